"""Human approval of tool calls: which calls need it, who answers, what the model is told.

A call needs approval when its tool's ``requires_approval`` or the agent's says so. The run
then emits ``approval_required`` and waits in that call's task (the other calls of the answer
go on), until `AgentRun.approve` or `AgentRun.deny` answers it, or the tool's own `Approver`
does; the first answer counts. A run with ``defer_approval=True`` does not wait for calls
without an approver: it ends with ``awaiting_approval`` and `Agent.resume` continues it.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from glassagent._core.errors import UserError
from glassagent._core.messages import Message, ToolCall
from glassagent._core.result import ToolResult
from glassagent._tools.execute import _call_async, describe_exception

if TYPE_CHECKING:
    from glassagent._tools.tool import ApprovalAnswer, ApprovalPolicy, Approver, Tool


@dataclass(frozen=True)
class Answer:
    """How a call that needed approval was answered."""

    approved: bool
    reason: str | None = None
    failed: bool = False
    """Asking failed (the approver raised or gave no answer): the call is declined."""


def as_answer(value: object) -> Answer | None:
    """An `ApprovalAnswer` as an `Answer`; `None` for a value that is none."""
    if isinstance(value, bool):
        return Answer(value)
    if isinstance(value, str):
        return Answer(False, value.strip() or None)
    return None


def check_answers(
    approvals: Mapping[str, ApprovalAnswer], pending: Sequence[ToolCall]
) -> dict[str, Answer]:
    """The answers given to `Agent.resume`, checked against the calls that wait for one.

    Raises:
        UserError: For an id of no pending call, or a value that is not a bool or a string.
    """
    if not isinstance(approvals, Mapping):
        raise UserError(f"`approvals` must be a mapping of call ids, got {approvals!r}.")
    ids = {call.id for call in pending}
    answers: dict[str, Answer] = {}
    for call_id, value in approvals.items():
        if call_id not in ids:
            waiting = ", ".join(repr(i) for i in sorted(ids))
            raise UserError(f"No call {call_id!r} awaits approval; these do: {waiting}.")
        answer = as_answer(value)
        if answer is None:
            raise UserError(
                f"The answer for call {call_id!r} must be True, False or a reason (a string), "
                f"got {value!r}."
            )
        answers[call_id] = answer
    return answers


def pending_calls(conversation: Sequence[Message]) -> tuple[ToolCall, ...]:
    """The calls of the conversation's last answer that have no result yet.

    Only tool results may follow that answer; otherwise nothing is pending.
    """
    answered: set[str] = set()
    for message in reversed(conversation):
        if message.role == "tool":
            answered.add(message.tool_call_id or "")
            continue
        if message.role != "assistant":
            return ()
        return tuple(call for call in message.tool_calls if call.id not in answered)
    return ()


async def _ask(function: Any, call: ToolCall) -> tuple[bool, Any]:
    """Call a policy or an approver, awaiting what it returns; nothing it raises escapes."""

    async def invoke() -> Any:
        value = function(call)
        return await value if inspect.isawaitable(value) else value

    return await _call_async(invoke)


async def needs_approval(
    call: ToolCall, tool: Tool, policy: bool | ApprovalPolicy
) -> bool | BaseException:
    """Whether the tool's rule or the agent's requires approval; what a policy raised, if so."""
    for rule in (tool.requires_approval, policy):
        if rule is True:
            return True
        if callable(rule):
            ok, value = await _ask(rule, call)
            if not ok:
                return value  # type: ignore[no-any-return]
            if value:
                return True
    return False


async def ask_approver(approver: Approver, call: ToolCall) -> Answer:
    """The approver's answer; one that raises or answers nonsense declines the call."""
    ok, value = await _ask(approver, call)
    if not ok:
        reason = f"asking for approval failed: {describe_exception(value)}"
        return Answer(False, reason, failed=True)
    answer = as_answer(value)
    if answer is None:
        reason = f"asking for approval failed: the approver answered {value!r}"
        return Answer(False, reason, failed=True)
    return answer


def policy_failed(call: ToolCall, exc: BaseException, ui_info: Any) -> ToolResult:
    """The result of a call whose approval policy raised: it did not run."""
    output = (
        f"Error: deciding whether this {call.name} call needs approval failed "
        f"({describe_exception(exc)}), so nothing was done."
    )
    return ToolResult(call.id, call.name, output, True, 0.0, ui_info)


def declined(call: ToolCall, answer: Answer, ui_info: Any) -> ToolResult:
    """The result of a declined call, as the model reads it; ``ui_info`` marks it declined."""
    if answer.failed:
        output = f"Error: {answer.reason} for this {call.name} call, so nothing was done."
    else:
        because = f" Their reason: {answer.reason}." if answer.reason else ""
        output = (
            f"Error: the user declined this {call.name} call, so nothing was done.{because} "
            "Do not repeat it unchanged; ask the user how to go on if unsure."
        )
    marks: dict[str, Any] = dict(ui_info) if isinstance(ui_info, Mapping) else {}
    marks["declined"] = True
    if answer.reason:
        marks["reason"] = answer.reason
    return ToolResult(call.id, call.name, output, True, 0.0, marks)


class ApprovalGate:
    """The calls of one run waiting for an answer, and the answers given ahead (`resume`)."""

    def __init__(self, given: Mapping[str, Answer] | None = None) -> None:
        self._given = dict(given or {})
        self._waiting: dict[str, tuple[ToolCall, asyncio.Future[Answer]]] = {}

    @property
    def pending(self) -> tuple[ToolCall, ...]:
        """The calls waiting for an answer now, in the order they began waiting."""
        return tuple(call for call, future in self._waiting.values() if not future.done())

    def given(self, call_id: str) -> bool:
        """Whether an answer for `call_id` came with the run (from `Agent.resume`)."""
        return call_id in self._given

    def open(self, call: ToolCall) -> None:
        """Start accepting answers for `call` (the ``approval_required`` event is out)."""
        future = asyncio.get_running_loop().create_future()
        self._waiting[call.id] = (call, future)

    def answer(self, call_id: str, answer: Answer) -> bool:
        """Answer a waiting call; `False` when it is not waiting (or was answered already)."""
        entry = self._waiting.get(call_id)
        if entry is None or entry[1].done():
            return False
        entry[1].set_result(answer)
        return True

    def close(self) -> None:
        """The run is ending: every call still waiting stops waiting (it is cancelled)."""
        for _, future in self._waiting.values():
            future.cancel()

    async def wait(self, call: ToolCall, approver: Approver | None) -> Answer:
        """The answer for `call`: given ahead, or the first of the run's and the approver's."""
        if call.id in self._given:
            return self._given.pop(call.id)
        future = self._waiting[call.id][1]
        asking: asyncio.Task[Answer] | None = None
        if approver is not None:
            asking = asyncio.create_task(ask_approver(approver, call))
            asking.add_done_callback(lambda done: self._from_approver(call.id, done))
        try:
            return await future
        finally:
            if asking is not None:
                asking.cancel()  # answered otherwise, or the run is ending: stop asking

    def _from_approver(self, call_id: str, asking: asyncio.Task[Answer]) -> None:
        if not asking.cancelled():
            self.answer(call_id, asking.result())
