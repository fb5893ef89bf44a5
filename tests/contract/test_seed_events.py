"""Events as the design document (the "seed", ai_client_rule.txt section 5) writes them.

The seed's own example dicts are copied here; a run's ``to_dict()`` must match them key by key
for the fields the seed names (glassagent's own extra fields may be there too).
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel

from glassagent import Agent, LLMResponse, Message, Tool, ToolCall, tool
from glassagent.cli import _view
from glassagent.errors import UserError
from glassagent.events import (
    AbortedEvent,
    Event,
    FunctionCallStartEvent,
    FunctionExecutionCompleteEvent,
    ToolExecution,
    parse_event,
)
from glassagent.history import HistoryMessage, create_standard_message
from glassagent.otel import traced
from glassagent.testing import ReplayClient, ScriptedClient

# The seed's examples, as written there ("data": [...] filled with two results).
SEED_FUNCTION_CALL_START = {
    "type": "function_call_start",
    "function_name": "web_search",
    "tool_name": "Web検索",
    "args": {"query": "検索クエリ"},
    "ui_info": {"has_ui": True, "html_file": "index.html"},  # optional in the seed
}
SEED_FUNCTION_EXECUTION_COMPLETE = {
    "type": "function_execution_complete",
    "execution": {
        "function_name": "web_search",
        "tool_name": "Web検索",
        "args": {"query": "検索クエリ"},
        "result": {"success": True, "data": ["first hit", "second hit"]},
        "has_ui": False,
        "ui_info": None,
    },
}
SEED_ABORTED = {"type": "aborted", "text": "中断時点までのテキスト", "reason": "user_abort"}


def web_search_tool(ui_info: Any = None) -> Tool:
    @tool(display_name="Web検索", ui_info=ui_info)
    def web_search(query: str) -> dict[str, Any]:
        """Search the web."""
        return {"success": True, "data": ["first hit", "second hit"]}

    return web_search


def script() -> list[Any]:
    call = ToolCall("call_1", "web_search", {"query": "検索クエリ"})
    return [LLMResponse(tool_calls=[call]), "Found two hits."]


async def run_search(ui_info: Any = None) -> tuple[Any, ScriptedClient]:
    client = ScriptedClient(script())
    return await Agent(client, [web_search_tool(ui_info)]).run("search"), client


def only(events: tuple[Event, ...], kind: str) -> dict[str, Any]:
    [event] = [e for e in events if e.type == kind]
    return event.to_dict()


def assert_seed_fields(actual: dict[str, Any], seed: dict[str, Any]) -> None:
    for key, value in seed.items():
        if isinstance(value, dict) and key == "execution":
            assert_seed_fields(actual[key], value)
        else:
            assert actual[key] == value, key


async def test_function_call_start_is_the_seeds_dict() -> None:
    result, _ = await run_search({"has_ui": True, "html_file": "index.html"})

    start = only(result.events, "function_call_start")
    assert_seed_fields(start, SEED_FUNCTION_CALL_START)
    assert start["call_id"] == "call_1"  # glassagent's own field stays


async def test_function_execution_complete_is_the_seeds_dict() -> None:
    result, client = await run_search()

    complete = only(result.events, "function_execution_complete")
    assert_seed_fields(complete, SEED_FUNCTION_EXECUTION_COMPLETE)
    assert complete["execution"]["is_error"] is False
    # The model reads the result as JSON text, and knows the tool by its name only.
    [tool_message] = [m for m in client.requests[1].messages if m.role == "tool"]
    assert json.loads(tool_message.content) == {
        "success": True,
        "data": ["first hit", "second hit"],
    }
    assert [t.name for t in client.requests[0].tools] == ["web_search"]
    assert "Web検索" not in json.dumps([e.to_dict() for e in result.events[:1]])


async def test_seed_events_survive_a_json_round_trip() -> None:
    result, _ = await run_search({"has_ui": True, "html_file": "index.html"})

    for event in result.events:
        if isinstance(event, FunctionCallStartEvent | FunctionExecutionCompleteEvent):
            again = parse_event(json.loads(json.dumps(event.to_dict(), ensure_ascii=False)))
            assert again == event
    complete = next(e for e in result.events if isinstance(e, FunctionExecutionCompleteEvent))
    assert complete.execution.result == {"success": True, "data": ["first hit", "second hit"]}
    assert parse_event(complete.to_dict()).execution.result == complete.execution.result  # type: ignore[union-attr]


class Point(BaseModel):
    x: int
    y: int


@pytest.mark.parametrize(
    ("returned", "expected"),
    [
        ([1, "two"], [1, "two"]),
        ((1, 2), [1, 2]),
        ({}, {}),
        (Point(x=1, y=2), {"x": 1, "y": 2}),
        ('{"looks": "like JSON"}', '{"looks": "like JSON"}'),  # a string stays a string
        (42, "42"),
        (None, "null"),
    ],
)
async def test_only_objects_and_arrays_become_structured(returned: Any, expected: Any) -> None:
    def give() -> Any:
        """Give the value."""
        return returned

    answers = [LLMResponse(tool_calls=[ToolCall("c", "give", {})]), "ok"]
    result = await Agent(ScriptedClient(answers), [give]).run("go")

    execution = only(result.events, "function_execution_complete")["execution"]
    assert (execution["result"], execution["is_error"]) == (expected, False)
    assert parse_event(only(result.events, "function_execution_complete")).to_dict() == only(
        result.events, "function_execution_complete"
    )


async def test_an_unknown_tool_has_no_tool_name_and_an_error_is_text() -> None:
    answers = [LLMResponse(tool_calls=[ToolCall("c", "nope", {})]), "ok"]
    result = await Agent(ScriptedClient(answers), [web_search_tool()]).run("go")

    assert only(result.events, "function_call_start")["tool_name"] is None
    execution = only(result.events, "function_execution_complete")["execution"]
    assert execution["tool_name"] is None
    assert isinstance(execution["result"], str)
    assert execution["is_error"] is True


def test_display_name_defaults_to_the_name_and_is_checked() -> None:
    def web_search(query: str) -> str:
        """Search."""
        return query

    assert Tool(web_search).display_name == "web_search"
    assert Tool(web_search, name="search").display_name == "search"
    assert Tool(web_search, display_name="Web検索").display_name == "Web検索"
    schema = {"type": "object", "properties": {"query": {"type": "string"}}}
    made = Tool.from_schema("search", "Search.", schema, web_search, display_name="Search it")
    assert (made.name, made.display_name) == ("search", "Search it")
    assert Tool.from_schema("search", "Search.", schema, web_search).display_name == "search"
    for bad in ("", 3):
        with pytest.raises(UserError, match="display_name"):
            Tool(web_search, display_name=bad)  # type: ignore[arg-type]


async def test_approval_events_carry_the_display_name() -> None:
    @tool(display_name="Delete a file", requires_approval=True)
    def delete(path: str) -> str:
        """Delete."""
        return "deleted"

    answers = [LLMResponse(tool_calls=[ToolCall("c", "delete", {"path": "x"})]), "ok"]
    run = Agent(ScriptedClient(answers), [delete]).run("go")
    names = []
    async for event in run:
        if event.type in ("approval_required", "approval_answered"):
            names.append(event.to_dict()["tool_name"])
        if event.type == "approval_required":
            run.approve("c")
    assert names == ["Delete a file", "Delete a file"]


async def test_the_default_abort_reason_is_the_seeds() -> None:
    client = ScriptedClient(["中断時点までのテキスト and more to come"], chunk_delay=0.02)
    run = Agent(client).run("go")
    async for event in run:
        if event.type == "text_chunk":
            run.abort()

    aborted = run.result.events[-1] if run.result else None
    assert isinstance(aborted, AbortedEvent)
    assert aborted.to_dict()["reason"] == SEED_ABORTED["reason"]
    assert set(SEED_ABORTED) <= set(aborted.to_dict())


def test_generated_message_ids_follow_the_seed_and_given_ids_are_kept() -> None:
    made = create_standard_message("user", "こんにちは")
    stored = HistoryMessage.from_message(Message(role="user", content="hi"))
    for message_id in (made.id, stored.id):
        assert re.fullmatch(r"msg_[0-9a-f]{24}", message_id), message_id
    assert made.id != create_standard_message("user", "こんにちは").id
    assert create_standard_message("user", "hi", message_id="mine").id == "mine"
    given = HistoryMessage.from_message(Message(role="user", content="hi"), id="mine")
    assert given.id == "mine"


async def test_a_run_with_a_dict_result_records_replays_and_renders(tmp_path: Path) -> None:
    recorded, _ = await run_search()
    path = tmp_path / "search.jsonl"
    recorded.save_events(path)

    replay = ReplayClient.from_events(path)
    replayed = await Agent(replay, [web_search_tool()]).run("search")
    replay.check(replayed)
    assert only(replayed.events, "function_execution_complete")["execution"]["result"] == {
        "success": True,
        "data": ["first hit", "second hit"],
    }
    shown = '{"success": true, "data": ["first hit", "second hit"]}'
    html = replayed._repr_html_()
    assert "&quot;success&quot;: true" in html or shown in html
    assert shown in replayed._repr_markdown_()


async def test_a_recording_from_before_structured_results_still_checks(tmp_path: Path) -> None:
    recorded, _ = await run_search()
    old = []  # as a recording made when execution.result was always the JSON text
    for event in recorded.events:
        data = event.to_dict()
        if data["type"] == "function_execution_complete":
            result = data["execution"]["result"]
            data["execution"]["result"] = json.dumps(result, separators=(",", ":"))
        old.append(data)
    replay = ReplayClient.from_events(old)
    replay.check(await Agent(replay, [web_search_tool()]).run("search"))


async def test_a_result_with_nan_stays_text_so_the_event_stays_json() -> None:
    @tool
    def measure() -> dict[str, float]:
        """Measure."""
        return {"x": float("nan")}

    client = ScriptedClient([LLMResponse(tool_calls=[ToolCall("c1", "measure", {})]), "done"])
    result = await Agent(client, [measure]).run("go")
    event = only(result.events, "function_execution_complete")
    assert isinstance(event["execution"]["result"], str)
    json.dumps(event, allow_nan=False)  # strict JSON, as a browser's JSON.parse needs


def test_the_terminal_view_shows_a_structured_result_as_json() -> None:
    out = io.StringIO()
    view = _view.HumanView(_view.PlainWriter(out), _view.PLAIN_MARKS)
    result = {"success": True, "data": ["Web検索"]}
    execution = ToolExecution("web_search", "Web検索", {}, result, False, 3.0, False, None, "c")
    view.show(FunctionExecutionCompleteEvent(run_id="r", seq=0, execution=execution))
    assert '{"success": true, "data": ["Web検索"]}' in out.getvalue()


async def test_otel_exports_a_structured_result_as_the_json_the_model_read(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    client = ScriptedClient(script())
    agent = Agent(client, [web_search_tool()])
    await traced(agent.run("search"), tracer_provider=provider, capture_content=True)

    [span] = [s for s in exporter.get_finished_spans() if s.name == "execute_tool web_search"]
    exported = (span.attributes or {})["gen_ai.tool.call.result"]
    assert isinstance(exported, str)
    assert json.loads(exported) == {"success": True, "data": ["first hit", "second hit"]}
