"""Execute one tool call; every failure becomes an error `ToolResult` for the model."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable, Collection
from typing import Any

from glassagent._core.errors import ToolError
from glassagent._core.messages import ARGUMENTS_ERROR, ToolCall
from glassagent._core.result import ToolResult
from glassagent._tools.context import ToolContext
from glassagent._tools.tool import InvalidArguments, Tool


async def _guarded(awaitable: Awaitable[Any]) -> tuple[bool, Any]:
    """Await, returning ``(True, value)`` or ``(False, exception)``: a timeout stays ours."""
    try:
        return True, await awaitable
    except Exception as exc:
        return False, exc


def _call_sync(function: Callable[[], Any]) -> Any:
    """Run a sync tool; a `StopIteration` it raises could not cross into a future (it hangs)."""
    try:
        return function()
    except StopIteration as exc:
        raise RuntimeError(f"StopIteration: {exc}") from exc


def _serialise(value: Any) -> str:
    if isinstance(value, str):
        return value
    from pydantic_core import to_json

    return to_json(value, fallback=str).decode()


def _failure(exc: BaseException, name: str) -> str:
    if isinstance(exc, ToolError):
        return f"Error: {exc}"
    return f"Error: tool {name!r} raised {type(exc).__name__}: {exc}"


async def execute_call(
    tool: Tool | None,
    call: ToolCall,
    ctx: ToolContext[Any] | None,
    *,
    available: Collection[str],
    default_timeout: float | None,
) -> ToolResult:
    """Run `call` with `tool` (None when the model named an unknown tool).

    Never raises for tool failures; only cancellation propagates.
    """
    started = time.perf_counter()

    def done(output: str, is_error: bool) -> ToolResult:
        ui_info = ctx.ui_info if ctx is not None else None
        duration = (time.perf_counter() - started) * 1000
        return ToolResult(call.id, call.name, output, is_error, duration, ui_info)

    if problem := call.provider_metadata.get(ARGUMENTS_ERROR):
        return done(f"Error: invalid arguments for tool {call.name!r}: {problem}", True)
    if tool is None:
        names = ", ".join(available) or "none"
        return done(f"Error: unknown tool {call.name!r}. Available tools: {names}.", True)
    try:
        args, kwargs = tool._signature.bind(call.input)
    except InvalidArguments as exc:
        return done(f"Error: invalid arguments for tool {tool.name!r}: {exc}", True)
    if tool._signature.context_param is not None:
        kwargs[tool._signature.context_param] = ctx
    if tool.is_async:
        awaitable: Awaitable[Any] = tool.function(*args, **kwargs)
    else:
        awaitable = asyncio.to_thread(_call_sync, functools.partial(tool.function, *args, **kwargs))
    timeout = tool.timeout if tool.timeout is not None else default_timeout
    try:
        ok, value = await asyncio.wait_for(_guarded(awaitable), timeout)
    except asyncio.TimeoutError:
        if ctx is not None:
            ctx._abort()
        return done(f"Error: tool {tool.name!r} timed out after {timeout:g} s.", True)
    if not ok:
        return done(_failure(value, tool.name), True)
    try:
        return done(_serialise(value), False)
    except Exception as exc:
        return done(
            f"Error: the result of tool {tool.name!r} is not JSON-serialisable: {exc}", True
        )
