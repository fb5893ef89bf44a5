"""Structured output through the public API, with the scripted test clients: the modes,
retries, `OutputValidationError`, tools in the same run, streaming, history and replay."""

from __future__ import annotations

import contextlib
import json
import pickle
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from glassagent import Agent, LLMResponse, ModelSettings, tool
from glassagent.errors import (
    ConfigurationError,
    GlassAgentError,
    OutputValidationError,
    RunError,
    UserError,
)
from glassagent.events import (
    CompleteEvent,
    ErrorEvent,
    OutputRetryEvent,
    TextChunkEvent,
    load_events,
    parse_event,
)
from glassagent.history import History
from glassagent.llm import Message, OutputMode, OutputSchema, ToolCall
from glassagent.testing import FunctionClient, ReplayClient, ScriptedClient

ANSWER = {"name": "Paris", "population": 2102650}


class City(BaseModel):
    """A city and how many live there."""

    name: str
    population: int = Field(ge=0)


@dataclass
class Point:
    x: int
    y: int


class Pair(TypedDict):
    left: str
    right: str


@tool
def lookup(city: str) -> str:
    """Look a city up.

    Args:
        city: The city's name.
    """
    return f"{city}: 2102650 inhabitants"


class Opaque:
    """A class pydantic has no schema for."""


def final(args: dict[str, Any], call_id: str = "f1") -> LLMResponse:
    return LLMResponse(tool_calls=[ToolCall(call_id, "final_result", args)])


class NativeClient(ScriptedClient):
    """A scripted client that declares a native structured mode."""

    def output_mode(self, *, tools: bool, settings: ModelSettings) -> OutputMode:
        return "native"


# ---- modes --------------------------------------------------------------------------------


async def test_a_custom_client_gets_the_final_answer_tool() -> None:
    client = ScriptedClient([final(ANSWER)])
    result = await Agent(client, output_type=City).run("Which city?")
    assert result.output == City(name="Paris", population=2102650)
    request = client.requests[0]
    assert [t.name for t in request.tools] == ["final_result"]
    assert request.tools[0].parameters["required"] == ["name", "population"]
    assert request.settings is not None
    assert request.settings.output_schema is None
    assert result.text == json.dumps(ANSWER)
    assert result.stop_reason == "end_turn"


async def test_a_native_client_gets_the_schema_in_its_settings() -> None:
    client = NativeClient([json.dumps(ANSWER)])
    result = await Agent(client, output_type=City).run("Which city?")
    assert result.output == City(**ANSWER)
    settings = client.requests[0].settings
    assert settings is not None
    assert settings.output_schema is not None
    assert settings.output_schema.name == "City"
    assert settings.output_schema.schema["properties"]["population"]["minimum"] == 0
    assert client.requests[0].tools == ()
    assert client.requests[0].system is None


async def test_prompted_mode_puts_the_schema_in_the_system_prompt() -> None:
    client = ScriptedClient([f"Here it is:\n```json\n{json.dumps(ANSWER)}\n```"])
    agent = Agent(client, system="Be brief.", output_type=City, output_mode="prompted")
    result = await agent.run("Which city?")
    assert result.output == City(**ANSWER)
    system = client.requests[0].system or ""
    assert system.startswith("Be brief.\n\nAnswer with exactly one JSON object")
    assert '"population"' in system
    assert client.requests[0].tools == ()


class Loose(BaseModel):
    scores: dict[str, int]


class Untyped(BaseModel):
    extra: Any


class Defaulted(BaseModel):
    name: str = "x"


@pytest.mark.parametrize(
    ("output_type", "strict"),
    [(City, True), (list[str], True), (Loose, False), (Untyped, False), (Defaulted, False)],
)
async def test_only_closed_typed_schemas_are_marked_strict(output_type: Any, strict: bool) -> None:
    # OpenAI's strict mode takes only closed objects whose properties are all required and
    # typed: a dict, an Any or a default would have the request refused
    client = NativeClient([json.dumps({"result": ["a"]} if output_type is list[str] else {})])
    with contextlib.suppress(OutputValidationError):
        await Agent(client, output_type=output_type, output_retries=0).run("?")
    settings = client.requests[0].settings
    assert settings is not None
    assert settings.output_schema is not None
    assert settings.output_schema.strict is strict


