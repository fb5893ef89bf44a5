"""Execute one tool call; every failure becomes an error `ToolResult` for the model."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import inspect
import json
import os
import queue
import threading
import time
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import Any, Protocol

from glassagent._core.errors import ToolError
from glassagent._core.messages import ToolCall
from glassagent._core.result import ToolResult
from glassagent._tools.invalid import InvalidArguments
from glassagent._tools.tool import Tool


class ToolInterrupted(Exception):
    """A tool raised `KeyboardInterrupt`: the run aborts, then the interrupt is raised again.

    It travels as an ordinary exception so that asyncio's task machinery, which lets a
    `KeyboardInterrupt` out of the event loop, never sees the interrupt itself.
    """

    def __init__(self, interrupt: KeyboardInterrupt, result: ToolResult) -> None:
        super().__init__(result.output)
        self.interrupt = interrupt
        self.result = result


Outcome = tuple[bool, Any]
"""``(True, value)`` when a tool returned, ``(False, exception)`` when it raised."""


def _raised_by_tool(exc: BaseException) -> bool:
    """Whether `exc` came out of the tool, not thrown into our own frame (``close()``)."""
    return exc.__traceback__ is not None and exc.__traceback__.tb_next is not None


async def _call_async(function: Callable[[], Awaitable[Any]]) -> Outcome:
    """Await an async tool, catching everything it raises except cancellation.

    `SystemExit`, `KeyboardInterrupt` and other `BaseException`s must not reach asyncio: a
    task that raises one of the first two stops the whole event loop.
    """
    try:
        return True, await function()
    except asyncio.CancelledError:
        raise
    except GeneratorExit as exc:
        if not _raised_by_tool(exc):
            raise  # our coroutine is being closed: let it close
        return False, exc
    except BaseException as exc:
        return False, exc


class _Workers:
    """Daemon threads that run sync tools: one per running tool, kept a while for reuse.

    Not the loop's default executor: a tool hung past its timeout would keep
    ``asyncio.run`` (which waits for that executor) and the interpreter from exiting, and
    would hold one of the executor's few workers. Here every job gets a thread of its own
    (an idle one, else a new one), so a hung tool never delays another; starting a thread
    per call cost more than the rest of a tool call, so idle threads wait for the next job
    for `IDLE_SECONDS` before they end.

    Invariant: the threads waiting for a job are the idle ones plus the jobs queued.
    """

    IDLE_SECONDS = 30.0

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0

    def submit(self, job: Callable[[], None]) -> None:
        """Run `job` on an idle thread, or on a new one when none is idle."""
        with self._lock:
            spawn = self._idle == 0
            if not spawn:
                self._idle -= 1  # that thread is now spoken for
        self._jobs.put(job)
        if spawn:
            threading.Thread(target=self._work, name="glassagent-tool", daemon=True).start()

    def _work(self) -> None:
        while True:
            try:
                job = self._jobs.get(timeout=self.IDLE_SECONDS)
            except queue.Empty:
                with self._lock:
                    if self._idle > 0:  # no job is on its way to this thread: end it
                        self._idle -= 1
                        return
                continue  # a job was queued just now: take it
            job()
            del job
            with self._lock:
                self._idle += 1


_WORKERS = _Workers()


def _forget_workers() -> None:
    """In a forked child: the parent's threads are gone, so start with none."""
    global _WORKERS
    _WORKERS = _Workers()


if hasattr(os, "register_at_fork"):  # not on Windows
    os.register_at_fork(after_in_child=_forget_workers)


