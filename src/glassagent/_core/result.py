"""Results: of one tool call (`ToolResult`) and of a whole agent run (`RunResult`)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal

from typing_extensions import TypeVar

from glassagent._core.cost import NOT_RECORDED, Cost
from glassagent._core.messages import Message, StopReason, ToolCall, Usage

if TYPE_CHECKING:
    from glassagent._core.events import Event
    from glassagent._core.record.redact import Redact

RunStopReason = Literal[
    "end_turn", "max_iterations", "aborted", "error", "budget", "awaiting_approval"
]
"""How an agent run ended (why the model stopped: `RunResult.model_stop_reason`); ``budget``
when the agent's `Budget` stopped it before a model call; ``awaiting_approval`` when a run
with ``defer_approval=True`` stopped for calls a person must approve
(`RunResult.pending_approvals`; continue with `Agent.resume`)."""

OutputT = TypeVar("OutputT", default=str)
"""The type of a run's output: the agent's ``output_type`` (``str`` without one)."""

_CUT: frozenset[StopReason] = frozenset({"max_tokens", "content_filter", "other"})


@dataclass(frozen=True)
class ToolResult:
    """The outcome of one tool call, as sent back to the model."""

    call_id: str
    """Id of the `ToolCall` this answers."""
    name: str
    """Name of the tool the model called."""
    output: str
    """The text sent to the model: the tool's return value, or an error message."""
    is_error: bool
    """Whether the call failed (unknown tool, invalid arguments, exception, timeout, abort)."""
    duration_ms: float
    """Wall time the call took, in milliseconds."""
    ui_info: Any = None
    """Display hints for user interfaces (from the tool), never sent to the model."""
    structured: dict[str, Any] | list[Any] | None = None
    """The tool's return value as JSON values when it is a JSON object or array (a dict, a
    list, a model...), for ``function_execution_complete`` events; `None` otherwise. The
    model reads `output`, its JSON text."""


@dataclass(frozen=True)
class RunResult(Generic[OutputT]):
    """Everything an agent run produced; `output` is typed as the agent's ``output_type``."""

    text: str
    """The final answer (on abort: the partial text; on error: the text so far)."""
    new_messages: tuple[Message, ...]
    """Messages this run added: the user prompt, assistant turns and tool results."""
    all_messages: tuple[Message, ...]
    """The conversation before the run followed by `new_messages`."""
    events: tuple[Event, ...]
    """Every event the run emitted, in order."""
    usage: Usage
    """Tokens used by all model calls of the run."""
    iterations: int
    """Number of model calls made."""
    stop_reason: RunStopReason
    """How the run ended: ``end_turn`` when it has a final answer (see `truncated`)."""
    model_stop_reason: StopReason | None = None
    """Why the model stopped its last answer (`LLMResponse.stop_reason`): ``end_turn`` for a
    complete answer, ``max_tokens`` when the token limit cut it, ...; `None` when no answer
    arrived."""
    cost: Cost = NOT_RECORDED
    """What the run's model calls cost: the sum of each ``llm_response`` event's cost (zero
    when no call was made); unpriced, with the reason, when a call could not be priced."""
    pending_approvals: tuple[ToolCall, ...] = ()
    """With ``stop_reason="awaiting_approval"``: the calls waiting for a person's answer, in
    the order the model made them; continue with `Agent.resume`. Empty otherwise."""
    output: OutputT = None  # type: ignore[assignment]  # set by every run that ends
    """The run's output: with ``Agent(output_type=...)`` the validated value (a model
    instance, a dataclass, a list...), `None` when the run ended without a final answer
    (any `stop_reason` but ``end_turn``); without one, the same as `text`."""
    last_agent: str | None = None
    """The name of the agent that ended the run: the agent run, or the one the conversation
    was last handed to (see "Many agents"); `None` for an agent without a name."""
    redact: Redact | None = field(default=None, repr=False, compare=False)
    """The agent's `redact` hook: `save_events` and the notebook view pass the events
    through it."""

    @property
    def truncated(self) -> bool:
        """Whether the last answer was cut short rather than finished by the model.

        True when the model stopped for ``max_tokens``, ``content_filter`` or ``other``:
        `text` may then be incomplete (or empty) even though the run ended with ``end_turn``.
        """
        return self.model_stop_reason in _CUT

    @property
    def cache_hit_rate(self) -> float | None:
        """The share of the run's input tokens read from the provider's prompt cache.

        ``usage.cache_read_tokens / usage.input_tokens``, from 0.0 to 1.0; `None` when the
        run sent no input tokens (or its provider reported none). See "Prompt caching".
        """
        usage = self.usage
        if usage.input_tokens <= 0:
            return None
        return min(usage.cache_read_tokens / usage.input_tokens, 1.0)

    def save_events(self, path: str | os.PathLike[str], *, append: bool = False) -> None:
        """Write the run's events to a JSON Lines file: a header line, then one event per line.

        Every line passes the agent's `redact` hook. Read the file back with
        `glassagent.events.load_events`, or replay it with `glassagent.testing.ReplayClient`.

        Args:
            path: The file (created or replaced; see `append`).
            append: Add to the end of an existing file (e.g. the turns of one conversation).

        Raises:
            UserError: When the file cannot be written, or the redact hook fails.
        """
        from glassagent._core.record.jsonl import save_events

        save_events(path, self.events, redact=self.redact, append=append)

    def _repr_html_(self) -> str:
        from glassagent._core.record import render

        return render.html_timeline(render.redacted_dicts(self.events, self.redact))

    def _repr_markdown_(self) -> str:
        from glassagent._core.record import render

        return render.markdown_timeline(render.redacted_dicts(self.events, self.redact))
