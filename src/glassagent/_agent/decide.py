"""The loop's decisions as plain functions: no I/O, no awaiting, easy to reason about."""

from __future__ import annotations

import reprlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from glassagent._core.errors import UNREADABLE_REPLY
from glassagent._core.events import ToolExecution
from glassagent._core.messages import (
    LLMResponse,
    Message,
    ModelSettings,
    RetryNotice,
    ToolCall,
    ToolDefinition,
)
from glassagent._core.result import ToolResult

if TYPE_CHECKING:
    from glassagent._core.errors import ToolCallFormatError
    from glassagent._tools.tool import Tool

UNFORCED = ("auto", "none")
"""Tool choices that do not make the model call a tool."""


@dataclass(frozen=True)
class Finish:
    """The model answered: the run ends with this text (and output)."""

    text: str
    output: Any = None
    """The validated output (``Agent(output_type=...)``), else `None`."""
    data: Any = None
    """`output` as plain JSON values, for the ``complete`` event."""


@dataclass(frozen=True)
class Act:
    """The model asked for tools: execute these calls, then think again."""

    calls: tuple[ToolCall, ...]


Step = Finish | Act


def next_step(response: LLMResponse) -> Step:
    """Decide what follows a model answer: act on its tool calls, or finish with its text."""
    if response.tool_calls:
        return Act(response.tool_calls)
    return Finish(response.text)


def malformed_call(response: LLMResponse) -> str | None:
    """What makes a tool call of `response` impossible to act on, or `None` if nothing does.

    Clients check the wire; this checks what any client (a custom one, too) handed back.
    """
    for call in response.tool_calls:
        if not isinstance(call, ToolCall):
            return f"a tool call that is a {type(call).__name__}, not a ToolCall"
        for name, expected in (("id", str), ("name", str), ("input", dict)):
            value = getattr(call, name)
            if not isinstance(value, expected):
                kind, wanted = type(value).__name__, expected.__name__
                shown = reprlib.repr(value)  # short, however large or deep the value
                return f"a tool call whose {name} is a {kind}, not a {wanted}: {shown}"
        if not call.name.strip():
            return f"a tool call without a name (id {reprlib.repr(call.id)})"
    ids = [call.id for call in response.tool_calls]
    if len(set(ids)) != len(ids):
        twice = next(i for i in ids if ids.count(i) > 1)
        return f"two tool calls with the same id {reprlib.repr(twice)}"
    return None


def call_settings(settings: ModelSettings, acted: bool, answer: bool = False) -> ModelSettings:
    """The settings of the next model call of a run.

    A tool choice that forces a call (``"required"`` or a tool's name) holds until tools have
    run in this run; after that it is ``"auto"``, so the model can answer with their results
    instead of being made to call tools until `max_iterations`. With `answer` (the model
    repeated its calls, see `repeats_last_round`) the call offers no tools at all.
    """
    if answer:
        return replace(settings, tool_choice="none")
    if acted and settings.tool_choice not in (None, *UNFORCED):
        return replace(settings, tool_choice="auto")
    return settings


def repeats_last_round(messages: Sequence[Message], calls: tuple[ToolCall, ...]) -> bool:
    """Whether `calls` ask for exactly what the previous assistant message with calls asked.

    `messages` end with the answer that holds `calls`; the same tools with the same
    arguments, in the same order, count as a repeat.
    """
    asked = [(c.name, c.input) for c in calls]
    for message in reversed(messages[:-1]):
        if message.role == "assistant" and message.tool_calls:
            return [(c.name, c.input) for c in message.tool_calls] == asked
    return False


def unreadable_reply(error: ToolCallFormatError, text: str, thinking: str) -> LLMResponse:
    """The answer recorded when the server could not read the model's reply as a tool call.

    Its ``protocol_error`` is the server's complaint, its ``raw_stop_reason``
    ``"unreadable_tool_call"`` and its text what streamed before the server gave up.
    """
    return LLMResponse(
        text,
        thinking=thinking or None,
        stop_reason="other",
        protocol_error=str(error),
        raw_stop_reason=UNREADABLE_REPLY,
    )


