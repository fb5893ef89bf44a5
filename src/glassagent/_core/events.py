"""The closed set of events an agent run emits (documented in `glassagent.events`)."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from enum import Enum
from functools import cache
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias, get_args

from glassagent._core.analysis import MessageAnalysis
from glassagent._core.cost import NOT_RECORDED, Cost
from glassagent._core.errors import UserError
from glassagent._core.messages import (
    Message,
    ModelSettings,
    StopReason,
    ToolCall,
    ToolDefinition,
    ToolProtocol,
    Usage,
    WireRecord,
)

if TYPE_CHECKING:
    from pydantic import TypeAdapter

BudgetLimit = Literal["max_cost", "max_tokens", "max_model_calls"]
"""Which limit of a `Budget` stopped a run."""

_FIELDS: dict[type, tuple[str, ...]] = {}
_SCALARS = (str, int, float, bool, type(None))


def to_jsonable(value: Any) -> Any:
    """Convert dataclasses, mappings, sequences, bytes and enums to plain JSON values."""
    if isinstance(value, _SCALARS):
        return value
    cls = type(value)
    names = _FIELDS.get(cls)
    if names is None and is_dataclass(value):
        names = _FIELDS[cls] = tuple(f.name for f in fields(value))
    if names is not None:
        return {name: to_jsonable(getattr(value, name)) for name in names}
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, Enum):
        return to_jsonable(value.value)
    from pydantic_core import to_jsonable_python

    try:
        return to_jsonable_python(value)
    except Exception:
        return repr(value)


@dataclass(frozen=True, kw_only=True)
class BaseEvent:
    """Fields every event carries."""

    run_id: str
    """Id of the run that emitted the event."""
    seq: int
    """Position of the event in its run: 0, 1, 2, ... with no gaps."""
    timestamp: float = field(default_factory=time.time, compare=False)
    """When the event was emitted, in seconds since the Unix epoch (`time.time`); not
    compared: two events that differ only in it are equal."""
    replayed: bool = False
    """Whether the event reports what a durable run did before its process stopped: a run
    resumed after a crash replays its finished steps from their checkpoints, and marks the
    events of that replay (`glassagent.durable`). Only a replayed event's dict has the key."""
    parent_run_id: str | None = None
    """For an event of a sub-agent's run (an agent used as a tool, see "Many agents"): the
    id of the run whose tool call started it; `None` for an event of a top-level run."""
    parent_call_id: str | None = None
    """For an event of a sub-agent's run: the id of the parent's tool call that runs it."""
    depth: int = 0
    """How deep the emitting run is nested: 0 for a top-level run, 1 for a sub-agent's run,
    2 for a sub-agent of a sub-agent, ... Only a nested event's dict has the three keys."""

    def to_dict(self) -> dict[str, Any]:
        """Return the standard JSON-serialisable event dict (``type`` first).

        Bytes become standard base64 strings; values JSON cannot hold become their ``repr``.
        ``replayed`` is left out when it is false, and ``parent_run_id``, ``parent_call_id``
        and ``depth`` for an event of a top-level run.
        """
        data: dict[str, Any] = to_jsonable(self)
        if not data["replayed"]:
            del data["replayed"]
        if not data["depth"]:
            del data["parent_run_id"], data["parent_call_id"], data["depth"]
        return {"type": data.pop("type"), **data}


@dataclass(frozen=True, kw_only=True)
class TextChunkEvent(BaseEvent):
    """A piece of the model's answer text, as it streams in."""

    type: Literal["text_chunk"] = "text_chunk"
    """Event tag."""
    text: str
    """The new text."""
    is_follow_up: bool
    """True for text produced after at least one tool round."""


@dataclass(frozen=True, kw_only=True)
class ThinkingChunkEvent(BaseEvent):
    """A piece of the model's reasoning, as it streams in."""

    type: Literal["thinking_chunk"] = "thinking_chunk"
    """Event tag."""
    text: str
    """The new reasoning text."""


@dataclass(frozen=True, kw_only=True)
class FunctionCallStartEvent(BaseEvent):
    """The model asked for a tool call (emitted once per call, before execution)."""

    type: Literal["function_call_start"] = "function_call_start"
    """Event tag."""
    function_name: str
    """The name the model called (``web_search``)."""
    tool_name: str | None
    """The display name of the registered tool that will handle the call (``Web search``):
    its `Tool.display_name`, which defaults to its name; `None` when no tool has that name."""
    args: dict[str, Any]
    """The arguments the model gave."""
    call_id: str
    """Id of the call."""
    ui_info: Any = None
    """The tool's display hints, if it declared any."""