async def test_under_tool_choice_none_the_answer_is_asked_for_in_the_prompt() -> None:
    client = ScriptedClient([json.dumps(ANSWER)])
    none = ModelSettings(tool_choice="none")
    result = await Agent(client, [lookup], output_type=City, settings=none).run("Which?")
    assert result.output == City(**ANSWER)
    request = client.requests[0]
    assert [t.name for t in request.tools] == ["lookup"]  # no final-answer tool to call
    assert "Answer with exactly one JSON object" in (request.system or "")
    forced = Agent(ScriptedClient([]), [lookup], output_type=City, output_mode="tool")
    with pytest.raises(ConfigurationError, match="tool_choice='none' forbids"):
        await forced.run("Which?", settings=none)


@pytest.mark.parametrize(
    ("output_type", "reply", "expected"),
    [
        (list[str], {"result": ["a", "b"]}, ["a", "b"]),
        (Point, {"x": 1, "y": 2}, Point(1, 2)),
        (Pair, {"left": "l", "right": "r"}, {"left": "l", "right": "r"}),
        (int, {"result": 7}, 7),
    ],
)
async def test_other_output_types(output_type: Any, reply: Any, expected: Any) -> None:
    client = ScriptedClient([final(reply)])
    result = await Agent(client, output_type=output_type).run("?")
    assert result.output == expected
    assert client.requests[0].tools[0].parameters["type"] == "object"


async def test_a_non_object_output_is_wrapped_under_result() -> None:
    client = NativeClient([json.dumps({"result": [{"x": 1, "y": 2}]})])
    result = await Agent(client, output_type=list[Point]).run("?")
    assert result.output == [Point(1, 2)]
    schema = client.requests[0].settings.output_schema.schema  # type: ignore[union-attr]
    assert schema["required"] == ["result"]
    assert schema["properties"]["result"]["items"] == {"$ref": "#/$defs/Point"}
    assert "Point" in schema["$defs"]


async def test_an_agent_without_output_type_has_the_text_as_output() -> None:
    result = await Agent(ScriptedClient(["plain words"])).run("?")
    assert result.output == "plain words"
    assert result.events[-1].to_dict()["output"] is None


async def test_native_asked_of_a_client_without_it_is_refused() -> None:
    agent = Agent(ScriptedClient(["{}"]), output_type=City, output_mode="native")
    with pytest.raises(ConfigurationError, match="cannot honour output_mode='native'"):
        await agent.run("?")


async def test_a_schema_in_the_settings_is_refused_for_a_client_without_native_mode() -> None:
    schema = OutputSchema(name="City", schema={"type": "object"})
    agent = Agent(ScriptedClient(["{}"]), settings=ModelSettings(output_schema=schema))
    with pytest.raises(ConfigurationError, match=r"cannot honour ModelSettings\.output_schema"):
        await agent.run("?")
    native = NativeClient(['{"name": "x"}'])
    result = await Agent(native, settings=ModelSettings(output_schema=schema)).run("?")
    assert result.output == '{"name": "x"}'
    assert native.requests[0].settings.output_schema == schema  # type: ignore[union-attr]


def test_bad_output_configurations_are_user_errors() -> None:
    client = ScriptedClient([])

    @tool
    def final_result(x: int) -> int:
        """A tool whose name is taken.

        Args:
            x: A number.
        """
        return x

    with pytest.raises(UserError, match="reserved"):
        Agent(client, [final_result], output_type=City)
    with pytest.raises(UserError, match="output_retries"):
        Agent(client, output_type=City, output_retries=-1)
    with pytest.raises(UserError, match="output_mode"):
        Agent(client, output_type=City, output_mode="grammar")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="no JSON Schema"):
        Agent(client, output_type=Opaque)
    with pytest.raises(UserError, match="object schema"):
        OutputSchema(name="x", schema={"type": "array"})
    with pytest.raises(UserError, match="name"):
        OutputSchema(name="not ok", schema={"type": "object"})
    with pytest.raises(UserError, match="output_schema"):
        ModelSettings(output_schema={"type": "object"})  # type: ignore[arg-type]


# ---- retries --------------------------------------------------------------------------------


