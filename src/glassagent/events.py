"""The one closed set of events a run emits; the event stream is the whole truth of a run.

Every event is a frozen dataclass with a ``type`` tag, a ``run_id`` and a gap-free ``seq``.
`BaseEvent.to_dict` gives the standard JSON-serialisable dict; `parse_event` reads it back.

A run with one tool round emits, in order:

```text
(context_selection -> context_tool_complete*)    only for an agent with context tools
llm_request -> llm_retry* -> thinking_chunk* -> text_chunk* -> llm_response
  -> function_call_start (one per call) -> approval_required (per call needing it)
  -> function_execution_start
  -> approval_answered* / tool_progress* / function_execution_complete (one per call)
  -> sending_function_response
llm_request -> ... -> llm_response -> complete
```

With ``Agent(output_type=...)``, an answer that is not valid output is followed by
``output_retry`` and another ``llm_request``. With a context policy (``Agent(context_policy=...)``),
a model call whose request leaves out or summarizes other messages than the previous call's
is preceded by ``context_compacted``. A handoff tool call is followed by ``handoff``
(the run goes on with the other agent). A sub-agent's run (an agent used as a tool) streams its
own events inside the parent's, between the call's ``function_execution_start`` and
``function_execution_complete``, each with its own ``run_id`` and ``seq`` and with
``parent_run_id``, ``parent_call_id`` and ``depth`` set.

and ends with exactly one of ``complete``, ``aborted``, ``error``, ``budget_exceeded`` or
(a run with ``defer_approval=True``) ``awaiting_approval``.

`save_events` writes a run's events as JSON Lines (``result.save_events(path)`` and
``run.save_events(path)`` for a live run) and `load_events` reads them back; `redacted` is how
recorders, views and exporters let an event out: through the agent's `Redact` hook.
"""

from glassagent._core.events import (
    AbortedEvent,
    ApprovalAnsweredEvent,
    ApprovalRequiredEvent,
    AwaitingApprovalEvent,
    BaseEvent,
    BudgetExceededEvent,
    CompleteEvent,
    ContextCompactedEvent,
    ContextScore,
    ContextSelectionEvent,
    ContextToolCompleteEvent,
    ErrorEvent,
    Event,
    FunctionCallStartEvent,
    FunctionExecutionCompleteEvent,
    FunctionExecutionStartEvent,
    HandoffEvent,
    LLMRequestEvent,
    LLMResponseEvent,
    LLMRetryEvent,
    OutputRetryEvent,
    SendingFunctionResponseEvent,
    TextChunkEvent,
    ThinkingChunkEvent,
    ToolExecution,
    ToolProgressEvent,
    parse_event,
)
from glassagent._core.record.jsonl import load_events, save_events
from glassagent._core.record.redact import Redact, Redactor, redacted
from glassagent._public import publish

__all__ = [
    "AbortedEvent",
    "ApprovalAnsweredEvent",
    "ApprovalRequiredEvent",
    "AwaitingApprovalEvent",
    "BaseEvent",
    "BudgetExceededEvent",
    "CompleteEvent",
    "ContextCompactedEvent",
    "ContextScore",
    "ContextSelectionEvent",
    "ContextToolCompleteEvent",
    "ErrorEvent",
    "Event",
    "FunctionCallStartEvent",
    "FunctionExecutionCompleteEvent",
    "FunctionExecutionStartEvent",
    "HandoffEvent",
    "LLMRequestEvent",
    "LLMResponseEvent",
    "LLMRetryEvent",
    "OutputRetryEvent",
    "Redact",
    "Redactor",
    "SendingFunctionResponseEvent",
    "TextChunkEvent",
    "ThinkingChunkEvent",
    "ToolExecution",
    "ToolProgressEvent",
    "load_events",
    "parse_event",
    "redacted",
    "save_events",
]

publish(__name__, globals(), __all__)
