"""A tool's display name in the command line's run view (the web view: test_server_browser).

``@tool(display_name="Web検索")`` reaches events as ``tool_name``; the views show it, with
the function name beside it when the two differ, and unchanged when they do not.
"""

from __future__ import annotations

import io
from typing import Any

import pytest

from glassagent import Agent, LLMResponse, ToolCall, tool
from glassagent.cli import _view
from glassagent.events import FunctionCallStartEvent, FunctionExecutionCompleteEvent, ToolExecution
from glassagent.testing import ScriptedClient

IDS = {"run_id": "r", "seq": 0}


def plain() -> tuple[_view.HumanView, io.StringIO]:
    out = io.StringIO()
    return _view.HumanView(_view.PlainWriter(out), _view.PLAIN_MARKS), out


def execution(tool_name: str | None, *, error: bool = False, ui: Any = None) -> ToolExecution:
    return ToolExecution("web_search", tool_name, {}, "hit", error, 3.0, ui is not None, ui, "c")


async def test_a_run_shows_the_display_name_beside_the_function_name() -> None:
    @tool(display_name="Web検索")
    def web_search(query: str) -> str:
        """Search the web."""
        return "first hit"

    call = ToolCall("call_1", "web_search", {"query": "東京"})
    client = ScriptedClient([LLMResponse(tool_calls=[call]), "Found it."])
    result = await Agent(client, [web_search]).run("search")
    view, out = plain()
    for event in result.events:
        view.show(event)
    shown = out.getvalue().splitlines()
    assert '-> Web検索 (web_search): query="東京"' in shown
    [done] = [line for line in shown if line.startswith("  ok ")]
    assert done.startswith("  ok Web検索 (web_search, ")
    assert done.endswith(" ms)")


def test_every_line_of_a_call_names_the_tool_both_ways() -> None:
    view, out = plain()
    start = {"function_name": "web_search", "tool_name": "Web検索", "call_id": "c"}
    view.show(FunctionCallStartEvent(**IDS, **start, args={"query": "x", "n": 2}))
    view.show(FunctionCallStartEvent(**IDS, **start, args={}))
    view.show(FunctionExecutionCompleteEvent(**IDS, execution=execution("Web検索")))
    view.show(FunctionExecutionCompleteEvent(**IDS, execution=execution("Web検索", error=True)))
    declined = execution("Web検索", error=True, ui={"declined": True})
    view.show(FunctionExecutionCompleteEvent(**IDS, execution=declined))
    assert out.getvalue().splitlines() == [
        '-> Web検索 (web_search): query="x", n=2',
        "-> Web検索 (web_search)",
        "  ok Web検索 (web_search, 3 ms)",
        "    hit",
        "  !! Web検索 (web_search) failed (3 ms)",
        "    hit",
        "  !! Web検索 (web_search) declined",
    ]


def test_a_display_name_equal_to_the_function_name_changes_nothing() -> None:
    view, out = plain()
    start = {"function_name": "web_search", "tool_name": "web_search", "call_id": "c"}
    view.show(FunctionCallStartEvent(**IDS, **start, args={"query": "x"}))
    view.show(FunctionExecutionCompleteEvent(**IDS, execution=execution("web_search")))
    view.show(FunctionExecutionCompleteEvent(**IDS, execution=execution(None, error=True)))
    assert out.getvalue().splitlines() == [
        '-> web_search(query="x")',
        "  ok web_search (3 ms)",
        "    hit",
        "  !! web_search failed (3 ms)",
        "    hit",
    ]


def test_a_display_name_cannot_drive_the_terminal() -> None:
    """Control characters in a display name are shown as ``?``, never written as they are."""
    view, out = plain()
    name = "Evil\x1b[2J\x07\nname"
    start = {"function_name": "web_search", "tool_name": name, "call_id": "c"}
    view.show(FunctionCallStartEvent(**IDS, **start, args={}))
    view.show(FunctionExecutionCompleteEvent(**IDS, execution=execution(name)))
    text = out.getvalue()
    assert "\x1b" not in text
    assert "\x07" not in text
    assert text.splitlines()[:2] == [
        "-> Evil?[2J? name (web_search)",
        "  ok Evil?[2J? name (web_search, 3 ms)",
    ]


def test_the_rich_writer_shows_a_display_name_as_text() -> None:
    pytest.importorskip("rich")
    from glassagent.cli._rich import RichWriter

    out = io.StringIO()
    view = _view.HumanView(RichWriter(out), _view.Marks())
    start = {"function_name": "web_search", "tool_name": "[bold]Web[/bold]", "call_id": "c"}
    view.show(FunctionCallStartEvent(**IDS, **start, args={}))
    assert out.getvalue() == "⚙ [bold]Web[/bold] (web_search)\n"
