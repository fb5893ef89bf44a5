"""Act: run the tool calls of one model answer concurrently, approval first where needed.

Each call is checked first (a known tool, arguments that fit), in the order the model made
them; then whether it needs approval, which emits ``approval_required``. All calls then start
together: a call that needs approval waits in its own task for the answer while the others
run, and its tool's timeout starts only once it is approved. Results go back in call order.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from glassagent._agent import decide
from glassagent._agent.approval import (
    ApprovalGate,
    declined,
    needs_approval,
    policy_failed,
)
from glassagent._core.events import (
    ApprovalAnsweredEvent,
    ApprovalRequiredEvent,
    FunctionCallStartEvent,
    FunctionExecutionCompleteEvent,
    FunctionExecutionStartEvent,
    SendingFunctionResponseEvent,
    ToolProgressEvent,
)
from glassagent._core.result import ToolResult
from glassagent._tools.context import ToolContext
from glassagent._tools.execute import Prepared, ToolInterrupted, prepare_call, run_prepared

if TYPE_CHECKING:
    from glassagent._agent.config import RunConfig
    from glassagent._core.messages import Message, ToolCall
    from glassagent._tools.tool import Tool

ABORT_GRACE_SECONDS = 0.25
"""How long running tools may take to notice an abort before they are cancelled."""


class _Call:
    """One call of an answer on its way: what it needs, and whether it has ended."""

    __slots__ = ("ask", "call", "finished", "pending", "prepared", "result", "tool")

    def __init__(self, call: ToolCall, tool: Tool | None) -> None:
        self.call = call
        self.tool = tool
        self.prepared: Prepared | None = None  # runnable
        self.result: ToolResult | None = None  # known without running (a bad call)
        self.ask = False  # wait for an answer first
        self.pending = False  # deferred: no answer in this run
        self.finished = False


@dataclass(frozen=True)
class Host:
    """What acting needs of its run; held only while a round goes on (no lasting cycle)."""

    config: RunConfig
    """The run's configuration as it started (its client may be wrapped by then)."""
    emit: Callable[..., None]
    ended: Callable[[], bool]
    """Whether the run has ended: late progress is dropped."""
    reason: Callable[[], str]
    """Why the run is aborting."""
    interrupted: Callable[[ToolInterrupted, str], None]
    """A tool raised `KeyboardInterrupt`: abort the run with this reason."""
    paused: Callable[[], AbstractContextManager[None]]
    """Stop counting the run's ``run_timeout`` meanwhile (a durable approval wait)."""


