"""Many agents: an agent as another's tool (a nested run), and handoffs between agents.

A sub-agent's run is a run of its own (its own ``run_id`` and ``seq``) started inside a tool
call of its parent. `Nesting` links it to that call: its events carry the link and go into
the parent's stream too, its usage and cost are added to the parent's, the parent's budget
is checked before each of its model calls, and aborting the parent aborts it.

A handoff is a tool that makes the run that calls it go on as another agent. `RunNesting` is
what a run does for both.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import weakref
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from glassagent._agent.approval import Answer
from glassagent._agent.config import plan_output
from glassagent._core.errors import GlassAgentError, ToolError, UserError
from glassagent._core.events import HandoffEvent, to_jsonable
from glassagent._core.record.redact import TreeRedact
from glassagent._tools.context import ToolContext
from glassagent._tools.tool import Tool

if TYPE_CHECKING:
    from collections.abc import Callable, Generator, Mapping

    from glassagent._agent.approval import ApprovalGate
    from glassagent._agent.budget import BudgetStop, NextCall
    from glassagent._agent.config import RunConfig
    from glassagent._agent.guard import RunGuard
    from glassagent._agent.output import Plan
    from glassagent._core.cost import Cost
    from glassagent._core.events import Event
    from glassagent._core.messages import Message, ToolCall, Usage
    from glassagent._core.record.redact import Redact
    from glassagent._core.result import RunResult


class Delegate(Protocol):
    """What a run needs of an agent it hands over to or runs nested (an `Agent`)."""

    name: str | None
    description: str | None

    def _nested_run(
        self,
        task: str,
        nesting: Nesting | None,
        *,
        deps: Any,
        host: Mapping[str, Any],
        defer_approval: bool,
    ) -> RunNesting: ...

    def _handed_config(self, base: RunConfig) -> RunConfig: ...


_RUNNING: ContextVar[weakref.ref[RunNesting] | None] = ContextVar(
    "glassagent_running_run", default=None
)


def set_running(run: RunNesting) -> None:
    """Make `run` the run of the calling task's context (and of the tasks it starts).

    The context keeps a weak reference: a task that outlives the run does not keep it.
    """
    _RUNNING.set(weakref.ref(run))


def running() -> RunNesting | None:
    """The run whose driver (or tool call) is executing: how a tool finds the run it serves."""
    ref = _RUNNING.get()
    return None if ref is None else ref()


_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

MAX_DEPTH = 8
"""The deepest a sub-agent's run may be nested (a call deeper than that is an error result):
an agent that is, through others, its own tool cannot recurse without end."""


@dataclass(frozen=True)
class Nesting:
    """Where a sub-agent's run sits: the parent run, its tool call, and the depth."""

    parent: RunNesting
    """The run whose tool call started this one."""
    call_id: str
    """The id of that tool call."""
    depth: int
    """1 for a sub-agent of a top-level run, 2 for one below it, ..."""