def unreadable_attempt(text: str, thinking: str) -> Message:
    """The assistant message kept for a reply that could not be read: what came of it."""
    return Message(role="assistant", content=text, thinking=thinking or None, status="unreadable")


def correction(tools: Sequence[ToolDefinition]) -> Message:
    """The protocol message that tells the model its last reply could not be read.

    It goes to the model as a ``user`` message but is marked ``protocol``: the user did not
    write it, and the history says so.
    """
    names = ", ".join(tool.name for tool in tools) or "none"
    return Message(
        role="user",
        content=(
            "Your last reply could not be read: it named a tool that does not exist or did "
            f"not follow the tool-call format. The tools that exist are: {names}. Call one "
            "of them by its exact name with valid JSON arguments, or answer without a tool "
            "call."
        ),
        protocol=True,
    )


def protocol_traffic(message: Message) -> bool:
    """Whether `message` is the tool protocol's own: an unreadable reply or a correction."""
    return message.protocol or message.status == "unreadable"


def sendable(messages: Sequence[Message], prior: int) -> tuple[Message, ...]:
    """What of `messages` goes to the model: the protocol's traffic of this run only.

    Unreadable replies and their corrections before `prior` (earlier turns) are left out,
    and so are this run's unreadable replies of which nothing came (providers refuse them).
    """
    return tuple(
        m
        for i, m in enumerate(messages)
        if not protocol_traffic(m) or (i >= prior and (m.protocol or m.content or m.tool_calls))
    )


def may_think_again(iteration: int, max_iterations: int) -> bool:
    """Whether another model call is allowed after `iteration` calls."""
    return iteration < max_iterations


def resolve(calls: tuple[ToolCall, ...], tools: Mapping[str, Tool]) -> list[Tool | None]:
    """The tool that handles each call, or `None` for names the agent does not know."""
    return [tools.get(call.name) for call in calls]


def aborted_result(
    call: ToolCall, reason: str, duration_ms: float, ui_info: Any = None
) -> ToolResult:
    """The result recorded for a tool call cancelled by an abort."""
    output = f"Error: tool call aborted ({reason})."
    return ToolResult(call.id, call.name, output, True, duration_ms, ui_info)


def execution(call: ToolCall, tool: Tool | None, result: ToolResult) -> ToolExecution:
    """The ``function_execution_complete`` event payload of a finished call."""
    return ToolExecution(
        function_name=call.name,
        tool_name=tool.display_name if tool else None,
        args=call.input,
        result=result.output if result.structured is None else result.structured,
        is_error=result.is_error,
        duration_ms=result.duration_ms,
        has_ui=result.ui_info is not None,
        ui_info=result.ui_info,
        call_id=call.id,
    )


def partial_message(text: str, thinking: str) -> Message | None:
    """The assistant message kept when a streamed answer is aborted; None if nothing came."""
    if not text and not thinking:
        return None
    return Message(role="assistant", content=text, thinking=thinking or None, status="aborted")


def mark_aborted(message: Message) -> Message:
    """`message` with status ``aborted``."""
    return replace(message, status="aborted")


def last_assistant_text(messages: list[Message], start: int) -> str:
    """Text of the last assistant message at or after index `start`."""
    for message in reversed(messages[start:]):
        if message.role == "assistant" and message.status != "unreadable":
            return message.content
    return ""


def last_user_message(messages: list[Message], start: int) -> int | None:
    """Index of the user message a run answers: the one at `start`, else the last before it.

    A resumed run starts after its conversation; it answers the last user message there.
    """
    for index in range(min(start, len(messages) - 1), -1, -1):
        if messages[index].role == "user" and not messages[index].protocol:
            return index
    return None


def retry_fields(notice: RetryNotice) -> dict[str, Any]:
    """The ``llm_retry`` event payload for a client's `RetryNotice`."""
    return {
        "attempt": notice.attempt,
        "delay": notice.delay,
        "error": notice.error,
        "error_type": notice.error_type,
        "status": notice.status,
    }


def error_fields(exc: BaseException) -> dict[str, Any]:
    """The ``error`` event payload for an exception."""
    return {"error": str(exc) or type(exc).__name__, "error_type": type(exc).__name__}