class Acting:
    """The tool side of one run: the calls of each answer, then their results in order."""

    def __init__(self, run_id: str, gate: ApprovalGate) -> None:
        self._run_id = run_id
        self._gate = gate
        self._host: Host | None = None
        self._contexts: list[ToolContext[Any]] = []
        self._cancelling = False
        self._seen: dict[str, int] = {}  # how often each call id came, for idempotency keys

    @property
    def _config(self) -> RunConfig:
        assert self._host is not None
        return self._host.config

    def _emit(self, event_type: Callable[..., Any], **fields: Any) -> None:
        if self._host is not None:
            self._host.emit(event_type, **fields)

    def abort(self) -> None:
        """Signal the running tools, and stop waiting for approvals."""
        for ctx in self._contexts:
            ctx._abort()
        self._gate.close()

    async def act(
        self,
        host: Host,
        calls: tuple[ToolCall, ...],
        conversation: list[Message],
        *,
        resumed: bool = False,
    ) -> tuple[ToolCall, ...]:
        """Run the calls of one answer, appending their results to `conversation`.

        Returns the calls left waiting for approval (a deferred run): then nothing is sent.
        On `resumed`, every call of `calls` needed approval in the run before.
        """
        self._host = host
        try:
            return await self._act(calls, conversation, resumed)
        finally:
            self._host = None

    async def _act(
        self, calls: tuple[ToolCall, ...], conversation: list[Message], resumed: bool
    ) -> tuple[ToolCall, ...]:
        tools = decide.resolve(calls, self._config.tools)
        states = [_Call(call, tool) for call, tool in zip(calls, tools, strict=True)]
        for state in states:
            self._emit(
                FunctionCallStartEvent,
                function_name=state.call.name,
                tool_name=state.tool.display_name if state.tool else None,
                args=state.call.input,
                call_id=state.call.id,
                ui_info=state.tool.ui_info if state.tool else None,
            )
        started = time.perf_counter()
        tasks: dict[str, asyncio.Task[ToolResult]] = {}
        try:
            for state in states:
                await self._plan(state, resumed)
            await self._await_answers(states)
            running = [state for state in states if not state.pending]
            self._emit(FunctionExecutionStartEvent, count=len(running))
            tasks = {s.call.id: asyncio.create_task(self._call(s)) for s in running}
            if tasks:
                await _all_done(tasks.values())
        except asyncio.CancelledError:
            await self._observe_aborted(states, tasks, started, conversation)
            raise
        finally:
            self._contexts.clear()
        client = self._config.client
        for state in states:
            if task := tasks.get(state.call.id):
                conversation.append(client.format_tool_result(state.call, task.result()))
        pending = tuple(state.call for state in states if state.pending)
        if not pending:
            self._emit(SendingFunctionResponseEvent, count=len(calls))
        return pending

    async def _plan(self, state: _Call, resumed: bool) -> None:
        """Check the call, and decide whether it needs approval (``approval_required``)."""
        call, tool = state.call, state.tool
        ctx = self._context(state) if tool is not None else None
        prepared = prepare_call(tool, call, ctx, available=self._config.tools.keys())
        if isinstance(prepared, ToolResult):
            state.result = prepared
            return
        tool = prepared.tool
        needed = resumed or await needs_approval(call, tool, self._config.requires_approval)
        if isinstance(needed, BaseException):
            state.result = policy_failed(call, needed, tool.ui_info)
            return
        state.prepared, state.ask = prepared, needed
        if not needed or self._gate.given(call.id):
            return
        if self._config.defer_approval and tool.approver is None:
            state.pending = True
        else:
            self._gate.open(call)
        if self._config.steps is None:  # a durable run announces them once they wait
            self._announce(state)

    def _announce(self, state: _Call) -> None:
        tool = state.tool
        assert tool is not None
        self._emit(
            ApprovalRequiredEvent,
            call=state.call,
            tool_name=tool.display_name,
            ui_info=tool.ui_info,
        )

    async def _await_answers(self, states: list[_Call]) -> None:
        """In a durable run, wait for the answers before any call starts (in one place).

        The ``approval_required`` events come once the run waits: an answer given on seeing
        one is taken.
        """
        steps = self._config.steps
        if steps is None:
            return
        asking = [s for s in states if s.ask and not s.pending and not self._gate.given(s.call.id)]
        if not asking:
            return

        def announce() -> None:
            for state in asking:
                self._announce(state)

        assert self._host is not None
        with self._host.paused():  # a wait of days is no part of the run's time
            answers = await steps.approvals(tuple(state.call for state in asking), announce)
        for call_id, answer in answers.items():
            self._gate.answer(call_id, answer)

    def _context(self, state: _Call) -> ToolContext[Any]:
        call, tool = state.call, state.tool
        assert tool is not None

        def progress(message: str) -> None:
            # A timed-out sync tool's thread may still report: its call has ended by then.
            host = self._host
            if not state.finished and host is not None and not host.ended():
                self._emit(ToolProgressEvent, tool=call.name, message=message, call_id=call.id)

        config = self._config
        seen = self._seen[call.id] = self._seen.get(call.id, 0) + 1
        key = f"{self._run_id}:{call.id}" + (f":{seen}" if seen > 1 else "")
        ctx: ToolContext[Any] = ToolContext(
            call_id=call.id,
            run_id=self._run_id,
            tool_name=tool.display_name,
            deps=config.deps,
            on_progress=progress,
            ui_info=tool.ui_info,
            model=config.client.model,
            settings=config.settings,
            system_prompt=config.system,
            tools=config.tools,
            host=config.host,
            idempotency_key=key,
        )
        self._contexts.append(ctx)
        return ctx

    async def _call(self, state: _Call) -> ToolResult:
        """One call's task: its answer first if it needs one, then its run."""
        try:
            result = state.result
            if result is None:
                result = await self._answer_and_run(state)
        finally:
            state.finished = True
            state.prepared = None  # its context's progress callback refers back to `state`
        self._emit_complete(state.call, state.tool, result)
        return result

    async def _answer_and_run(self, state: _Call) -> ToolResult:
        prepared = state.prepared
        assert prepared is not None
        if state.ask:
            tool = prepared.tool
            answer = await self._gate.wait(state.call, tool.approver)
            self._emit(
                ApprovalAnsweredEvent,
                call_id=state.call.id,
                tool_name=tool.display_name,
                approved=answer.approved,
                reason=answer.reason,
            )
            if not answer.approved:
                return declined(state.call, answer, tool.ui_info)
        return await self._execute(prepared)

    async def _execute(self, prepared: Prepared) -> ToolResult:
        call = prepared.call
        started = time.perf_counter()
        timeout = self._config.tool_timeout
        steps = self._config.steps
        try:
            if steps is None:
                return await run_prepared(prepared, default_timeout=timeout)
            execute = lambda: run_prepared(prepared, default_timeout=timeout)  # noqa: E731
            return await steps.tool(prepared, execute)
        except ToolInterrupted as interrupted:  # abort the run; its consumer gets it back
            reason = f"interrupted: tool {call.name!r} raised KeyboardInterrupt"
            if self._host is not None:
                self._host.interrupted(interrupted, reason)
            return interrupted.result
        except asyncio.CancelledError:
            if self._cancelling:  # an abort: let the cancellation through
                raise
            # The tool itself raised CancelledError (e.g. it awaited something cancelled).
            duration = (time.perf_counter() - started) * 1000
            output = f"Error: tool {call.name!r} was cancelled from within."
            ctx = prepared.ctx
            return ToolResult(call.id, call.name, output, True, duration, ctx and ctx.ui_info)

    async def _observe_aborted(
        self,
        states: list[_Call],
        tasks: dict[str, asyncio.Task[ToolResult]],
        started: float,
        conversation: list[Message],
    ) -> None:
        """Give running tools a short grace to notice the abort; keep what finished.

        Every call cut short still gets its ``function_execution_complete`` (an error), so a
        UI never waits forever on a call id.
        """
        self.abort()
        pending: set[asyncio.Task[ToolResult]] = set()
        if tasks:
            _, pending = await asyncio.wait(tasks.values(), timeout=ABORT_GRACE_SECONDS)
        self._cancelling = True
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)
        reason = self._host.reason() if self._host is not None else "cancelled"
        client = self._config.client
        for state in states:
            call, tool = state.call, state.tool
            done = tasks.get(call.id)
            if done is None or done.cancelled() or done.exception() is not None:
                duration = (time.perf_counter() - started) * 1000
                ui_info = tool.ui_info if tool is not None else None
                result = decide.aborted_result(call, reason, duration, ui_info)
                self._emit_complete(call, tool, result)
                message = client.format_tool_result(call, result)
                conversation.append(decide.mark_aborted(message))
            else:
                conversation.append(client.format_tool_result(call, done.result()))

    def _emit_complete(self, call: ToolCall, tool: Tool | None, result: ToolResult) -> None:
        execution = decide.execution(call, tool, result)
        self._emit(FunctionExecutionCompleteEvent, execution=execution)


def _all_done(tasks: Collection[asyncio.Task[Any]]) -> asyncio.Future[None]:
    """A future that is done once every task is (cancelling it leaves the tasks running).

    ``asyncio.wait`` does the same with more machinery per call: one callback per task here.
    """
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    left = len(tasks)

    def finished(_: asyncio.Task[Any]) -> None:
        nonlocal left
        left -= 1
        if left == 0 and not done.done():
            done.set_result(None)

    for task in tasks:
        task.add_done_callback(finished)
    return done
