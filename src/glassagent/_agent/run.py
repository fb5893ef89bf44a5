"""`AgentRun`: the thin async driver of Think -> Act -> Observe, streamed as events."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Coroutine, Generator
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from glassagent._agent import decide, output, record
from glassagent._agent.act import Acting, Host
from glassagent._agent.approval import Answer, ApprovalGate
from glassagent._agent.awaitable import AwaitableRun
from glassagent._agent.compact import ContextWindow, Prepared, Spending
from glassagent._agent.config import append_turn, plan_output
from glassagent._agent.context_step import NO_CONTEXT, gather_context
from glassagent._agent.guard import RunGuard
from glassagent._agent.nesting import RunNesting, set_running
from glassagent._agent.think import read_answer, tool_protocol
from glassagent._agent.timer import RunTimer
from glassagent._core.errors import (
    HistoryAppendError,
    MaxIterationsExceeded,
    RunAborted,
    RunError,
    RunTimeoutError,
    ToolCallFormatError,
    UserError,
)
from glassagent._core.events import (
    AbortedEvent,
    AwaitingApprovalEvent,
    BudgetExceededEvent,
    CompleteEvent,
    ContextCompactedEvent,
    ErrorEvent,
    Event,
    LLMRequestEvent,
    LLMResponseEvent,
    OutputRetryEvent,
    TextChunkEvent,
    ThinkingChunkEvent,
)
from glassagent._core.messages import (
    LLMResponse,
    Message,
    StopReason,
    ToolCall,
    Usage,
)
from glassagent._core.request import ModelRequest
from glassagent._core.result import OutputT, RunResult, RunStopReason

if TYPE_CHECKING:
    from collections.abc import Mapping

    from typing_extensions import Self

    from glassagent._agent.budget import BudgetStop, NextCall
    from glassagent._agent.config import RunConfig
    from glassagent._agent.nesting import Delegate, Nesting
    from glassagent._core.record.redact import Redact
    from glassagent._tools.execute import ToolInterrupted

_END = object()


class AgentRun(record.RunRecording, RunNesting, AwaitableRun[RunResult[OutputT]]):
    """One run of an agent: an async iterator of events, and awaitable for its `RunResult`.

    ``async for event in agent.run(...)`` streams every step; ``await agent.run(...)`` returns
    the result (or raises a `GlassAgentError` that carries the partial result in ``.result``).
    A run is also a coroutine, so ``asyncio.run(agent.run(...))`` and
    ``asyncio.create_task(agent.run(...))`` work too. Nothing happens until the run is
    awaited, iterated or scheduled; a run dropped unused gives a `RuntimeWarning`, as a
    coroutine never awaited does (`close` discards one on purpose). Call `abort` from any task
    to stop the run promptly, and `approve` or `deny` to answer a tool call that waits for
    approval. `Agent.run` and `Agent.resume` create runs; there is no need to construct one
    yourself.
    """

    _how_to_use = (
        "`await agent.run(...)`, `async for event in agent.run(...)`, "
        "`asyncio.run(agent.run(...))` or `agent.run_sync(...)`"
    )

    def __init__(
        self,
        config: RunConfig,
        conversation: list[Message],
        *,
        resume: tuple[tuple[ToolCall, ...], Mapping[str, Answer]] | None = None,
        run_id: str | None = None,
        nesting: Nesting | None = None,
    ) -> None:
        self.run_id: str = run_id or uuid.uuid4().hex
        """Unique id of this run, carried by every event."""
        self._nesting = nesting
        self.depth: int = nesting.depth if nesting is not None else 0
        """How deep the run is nested: 0 for a top-level run, 1 for a sub-agent's run..."""
        self._children: set[RunNesting] = set()  # sub-agents' runs going on now
        self._handoff: tuple[Delegate, str] | None = None  # (agent, call id)
        self._agent_name = config.agent_name
        self._round_size = 0  # calls of the answer being acted on
        self._nested_redacts: dict[str, tuple[Redact, ...]] = {}  # sub-agents' hooks, by run
        self._seq = 0
        self._config = config
        self._conversation = conversation
        # Everything before the new user message; a resumed run adds no user message.
        self._prior = len(conversation) - (0 if resume else 1)
        self._resumed = resume[0] if resume else ()  # calls that waited for approval
        self._gate = ApprovalGate(resume[1] if resume else None)
        self._context = NO_CONTEXT  # what the context tools gathered, sent with each request
        self._timed_out = False
        self._timer = RunTimer(config.run_timeout, self._time_out)
        self._events: list[Event] = []
        self._queue: asyncio.Queue[Any] | None = None
        self._producer: asyncio.Task[None] | None = None
        self._acting = Acting(self.run_id, self._gate)
        self._usage = Usage()
        self._iterations = 0
        self._model_stop: StopReason | None = None
        self._text: list[str] = []
        self._thinking: list[str] = []
        self._acted = False  # whether tools ran in this run (see `decide.call_settings`)
        self._streaming = False
        self._answer_next = False  # the model repeated its calls: the next call must answer
        self._abort_reason: str | None = None
        self._result: RunResult[OutputT] | None = None
        self._plan: output.Plan | None = None  # how a structured answer is asked for
        self._output_retries = 0
        self._error: BaseException | None = None
        self._interrupt: KeyboardInterrupt | None = None
        self._coroutine: Coroutine[Any, Any, RunResult[OutputT]] | None = None
        self._claimed = False  # awaited, iterated, scheduled, aborted or closed
        self._guard = RunGuard()  # the model's profile and the budget
        self._attach_hook()  # the agent's on_event hook, if any

    # ---- public face -------------------------------------------------------------------

    @property
    def result(self) -> RunResult[OutputT] | None:
        """The run's result once it has ended (also after an error or abort), else `None`."""
        return self._result

    def abort(self, reason: str = "user_abort") -> None:
        """Stop the run: close the model stream, signal and then cancel running tools.

        Safe to call from any task, before or during the run; a no-op once it has ended.

        Args:
            reason: Why, carried by the ``aborted`` event and the `RunAborted` error;
                ``"user_abort"`` by default.
        """
        self._claimed = True
        if self._result is not None or self._abort_reason is not None:
            return
        self._abort_reason = reason
        self._acting.abort()
        if self._producer is not None:
            self._producer.cancel()

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._iterate()

    def __await__(self) -> Generator[Any, None, RunResult[OutputT]]:
        return self._collect().__await__()

    def close(self) -> None:
        """Discard the run: one never started will not start (and gives no warning).

        A run that is going is aborted (reason ``"the run was closed"``); awaiting a closed
        run that never started raises `RunAborted` at once.
        """
        self._claimed = True
        if self._coroutine is not None:
            self._coroutine.close()
        self.abort("the run was closed")

    def _awaiting(self) -> Coroutine[Any, Any, RunResult[OutputT]]:
        return self._collect()

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

    async def _collect(self) -> RunResult[OutputT]:
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
        steps = self._config.steps
        if steps is not None and steps.replaying():
            fields["replayed"] = True
        nesting = self._nesting
        if nesting is not None:
            fields.update(
                parent_run_id=nesting.parent.run_id,
                parent_call_id=nesting.call_id,
                depth=nesting.depth,
            )
        event = event_type(run_id=self.run_id, seq=self._seq, **fields)
        self._seq += 1
        self._relay(event)

    async def _drive(self) -> None:
        """Run the loop and end the run; nothing but an outside cancellation escapes.

        A `SystemExit` or `KeyboardInterrupt` reaching asyncio's task machinery would stop
        the whole event loop, and every other run on it.
        """
        self._timer.start()
        set_running(self)  # this task's own context: what its tool calls see
        try:
            if self._abort_reason is not None:
                raise asyncio.CancelledError
            self._config = self._guard.start(self._config, self._conversation)
            self._config, self._plan = plan_output(self._config)
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
            self._timer.stop()
            try:
                await self._hook_caught_up()
            finally:
                self._announce_end()

    def _time_out(self) -> None:
        """`run_timeout` has passed: end the run with `RunTimeoutError`."""
        if self._result is None and self._abort_reason is None:
            self._timed_out = True
            self.abort(f"the run_timeout of {self._config.run_timeout or 0:g} s was reached")

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
        conversation = self._conversation
        asked = decide.last_user_message(conversation, self._prior)
        if asked is not None:
            args = (self._config, conversation, asked, self.run_id, self._emit)
            self._context = await gather_context(*args)
        if self._resumed and not await self._act(self._resumed, resumed=True):
            return
        iteration = 0
        window = ContextWindow(self._prior, Spending(self._summary_refusal, self._absorb))
        while True:
            iteration += 1
            sent = await self._compact(window, iteration)
            stop = self._guard.before_call(sent.messages, sent.config)
            if stop := stop or self._ancestors_stop():
                self._end_budget(stop)
                return
            response = await self._think(iteration, sent)
            if response is not None:  # None: the reply was unreadable, the model was told
                step = decide.next_step(response) if self._plan is None else self._settle(response)
                if isinstance(step, decide.Finish):
                    self._emit(
                        CompleteEvent,
                        text=step.text,
                        usage=self._usage,
                        iterations=iteration,
                        stop_reason=response.stop_reason,
                        output=step.data,
                    )
                    self._end(step.text, "end_turn", output=step.output)
                    return
                if step is not None:
                    self._answer_next = (
                        self._plan is None
                        and self._config.stop_repeats
                        and decide.repeats_last_round(self._conversation, step.calls)
                    )
                    if not await self._act(step.calls):
                        return
            if not decide.may_think_again(iteration, self._config.max_iterations):
                limit = self._config.max_iterations
                raise MaxIterationsExceeded(
                    f"The run reached max_iterations={limit} without a final answer.",
                    max_iterations=limit,
                )

    def _settle(self, response: LLMResponse) -> decide.Step | None:
        """Read a structured answer: finish with it, act on the run's tools, or ask again.

        Raises:
            OutputValidationError: When the answer is invalid and no retry is left.
        """
        assert self._plan is not None
        outcome = output.read(self._plan, response)
        if outcome is None:
            return decide.Act(response.tool_calls)
        conversation = self._conversation
        if isinstance(outcome, output.Valid):
            conversation[-1] = output.final_message(conversation[-1], outcome)
            return decide.Finish(conversation[-1].content, outcome.value, outcome.data)
        if self._output_retries >= self._plan.spec.retries:
            raise output.exhausted(self._plan, outcome, self._output_retries)
        self._output_retries += 1
        fields = {"text": outcome.text, "errors": outcome.errors, "attempt": self._output_retries}
        self._emit(OutputRetryEvent, iteration=self._iterations, **fields)
        conversation[-1:] = output.ask_again(
            self._plan, conversation[-1], outcome, self._config.client
        )
        return None

    async def _compact(self, window: ContextWindow, iteration: int) -> Prepared:
        """What the next model call sends, as the context policy has it (see `compact`).

        A summarizer's calls count as the run's (usage, cost, budget) (`_summary_refusal`).
        """
        sent = await window.prepare(self._conversation, self._config, self._context, self._guard)
        if sent.event is not None:
            self._emit(ContextCompactedEvent, iteration=iteration, **sent.event)
        return sent

    def _summary_refusal(self, next_call: NextCall, later: int) -> str | None:
        """Why summarizer calls and the model call after them would pass a budget (`Spending`)."""
        budget, guard = self._config.budget, self._guard
        stop = None if budget is None else guard.budget_stop(budget, next_call, later_calls=later)
        whose = "the run's budget"
        if stop is None:
            stop, whose = (
                self._ancestors_stop(next_call, later_calls=later),
                "a parent run's budget",
            )
        if stop is None:
            return None
        return f"its calls and the model call after them would pass {whose} ({stop.limit})"

    async def _think(self, iteration: int, sent: Prepared) -> LLMResponse | None:
        """One model call, streamed: text and thinking chunks as they arrive.

        `sent` is what the call sends (`_compact`). `None` when the server could not read the
        model's reply as a tool call: the model is told so, with the tools that exist, and
        thinks again.
        """
        self._iterations = iteration
        messages, system = sent.messages, sent.system
        client = self._config.client
        settings = decide.call_settings(self._config.settings, self._acted, self._answer_next)
        settings = self._guard.fit(settings)
        protocol = await tool_protocol(client, self._config.definitions, self._config.settings)
        self._emit(
            LLMRequestEvent,
            iteration=iteration,
            provider=client.provider_name,
            model=client.model,
            messages=messages,
            tools=self._config.definitions,
            system=system,
            settings=settings,
            tool_protocol=protocol,
        )
        request = ModelRequest.build(messages, self._config.definitions, system, settings)
        started = time.perf_counter()
        self._text.clear()
        self._thinking.clear()
        self._streaming = True
        try:
            response = await read_answer(
                client,
                request,
                emit=self._emit,
                text=self._text,
                thinking=self._thinking,
                iteration=iteration,
            )
        except ToolCallFormatError as exc:  # no answer: the model is told and tries again
            self._streaming = False
            text, thinking = "".join(self._text), "".join(self._thinking)
            self._observe(decide.unreadable_reply(exc, text, thinking), iteration, started)
            self._conversation.append(decide.unreadable_attempt(text, thinking))
            self._conversation.append(decide.correction(self._config.definitions))
            return None
        self._streaming = False
        self._observe(response, iteration, started)
        self._model_stop = response.stop_reason
        self._conversation.append(client.format_assistant_message(response))
        return response

    def _observe(self, response: LLMResponse, iteration: int, started: float) -> None:
        """Account for an answer: the chunks not streamed, its usage and cost, its event."""
        if not self._thinking and response.thinking:
            self._emit(ThinkingChunkEvent, text=response.thinking)
        if not self._text and response.text:
            self._emit(TextChunkEvent, text=response.text, is_follow_up=iteration > 1)
        self._usage += response.usage
        cost = self._guard.after_call(response)
        if self._nesting is not None:
            self._nesting.parent._absorb(response.usage, cost, self._guard.last_tokens)
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
            wire=response.wire,
        )

    async def _act(self, calls: tuple[ToolCall, ...], *, resumed: bool = False) -> bool:
        """Run the calls of one answer; `False` when the run ended awaiting approval."""
        host = Host(
            self._config,
            self._emit,
            ended=lambda: self._result is not None,
            reason=lambda: self._abort_reason or "cancelled",
            interrupted=self._tool_interrupted,
            paused=self._timer.paused,
        )
        self._acted = True  # a tool choice that forces a call has been honoured
        self._round_size = len(calls)
        pending = await self._acting.act(host, calls, self._conversation, resumed=resumed)
        if not pending:
            self._take_handoff()
            return True
        text = decide.last_assistant_text(self._conversation, self._prior)
        fields = {"usage": self._usage, "iterations": self._iterations}
        self._emit(AwaitingApprovalEvent, pending=pending, text=text, **fields)
        self._end(text, "awaiting_approval", pending)
        return False

    def _tool_interrupted(self, interrupted: ToolInterrupted, reason: str) -> None:
        """A tool raised `KeyboardInterrupt`: abort the run; its consumer gets it back."""
        if self._result is None and self._interrupt is None:
            self._interrupt = interrupted.interrupt
            self.abort(reason)

    # ---- endings -----------------------------------------------------------------------

    def _end(
        self,
        text: str,
        stop_reason: RunStopReason,
        pending: tuple[ToolCall, ...] = (),
        output: Any = None,
    ) -> None:
        value: Any = text if self._config.output is None else output
        self._result = RunResult(
            output=value,
            text=text,
            new_messages=tuple(self._conversation[self._prior :]),
            all_messages=tuple(self._conversation),
            events=tuple(self._events),
            usage=self._usage,
            iterations=self._iterations,
            stop_reason=stop_reason,
            model_stop_reason=self._model_stop,
            cost=self._guard.cost,
            pending_approvals=pending,
            last_agent=self._agent_name,
            redact=self._output_redact(),
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
