"""Runs written as JSON Lines and read back: after the fact, live, and through `redact`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import glassagent
from glassagent import Agent, LLMResponse, ToolCall, Usage
from glassagent.errors import UserError
from glassagent.events import Redactor, load_events, redacted, save_events
from glassagent.testing import ScriptedClient


def get_weather(city: str) -> str:
    """The weather of a city."""
    if city == "Atlantis":
        raise ValueError("no such city")
    return f"Sunny in {city}, 21 C"


def weather_client(**kwargs: Any) -> ScriptedClient:
    return ScriptedClient(
        [
            LLMResponse(
                tool_calls=[ToolCall("c1", "get_weather", {"city": "Paris"})],
                thinking="Look it up.",
                usage=Usage(input_tokens=100, output_tokens=20),
            ),
            LLMResponse("Sunny in Paris.", usage=Usage(input_tokens=150, output_tokens=5)),
        ],
        **kwargs,
    )


def weather_agent(**kwargs: Any) -> Agent[Any]:
    return Agent(weather_client(model="gpt-4o-mini"), [get_weather], system="Be brief.", **kwargs)


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()]


async def test_a_result_is_saved_as_a_header_and_one_event_dict_per_line(tmp_path: Path) -> None:
    result = await weather_agent().run("Weather in Paris?")
    path = tmp_path / "run.jsonl"
    result.save_events(path)

    header, *events = lines(path)
    assert header["type"] == "recording"
    assert header["format"] == 1
    assert header["glassagent"] == glassagent.__version__
    assert (header["run_id"], header["provider"], header["model"]) == (
        result.events[0].run_id,
        "scripted",
        "gpt-4o-mini",
    )
    assert header["tools"] == [
        {
            "name": "get_weather",
            "description": "The weather of a city.",
            "parameters": Agent(weather_client(), [get_weather]).tools[0].definition.parameters,
        }
    ]
    assert events == [json.loads(json.dumps(e.to_dict())) for e in result.events]
    assert [e["seq"] for e in events] == list(range(len(result.events)))
    assert all(e["run_id"] == header["run_id"] for e in events)
    stamps = [e["timestamp"] for e in events]
    assert stamps == sorted(stamps)
    assert load_events(path) == result.events
    assert [e.timestamp for e in load_events(path)] == stamps


async def test_a_live_run_writes_each_event_the_moment_it_is_emitted(tmp_path: Path) -> None:
    path = tmp_path / "live.jsonl"
    run = weather_agent().run("Weather in Paris?").save_events(path)
    header = lines(path)
    assert [h["type"] for h in header] == ["recording"]  # before the run starts
    assert header[0]["tools"][0]["name"] == "get_weather"
    seen = 0
    async for event in run:
        seen += 1
        written = lines(path)[1:]
        assert len(written) >= seen  # the event is on disk before the consumer gets it
        assert written[event.seq]["seq"] == event.seq
    assert load_events(path) == run.result.events  # type: ignore[union-attr]


async def test_a_run_saved_midway_keeps_the_past_and_records_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "midway.jsonl"
    run = weather_agent().run("Weather in Paris?")
    async for event in run:
        if event.type == "function_call_start":
            run.save_events(path)
    assert load_events(path) == run.result.events  # type: ignore[union-attr]
    run.save_events(tmp_path / "after.jsonl")  # an ended run: written once, nothing attached
    assert load_events(tmp_path / "after.jsonl") == run.result.events  # type: ignore[union-attr]


async def test_turns_of_a_conversation_append_to_one_file(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    agent = Agent(ScriptedClient(["one", "two"]))
    first = await agent.run("1?")
    first.save_events(path)
    second = await agent.run("2?", messages=first.all_messages)
    second.save_events(path, append=True)
    assert [d["type"] for d in lines(path)].count("recording") == 2
    assert load_events(path) == first.events + second.events
    save_events(tmp_path / "both.jsonl", [*first.events, *second.events])
    assert (tmp_path / "both.jsonl").read_text().count('"type": "recording"') == 2


async def test_the_cli_json_lines_without_a_header_read_too(tmp_path: Path) -> None:
    result = await weather_agent().run("Weather in Paris?")
    path = tmp_path / "bare.jsonl"
    path.write_text("".join(json.dumps(e.to_dict()) + "\n\n" for e in result.events), "utf-8")
    assert load_events(path) == result.events


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"type": "recording", "format": 1}\nnot json\n', r"line 2 is not JSON"),
        ("[1, 2]\n", r"line 1 is not an event"),
        ('{"type": "nope", "run_id": "r", "seq": 0}\n', r"line 1: Not a valid event dict"),
        ('{"type": "recording", "format": 99, "glassagent": "9.0"}\n', r"format 99 .*'9\.0'"),
    ],
)
def test_a_file_that_is_not_a_recording_is_refused_naming_the_line(
    tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content, "utf-8")
    with pytest.raises(UserError, match=message):
        load_events(path)


DEEP = 100_000
_EVENT = '{"type": "complete", "run_id": "r", "seq": 0, "timestamp": 1, "x": '


def _deep_list(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    "line",
    [
        "[" * DEEP + "]" * DEEP,
        '{"a": ' * DEEP + "1" + "}" * DEEP,
        _EVENT + "[" * DEEP + "]" * DEEP + "}",
    ],
    ids=["lists", "objects", "in-an-event"],
)
def test_a_deeply_nested_line_is_a_user_error_naming_the_line(tmp_path: Path, line: str) -> None:
    from glassagent.testing import ReplayClient

    path = tmp_path / "deep.jsonl"
    path.write_text('{"type": "recording", "format": 1}\n' + line + "\n", "utf-8")
    for read in (load_events, ReplayClient.from_events):
        with pytest.raises(UserError, match=r"deep\.jsonl, line 2 is not an event: .*nested"):
            read(path)


def test_deeply_nested_event_dicts_are_a_user_error_naming_the_item() -> None:
    from glassagent.testing import ReplayClient

    fine = {"type": "text_chunk", "run_id": "r", "seq": 0, "text": "a", "is_follow_up": False}
    deep = {**fine, "seq": 1, "x": _deep_list(DEEP)}
    with pytest.raises(UserError, match=r"item 2 is not an event: .*nested"):
        ReplayClient.from_events([fine, deep])


def test_unreadable_and_unwritable_paths_are_typed_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="Cannot read the events"):
        load_events(tmp_path / "missing.jsonl")
    with pytest.raises(UserError, match="Cannot write the events"):
        save_events(tmp_path / "no" / "dir.jsonl", [])


async def test_the_redact_hook_applies_to_every_recorded_line(tmp_path: Path) -> None:
    hook = Redactor([r"Paris"], fields=["system"])
    agent = weather_agent(redact=hook)
    result = await agent.run("Weather in Paris?").save_events(tmp_path / "live.jsonl")
    result.save_events(tmp_path / "after.jsonl")
    save_events(tmp_path / "plain.jsonl", result.events)
    for name in ("live", "after"):
        text = (tmp_path / f"{name}.jsonl").read_text("utf-8")
        assert "Paris" not in text
        assert "Be brief" not in text
        assert "[redacted]" in text
    assert "Paris" in (tmp_path / "plain.jsonl").read_text("utf-8")  # no hook, no redaction
    # the program's own events are untouched
    assert "Paris" in result.text
    assert result.events[0].system == "Be brief."  # type: ignore[union-attr]


def test_redacted_copies_the_dict_and_fails_closed() -> None:
    event = {"type": "text_chunk", "text": "secret", "nested": {"keep": ["a secret b"]}}

    def mutate(data: dict[str, Any]) -> dict[str, Any]:
        data["text"] = "x"
        return data

    assert redacted(event, mutate)["text"] == "x"
    assert event["text"] == "secret"
    assert redacted(event, Redactor(["secret"]))["nested"] == {"keep": ["a [redacted] b"]}

    def broken(data: dict[str, Any]) -> dict[str, Any]:
        raise KeyError(data["text"])

    with pytest.raises(UserError, match=r"redact hook failed on a text_chunk event \(KeyError\)"):
        redacted(event, broken)
    with pytest.raises(UserError, match="must return a dict, got NoneType"):
        redacted(event, lambda data: None)  # type: ignore[arg-type,return-value]
    with pytest.raises(UserError, match="not a regular expression"):
        Redactor(["("])
    with pytest.raises(UserError, match="`redact` must be callable"):
        Agent(ScriptedClient([]), redact="no")  # type: ignore[arg-type]


async def test_a_failing_live_recorder_is_detached_and_the_run_goes_on(tmp_path: Path) -> None:
    calls = 0

    def flaky(data: dict[str, Any]) -> dict[str, Any]:
        nonlocal calls
        calls += 1
        if data.get("type") == "llm_response":
            raise RuntimeError("disk full")
        return data

    path = tmp_path / "flaky.jsonl"
    run = weather_agent(redact=flaky).run("Weather in Paris?").save_events(path)
    with pytest.warns(RuntimeWarning, match="Stopped recording or showing run"):
        result = await run
    assert result.text == "Sunny in Paris."
    written = [d["type"] for d in lines(path)]
    assert "llm_response" not in written  # nothing of the failing event, nothing after it
    assert written[-1] in ("text_chunk", "thinking_chunk")
