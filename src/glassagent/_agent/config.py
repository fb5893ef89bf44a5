"""`RunConfig`: everything one run is configured with, and its steps before and after.

`plan_output` applies the structured output's mode before the run; `append_turn` appends the
turn to a history after it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeAlias

from glassagent._agent.output import OutputSpec, Plan, final_tool, instructions
from glassagent._core.errors import ConfigurationError, HistoryAppendError

if TYPE_CHECKING:
    from glassagent._agent.approval import Answer
    from glassagent._agent.budget import Budget
    from glassagent._agent.context_policy import ContextPolicy
    from glassagent._agent.hook import OnEvent
    from glassagent._core.client import BaseLLMClient
    from glassagent._core.messages import ModelSettings, ToolCall, ToolDefinition
    from glassagent._core.record.redact import Redact
    from glassagent._core.result import RunResult, ToolResult
    from glassagent._history.tree import History
    from glassagent._tools.context_tools import ContextSettings, ContextTool
    from glassagent._tools.execute import Prepared
    from glassagent._tools.tool import ApprovalPolicy, Tool

ToolStep: TypeAlias = (
    "Callable[[Prepared, Callable[[], Awaitable[ToolResult]]], Awaitable[ToolResult]]"
)
"""``step(prepared, execute)``: runs one prepared tool call by awaiting ``execute()``, or
returns the result it recorded for that call before (a durable run's checkpoint)."""


@dataclass(frozen=True)
class RunSteps:
    """How a durable run's calls go through checkpointed steps (`glassagent.durable`)."""

    tool: ToolStep
    """Runs each approved tool call (or returns its recorded result)."""
    approvals: Callable[[tuple[ToolCall, ...], Callable[[], None]], Awaitable[Mapping[str, Answer]]]
    """``approvals(calls, announce)`` waits for the answers to the calls of one model answer
    that need approval (or returns the recorded ones), calling ``announce()`` (which emits
    their ``approval_required`` events) once they wait; the calls start once it returns."""
    replaying: Callable[[], bool]
    """Whether the run is replaying its finished steps: its events are marked replayed."""


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
    steps: RunSteps | None = None
    """How tool calls and approvals go through checkpointed steps (a durable run), when not
    directly."""
    context_policy: ContextPolicy | None = None
    """What of a long conversation each model call sends (`None`: all of it)."""
    agent_name: str | None = None
    """The name of the agent the run goes on as (it changes on a handoff)."""


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


def plan_output(config: RunConfig) -> tuple[RunConfig, Plan | None]:
    """The run's configuration with its output mode applied, and the mode.

    ``native`` puts the schema in the settings, ``tool`` adds the final-answer tool,
    ``prompted`` adds the schema to the system prompt.

    Under ``tool_choice="none"`` the client's ``tool`` mode becomes ``prompted``.

    Raises:
        ConfigurationError: When the agent asks for ``native``, or the settings carry an
            `OutputSchema`, and the client has no native mode for this run; or when it asks
            for ``tool`` under ``tool_choice="none"``.
    """
    spec = config.output
    client, tools = config.client, bool(config.definitions)
    if spec is None and config.settings.output_schema is None:
        return config, None
    offered = client.output_mode(tools=tools, settings=config.settings)
    if spec is None:  # a schema in the settings, for the client to honour
        if offered != "native":
            raise ConfigurationError(
                f"{client.provider_name} ({type(client).__name__}) cannot honour "
                "ModelSettings.output_schema: its output_mode is not 'native'. Use "
                "Agent(output_type=...) instead."
            )
        return config, None
    mode = spec.mode or offered
    if mode == "tool" and config.settings.tool_choice == "none":  # no tool may be called
        if spec.mode == "tool":
            raise ConfigurationError(
                "output_mode='tool' needs the final-answer tool, which "
                "ModelSettings.tool_choice='none' forbids the model to call; use "
                "output_mode='prompted' or another tool_choice."
            )
        mode = "prompted"
    if mode == "native" and offered != "native":
        raise ConfigurationError(
            f"{client.provider_name} ({type(client).__name__}) cannot honour output_mode="
            f"'native'{' in a run with tools' if tools else ''}: its output_mode is "
            f"{offered!r}. Use output_mode='tool' or 'prompted', or leave it unset."
        )
    if mode == "native":
        settings = replace(config.settings, output_schema=spec.schema)
        return replace(config, settings=settings), Plan(spec, mode)
    settings = replace(config.settings, output_schema=None)
    config = replace(config, settings=settings)
    if mode == "tool":
        definitions = (*config.definitions, final_tool(spec.schema))
        return replace(config, definitions=definitions), Plan(spec, mode)
    system = "\n\n".join(s for s in (config.system, instructions(spec.schema)) if s)
    return replace(config, system=system), Plan(spec, mode)