@dataclass(frozen=True, kw_only=True)
class ToolProgressEvent(BaseEvent):
    """A running tool reported progress (``await ctx.progress(...)``)."""

    type: Literal["tool_progress"] = "tool_progress"
    """Event tag."""
    tool: str
    """Name of the tool."""
    message: str
    """The progress message."""
    call_id: str
    """Id of the call that is running."""


@dataclass(frozen=True, kw_only=True)
class FunctionExecutionStartEvent(BaseEvent):
    """Tool execution begins for all calls of one model answer."""

    type: Literal["function_execution_start"] = "function_execution_start"
    """Event tag."""
    count: int
    """Number of calls that run (concurrently)."""


@dataclass(frozen=True)
class ToolExecution:
    """What happened in one tool call (payload of `FunctionExecutionCompleteEvent`)."""

    function_name: str
    """The name the model called."""
    tool_name: str | None
    """The display name of the registered tool that handled it (`Tool.display_name`);
    `None` when the name was unknown."""
    args: dict[str, Any]
    """The arguments the model gave."""
    result: str | dict[str, Any] | list[Any]
    """The tool's result: its JSON values when it returned a JSON object or array (a dict,
    a list, a model...), else the text sent back to the model (also for every error). The
    model always reads text: `ToolResult.output`."""
    is_error: bool
    """Whether the call failed."""
    duration_ms: float
    """Wall time of the call in milliseconds."""
    has_ui: bool
    """Whether `ui_info` is set."""
    ui_info: Any
    """Display hints from the tool."""
    call_id: str
    """Id of the call."""


@dataclass(frozen=True, kw_only=True)
class FunctionExecutionCompleteEvent(BaseEvent):
    """One tool call finished (emitted as each call completes)."""

    type: Literal["function_execution_complete"] = "function_execution_complete"
    """Event tag."""
    execution: ToolExecution
    """The call and its outcome."""


@dataclass(frozen=True, kw_only=True)
class SendingFunctionResponseEvent(BaseEvent):
    """Tool results are being sent back to the model."""

    type: Literal["sending_function_response"] = "sending_function_response"
    """Event tag."""
    count: int
    """Number of results sent."""


@dataclass(frozen=True, kw_only=True)
class CompleteEvent(BaseEvent):
    """The run finished with a final answer. Always the last event of a successful run."""

    type: Literal["complete"] = "complete"
    """Event tag."""
    text: str
    """The final answer."""
    usage: Usage
    """Tokens used by the whole run."""
    iterations: int
    """Number of model calls made."""
    stop_reason: StopReason = "end_turn"
    """Why the model stopped its final answer: anything but ``end_turn`` (``max_tokens``,
    ``content_filter``, ``other``) means the answer was cut short (`RunResult.truncated`)."""
    output: Any = None
    """With ``Agent(output_type=...)``: the validated output as JSON values (a model's fields
    as an object); `RunResult.output` holds the typed value. `None` for a plain-text agent."""


@dataclass(frozen=True, kw_only=True)
class AbortedEvent(BaseEvent):
    """The run was aborted. Always the last event of an aborted run."""

    type: Literal["aborted"] = "aborted"
    """Event tag."""
    text: str
    """The partial text produced in the interrupted turn."""
    reason: str
    """Why the run was aborted."""


@dataclass(frozen=True, kw_only=True)
class ErrorEvent(BaseEvent):
    """The run failed. Always the last event of a failed run."""

    type: Literal["error"] = "error"
    """Event tag."""
    error: str
    """The error message."""
    error_type: str
    """The error's class name, e.g. ``RateLimitError``."""


@dataclass(frozen=True)
class ContextScore:
    """How one context tool scored for a turn (payload of `ContextSelectionEvent`)."""

    tool_name: str
    """The context tool."""
    score: int
    """Its relevance to the user's message, 0-100 (0 when `relevance` failed)."""
    priority: int
    """Its priority, the tie-breaker between equal scores."""
    status: Literal["selected", "below_threshold", "over_cap", "relevance_failed"]
    """``selected`` (it runs), ``below_threshold`` (score under ``min_relevance``),
    ``over_cap`` (eligible, but ``max_tools`` better-ranked tools run) or
    ``relevance_failed`` (its `relevance` raised, timed out or gave no 0-100 number)."""
    error: str | None = None
    """Why `relevance` failed, when it did."""
    duration_ms: float = 0.0
    """How long `relevance` took, in milliseconds."""


