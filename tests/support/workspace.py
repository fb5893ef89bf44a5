"""Helpers for the workspace tests: run tool calls through a real agent, or call tools directly."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from glassagent import Agent, LLMResponse, ToolCall, ToolContext
from glassagent.agent import RunResult
from glassagent.events import FunctionExecutionCompleteEvent, ToolExecution
from glassagent.testing import ScriptedClient
from glassagent.workspace import Workspace


def call(name: str, call_id: str = "c1", **args: Any) -> ToolCall:
    return ToolCall(call_id, name, dict(args))


async def run_calls(workspace: Workspace, *calls: ToolCall) -> RunResult:
    """One model answer making `calls`, then a final answer; the run must end normally."""
    client = ScriptedClient([LLMResponse(tool_calls=list(calls)), "done"])
    result = await Agent(client, workspace.tools).run("go")
    assert result.stop_reason == "end_turn"
    return result


def executions(result: RunResult) -> dict[str, ToolExecution]:
    """The outcome of each call, by call id, from the run's events."""
    return {
        e.execution.call_id: e.execution
        for e in result.events
        if isinstance(e, FunctionExecutionCompleteEvent)
    }


async def run_one(workspace: Workspace, name: str, **args: Any) -> ToolExecution:
    """Run one call through an agent and return its outcome."""
    return executions(await run_calls(workspace, call(name, **args)))["c1"]


def context(
    tool_name: str, on_progress: Callable[[str], None] = lambda message: None
) -> ToolContext[Any]:
    """A context for calling an async workspace tool directly (needs a running loop)."""
    asyncio.get_running_loop()
    return ToolContext(
        call_id="c1", run_id="r1", tool_name=tool_name, deps=None, on_progress=on_progress
    )


def names(folder: Path) -> list[str]:
    """The names in `folder`, sorted."""
    return sorted(p.name for p in folder.iterdir())


def tools(workspace: Workspace) -> dict[str, Any]:
    return {t.name: t for t in workspace.tools}