async def test_an_invalid_call_goes_back_as_an_error_result_then_validates() -> None:
    client = ScriptedClient([final({"name": "Paris", "population": -3}), final(ANSWER, "f2")])
    result = await Agent(client, output_type=City).run("Which city?")
    assert result.output.population == 2102650
    retry = next(e for e in result.events if isinstance(e, OutputRetryEvent))
    assert (retry.iteration, retry.attempt) == (1, 1)
    assert retry.errors == ("population: Input should be greater than or equal to 0",)
    assert json.loads(retry.text) == {"name": "Paris", "population": -3}
    second = client.requests[1].messages
    assert second[-2].tool_calls[0].id == "f1"
    assert (second[-1].role, second[-1].tool_call_id, second[-1].is_error) == ("tool", "f1", True)
    assert "greater than or equal to 0" in second[-1].content
    assert parse_event(retry.to_dict()) == retry


async def test_invalid_text_goes_back_as_a_user_message() -> None:
    client = NativeClient(["Paris, I think", json.dumps(ANSWER)])
    result = await Agent(client, output_type=City).run("Which city?")
    assert result.output == City(**ANSWER)
    second = client.requests[1].messages
    assert (second[-2].role, second[-2].content) == ("assistant", "Paris, I think")
    assert second[-1].role == "user"
    assert "not JSON" in second[-1].content


async def test_retries_run_out_with_a_typed_error() -> None:
    client = NativeClient(['{"name": "Paris"}'] * 3)
    run = Agent(client, output_type=City, output_retries=2).run("Which city?")
    with pytest.raises(OutputValidationError) as caught:
        await run
    error = caught.value
    assert isinstance(error, RunError)
    assert isinstance(error, GlassAgentError)
    assert error.text == '{"name": "Paris"}'
    assert error.errors == ("population: Field required",)
    assert "after 2 retries" in str(error)
    assert client.remaining == 0
    events = error.result.events  # type: ignore[union-attr]
    assert [e.attempt for e in events if isinstance(e, OutputRetryEvent)] == [1, 2]
    assert isinstance(events[-1], ErrorEvent)
    assert events[-1].error_type == "OutputValidationError"
    assert error.result.stop_reason == "error"  # type: ignore[union-attr]
    assert error.result.output is None  # type: ignore[union-attr]
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.text, copy.errors) == (error.text, error.errors)


async def test_no_retries_fails_at_the_first_invalid_answer() -> None:
    client = ScriptedClient([final({"name": 3})])
    with pytest.raises(OutputValidationError, match="after 0 retries"):
        await Agent(client, output_type=City, output_retries=0).run("?")


async def test_a_text_answer_in_tool_mode_asks_for_the_tool_unless_it_is_valid() -> None:
    client = ScriptedClient(["I do not know", json.dumps(ANSWER)])
    result = await Agent(client, output_type=City).run("?")
    assert result.output == City(**ANSWER)
    assert "calling the final_result tool" in client.requests[1].messages[-1].content


# ---- tools, streaming, history, replay --------------------------------------------------------


async def test_tools_run_first_and_the_structured_answer_comes_last() -> None:
    client = ScriptedClient(
        [
            LLMResponse(tool_calls=[ToolCall("c1", "lookup", {"city": "Paris"})]),
            LLMResponse(
                tool_calls=[
                    ToolCall("c2", "lookup", {"city": "Rome"}),
                    ToolCall("f1", "final_result", ANSWER),
                ]
            ),
        ]
    )
    result = await Agent(client, [lookup], output_type=City).run("Which city?")
    assert result.output == City(**ANSWER)
    assert [t.name for t in client.requests[0].tools] == ["lookup", "final_result"]
    types = [e.type for e in result.events]
    assert types.count("function_execution_complete") == 1  # the answer's other call never ran
    roles = [(m.role, bool(m.tool_calls)) for m in result.new_messages]
    assert roles == [("user", False), ("assistant", True), ("tool", False), ("assistant", False)]
    assert result.new_messages[-1].content == json.dumps(ANSWER)


async def test_streaming_text_then_the_object_in_the_complete_event() -> None:
    client = NativeClient([json.dumps(ANSWER)])
    events = [e async for e in Agent(client, output_type=City).run("Which city?")]
    chunks = "".join(e.text for e in events if isinstance(e, TextChunkEvent))
    assert chunks == json.dumps(ANSWER)
    complete = events[-1]
    assert isinstance(complete, CompleteEvent)
    assert complete.output == ANSWER
    data = json.loads(json.dumps(complete.to_dict()))
    assert data["output"] == ANSWER
    assert parse_event(data) == complete