@dataclass(frozen=True, kw_only=True)
class ContextSelectionEvent(BaseEvent):
    """The agent scored its context tools for the user's message and chose which run."""

    type: Literal["context_selection"] = "context_selection"
    """Event tag."""
    scores: tuple[ContextScore, ...]
    """Every context tool, best-ranked first (score, then priority, both descending)."""
    min_relevance: int
    """The lowest score that made a tool eligible."""
    max_tools: int
    """The most tools that could run."""
    analysis: MessageAnalysis | None = None
    """What the analyser read in the message, which the tools saw as ``ctx.analysis``
    (`None`: no analyser, or it failed)."""
    analysis_error: str | None = None
    """Why the analyser failed, when it did."""


@dataclass(frozen=True, kw_only=True)
class ContextToolCompleteEvent(BaseEvent):
    """A selected context tool finished (emitted as each finishes), or failed and was skipped."""

    type: Literal["context_tool_complete"] = "context_tool_complete"
    """Event tag."""
    tool_name: str
    """The context tool."""
    score: int
    """The score that selected it."""
    output: str
    """The text it gave (``""`` when it failed)."""
    is_error: bool
    """Whether it raised, timed out or returned no text; its output is then left out."""
    error: str | None
    """What went wrong, when something did."""
    duration_ms: float
    """Wall time of its run, in milliseconds."""
    suggested_role: str | None = None
    """The role the tool suggested for the answer (`ContextResult.suggested_role`)."""
    debug_info: str | None = None
    """The tool's debug notes (`ContextResult.debug_info`); never sent to the model."""


@dataclass(frozen=True, kw_only=True)
class BudgetExceededEvent(BaseEvent):
    """The agent's `Budget` stopped the run before a model call. Always the last event of it.

    What the run produced so far is kept (`RunResult.stop_reason` is ``budget``).
    """

    type: Literal["budget_exceeded"] = "budget_exceeded"
    """Event tag."""
    limit: BudgetLimit
    """The limit the next call would have passed: ``max_cost``, ``max_tokens`` or
    ``max_model_calls``."""
    reason: str
    """What was spent, what the next call would have added, and the limit."""
    text: str
    """The last answer text of the run, if any."""
    usage: Usage
    """Tokens used by the run's model calls."""
    cost: Cost
    """What the run's model calls cost."""
    iterations: int
    """Number of model calls made."""


@dataclass(frozen=True, kw_only=True)
class ApprovalRequiredEvent(BaseEvent):
    """A tool call needs a person's approval before it runs (emitted before it waits).

    Answer with `AgentRun.approve` or `AgentRun.deny`; a run with ``defer_approval=True``
    ends with ``awaiting_approval`` instead, unless the tool has its own `Approver`.
    """

    type: Literal["approval_required"] = "approval_required"
    """Event tag."""
    call: ToolCall
    """The call: its ``id`` is what `AgentRun.approve` and `AgentRun.deny` take."""
    tool_name: str
    """The display name of the registered tool that will run it (`Tool.display_name`)."""
    ui_info: Any = None
    """The tool's display hints, if it declared any."""


@dataclass(frozen=True, kw_only=True)
class ApprovalAnsweredEvent(BaseEvent):
    """A call that needed approval was approved (it runs now) or declined (it never runs)."""

    type: Literal["approval_answered"] = "approval_answered"
    """Event tag."""
    call_id: str
    """Id of the call."""
    tool_name: str
    """The display name of the registered tool of the call (`Tool.display_name`)."""
    approved: bool
    """Whether the call was approved."""
    reason: str | None = None
    """Why it was declined, when a reason was given (or asking failed)."""


@dataclass(frozen=True, kw_only=True)
class AwaitingApprovalEvent(BaseEvent):
    """A run with ``defer_approval=True`` stopped to wait for approvals. Always its last event.

    The other calls of the answer have run; `Agent.resume` continues with the answers.
    """

    type: Literal["awaiting_approval"] = "awaiting_approval"
    """Event tag."""
    pending: tuple[ToolCall, ...]
    """The calls waiting for an answer, in the order the model made them."""
    text: str
    """The last answer text of the run, if any."""
    usage: Usage
    """Tokens used by the run's model calls."""
    iterations: int
    """Number of model calls made."""


