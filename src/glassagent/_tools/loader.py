"""`ToolLoader`: a run's tools by name, which a tool can also call (the design's tool loader)."""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from glassagent._core.errors import UserError
from glassagent._core.messages import ToolCall
from glassagent._core.result import ToolResult

if TYPE_CHECKING:
    from glassagent._tools.context import ToolContext
    from glassagent._tools.tool import Tool

_NUMBERS = itertools.count(1)


class ToolLoader(Mapping[str, "Tool"]):
    """The run's tools by name, read-only: what `ToolContext.tool_loader` gives.

    Besides reading a tool, a tool can run another one: ``await loader.run_tool(name,
    arguments)`` from async code, or the design's ``loader.execute_tool(name, arguments,
    context)`` from a sync tool (it runs in a worker thread). The inner call gets a context of
    its own (same run, deps, host facts and progress) and its arguments are checked as the
    model's are.
    """

    def __init__(self, tools: Mapping[str, Tool], ctx: ToolContext[Any]) -> None:
        self._tools = tools
        self._ctx = ctx

    def __getitem__(self, name: str) -> Tool:
        return self._tools[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        return f"ToolLoader({sorted(self._tools)!r})"

    def get_display_name(self, name: str) -> str:
        """The name people see for the tool `name` (`name` itself for an unknown tool)."""
        found = self._tools.get(name)
        return found.display_name if found is not None else name

    async def run_tool(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        """Run the tool `name` with `arguments`; failures come back as an error result."""
        from glassagent._tools.context import ToolContext
        from glassagent._tools.execute import prepare_call, run_prepared

        parent = self._ctx
        call = ToolCall(f"{parent.call_id}.{next(_NUMBERS)}", name, dict(arguments))
        tool = self._tools.get(name)
        ctx: ToolContext[Any] = ToolContext(
            call_id=call.id,
            run_id=parent.run_id,
            tool_name=name,
            deps=parent.deps,
            on_progress=parent._on_progress,
            ui_info=tool.ui_info if tool is not None else None,
            model=parent.model,
            settings=parent.settings,
            system_prompt=parent.system_prompt,
            tools=self._tools,
            host=parent.host,
        )
        prepared = prepare_call(tool, call, ctx, available=self._tools.keys())
        if isinstance(prepared, ToolResult):
            return prepared
        return await run_prepared(prepared, default_timeout=None)

    def execute_tool(
        self, name: str, arguments: Mapping[str, Any], context: Any = None
    ) -> dict[str, Any]:
        """Run the tool `name` from a sync tool and wait: the design's ``execute_tool``.

        Args:
            name: The tool to run.
            arguments: Its arguments.
            context: The design's context dict; accepted for the design's call, not needed.

        Returns:
            The design's execution dict (``function_name``, ``tool_name``, ``args``,
            ``result``, ``has_ui``, ``ui_info``).

        Raises:
            UserError: When called on the run's own event loop (an async tool): it would wait
                for itself; use ``await run_tool(...)`` there.
        """
        if threading.get_ident() == self._ctx._loop_thread:
            raise UserError("execute_tool waits; from an async tool use `await run_tool(...)`.")
        future = asyncio.run_coroutine_threadsafe(self.run_tool(name, arguments), self._ctx._loop)
        result = future.result()
        call = ToolCall(result.call_id, name, dict(arguments))
        return execution_dict(call, self.get_display_name(name), result, result.ui_info)


def result_value(result: ToolResult) -> Any:
    """The design's ``execution.result``: structured when it is JSON, else its text."""
    return result.structured if result.structured is not None else result.output


def execution_dict(
    call: ToolCall, display_name: str, result: ToolResult, ui_info: Any
) -> dict[str, Any]:
    """The design's ``execution`` dict of one finished call."""
    return {
        "function_name": call.name,
        "tool_name": display_name,
        "args": dict(call.input),
        "result": result_value(result),
        "has_ui": ui_info is not None,
        "ui_info": ui_info,
    }
