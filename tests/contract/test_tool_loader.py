"""A tool runs another through the design's ``tool_loader.execute_tool`` (ai_client_rule.txt §6)."""

from __future__ import annotations

from typing import Any

from glassagent import Agent, LLMResponse, ToolCall, ToolContext, tool
from glassagent.testing import ScriptedClient


@tool(display_name="Web検索")
def web_search(query: str, ctx: ToolContext) -> dict[str, Any]:
    """Search the web."""
    ctx.progress_nowait(f"searching {query}")
    return {"success": True, "data": [query, ctx.chat_id]}


def run_one(entry: Any, *tools: Any) -> tuple[Any, list[str]]:
    client = ScriptedClient([LLMResponse(tool_calls=[ToolCall("c1", entry.name, {})]), "ok"])
    result = Agent(client, [entry, *tools]).run_sync("go", host={"chat_id": "chat-1"})
    progress = [e.message for e in result.events if e.type == "tool_progress"]
    outputs = [e.execution.result for e in result.events if e.type == "function_execution_complete"]
    return outputs[0], progress


def test_a_sync_tool_runs_another_with_the_design_call() -> None:
    @tool
    def research(ctx: ToolContext) -> Any:
        """Research with the search tool, the design's way."""
        context = ctx.to_seed_dict()
        return context["tool_loader"].execute_tool("web_search", {"query": "東京"}, context)

    output, progress = run_one(research, web_search)
    assert output == {
        "function_name": "web_search",
        "tool_name": "Web検索",
        "args": {"query": "東京"},
        "result": {"success": True, "data": ["東京", "chat-1"]},
        "has_ui": False,
        "ui_info": None,
    }
    assert progress == ["searching 東京"]


def test_an_async_tool_awaits_run_tool_and_cannot_block_on_execute_tool() -> None:
    @tool
    async def research(ctx: ToolContext) -> Any:
        """Research with the search tool."""
        found = await ctx.tool_loader.run_tool("web_search", {"query": "x"})
        missing = await ctx.tool_loader.run_tool("web_search", {})
        try:
            ctx.tool_loader.execute_tool("web_search", {"query": "x"})
        except Exception as exc:
            blocked = f"{type(exc).__name__}: {exc}"
        return {"found": found.structured, "missing": missing.is_error, "blocked": blocked}

    output, _ = run_one(research, web_search)
    assert output["found"] == {"success": True, "data": ["x", "chat-1"]}
    assert output["missing"] is True
    assert output["blocked"].startswith("UserError: execute_tool waits")


def test_the_loader_reads_like_the_mapping_it_was() -> None:
    @tool
    def look(ctx: ToolContext) -> Any:
        """Look at the tools."""
        loader = ctx.tool_loader
        return {"names": sorted(loader), "shown": loader.get_display_name("web_search")}

    output, _ = run_one(look, web_search)
    assert output == {"names": ["look", "web_search"], "shown": "Web検索"}