@dataclass(frozen=True, kw_only=True)
class LLMRequestEvent(BaseEvent):
    """A model call is about to be made: the neutral request, exactly as sent to the client."""

    type: Literal["llm_request"] = "llm_request"
    """Event tag."""
    iteration: int
    """1 for the first model call of the run, then 2, 3, ..."""
    provider: str
    """The client's provider name."""
    model: str
    """The client's model."""
    messages: tuple[Message, ...]
    """The conversation sent."""
    tools: tuple[ToolDefinition, ...]
    """The tools offered."""
    system: str | None
    """The system instructions."""
    settings: ModelSettings
    """The merged generation settings."""
    tool_protocol: ToolProtocol = "native"
    """How the client offers the tools: natively or through the JSON tool protocol. A client
    set to ``auto`` has decided before a request with tools; ``auto`` remains only when it
    could not yet (the call decides) or when no tools are offered."""


@dataclass(frozen=True, kw_only=True)
class LLMResponseEvent(BaseEvent):
    """A model call finished: its complete answer."""

    type: Literal["llm_response"] = "llm_response"
    """Event tag."""
    iteration: int
    """Which model call of the run this answers."""
    text: str
    """The answer's text."""
    tool_calls: tuple[ToolCall, ...]
    """Tool calls the model asked for."""
    stop_reason: StopReason
    """Why the model stopped."""
    thinking: str | None
    """The model's reasoning, if any."""
    usage: Usage
    """Tokens used by this call."""
    latency_ms: float
    """Time from the request to the complete answer, in milliseconds."""
    protocol_error: str | None = None
    """Set when the reply did not follow the client's tool protocol and the client fell back."""
    raw_stop_reason: str | None = None
    """The provider's own finish reason, as sent (e.g. ``length`` or ``MAX_TOKENS``)."""
    cost: Cost = NOT_RECORDED
    """What this call cost, priced from `usage` by the model's profile (or genai-prices);
    unpriced (``amount=None``) with the reason when it cannot be priced."""
    wire: WireRecord | None = None
    """The call's request and response bodies as they crossed the wire, key masked, when the
    client records them (``record_wire=True``); `None` otherwise, and then left out of
    `to_dict`."""

    def to_dict(self) -> dict[str, Any]:
        """Return the standard event dict; ``wire`` only when the bodies were recorded."""
        data = super().to_dict()
        if self.wire is None:
            del data["wire"]
        return data


@dataclass(frozen=True, kw_only=True)
class LLMRetryEvent(BaseEvent):
    """A model call failed before any answer arrived and is tried again after `delay` s."""

    type: Literal["llm_retry"] = "llm_retry"
    """Event tag."""
    iteration: int
    """Which model call of the run is retried."""
    attempt: int
    """Which retry this is: 1 for the first."""
    delay: float
    """Seconds waited before the retry."""
    error: str
    """Why the previous attempt failed (never holds a key)."""
    error_type: str
    """The error's class name, e.g. ``RateLimitError``."""
    status: int | None = None
    """The HTTP status of the failure, when there was one."""


@dataclass(frozen=True, kw_only=True)
class OutputRetryEvent(BaseEvent):
    """An answer was not valid output (``Agent(output_type=...)``) and is sent back.

    The model gets the validation errors and answers again; after the agent's
    ``output_retries`` the run ends with `OutputValidationError` instead.
    """

    type: Literal["output_retry"] = "output_retry"
    """Event tag."""
    iteration: int
    """Which model call gave the invalid answer."""
    attempt: int
    """Which retry this is: 1 for the first (at most the agent's ``output_retries``)."""
    text: str
    """The raw output: the answer's text, or the final-answer tool's arguments as JSON."""
    errors: tuple[str, ...]
    """What was wrong with it, one line each; the model is told the same."""


@dataclass(frozen=True, kw_only=True)
class ContextCompactedEvent(BaseEvent):
    """The agent's context policy left messages out of the next model call, or summarized them.

    Emitted before that call's ``llm_request`` when what it leaves out differs from the
    previous call's (not before every call). The conversation and its history keep every
    message; only the request is shorter (see "Long conversations").
    """

    type: Literal["context_compacted"] = "context_compacted"
    """Event tag."""
    iteration: int
    """The model call the request is for."""
    policy: Literal["keep_turns", "fit_window", "summarize"]
    """Which policy: `KeepTurns`, `FitWindow` or `Summarize`."""
    messages_before: int
    """Messages the request would send without the policy."""
    messages_after: int
    """Messages it sends."""
    tokens_before: int
    """Tokens of the request without the policy: messages, tools and system instructions."""
    tokens_after: int
    """Tokens of the request sent (a summary in the system instructions counted)."""
    window: int | None
    """The tokens a request may have (the policy's ``window`` or the model's profile);
    `None` for `KeepTurns`, which has none."""
    tokenizer: str
    """What counted the tokens: the client's tokenizer (e.g. ``"llama.cpp /tokenize"``), or
    ``"estimate"`` (four characters a token)."""
    dropped: tuple[int, ...]
    """Positions of the messages left out, in the run's conversation
    (`RunResult.all_messages`), oldest first."""
    summary: str | None = None
    """The summary sent in place of the messages it covers, if any."""
    summary_of: int | None = None
    """How many messages of the thread the summary covers (`Message.summary_of`)."""
    new_summary: bool = False
    """Whether the summary was written for this request (it is then a new message of the
    run: `RunResult.new_messages`), rather than one written before."""
    summary_error: str | None = None
    """Why a summary that was due could not be written (the oldest turns were left out
    instead), or `None`."""
    usage: Usage = field(default_factory=Usage)
    """Tokens the summarizer's calls used (they count toward the run's usage and budget)."""
    cost: Cost | None = None
    """What the summarizer's calls cost; `None` when there was no call."""


