"""Run the calls of one answer the design's way: the application's tool loader first.

The design's context dict carries a ``tool_loader`` whose ``execute_tool(name, arguments,
context)`` runs a tool. When the context has none that knows the call, a glassagent `Tool`
given to the request (or the adapter) runs instead, with a `ToolContext` made from the
context dict's facts. Either way the result is a `ToolResult` and the design's execution dict.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from typing import Any

from glassagent._contract import bridge
from glassagent._contract.convert import HOST_KEYS, display_name_of, tool_result
from glassagent._core.messages import ModelSettings, ToolCall
from glassagent._core.result import ToolResult
from glassagent._tools.context import ToolContext, execution_dict
from glassagent._tools.execute import describe_exception, prepare_call, run_prepared
from glassagent._tools.tool import Tool


@dataclass(frozen=True)
class Execution:
    """One finished call: what goes back to the model, and the design's execution dict."""

    result: ToolResult
    record: dict[str, Any]


def _never() -> bool:
    return False


@dataclass(frozen=True)
class Calling:
    """What the calls of a round share: the context dict, the tools, the run's settings."""

    context: Mapping[str, Any]
    tools: Mapping[str, Tool]
    model: str
    settings: ModelSettings
    system_prompt: str | None
    stopped: Callable[[], bool] = _never

    @property
    def loader(self) -> Any:
        """The context's tool loader, if it has one."""
        return self.context.get("tool_loader")

    def display_name(self, name: str) -> str:
        """The name people see for the tool `name`."""
        return display_name_of(name, self.tools, self.loader)

    def ui_info(self, name: str) -> Any:
        """The display hints of the glassagent tool `name` (`None` for the loader's)."""
        found = self.tools.get(name)
        return found.ui_info if found is not None else None

    def aborted(self) -> bool:
        """Whether the context's ``abort_event`` is set, or the stream was aborted."""
        event = self.context.get("abort_event")
        return (isinstance(event, threading.Event) and event.is_set()) or self.stopped()

    def runnable(self, name: str) -> Tool | None:
        """The glassagent tool that runs `name` when the loader does not."""
        if name in self.tools:
            return self.tools[name]
        loader = self.loader
        found = loader.get(name) if isinstance(loader, Mapping) else None
        return found if isinstance(found, Tool) else None


def run_call(
    calling: Calling, call: ToolCall, updates: queue.SimpleQueue[dict[str, Any]]
) -> Generator[dict[str, Any], None, Execution]:
    """Run `call`, yielding its ``tool_progress`` events as they come; returns its `Execution`.

    Raises:
        bridge.Aborted: When the context's abort is set while a glassagent tool runs.
    """
    tool = calling.runnable(call.name)
    loader = calling.loader
    if tool is None and callable(getattr(loader, "execute_tool", None)):
        return _by_loader(calling, call)
    coroutine = _by_tool(calling, tool, call, updates)
    result, ui_info = yield from bridge.watch(coroutine, calling.aborted, updates)
    record = execution_dict(call, calling.display_name(call.name), result, ui_info)
    return Execution(result, record)


def _by_loader(calling: Calling, call: ToolCall) -> Execution:
    started = time.perf_counter()
    try:
        value = calling.loader.execute_tool(call.name, dict(call.input), dict(calling.context))
    except Exception as exc:
        text = f"Error: tool {call.name!r} raised {describe_exception(exc)}"
        result = ToolResult(call.id, call.name, text, True, _since(started))
        return Execution(
            result, execution_dict(call, calling.display_name(call.name), result, None)
        )
    ui_info = None
    if isinstance(value, Mapping) and {"function_name", "result"} <= value.keys():
        ui_info = value.get("ui_info")  # the loader gave the execution dict itself
        value = value["result"]
    result = tool_result(call, value, is_error=False, duration_ms=_since(started))
    return Execution(result, execution_dict(call, calling.display_name(call.name), result, ui_info))


async def _by_tool(
    calling: Calling,
    tool: Tool | None,
    call: ToolCall,
    updates: queue.SimpleQueue[dict[str, Any]],
) -> tuple[ToolResult, Any]:
    def progress(message: str) -> None:
        updates.put({"type": "tool_progress", "tool": call.name, "message": message})

    context = calling.context
    host = {key: context[key] for key in HOST_KEYS if context.get(key) is not None}
    if context.get("debug_mode"):
        host["debug_mode"] = True
    ctx: ToolContext[Any] = ToolContext(
        call_id=call.id,
        run_id=str(context.get("execution_id") or call.id),
        tool_name=call.name,
        deps=context.get("deps"),
        on_progress=progress,
        ui_info=tool.ui_info if tool is not None else None,
        model=calling.model,
        settings=calling.settings,
        system_prompt=calling.system_prompt,
        tools=calling.tools,
        host=host,
    )
    prepared = prepare_call(tool, call, ctx, available=calling.tools.keys())
    if isinstance(prepared, ToolResult):
        return prepared, ctx.ui_info
    return await run_prepared(prepared, default_timeout=None), ctx.ui_info


def _since(started: float) -> float:
    return (time.perf_counter() - started) * 1000
