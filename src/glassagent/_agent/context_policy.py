"""The context policies: what of a long conversation each model call sends.

`KeepTurns`, `FitWindow` and `Summarize` are plain settings; `compact` applies them. A policy
changes what is sent, never the conversation or its history.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from glassagent._core.client import BaseLLMClient
from glassagent._core.errors import UserError

SUMMARY_HEADING = "Summary of the earlier conversation:"
"""The line before a summary's text in the system instructions of a request."""

DEFAULT_INSTRUCTIONS = (
    "You summarize conversations between a user and an assistant that uses tools. Write a "
    "short summary of the conversation you are given, for the assistant to continue it: the "
    "user's goals and requests, facts and decisions, what the tools found or did (names, "
    "numbers, files, results), and what is still open. If an earlier summary is given, fold "
    "it in. Write plain prose or short bullet points; no greeting, nothing else."
)
"""The summarizer's system instructions, unless `Summarize.instructions` gives others."""


def _check_count(owner: str, name: str, value: object, *, least: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise UserError(
            f"{owner}.{name} must be a whole number of at least {least}, got {value!r}."
        )


def _check_window(owner: str, window: object, reserve: object) -> None:
    if window is not None:
        _check_count(owner, "window", window, least=1)
    if reserve is not None:
        _check_count(owner, "reserve", reserve, least=0)


@dataclass(frozen=True)
class KeepTurns:
    """Send only the last `n` turns of the conversation.

    A turn is a user message and everything after it up to the next user message (the
    model's answers, its tool calls and their results). The system prompt, ``system``
    messages and pinned messages are sent too, wherever they are.

    Example:
        ```python
        agent = Agent(client, context_policy=KeepTurns(10))
        ```
    """

    n: int
    """How many turns to send, the current one included (at least 1)."""

    def __post_init__(self) -> None:
        _check_count("KeepTurns", "n", self.n, least=1)


@dataclass(frozen=True)
class FitWindow:
    """Leave out the oldest turns until the request fits the model's context window.

    Room for the answer is left free (`reserve`). When even the current turn is too long,
    its oldest rounds of tool calls go too (each call with its result); the user's message
    that started the turn and the latest round stay. A request that cannot fit even so is
    refused as before (`ContextLengthError`).
    """

    reserve: int | None = None
    """Tokens left free for the answer. `None`: the run's ``max_tokens`` when you set it;
    else a quarter of the window (a ``max_tokens`` the model's profile gave is cut to the
    room left anyway)."""
    window: int | None = None
    """The tokens a request may have. `None`: the ``context_length`` of the model's profile
    (with no profile and no window nothing is left out)."""

    def __post_init__(self) -> None:
        _check_window("FitWindow", self.window, self.reserve)


@dataclass(frozen=True)
class Summarize:
    """Summarize the older turns with a model once a request passes `trigger` of its room.

    The summary is a new message of the conversation (kept in the history, marked with
    `Message.summary_of`); each request sends it in the system instructions, after the line
    ``Summary of the earlier conversation:``, in place of the turns it covers, followed by
    the recent turns. A later turn reuses it until the window fills again. When a request
    is still too long, the rules of `FitWindow` apply, so a run never fails for length when
    leaving out turns can make it fit.

    The summarizer's calls are the run's: a call is made only when the run's budget (and the
    budgets of the runs it is nested in) can pay for it, the summarizer's later calls and
    the model call after them. When a summary cannot be written (a budget, or the summarizer
    failed), the oldest turns are left out instead, and the run does not ask again.
    """

    client: BaseLLMClient | None = None
    """The model that writes summaries. `None`: the run's own client (in a durable run its
    calls are checkpointed steps; another client's are not)."""
    keep_turns: int = 2
    """How many recent turns stay word for word, the current one included (at least 1)."""
    trigger: float = 0.8
    """Summarize when a request passes this share of its room: the window less the `reserve`
    for the answer (above 0, at most 1). With the defaults, 0.8 of three quarters of the
    window; 1 summarizes only once the request no longer fits."""
    instructions: str = DEFAULT_INSTRUCTIONS
    """The summarizer's system instructions."""
    max_summary_tokens: int = 512
    """The longest summary, in tokens (the summarizer call's ``max_tokens``)."""
    reserve: int | None = None
    """Tokens left free for the answer, as for `FitWindow`."""
    window: int | None = None
    """The tokens a request may have, as for `FitWindow`."""

    def __post_init__(self) -> None:
        if self.client is not None and not isinstance(self.client, BaseLLMClient):
            name = type(self.client).__name__
            raise UserError(f"Summarize.client must be a BaseLLMClient or None, got {name}.")
        _check_count("Summarize", "keep_turns", self.keep_turns, least=1)
        _check_count("Summarize", "max_summary_tokens", self.max_summary_tokens, least=1)
        trigger = self.trigger
        if isinstance(trigger, bool) or not isinstance(trigger, (int, float)):
            raise UserError(f"Summarize.trigger must be a number, got {trigger!r}.")
        if not 0 < trigger <= 1:
            raise UserError(f"Summarize.trigger must be above 0 and at most 1, got {trigger!r}.")
        if not isinstance(self.instructions, str) or not self.instructions.strip():
            raise UserError("Summarize.instructions must be a non-empty string.")
        _check_window("Summarize", self.window, self.reserve)


ContextPolicy: TypeAlias = KeepTurns | FitWindow | Summarize
"""Any context policy: `KeepTurns`, `FitWindow` or `Summarize`."""

POLICY_NAMES: dict[type, str] = {
    KeepTurns: "keep_turns",
    FitWindow: "fit_window",
    Summarize: "summarize",
}
"""Each policy's name in the ``context_compacted`` event."""


def check_policy(policy: object) -> None:
    """Raise `UserError` unless `policy` is a context policy or `None`."""
    if policy is not None and type(policy) not in POLICY_NAMES:
        raise UserError(
            "`context_policy` must be KeepTurns, FitWindow or Summarize (glassagent.context), "
            f"got {type(policy).__name__}."
        )