@dataclass(frozen=True, kw_only=True)
class HandoffEvent(BaseEvent):
    """The model handed the conversation to another agent (a handoff tool call).

    The run goes on with that agent's model, tools and instructions; the conversation
    continues as it is (see "Many agents").
    """

    type: Literal["handoff"] = "handoff"
    """Always ``"handoff"``."""
    from_agent: str
    """The name of the agent that handed the conversation over."""
    to_agent: str
    """The name of the agent that takes it."""
    call_id: str
    """The id of the handoff tool call."""


Event: TypeAlias = (
    TextChunkEvent
    | ThinkingChunkEvent
    | FunctionCallStartEvent
    | ToolProgressEvent
    | FunctionExecutionStartEvent
    | FunctionExecutionCompleteEvent
    | SendingFunctionResponseEvent
    | CompleteEvent
    | AbortedEvent
    | ErrorEvent
    | ContextSelectionEvent
    | ContextToolCompleteEvent
    | BudgetExceededEvent
    | ApprovalRequiredEvent
    | ApprovalAnsweredEvent
    | AwaitingApprovalEvent
    | LLMRequestEvent
    | LLMResponseEvent
    | LLMRetryEvent
    | OutputRetryEvent
    | ContextCompactedEvent
    | HandoffEvent
)
"""Any event of a run; the ``type`` field tells which."""


def _direct_init(cls: type) -> Callable[..., None]:
    """An ``__init__`` for the event class `cls` that stores all its fields in one step.

    It takes the same keyword arguments and defaults as the dataclass ``__init__``, which
    sets each field of a frozen class through ``object.__setattr__``: events are made at
    every step of every run, and this costs about half as much.
    """
    namespace: dict[str, Any] = {"_MISSING": MISSING}
    params, items = [], []
    for f in fields(cls):
        value = f.name
        if f.default is not MISSING:
            namespace[f"_d_{f.name}"] = f.default
            params.append(f"{f.name}=_d_{f.name}")
        elif f.default_factory is not MISSING:
            namespace[f"_f_{f.name}"] = f.default_factory
            params.append(f"{f.name}=_MISSING")
            value = f"_f_{f.name}() if {f.name} is _MISSING else {f.name}"
        else:
            params.append(f.name)
        items.append(f"{f.name!r}: {value}")
    source = (
        f"def __init__(self, *, {', '.join(params)}):\n"
        f"    self.__dict__.update({{{', '.join(items)}}})\n"
    )
    exec(source, namespace)  # as dataclasses makes its own __init__
    init: Callable[..., None] = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__annotations__ = dict(cls.__init__.__annotations__)  # type: ignore[misc]
    return init


for _event_class in get_args(Event):
    _event_class.__init__ = _direct_init(_event_class)


@cache
def _event_adapter() -> TypeAdapter[Any]:
    from pydantic import ConfigDict, Field, TypeAdapter

    return TypeAdapter(
        Annotated[Event, Field(discriminator="type")],
        config=ConfigDict(val_json_bytes="base64"),
    )


def parse_event(data: Mapping[str, Any]) -> Event:
    """Rebuild an event from its `to_dict()` form (for instance after a JSON round trip).

    Args:
        data: A standard event dict.

    Raises:
        UserError: When `data` is not a valid event dict.
    """
    from pydantic import ValidationError

    try:
        event: Event = _event_adapter().validate_json(json.dumps(data, default=repr))
    except ValidationError as exc:
        raise UserError(f"Not a valid event dict: {exc}") from exc
    return event
