"""`AgentRun`: the thin async driver of Think -> Act -> Observe, streamed as events."""

from __future__ import annotations

import asyncio
import time
import uuid
import warnings
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Coroutine, Generator
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from glassagent._agent import decide, record
from glassagent._agent.config import append_turn
from glassagent._agent.context_step import NO_CONTEXT, gather_context
from glassagent._agent.guard import RunGuard
from glassagent._agent.think import read_answer
from glassagent._core.errors import (
    HistoryAppendError,
    MaxIterationsExceeded,
    ProviderError,
    RunAborted,
    RunError,
    RunTimeoutError,
    UserError,
)
from glassagent._core.events import (
    AbortedEvent,
    BudgetExceededEvent,
    CompleteEvent,
    ErrorEvent,
    Event,
    FunctionCallStartEvent,
    FunctionExecutionCompleteEvent,
    FunctionExecutionStartEvent,
    LLMRequestEvent,
    LLMResponseEvent,
    SendingFunctionResponseEvent,
    TextChunkEvent,
    ThinkingChunkEvent,
    ToolProgressEvent,
)
from glassagent._core.messages import (
    LLMResponse,
    Message,
    StopReason,
    ToolCall,
    ToolProtocol,
    Usage,
)
from glassagent._core.result import RunResult, RunStopReason, ToolResult
from glassagent._tools.context import ToolContext
from glassagent._tools.execute import ToolInterrupted, execute_call

if TYPE_CHECKING:
    from typing_extensions import Self

    from glassagent._agent.budget import BudgetStop
    from glassagent._agent.config import RunConfig
    from glassagent._tools.tool import Tool

ABORT_GRACE_SECONDS = 0.25
"""How long running tools may take to notice an abort before they are cancelled."""

_END = object()


