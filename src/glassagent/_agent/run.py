"""`AgentRun`: the thin async driver of Think -> Act -> Observe, streamed as events."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator, Mapping
from contextlib import asynccontextmanager
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from glassagent._agent import decide
from glassagent._core.errors import (
    GlassAgentError,
    MaxIterationsExceeded,
    ProviderError,
    ResponseParseError,
    RunAborted,
    UserError,
)
from glassagent._core.events import (
    AbortedEvent,
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
    ToolExecution,
    ToolProgressEvent,
)
from glassagent._core.messages import (
    LLMResponse,
    Message,
    ModelSettings,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    ToolDefinition,
    Usage,
)
from glassagent._core.result import RunResult, RunStopReason, ToolResult
from glassagent._tools.context import ToolContext
from glassagent._tools.execute import execute_call

if TYPE_CHECKING:
    from typing_extensions import Self

    from glassagent._core.client import BaseLLMClient
    from glassagent._tools.tool import Tool

ABORT_GRACE_SECONDS = 0.25
"""How long running tools may take to notice an abort before they are cancelled."""

_END = object()


@asynccontextmanager
async def _closing(stream: AsyncIterator[Any]) -> AsyncGenerator[AsyncIterator[Any], None]:
    """Close an async generator on exit, so an aborted model stream releases its connection."""
    try:
        yield stream
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()


class AgentRun:
    """One run of an agent: an async iterator of events, and awaitable for its `RunResult`.

    ``async for event in agent.run(...)`` streams every step; ``await agent.run(...)`` returns
    the result (or raises a `GlassAgentError` that carries the partial result in ``.result``).
    Call `abort` from any task to stop the run promptly. `Agent.run` creates runs; there is no
    need to construct one yourself.
    """

    def __init__(
        self,
        *,
        client: BaseLLMClient,
        tools: Mapping[str, Tool],
        definitions: tuple[ToolDefinition, ...],
        system: str | None,
        settings: ModelSettings,
        max_iterations: int,
        tool_timeout: float | None,
        conversation: list[Message],
        deps: Any,
        on_end: Callable[[RunResult], None] | None = None,
    ) -> None:
        self.run_id: str = uuid.uuid4().hex
        """Unique id of this run, carried by every event."""
        self._client = client
        self._tools = tools
        self._definitions = definitions
        self._system = system
        self._settings = settings
        self._max_iterations = max_iterations
        self._tool_timeout = tool_timeout
        self._conversation = conversation
        self._prior = len(conversation) - 1  # everything before the new user message
        self._deps = deps
        self._on_end = on_end
        self._events: list[Event] = []
        self._queue: asyncio.Queue[Any] | None = None
        self._producer: asyncio.Task[None] | None = None
        self._contexts: list[ToolContext[Any]] = []
        self._usage = Usage()
        self._iterations = 0
        self._text: list[str] = []
        self._thinking: list[str] = []
        self._streaming = False
        self._cancelling_tools = False
        self._abort_reason: str | None = None
        self._result: RunResult | None = None
        self._error: BaseException | None = None

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
        if streaming:
            self._queue = asyncio.Queue()
        self._producer = asyncio.create_task(self._drive(), name=f"glassagent-run-{self.run_id}")
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

    async def _collect(self) -> RunResult:
        producer = self._producer
        if producer is None:  # awaited without iterating: no event queue needed
            try:
                await asyncio.wait({self._start(streaming=False)})
            finally:
                await self._stop("the awaiting task was cancelled")
        elif not producer.done():
            await asyncio.wait({producer})
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result

    # ---- the driver --------------------------------------------------------------------

    def _emit(self, event_type: Callable[..., Event], **fields: Any) -> None:
        event = event_type(run_id=self.run_id, seq=len(self._events), **fields)
        self._events.append(event)
        if self._queue is not None:
            self._queue.put_nowait(event)

    async def _drive(self) -> None:
        try:
            if self._abort_reason is not None:
                raise asyncio.CancelledError
            await self._loop()
        except asyncio.CancelledError:
            cancelled_from_outside = self._abort_reason is None
            self._end_aborted()
            if cancelled_from_outside:
                raise
        except Exception as exc:
            self._end_failed(exc)
        finally:
            try:
                if self._on_end is not None and self._result is not None:
                    self._on_end(self._result)
            finally:  # the consumer must learn of the end, whatever `on_end` did
                if self._queue is not None:
                    self._queue.put_nowait(_END)

    async def _loop(self) -> None:
        iteration = 0
        while True:
            iteration += 1
            response = await self._think(iteration)
            step = decide.next_step(response)
            if isinstance(step, decide.Finish):
                self._emit(CompleteEvent, text=step.text, usage=self._usage, iterations=iteration)
                self._end(step.text, "end_turn")
                return
            await self._act(step.calls)
            if not decide.may_think_again(iteration, self._max_iterations):
                limit = self._max_iterations
                raise MaxIterationsExceeded(
                    f"The run reached max_iterations={limit} without a final answer.",
                    max_iterations=limit,
                )

    async def _think(self, iteration: int) -> LLMResponse:
        """One model call, streamed: text and thinking chunks as they arrive."""
        self._iterations = iteration
        messages = tuple(self._conversation)
        client = self._client
        self._emit(
            LLMRequestEvent,
            iteration=iteration,
            provider=client.provider_name,
            model=client.model,
            messages=messages,
            tools=self._definitions,
            system=self._system,
            settings=self._settings,
            tool_protocol=client.tool_protocol,
        )
        started = time.perf_counter()
        follow_up = iteration > 1
        text, thinking = self._text, self._thinking
        text.clear()
        thinking.clear()
        response: LLMResponse | None = None
        self._streaming = True
        try:
            stream = client.stream(
                messages, self._definitions, self._system, settings=self._settings
            )
            async with _closing(stream) as parts:
                async for part in parts:
                    if isinstance(part, TextDelta):
                        text.append(part.text)
                        self._emit(TextChunkEvent, text=part.text, is_follow_up=follow_up)
                    elif isinstance(part, ThinkingDelta):
                        thinking.append(part.text)
                        self._emit(ThinkingChunkEvent, text=part.text)
                    elif isinstance(part, LLMResponse):
                        response = part
                        break
        except GlassAgentError:
            raise
        except Exception as exc:
            name = client.provider_name
            raise ProviderError(
                f"The {name} client failed: {type(exc).__name__}: {exc}", provider=name
            ) from exc
        if response is None:
            raise ResponseParseError(
                "The model stream ended without a final LLMResponse.", provider=client.provider_name
            )
        if problem := decide.malformed_call(response):
            name = client.provider_name
            raise ResponseParseError(f"The {name} client returned {problem}", provider=name)
        self._streaming = False
        if not thinking and response.thinking:
            self._emit(ThinkingChunkEvent, text=response.thinking)
        if not text and response.text:
            self._emit(TextChunkEvent, text=response.text, is_follow_up=follow_up)
        self._usage += response.usage
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
        )
        self._conversation.append(client.format_assistant_message(response))
        return response

    async def _act(self, calls: tuple[ToolCall, ...]) -> None:
        """Execute all calls of one answer concurrently; results go back in call order."""
        tools = decide.resolve(calls, self._tools)
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
            await self._observe_aborted(calls, tasks, started)
            raise
        finally:
            self._contexts.clear()
        for call, task in zip(calls, tasks, strict=True):
            self._conversation.append(self._client.format_tool_result(call, task.result()))
        self._emit(SendingFunctionResponseEvent, count=len(calls))

    async def _observe_aborted(
        self, calls: tuple[ToolCall, ...], tasks: list[asyncio.Task[ToolResult]], started: float
    ) -> None:
        """Give running tools a short grace to notice the abort; keep what finished."""
        for ctx in self._contexts:
            ctx._abort()
        _, pending = await asyncio.wait(tasks, timeout=ABORT_GRACE_SECONDS)
        self._cancelling_tools = True
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)
        reason = self._abort_reason or "cancelled"
        for call, task in zip(calls, tasks, strict=True):
            if task.cancelled() or task.exception() is not None:
                duration = (time.perf_counter() - started) * 1000
                result = decide.aborted_result(call, reason, duration)
                message = self._client.format_tool_result(call, result)
                self._conversation.append(decide.mark_aborted(message))
            else:
                self._conversation.append(self._client.format_tool_result(call, task.result()))

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
                deps=self._deps,
                on_progress=progress,
                ui_info=tool.ui_info,
            )
            self._contexts.append(ctx)
        started = time.perf_counter()
        try:
            result = await execute_call(
                tool, call, ctx, available=self._tools.keys(), default_timeout=self._tool_timeout
            )
        except asyncio.CancelledError:
            if self._cancelling_tools:  # an abort: let the cancellation through
                raise
            # The tool itself raised CancelledError (e.g. it awaited something cancelled).
            duration = (time.perf_counter() - started) * 1000
            output = f"Error: tool {call.name!r} was cancelled from within."
            result = ToolResult(call.id, call.name, output, True, duration, ctx and ctx.ui_info)
        finally:
            finished = True
        execution = ToolExecution(
            function_name=call.name,
            tool_name=tool.name if tool else None,
            args=call.input,
            result=result.output,
            is_error=result.is_error,
            duration_ms=result.duration_ms,
            has_ui=result.ui_info is not None,
            ui_info=result.ui_info,
            call_id=call.id,
        )
        self._emit(FunctionExecutionCompleteEvent, execution=execution)
        return result

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
        )

    def _end_aborted(self) -> None:
        reason = self._abort_reason or "cancelled"
        self._abort_reason = reason
        if self._streaming:
            text = "".join(self._text)
            partial = decide.partial_message(text, "".join(self._thinking))
            if partial is not None:
                self._conversation.append(partial)
        else:
            text = decide.last_assistant_text(self._conversation, self._prior)
        self._emit(AbortedEvent, text=text, reason=reason)
        self._finalise(text, "aborted", RunAborted(f"The run was aborted: {reason}", reason=reason))

    def _end_failed(self, exc: Exception) -> None:
        stop: Literal["max_iterations", "error"]
        stop = "max_iterations" if isinstance(exc, MaxIterationsExceeded) else "error"
        self._emit(ErrorEvent, **decide.error_fields(exc))
        text = decide.last_assistant_text(self._conversation, self._prior)
        self._finalise(text, stop, exc)

    def _finalise(self, text: str, stop: RunStopReason, exc: BaseException) -> None:
        self._end(text, stop)
        self._error = exc
        exc.result = self.result  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        return f"AgentRun(run_id={self.run_id!r})"
