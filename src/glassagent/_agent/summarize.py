"""The summarizer of `Summarize`: older turns, as a transcript, into a summary by a model.

A transcript longer than the summarizer's window goes in pieces, one call each, each call
given the summary so far (the piece is that much shorter); a single message longer than a
piece is cut.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from glassagent._agent.context_policy import Summarize
from glassagent._core.client import BaseLLMClient, send_request
from glassagent._core.cost import Cost
from glassagent._core.errors import GlassAgentError
from glassagent._core.messages import Message, ModelSettings, Usage
from glassagent._core.pricing import client_cost
from glassagent._core.request import ModelRequest

_CHARS_PER_TOKEN = 3  # cautious: a piece must fit the summarizer's window
_SMALLEST_PIECE = 200  # characters: with less room the summarizer's window is too small
_CUT = " [...]"
_ASK = "The conversation to summarize:\n\n"


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


def _take(lines: list[str], limit: int) -> tuple[str, list[str]]:
    """The next piece of at most `limit` characters (at least one line, cut to fit), the rest."""
    taken: list[str] = []
    size = 0
    for line in lines:
        if len(line) > limit:
            line = line[: max(0, limit - len(_CUT))] + _CUT
        if taken and size + len(line) + 2 > limit:
            break
        taken.append(line)
        size += len(line) + 2
    return "\n\n".join(taken), lines[len(taken) :]


def _window(policy: Summarize, client: BaseLLMClient, window: int | None) -> int | None:
    """The summarizer's window: its own profile's, or the run's."""
    profile = client.profile
    if policy.client is not None and profile is not None:
        return profile.capabilities.context_length
    return window


def _piece_limit(policy: Summarize, window: int | None, earlier: str) -> int | None:
    """Characters of transcript one summarizer call may read (`None`: no limit known).

    The call's window holds the instructions, the summary so far (`earlier`, sent before
    the piece) and the answer (`Summarize.max_summary_tokens`); the piece gets four fifths of
    the rest, at three characters a token. `0`: no room is left.
    """
    if window is None:
        return None
    taken = len(policy.instructions) + len(earlier) + len(_ASK)
    room = window - policy.max_summary_tokens - taken // _CHARS_PER_TOKEN - 1
    return max(0, room * _CHARS_PER_TOKEN * 4 // 5)


def _ahead(policy: Summarize, prompt: str, rest: list[str], limit: int | None) -> tuple[int, int]:
    """The characters of the prompts of the calls still to make (this one first), and their number.

    The `rest` of the transcript goes in pieces of `limit`, each with a summary so far as long
    as `Summarize.max_summary_tokens` allows.
    """
    chars = sum(len(line) + 2 for line in rest)
    later = -(-chars // limit) if rest and limit else 0
    each = len(policy.instructions) + len(_ASK) + 4 * policy.max_summary_tokens
    return len(policy.instructions) + len(prompt) + chars + later * each, 1 + later


def _no_room(policy: Summarize, window: int | None) -> str:
    return (
        f"the summarizer's window of {window} tokens leaves no room for the conversation "
        "next to its instructions, the summary so far and "
        f"max_summary_tokens={policy.max_summary_tokens}"
    )


def _prompt(earlier: str, piece: str) -> str:
    return f"{earlier}{_ASK}{piece}"


async def summarize(
    policy: Summarize,
    client: BaseLLMClient,
    previous: str | None,
    messages: Sequence[Message],
    *,
    window: int | None,
    timeout: float | None,
    refuse: Callable[[int, int], str | None] | None = None,
    spend: Callable[[Usage, Cost], None] | None = None,
) -> Summary:
    """Summarize `messages`, folding in the `previous` summary.

    Args:
        policy: The policy (instructions, longest summary).
        client: The summarizer: the policy's client, or the run's.
        previous: The summary of what came before `messages`, if any.
        messages: The messages to summarize, oldest first.
        window: The run's window, for a summarizer without a profile of its own.
        timeout: The run's ``ModelSettings.timeout`` for each call.
        refuse: Why the calls still to make may not be made (a budget), or `None`; asked
            before each call with the characters of their prompts and their number.
        spend: Told of each call's usage and cost as soon as it is made.

    A failed call (a `GlassAgentError`), a refused one, or a window with no room for the
    transcript ends the summary: `Summary.error` says why.
    """
    summary = Summary()
    text = previous
    settings = ModelSettings(max_tokens=policy.max_summary_tokens, timeout=timeout)
    window = _window(policy, client, window)
    lines = [render(m) for m in messages]
    while lines:
        earlier = f"The summary so far:\n{text}\n\n" if text else ""
        limit = _piece_limit(policy, window, earlier)
        if limit is None:
            piece, lines = "\n\n".join(lines), []
        elif limit < _SMALLEST_PIECE:
            summary.error = _no_room(policy, window)
            return summary
        else:
            piece, lines = _take(lines, limit)
        prompt = _prompt(earlier, piece)
        reason = None if refuse is None else refuse(*_ahead(policy, prompt, lines, limit))
        if reason is not None:
            summary.error = reason
            return summary
        request = ModelRequest.build(
            [Message(role="user", content=prompt)], (), policy.instructions, settings
        )
        try:
            response = await send_request(client, request)
        except GlassAgentError as exc:
            summary.error = f"{type(exc).__name__}: {exc}"
            return summary
        cost = client_cost(client, response.usage)
        summary.calls.append((response.usage, cost))
        if spend is not None:
            spend(response.usage, cost)
        if not response.text.strip():
            summary.error = "the summarizer answered with no text"
            return summary
        text = response.text.strip()
    summary.text = text
    return summary