async def test_the_turn_appended_to_a_history_keeps_the_json_answer() -> None:
    history = History()
    client = ScriptedClient([final(ANSWER)])
    agent = Agent(client, output_type=City)
    await agent.run("Which city?", history=history, append_to_history=True)
    thread = history.to_messages()
    assert [m.role for m in thread] == ["user", "assistant"]
    assert thread[-1].content == json.dumps(ANSWER)
    assert thread[-1].tool_calls == ()
    restored = History.from_json(history.to_json())
    assert restored.to_messages()[-1].content == json.dumps(ANSWER)


async def test_a_recorded_structured_run_replays(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    client = NativeClient(['{"name": 1}', json.dumps(ANSWER)])
    recorded = await Agent(client, output_type=City).run("Which city?")
    recorded.save_events(path)
    replay = ReplayClient(path)
    again = await Agent(replay, output_type=City).run("Which city?")
    assert again.output == recorded.output
    replay.check(again)
    assert [e.type for e in load_events(path)].count("output_retry") == 1


async def test_a_recorded_tool_mode_run_replays() -> None:
    client = ScriptedClient([final(ANSWER)])
    recorded = await Agent(client, [lookup], output_type=City).run("Which city?")
    replay = ReplayClient(recorded.events)
    again = await Agent(replay, [lookup], output_type=City).run("Which city?")
    replay.check(again)
    assert again.output == City(**ANSWER)


async def test_output_schema_reaches_a_function_client_directly() -> None:
    seen: list[ModelSettings | None] = []

    def answer(messages: Any, tools: Any, system: Any, settings: ModelSettings | None) -> str:
        seen.append(settings)
        return json.dumps(ANSWER)

    schema = OutputSchema(name="City", schema={"type": "object"})
    client = FunctionClient(answer)
    await client.chat(
        [Message(role="user", content="?")], settings=ModelSettings(output_schema=schema)
    )
    assert seen[0] is not None
    assert seen[0].output_schema == schema
    merged = ModelSettings(temperature=0.1).merge(ModelSettings(output_schema=schema))
    assert merged.output_schema == schema
    assert merged.temperature == 0.1


def test_run_sync_returns_the_typed_output() -> None:
    result = Agent(ScriptedClient([final(ANSWER)]), output_type=City).run_sync("?")
    assert result.output == City(**ANSWER)


# ---- typing ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_output_type_checks_with_mypy_strict() -> None:
    typing_file = Path(__file__).with_name("typing_structured_output.py")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(typing_file)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


async def test_the_notebook_timeline_shows_an_output_retry() -> None:
    client = NativeClient(['{"name": "Paris"}', json.dumps(ANSWER)])
    result = await Agent(client, output_type=City).run("Which city?")
    markdown = result._repr_markdown_()
    assert "not valid output, asked again (1): population: Field required" in markdown
    assert "not valid output, asked again" in result._repr_html_()


async def test_an_output_retry_is_an_event_of_the_run_span(provider: Any, exporter: Any) -> None:
    from glassagent.otel import traced

    client = NativeClient(['{"name": "Paris"}', json.dumps(ANSWER)])
    await traced(Agent(client, output_type=City).run("Which city?"), tracer_provider=provider)
    (run,) = [s for s in exporter.get_finished_spans() if s.name.startswith("invoke_agent")]
    (retry,) = [e for e in run.events if e.name == "glassagent.output_retry"]
    assert dict(retry.attributes or {}) == {"glassagent.retry.attempt": 1}


async def test_a_model_without_function_calling_gets_the_prompt_or_the_protocol(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from glassagent.profiles import reload_profiles
    from tests.support.profiles import write_profile

    path = write_profile(tmp_path, "acme-text", pricing=None)
    data = json.loads(path.read_text())
    data["features"]["supports_function_calling"] = False
    path.write_text(json.dumps(data))
    monkeypatch.setenv("GLASSAGENT_PROFILE_PATH", str(tmp_path))
    reload_profiles()
    try:
        plain = ScriptedClient([json.dumps(ANSWER)], model="acme-text")
        result = await Agent(plain, output_type=City).run("Which city?")
        assert result.output == City(**ANSWER)
        assert plain.requests[0].tools == ()
        assert "Answer with exactly one JSON object" in (plain.requests[0].system or "")
        reply = {"tool_call": {"name": "final_result", "input": ANSWER}}
        with_tools = ScriptedClient([json.dumps(reply)], model="acme-text")
        result = await Agent(with_tools, [lookup], output_type=City).run("Which city?")
        assert result.output == City(**ANSWER)
        assert "- final_result:" in (with_tools.requests[0].system or "")
    finally:
        reload_profiles()