def check_name(name: object, what: str) -> str:
    """`name` when it is a valid tool name part (letters, digits, ``_``, ``-``).

    Raises:
        UserError: When it is not.
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise UserError(
            f"{what} must be 1 to 64 letters, digits, '_' or '-' (it becomes a tool name), "
            f"got {name!r}."
        )
    return name


def agent_tool(
    agent: Delegate,
    *,
    name: str,
    description: str,
    timeout: float | None,
    requires_approval: bool,
) -> Tool:
    """A tool whose call runs `agent` on the task the model gives (see `Agent.as_tool`)."""

    async def delegate(task: str, ctx: ToolContext) -> Any:  # noqa: D417 - ctx is injected
        """Run the sub-agent.

        Args:
            task: The task, with everything needed to do it: the sub-agent does not see this
                conversation.
        """
        parent = running()
        nesting = None if parent is None else Nesting(parent, ctx.call_id, parent.depth + 1)
        if nesting is not None and nesting.depth > MAX_DEPTH:
            raise ToolError(f"Not run: sub-agents may nest {MAX_DEPTH} deep at most.")
        # a run that cannot wait for a person (it defers, or is durable): neither can its
        # sub-agents; they end at a call that needs approval, which fails this call
        defer = parent is not None and parent._cannot_wait()
        run = agent._nested_run(task, nesting, deps=ctx.deps, host=ctx.host, defer_approval=defer)
        if parent is not None:
            parent._children.add(run)
        try:
            result = await _follow(run, ctx, parent)
        finally:
            if parent is not None:
                parent._children.discard(run)
        return _answer(name, result)

    return Tool(
        delegate,
        name=name,
        description=description,
        timeout=timeout,
        requires_approval=requires_approval,
        ui_info={"agent": agent.name or name},
    )


async def _follow(
    run: RunNesting, ctx: ToolContext[Any], parent: RunNesting | None
) -> RunResult[Any]:
    """Run `run` to its end; abort it when the tool call is aborted or cancelled.

    Raises:
        ToolError: When the sub-agent's run fails or is aborted.
    """
    task = run._start(streaming=False)
    aborted = asyncio.create_task(ctx.abort_event.wait())
    try:
        await asyncio.wait({task, aborted}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        aborted.cancel()
        if not task.done():
            why = parent._abort_reason if parent is not None else None
            run.abort(
                f"the parent run was aborted: {why}"
                if why
                else "the tool call was stopped (its timeout, or the parent's abort)"
            )
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait({task})
    try:
        return await run
    except GlassAgentError as exc:
        raise ToolError(f"The sub-agent's run failed: {exc}") from None


def _answer(name: str, result: RunResult[Any]) -> Any:
    """What the parent's model gets back: the sub-agent's answer.

    Raises:
        ToolError: When the sub-agent stopped without an answer.
    """
    if result.stop_reason == "awaiting_approval":
        ids = ", ".join(call.id for call in result.pending_approvals)
        raise ToolError(
            f"{name} stopped at calls that need a person's approval ({ids}), which this run "
            "cannot wait for: it defers approvals, or is durable."
        )
    if result.stop_reason != "end_turn":
        text = f" Its text so far: {result.text}" if result.text else ""
        raise ToolError(f"{name} stopped without an answer ({result.stop_reason}).{text}")
    if isinstance(result.output, str):
        return result.output
    return to_jsonable(result.output)


def handoff_tool(target: Delegate) -> Tool:
    """A tool that hands the conversation of the run that calls it to `target`."""
    name = check_name(target.name, "The name of an agent handed off to")

    async def transfer(ctx: ToolContext) -> str:
        run = running()
        if run is None:  # pragma: no cover - a handoff tool runs inside a run
            raise ToolError("A handoff works only inside an agent run.")
        return run._hand_to(target, ctx.call_id)

    about = f" {target.description}" if target.description else ""
    return Tool(
        transfer,
        name=f"transfer_to_{name}",
        description=f"Hand the conversation over to the agent {name}.{about}",
        ui_info={"handoff": name},
    )


class RunNesting:
    """What an `AgentRun` does as a parent or a child of other runs (mixed into it).

    Its public part is the approval API, since a parent answers its sub-agents' calls too.
    """

    if TYPE_CHECKING:
        run_id: str
        _config: RunConfig
        _conversation: list[Message]
        _nesting: Nesting | None
        _children: set[RunNesting]
        _handoff: tuple[Delegate, str] | None
        _agent_name: str | None
        _gate: ApprovalGate
        _guard: RunGuard
        _usage: Usage
        _queue: asyncio.Queue[Any] | None
        _result: RunResult[Any] | None
        _plan: Plan | None
        _acted: bool
        _output_retries: int
        _round_size: int
        _nested_redacts: dict[str, tuple[Redact, ...]]

        _abort_reason: str | None
        depth: int

        def abort(self, reason: str = "user_abort") -> None: ...
        def _start(self, *, streaming: bool) -> asyncio.Task[None]: ...
        def __await__(self) -> Generator[Any, None, RunResult[Any]]: ...
        def _keep(self, event: Event) -> None: ...
        def _emit(self, event_type: Callable[..., Event], **fields: Any) -> None: ...

    def _output_redact(self, *, live: bool = False) -> Redact | None:
        """The hook this run's recordings and views pass events through.

        The run's own, after the hooks of the sub-agents' runs for their events; `live`: for
        a recorder that sees the events to come (a sub-agent may start later).
        """
        if not live and not self._nested_redacts:
            return self._config.redact
        return TreeRedact(self._config.redact, self._nested_redacts)

    def _relay(self, event: Event, chain: tuple[Redact, ...] = ()) -> None:
        """Store an event of this run or of a sub-agent's run inside it, and stream it.

        A sub-agent's event goes up to every ancestor's stream; one that comes after this
        run ended (a sub-agent winding down after an abort) is not kept.
        """
        if self._result is not None and event.run_id != self.run_id:
            return
        self._keep(event)  # stored, and handed to the live recorders and displays
        if self._queue is not None:
            self._queue.put_nowait(event)
        if chain:  # hooks of the sub-agents' runs between the event's run and this one
            self._nested_redacts.setdefault(event.run_id, chain)
        if self._nesting is not None:
            own = self._config.redact
            self._nesting.parent._relay(event, (*chain, own) if own is not None else chain)

    @property
    def pending_approvals(self) -> tuple[ToolCall, ...]:
        """The tool calls waiting for a person's answer now (see `approve`).

        They include the calls of sub-agents' runs going on inside this run's tool calls.
        """
        nested = tuple(call for child in self._children for call in child.pending_approvals)
        return self._gate.pending + nested

    def approve(self, call_id: str) -> bool:
        """Approve a tool call that waits for approval: it runs at once.

        Call it from any task of the run's event loop, e.g. on an ``approval_required`` event
        or for a call of `pending_approvals`. The first answer to a call counts.

        Args:
            call_id: The call's id (``event.call.id``).

        A call of a sub-agent's run going on inside this run (its ``approval_required`` event
        has this run's id as ``parent_run_id``, or a descendant's) is answered the same way.

        Returns:
            Whether the answer was taken: `False` when that call is not waiting (an unknown
            id, a call answered already, or a run that has ended).
        """
        return self._answer(call_id, Answer(True))

    def deny(self, call_id: str, reason: str | None = None) -> bool:
        """Decline a tool call that waits for approval: it never runs.

        The model gets an error result saying the user declined the call, with `reason`; the
        ``function_execution_complete`` event has ``is_error=True`` and ``ui_info`` marked
        ``{"declined": True}``.

        Args:
            call_id: The call's id (``event.call.id``).
            reason: Why, for the model (and the ``approval_answered`` event).

        Returns:
            Whether the answer was taken (see `approve`).
        """
        return self._answer(call_id, Answer(False, (reason or "").strip() or None))

    def _answer(self, call_id: str, answer: Answer) -> bool:
        """Answer the call `call_id` of this run, or of a sub-agent's run inside it."""
        if self._gate.answer(call_id, answer):
            return True
        return any(child._answer(call_id, answer) for child in tuple(self._children))

    def _absorb(self, usage: Usage, cost: Cost, tokens: int | None = None) -> None:
        """Add a sub-agent's (or a summarizer's) model call to the run's usage, cost, budget.

        And up the tree. `tokens`: what the budget counts (default: the usage's total).
        """
        counted = usage.total_tokens if tokens is None else tokens
        self._usage += usage
        self._guard.absorb(counted, cost)
        if self._nesting is not None:
            self._nesting.parent._absorb(usage, cost, counted)

    def _ancestors_stop(
        self, next_call: NextCall | None = None, *, later_calls: int = 0
    ) -> BudgetStop | None:
        """Whether the next call passes the budget of a run this one is nested in.

        `next_call`: that call (default: the model call the guard checked); `later_calls` as
        for `RunGuard.budget_stop`.
        """
        nesting = self._nesting
        if next_call is None and nesting is not None:
            next_call = self._guard.next_call()
        while nesting is not None:
            parent = nesting.parent
            budget = parent._config.budget
            if budget is not None and next_call is not None:
                stop = parent._guard.budget_stop(budget, next_call, later_calls=later_calls)
                if stop is not None:
                    why = f"the budget of the parent run {parent.run_id}: {stop.reason}"
                    return replace(stop, reason=why)
            nesting = parent._nesting
        return None

    def _hand_to(self, target: Delegate, call_id: str) -> str:
        """A handoff tool was called: the run goes on as `target` after this round of calls."""
        if self._handoff is not None:
            return f"Not handed over: the conversation goes to {self._handoff[0].name} already."
        if self._round_size > 1 and self._cannot_wait():
            return (
                "Not handed over: in a run that defers approvals, hand over in an answer "
                "without other calls."
            )
        self._handoff = (target, call_id)
        return f"The conversation is handed over to {target.name}."

    def _cannot_wait(self) -> bool:
        """Whether the run ends at a call that needs approval rather than wait for it."""
        return self._config.defer_approval or self._config.steps is not None

    def _take_handoff(self) -> None:
        """Go on as the agent a handoff of the last round named, if any."""
        if self._handoff is None:
            return
        target, call_id = self._handoff
        self._handoff = None
        before = self._agent_name or "agent"
        config = target._handed_config(self._config)
        self._config = self._guard.start(config, self._conversation)
        self._config, self._plan = plan_output(self._config)
        self._agent_name = target.name
        self._acted = False
        self._output_retries = 0
        self._emit(HandoffEvent, from_agent=before, to_agent=target.name or "", call_id=call_id)