class AgentRun(record.RunRecording, Coroutine[Any, Any, RunResult]):
    """One run of an agent: an async iterator of events, and awaitable for its `RunResult`.

    ``async for event in agent.run(...)`` streams every step; ``await agent.run(...)`` returns
    the result (or raises a `GlassAgentError` that carries the partial result in ``.result``).
    A run is also a coroutine, so ``asyncio.run(agent.run(...))`` and
    ``asyncio.create_task(agent.run(...))`` work too. Nothing happens until the run is
    awaited, iterated or scheduled; a run dropped unused gives a `RuntimeWarning`, as a
    coroutine never awaited does (`close` discards one on purpose). Call `abort` from any task
    to stop the run promptly. `Agent.run` creates runs; there is no need to construct one
    yourself.
    """

    def __init__(self, config: RunConfig, conversation: list[Message]) -> None:
        self.run_id: str = uuid.uuid4().hex
        """Unique id of this run, carried by every event."""
        self._config = config
        self._conversation = conversation
        self._prior = len(conversation) - 1  # everything before the new user message
        self._context = NO_CONTEXT  # what the context tools gathered, sent with each request
        self._timed_out = False
        self._events: list[Event] = []
        self._queue: asyncio.Queue[Any] | None = None
        self._producer: asyncio.Task[None] | None = None
        self._contexts: list[ToolContext[Any]] = []
        self._usage = Usage()
        self._iterations = 0
        self._model_stop: StopReason | None = None
        self._text: list[str] = []
        self._thinking: list[str] = []
        self._streaming = False
        self._cancelling_tools = False
        self._abort_reason: str | None = None
        self._result: RunResult | None = None
        self._error: BaseException | None = None
        self._interrupt: KeyboardInterrupt | None = None
        self._coroutine: Coroutine[Any, Any, RunResult] | None = None
        self._claimed = False  # awaited, iterated, scheduled, aborted or closed
        self._guard = RunGuard()  # the model's profile and the budget

    # ---- public face -------------------------------------------------------------------

    @property
    def result(self) -> RunResult | None:
        """The run's result once it has ended (also after an error or abort), else `None`."""
        return self._result

    def abort(self, reason: str = "aborted by user") -> None:
        """Stop the run: close the model stream, signal and then cancel running tools.

        Safe to call from any task, before or during the run; a no-op once it has ended.

        Args:
            reason: Why, carried by the ``aborted`` event and the `RunAborted` error.
        """
        self._claimed = True
        if self._result is not None or self._abort_reason is not None:
            return
        self._abort_reason = reason
        for ctx in self._contexts:
            ctx._abort()
        if self._producer is not None:
            self._producer.cancel()

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._iterate()

    def __await__(self) -> Generator[Any, None, RunResult]:
        return self._collect().__await__()

    def send(self, value: Any) -> Any:
        """Coroutine protocol, for ``asyncio.run`` and tasks: the same as awaiting the run.

        Args:
            value: The value to send (asyncio sends `None`).
        """
        return self._as_coroutine().send(value)

    def throw(self, typ: Any, val: Any = None, tb: TracebackType | None = None, /) -> Any:
        """Coroutine protocol: raise an exception where the awaiting run is suspended.

        Args:
            typ: The exception (or its type).
            val: The exception value, with a type as `typ` (deprecated form).
            tb: A traceback for the exception (deprecated form).
        """
        coroutine = self._as_coroutine()
        if val is None and tb is None:
            return coroutine.throw(typ)
        return coroutine.throw(typ, val, tb)  # pragma: no cover - the deprecated form

    def close(self) -> None:
        """Discard the run: one never started will not start (and gives no warning).

        A run that is going is aborted (reason ``"the run was closed"``); awaiting a closed
        run that never started raises `RunAborted` at once.
        """
        self._claimed = True
        if self._coroutine is not None:
            self._coroutine.close()
        self.abort("the run was closed")

    def _as_coroutine(self) -> Coroutine[Any, Any, RunResult]:
        if self._coroutine is None:
            self._claimed = True
            self._coroutine = self._collect()
        return self._coroutine

    def __del__(self) -> None:
        if not getattr(self, "_claimed", True):
            warnings.warn(
                f"{self!r} was never awaited or iterated, so it did not run: use "
                "`await agent.run(...)`, `async for event in agent.run(...)`, "
                "`asyncio.run(agent.run(...))` or `agent.run_sync(...)`",
                RuntimeWarning,
                stacklevel=2,
                source=self,
            )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._stop("the run's context was exited")

    # ---- consuming ---------------------------------------------------------------------

    def _start(self, *, streaming: bool) -> asyncio.Task[None]:
        if self._producer is not None:
            raise UserError("An AgentRun can be iterated or awaited only once; start a new run.")
        self._claimed = True
        if streaming:
            self._queue = asyncio.Queue()
        self._producer = asyncio.create_task(self._drive(), name=f"glassagent-run-{self.run_id}")
        self._producer.add_done_callback(self._driver_done)
        return self._producer

    async def _stop(self, reason: str) -> None:
        """Abort the run if it is still going, and wait until it has wound down."""
        if self._producer is not None and not self._producer.done():
            self.abort(reason)
            await asyncio.wait({self._producer})

    async def _iterate(self) -> AsyncGenerator[Event, None]:
        self._start(streaming=True)
        queue = self._queue
        assert queue is not None
        try:
            while (item := await queue.get()) is not _END:
                yield item
        finally:
            await self._stop("the consumer stopped iterating")
        if self._interrupt is not None:
            raise self._interrupt
        if isinstance(self._error, HistoryAppendError):  # no event reports it
            raise self._error

    async def _collect(self) -> RunResult:
        producer = self._producer
        if producer is None:  # awaited without iterating: no event queue needed
            producer = self._start(streaming=False)
            try:
                await asyncio.wait({producer})
            except GeneratorExit:  # closed (`close`): no more awaiting here
                self.abort("the run was closed")
                raise
            except BaseException:
                await self._stop("the awaiting task was cancelled")
                raise
        elif not producer.done():
            await asyncio.wait({producer})
        if self._interrupt is not None:
            raise self._interrupt
        if self._error is not None:
            raise self._error
        if self._result is None:  # pragma: no cover - `_driver_done` always ends the run
            raise RunError("The run stopped without a result.")
        return self._result

    # ---- the driver --------------------------------------------------------------------

    def _emit(self, event_type: Callable[..., Event], **fields: Any) -> None:
        event = event_type(run_id=self.run_id, seq=len(self._events), **fields)
        self._keep(event)  # stored, and handed to the live recorders and displays
        if self._queue is not None:
            self._queue.put_nowait(event)

    async def _drive(self) -> None:
        """Run the loop and end the run; nothing but an outside cancellation escapes.

        A `SystemExit` or `KeyboardInterrupt` reaching asyncio's task machinery would stop
        the whole event loop, and every other run on it.
        """
        timer = self._start_timer()
        try:
            if self._abort_reason is not None:
                raise asyncio.CancelledError
            self._config = self._guard.start(self._config, self._conversation)
            await self._loop()
        except asyncio.CancelledError:
            cancelled_from_outside = self._abort_reason is None
            if self._timed_out:
                limit = self._config.run_timeout or 0.0
                message = f"The run took longer than its run_timeout of {limit:g} s."
                self._end_failed(RunTimeoutError(message, seconds=limit))
            else:
                self._end_aborted()
            if cancelled_from_outside:
                raise
        except Exception as exc:
            self._end_failed(exc)
        except KeyboardInterrupt as exc:  # e.g. from the model client: abort, raise it later
            self._interrupt = exc
            self._abort_reason = self._abort_reason or "interrupted (KeyboardInterrupt)"
            self._end_aborted()
        except BaseException as exc:  # SystemExit, GeneratorExit...: the run fails, typed
            error = RunError(f"The run stopped on {type(exc).__name__}: {exc}")
            error.__cause__ = exc
            self._end_failed(error)
        finally:
            if timer is not None:
                timer.cancel()
            self._announce_end()

    def _start_timer(self) -> asyncio.TimerHandle | None:
        """End the run with `RunTimeoutError` once `run_timeout` has passed."""
        if self._config.run_timeout is None:
            return None

        def time_out() -> None:
            if self._result is None and self._abort_reason is None:
                self._timed_out = True
                self.abort(f"the run_timeout of {self._config.run_timeout:g} s was reached")

        return asyncio.get_running_loop().call_later(self._config.run_timeout, time_out)

    def _announce_end(self) -> None:
        """The step after the end: append the turn to the history, then end the stream.

        A refused append becomes the run's error (`HistoryAppendError`); the consumer learns
        of the end either way.
        """
        try:
            if self._result is not None:
                append_turn(self._config, self._result)
        except HistoryAppendError as exc:
            self._error = exc
        finally:
            if self._queue is not None:
                self._queue.put_nowait(_END)

    def _driver_done(self, producer: asyncio.Task[None]) -> None:
        """Backstop: a driver stopped before it could end the run still ends it, once.

        That happens when it is cancelled before it started, or when its ending failed.
        """
        if self._result is not None:
            return
        if producer.cancelled():
            self._end_aborted()
        else:
            exc = producer.exception()
            self._end_failed(RunError(f"The run stopped unexpectedly: {exc!r}"))
        self._announce_end()

    async def _loop(self) -> None:
        args = (self._config, self._conversation, self._prior, self.run_id, self._emit)
        self._context = await gather_context(*args)
        iteration = 0
        while True:
            iteration += 1
            if stop := self._guard.before_call(self._conversation, self._config):
                self._end_budget(stop)
                return
            response = await self._think(iteration)
            step = decide.next_step(response)
            if isinstance(step, decide.Finish):
                self._emit(
                    CompleteEvent,
                    text=step.text,
                    usage=self._usage,
                    iterations=iteration,
                    stop_reason=response.stop_reason,
                )
                self._end(step.text, "end_turn")
                return
            await self._act(step.calls)
            if not decide.may_think_again(iteration, self._config.max_iterations):
                limit = self._config.max_iterations
                raise MaxIterationsExceeded(
                    f"The run reached max_iterations={limit} without a final answer.",
                    max_iterations=limit,
                )

    async def _tool_protocol(self) -> ToolProtocol:
        """The protocol the next call offers tools with; ``auto`` is resolved first.

        A client that cannot decide now (its server is down) is left to decide in the call,
        which retries and reports the failure as usual; the event then says ``auto``.
        """
        client = self._config.client
        if client.tool_protocol != "auto" or not self._config.definitions:
            return client.tool_protocol
        try:
            return await client.resolve_tool_protocol(self._config.settings)
        except ProviderError:
            return client.tool_protocol

    async def _think(self, iteration: int) -> LLMResponse:
        """One model call, streamed: text and thinking chunks as they arrive."""
        self._iterations = iteration
        messages, system = self._context.apply(self._conversation, self._config.system)
        client = self._config.client
        protocol = await self._tool_protocol()
        self._emit(
            LLMRequestEvent,
            iteration=iteration,
            provider=client.provider_name,
            model=client.model,
            messages=messages,
            tools=self._config.definitions,
            system=system,
            settings=self._config.settings,
            tool_protocol=protocol,
        )
        started = time.perf_counter()
        follow_up = iteration > 1
        text, thinking = self._text, self._thinking
        text.clear()
        thinking.clear()
        self._streaming = True
        response = await read_answer(
            client,
            (messages, self._config.definitions, system, self._config.settings),
            emit=self._emit,
            text=text,
            thinking=thinking,
            iteration=iteration,
        )
        self._streaming = False
        if not thinking and response.thinking:
            self._emit(ThinkingChunkEvent, text=response.thinking)
        if not text and response.text:
            self._emit(TextChunkEvent, text=response.text, is_follow_up=follow_up)
        self._usage += response.usage
        cost = self._guard.after_call(response)
        self._emit(
            LLMResponseEvent,
            iteration=iteration,
            text=response.text,
            tool_calls=response.tool_calls,
            stop_reason=response.stop_reason,
            thinking=response.thinking,
            usage=response.usage,
            latency_ms=(time.perf_counter() - started) * 1000,
            protocol_error=response.protocol_error,
            raw_stop_reason=response.raw_stop_reason,
            cost=cost,
        )
        self._model_stop = response.stop_reason
        self._conversation.append(client.format_assistant_message(response))
        return response

    async def _act(self, calls: tuple[ToolCall, ...]) -> None:
        """Execute all calls of one answer concurrently; results go back in call order."""
        tools = decide.resolve(calls, self._config.tools)
        for call, tool in zip(calls, tools, strict=True):
            self._emit(
                FunctionCallStartEvent,
                function_name=call.name,
                tool_name=tool.name if tool else None,
                args=call.input,
                call_id=call.id,
                ui_info=tool.ui_info if tool else None,
            )
        self._emit(FunctionExecutionStartEvent, count=len(calls))
        started = time.perf_counter()
        pairs = zip(calls, tools, strict=True)
        tasks = [asyncio.create_task(self._call(call, tool)) for call, tool in pairs]
        try:
            await asyncio.wait(tasks)
        except asyncio.CancelledError:
            await self._observe_aborted(calls, tools, tasks, started)
            raise
        finally:
            self._contexts.clear()
        for call, task in zip(calls, tasks, strict=True):
            self._conversation.append(self._config.client.format_tool_result(call, task.result()))
        self._emit(SendingFunctionResponseEvent, count=len(calls))

    async def _observe_aborted(
        self,
        calls: tuple[ToolCall, ...],
        tools: list[Tool | None],
        tasks: list[asyncio.Task[ToolResult]],
        started: float,
    ) -> None:
        """Give running tools a short grace to notice the abort; keep what finished.

        Every call cut short still gets its ``function_execution_complete`` (an error), so a
        UI never waits forever on a call id.
        """
        for ctx in self._contexts:
            ctx._abort()
        _, pending = await asyncio.wait(tasks, timeout=ABORT_GRACE_SECONDS)
        self._cancelling_tools = True
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)
        reason = self._abort_reason or "cancelled"
        for call, tool, task in zip(calls, tools, tasks, strict=True):
            if task.cancelled() or task.exception() is not None:
                duration = (time.perf_counter() - started) * 1000
                ui_info = tool.ui_info if tool is not None else None
                result = decide.aborted_result(call, reason, duration, ui_info)
                self._emit_complete(call, tool, result)
                message = self._config.client.format_tool_result(call, result)
                self._conversation.append(decide.mark_aborted(message))
            else:
                message = self._config.client.format_tool_result(call, task.result())
                self._conversation.append(message)

    async def _call(self, call: ToolCall, tool: Tool | None) -> ToolResult:
        ctx: ToolContext[Any] | None = None
        finished = False

        def progress(message: str) -> None:
            # A timed-out sync tool's thread may still report: its call has ended by then.
            if not finished and self._result is None:
                self._emit(ToolProgressEvent, tool=call.name, message=message, call_id=call.id)

        if tool is not None:
            ctx = ToolContext(
                call_id=call.id,
                run_id=self.run_id,
                tool_name=tool.name,
                deps=self._config.deps,
                on_progress=progress,
                ui_info=tool.ui_info,
            )
            self._contexts.append(ctx)
        started = time.perf_counter()
        try:
            result = await execute_call(
                tool,
                call,
                ctx,
                available=self._config.tools.keys(),
                default_timeout=self._config.tool_timeout,
            )
        except ToolInterrupted as interrupted:  # abort the run; its consumer gets it back
            result = interrupted.result
            if self._result is None and self._interrupt is None:
                self._interrupt = interrupted.interrupt
                self.abort(f"interrupted: tool {call.name!r} raised KeyboardInterrupt")
        except asyncio.CancelledError:
            if self._cancelling_tools:  # an abort: let the cancellation through
                raise
            # The tool itself raised CancelledError (e.g. it awaited something cancelled).
            duration = (time.perf_counter() - started) * 1000
            output = f"Error: tool {call.name!r} was cancelled from within."
            result = ToolResult(call.id, call.name, output, True, duration, ctx and ctx.ui_info)
        finally:
            finished = True
        self._emit_complete(call, tool, result)
        return result

    def _emit_complete(self, call: ToolCall, tool: Tool | None, result: ToolResult) -> None:
        execution = decide.execution(call, tool, result)
        self._emit(FunctionExecutionCompleteEvent, execution=execution)

    # ---- endings -----------------------------------------------------------------------

    def _end(self, text: str, stop_reason: RunStopReason) -> None:
        self._result = RunResult(
            text=text,
            new_messages=tuple(self._conversation[self._prior :]),
            all_messages=tuple(self._conversation),
            events=tuple(self._events),
            usage=self._usage,
            iterations=self._iterations,
            stop_reason=stop_reason,
            model_stop_reason=self._model_stop,
            cost=self._guard.cost,
            redact=self._config.redact,
        )

    def _keep_partial(self) -> str:
        """The text so far: a model answer cut mid-stream is kept, marked ``aborted``."""
        if not self._streaming:
            return decide.last_assistant_text(self._conversation, self._prior)
        self._streaming = False
        text = "".join(self._text)
        partial = decide.partial_message(text, "".join(self._thinking))
        if partial is None:
            return decide.last_assistant_text(self._conversation, self._prior)
        self._conversation.append(partial)
        return text

    def _end_aborted(self) -> None:
        reason = self._abort_reason or "cancelled"
        self._abort_reason = reason
        text = self._keep_partial()
        self._emit(AbortedEvent, text=text, reason=reason)
        self._finalise(text, "aborted", RunAborted(f"The run was aborted: {reason}", reason=reason))

    def _end_budget(self, stop: BudgetStop) -> None:
        text = decide.last_assistant_text(self._conversation, self._prior)
        fields = {"usage": self._usage, "cost": self._guard.cost, "iterations": self._iterations}
        self._emit(BudgetExceededEvent, limit=stop.limit, reason=stop.reason, text=text, **fields)
        self._end(text, "budget")

    def _end_failed(self, exc: Exception) -> None:
        stop: Literal["max_iterations", "error"]
        stop = "max_iterations" if isinstance(exc, MaxIterationsExceeded) else "error"
        text = self._keep_partial()
        self._emit(ErrorEvent, **decide.error_fields(exc))
        self._finalise(text, stop, exc)

    def _finalise(self, text: str, stop: RunStopReason, exc: BaseException) -> None:
        self._end(text, stop)
        self._error = exc
        exc.result = self.result  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        return f"AgentRun(run_id={self.run_id!r})"