def _call_in_thread(function: Callable[[], Any], name: str) -> asyncio.Future[Outcome]:
    """Run a sync tool on a worker thread (see `_Workers`); the future settles when it returns.

    The thread is named ``glassagent-tool-<name>`` while the tool runs.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Outcome] = loop.create_future()
    context = contextvars.copy_context()

    def settle(outcome: Outcome) -> None:
        if not future.done():  # a timeout or an abort may have cancelled it
            future.set_result(outcome)

    def work() -> None:
        threading.current_thread().name = thread_name
        outcome: Outcome
        try:
            value = context.run(function)
            if inspect.isgenerator(value):  # run its body here, not on the loop's thread
                value = context.run(list, value)
            outcome = True, value
        except BaseException as exc:  # all of it, StopIteration and SystemExit included
            outcome = False, exc
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
            loop.call_soon_threadsafe(settle, outcome)

    thread_name = f"glassagent-tool-{name}"
    _WORKERS.submit(work)
    return future


def _serialise(value: Any) -> str:
    if isinstance(value, str):
        return value
    from pydantic_core import to_json

    return to_json(value, fallback=str).decode()


def exception_text(exc: BaseException) -> str:
    """``str(exc)``, or ``<unprintable>`` when its ``__str__`` raises."""
    try:
        return str(exc)
    except Exception:  # a broken __str__ must not break the run
        return "<unprintable>"


def describe_exception(exc: BaseException) -> str:
    """``Type: message`` for `exc` in one line, its type alone when it has no message."""
    text = exception_text(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _failure(exc: BaseException, name: str) -> str:
    text = exception_text(exc)
    if isinstance(exc, ToolError):
        return f"Error: {text}"
    return f"Error: tool {name!r} raised {type(exc).__name__}: {text}"


class CallContext(Protocol):
    """What running a call needs of its `ToolContext` (which is built above this module)."""

    ui_info: Any

    def _abort(self) -> None: ...


@dataclass(frozen=True)
class Prepared:
    """A call whose tool exists and whose arguments fit it: ready to run."""

    tool: Tool
    call: ToolCall
    ctx: CallContext | None
    args: list[Any]
    kwargs: dict[str, Any]


def _result(
    call: ToolCall,
    ctx: CallContext | None,
    started: float,
    output: str,
    is_error: bool,
    structured: dict[str, Any] | list[Any] | None = None,
) -> ToolResult:
    ui_info = ctx.ui_info if ctx is not None else None
    duration = (time.perf_counter() - started) * 1000
    return ToolResult(call.id, call.name, output, is_error, duration, ui_info, structured)


_STRUCTURED_CHARS = 1_000_000  # a longer result stays text in the event only


def _structured(value: Any, output: str) -> dict[str, Any] | list[Any] | None:
    """`output` read back as JSON values when `value` gave a JSON object or array.

    Not for a very long result, nor one with ``NaN`` or ``Infinity`` (not JSON: an event must
    stay strict JSON for the browser and other readers); the event keeps the text then.
    """
    if isinstance(value, str) or output[:1] not in ("{", "[") or len(output) > _STRUCTURED_CHARS:
        return None
    try:
        data: dict[str, Any] | list[Any] = json.loads(output, parse_constant=_not_json)
    except ValueError:
        return None
    return data


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def prepare_call(
    tool: Tool | None,
    call: ToolCall,
    ctx: CallContext | None,
    *,
    available: Collection[str],
) -> Prepared | ToolResult:
    """Check `call` before it runs: an error result when it cannot, else its bound arguments.

    `tool` is `None` when the model named an unknown tool.
    """
    started = time.perf_counter()
    if problem := call.arguments_error:
        output = f"Error: invalid arguments for tool {call.name!r}: {problem}"
        return _result(call, ctx, started, output, True)
    if tool is None:
        names = ", ".join(available) or "none"
        output = f"Error: unknown tool {call.name!r}. Available tools: {names}."
        return _result(call, ctx, started, output, True)
    try:
        args, kwargs = tool._signature.bind(call.input, ctx)
    except InvalidArguments as exc:
        output = f"Error: invalid arguments for tool {tool.name!r}: {exc}"
        return _result(call, ctx, started, output, True)
    return Prepared(tool, call, ctx, args, kwargs)


async def run_prepared(prepared: Prepared, *, default_timeout: float | None) -> ToolResult:
    """Run a prepared call; its timeout starts now.

    Never raises for tool failures, whatever the tool raises; cancellation propagates, and a
    `KeyboardInterrupt` from the tool comes out as `ToolInterrupted`.
    """
    tool, call, ctx = prepared.tool, prepared.call, prepared.ctx
    started = time.perf_counter()

    def done(output: str, is_error: bool, value: Any = None) -> ToolResult:
        structured = None if is_error else _structured(value, output)
        return _result(call, ctx, started, output, is_error, structured)

    function = functools.partial(tool.function, *prepared.args, **prepared.kwargs)
    if tool.is_async:
        outcome: Awaitable[Outcome] = _call_async(function)
    else:
        outcome = _call_in_thread(function, tool.name)
    timeout = tool.timeout if tool.timeout is not None else default_timeout
    try:
        ok, value = await asyncio.wait_for(outcome, timeout)
    except asyncio.TimeoutError:
        if ctx is not None:
            ctx._abort()
        return done(f"Error: tool {tool.name!r} timed out after {timeout:g} s.", True)
    if not ok and isinstance(value, KeyboardInterrupt):
        output = f"Error: tool {tool.name!r} was interrupted (KeyboardInterrupt)."
        raise ToolInterrupted(value, done(output, True))
    if not ok:
        return done(_failure(value, tool.name), True)
    try:
        return done(_serialise(value), False, value)
    except Exception as exc:
        return done(
            f"Error: the result of tool {tool.name!r} is not JSON-serialisable: {exc}", True
        )
