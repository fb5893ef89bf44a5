"""`ToolContext.idempotency_key`: in every run, unique to a run and a call (no DBOS here)."""

from __future__ import annotations

from glassagent import Agent, LLMResponse, ToolCall, ToolContext, tool
from glassagent.testing import ScriptedClient


async def test_each_call_of_each_run_has_a_key_of_its_run_and_call() -> None:
    keys: list[tuple[str, str, str]] = []

    @tool
    def note(text: str, ctx: ToolContext) -> str:
        keys.append((ctx.run_id, ctx.call_id, ctx.idempotency_key))
        return text

    def script() -> ScriptedClient:
        return ScriptedClient(
            [
                LLMResponse(tool_calls=[ToolCall("a", "note", {"text": "1"})]),
                # the model reuses the id "a" in a later answer: a new call, a new key
                LLMResponse(
                    tool_calls=[
                        ToolCall("a", "note", {"text": "2"}),
                        ToolCall("b", "note", {"text": "3"}),
                    ]
                ),
                "done",
            ]
        )

    one = await Agent(script(), [note]).run("go")
    two = await Agent(script(), [note]).run("go")
    first, second = keys[:3], keys[3:]
    assert [key for _, _, key in first] == [
        f"{one.events[0].run_id}:a",
        f"{one.events[0].run_id}:a:2",
        f"{one.events[0].run_id}:b",
    ]
    assert all(run == two.events[0].run_id for run, _, _ in second)
    assert len({key for _, _, key in keys}) == 6  # unique across runs and calls


async def test_a_call_through_the_tool_loader_has_a_key_below_its_callers() -> None:
    inner_keys: list[str] = []

    @tool
    def leaf(ctx: ToolContext) -> str:
        inner_keys.append(ctx.idempotency_key)
        return "leaf"

    @tool
    async def branch(ctx: ToolContext) -> str:
        await ctx.tool_loader.run_tool("leaf", {})
        await ctx.tool_loader.run_tool("leaf", {})
        return ctx.idempotency_key

    client = ScriptedClient([LLMResponse(tool_calls=[ToolCall("c1", "branch", {})]), "ok"])
    result = await Agent(client, [branch, leaf]).run("go")
    key = f"{result.events[0].run_id}:c1"
    assert inner_keys == [f"{key}.1", f"{key}.2"]
