"""The summarizer of `Summarize`: older turns, as a transcript, into a summary by a model.

A transcript longer than the summarizer's window goes in pieces, one call each, each call
given the summary so far; a single message longer than a piece is cut.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from glassagent._agent.context_policy import Summarize
from glassagent._core.client import BaseLLMClient, send_request
from glassagent._core.cost import Cost
from glassagent._core.errors import GlassAgentError
from glassagent._core.messages import Message, ModelSettings, Usage
from glassagent._core.pricing import client_cost
from glassagent._core.request import ModelRequest

_CHARS_PER_TOKEN = 3  # cautious: a piece must fit the summarizer's window
_SMALLEST_PIECE = 2_000
_CUT = " [...]"


@dataclass
class Summary:
    """What the summarizer wrote, and what its calls spent."""

    text: str | None = None
    """The summary; `None` when it could not be written (see `error`)."""
    calls: list[tuple[Usage, Cost]] = field(default_factory=list)
    """Each call's usage and cost."""
    error: str | None = None
    """Why no summary was written, or `None`."""

    @property
    def usage(self) -> Usage:
        """The usage of all the calls."""
        total = Usage()
        for usage, _ in self.calls:
            total += usage
        return total


def render(message: Message) -> str:
    """One message of the transcript the summarizer reads."""
    if message.role == "tool":
        flag = " (error)" if message.is_error else ""
        return f"Tool result of {message.name or 'a tool'}{flag}: {message.content}"
    if message.role == "assistant":
        calls = "".join(f"\n[calls {call.name} with {call.input}]" for call in message.tool_calls)
        return f"Assistant: {message.content}{calls}"
    return f"{message.role.capitalize()}: {message.content}"


def pieces(messages: Sequence[Message], limit: int | None) -> list[str]:
    """The transcript of `messages`, in pieces of at most `limit` characters (`None`: one)."""
    lines = [render(m) for m in messages]
    if limit is None:
        return ["\n\n".join(lines)]
    parts: list[str] = []
    current: list[str] = []
    size = 0
    for line in lines:
        if len(line) > limit:
            line = line[: limit - len(_CUT)] + _CUT
        if current and size + len(line) + 2 > limit:
            parts.append("\n\n".join(current))
            current, size = [], 0
        current.append(line)
        size += len(line) + 2
    if current:
        parts.append("\n\n".join(current))
    return parts


def _piece_limit(policy: Summarize, client: BaseLLMClient, window: int | None) -> int | None:
    """Characters of transcript one summarizer call may read (`None`: no limit known)."""
    profile = client.profile
    if policy.client is not None and profile is not None:
        window = profile.capabilities.context_length
    if window is None:
        return None
    room = window - policy.max_summary_tokens - len(policy.instructions) // _CHARS_PER_TOKEN
    return max(_SMALLEST_PIECE, room * _CHARS_PER_TOKEN * 4 // 5)


async def summarize(
    policy: Summarize,
    client: BaseLLMClient,
    previous: str | None,
    messages: Sequence[Message],
    *,
    window: int | None,
    timeout: float | None,
) -> Summary:
    """Summarize `messages`, folding in the `previous` summary.

    Args:
        policy: The policy (instructions, longest summary).
        client: The summarizer: the policy's client, or the run's.
        previous: The summary of what came before `messages`, if any.
        messages: The messages to summarize, oldest first.
        window: The run's window, for a summarizer without a profile of its own.
        timeout: The run's ``ModelSettings.timeout`` for each call.

    A failed call (a `GlassAgentError`) ends the summary: `Summary.error` says why.
    """
    summary = Summary()
    text = previous
    settings = ModelSettings(max_tokens=policy.max_summary_tokens, timeout=timeout)
    for piece in pieces(messages, _piece_limit(policy, client, window)):
        earlier = f"The summary so far:\n{text}\n\n" if text else ""
        prompt = f"{earlier}The conversation to summarize:\n\n{piece}"
        asked = [Message(role="user", content=prompt)]
        request = ModelRequest.build(asked, (), policy.instructions, settings)
        try:
            response = await send_request(client, request)
        except GlassAgentError as exc:
            summary.error = f"{type(exc).__name__}: {exc}"
            return summary
        summary.calls.append((response.usage, client_cost(client, response.usage)))
        if not response.text.strip():
            summary.error = "the summarizer answered with no text"
            return summary
        text = response.text.strip()
    summary.text = text
    return summary
