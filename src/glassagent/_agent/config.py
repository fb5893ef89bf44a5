"""`RunConfig`: everything one run is configured with; `append_turn`: its step after the end."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from glassagent._core.errors import HistoryAppendError

if TYPE_CHECKING:
    from glassagent._agent.budget import Budget
    from glassagent._agent.hook import OnEvent
    from glassagent._agent.output import OutputSpec
    from glassagent._core.client import BaseLLMClient
    from glassagent._core.messages import ModelSettings, ToolDefinition
    from glassagent._core.result import RunResult
    from glassagent._history.tree import History
    from glassagent._record.redact import Redact
    from glassagent._tools.context_tools import ContextSettings, ContextTool
    from glassagent._tools.tool import ApprovalPolicy, Tool


@dataclass(frozen=True)
class RunConfig:
    """The configuration of one run, as `Agent.run` resolved it."""

    client: BaseLLMClient
    tools: Mapping[str, Tool]
    definitions: tuple[ToolDefinition, ...]
    system: str | None
    settings: ModelSettings
    max_iterations: int
    tool_timeout: float | None = None
    run_timeout: float | None = None
    budget: Budget | None = None
    """Limits on what the run may spend (`None`: none)."""
    deps: Any = None
    append_to: History | None = None
    """The history the turn is appended to when the run ends (`None`: none)."""
    append_below: str | None = None
    """The node the run started from, which the turn is appended below."""
    context_tools: tuple[ContextTool, ...] = ()
    """Tools run before the first model call to gather context (see `context_step`)."""
    context_settings: ContextSettings | None = None
    """How the context tools are selected and their output placed (`None`: the defaults)."""
    requires_approval: bool | ApprovalPolicy = False
    """The agent's rule for which calls need approval, besides each tool's own."""
    defer_approval: bool = False
    """End the run ``awaiting_approval`` rather than wait for calls without an approver."""
    redact: Redact | None = None
    """The hook recordings, views and exports of the run pass its events through."""
    on_event: OnEvent | None = None
    """The hook given each event of the run as it is emitted (`None`: none)."""
    output: OutputSpec | None = None
    """The structured output the run must end with (`None`: plain text)."""
    stop_repeats: bool = False
    """Make the model answer after it repeated its previous round of calls."""
    host: Mapping[str, Any] | None = None
    """What the application told the run for its tools (``ToolContext.host``)."""


def append_turn(config: RunConfig, result: RunResult[Any]) -> None:
    """Append the new messages of a run that did not fail to ``config.append_to``.

    A failed run leaves the history exactly as it was.

    Raises:
        HistoryAppendError: When the history refuses a message, with ``.result`` set and the
            refusal as ``__cause__``; the messages appended before it stay.
    """
    history = config.append_to
    if history is None or result.stop_reason in ("error", "max_iterations"):
        return
    node = config.append_below
    appended: list[str] = []
    try:
        for message in result.new_messages:
            node = history.append(message, parent=node)
            appended.append(node)
    except Exception as exc:
        error = HistoryAppendError(
            f"The run ended ({result.stop_reason}) but its turn could not be appended to the "
            f"history: {type(exc).__name__}: {exc}",
            appended=tuple(appended),
        )
        error.result = result
        raise error from exc
