"""`RunSpans`: the spans of one run, opened and closed as its events arrive.

The run is one ``invoke_agent`` span; each model call a ``chat {model}`` span and each tool
call (context tools too) an ``execute_tool {name}`` span, both children of the run span.
A span starts when the event that begins its step arrives and ends when the event that ends
it arrives; whatever is still open when the run ends is ended with the run's outcome.
A sub-agent's run (an agent used as a tool; its events have a ``depth`` above 0) is an
``invoke_agent {agent}`` span of its own, a child of the ``execute_tool`` span of the call
that runs it, with its own spans below; a handoff is a ``glassagent.handoff`` span event.
Telemetry never breaks a run: a failure here is logged (``glassagent.otel``), not raised.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any, cast

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from glassagent._core.cost import Cost
from glassagent._core.events import (
    AbortedEvent,
    BudgetExceededEvent,
    ContextCompactedEvent,
    ContextSelectionEvent,
    ContextToolCompleteEvent,
    ErrorEvent,
    FunctionCallStartEvent,
    FunctionExecutionCompleteEvent,
    HandoffEvent,
    LLMRequestEvent,
    LLMResponseEvent,
    LLMRetryEvent,
    OutputRetryEvent,
    ToolProgressEvent,
)
from glassagent._core.messages import StopReason, Usage
from glassagent._otel import attributes as names
from glassagent._otel import content

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, Tracer

    from glassagent._core.events import BaseEvent, Event
    from glassagent._core.result import RunResult, RunStopReason

Redact = Callable[[dict[str, Any]], dict[str, Any]]
"""A function given each standard event dict whose content may be exported; it returns the
dict to export (a changed copy, or the same dict changed in place)."""

Failure = tuple[str, "str | None"]  # error.type, status description

_log = logging.getLogger("glassagent.otel")

STOPS: dict[str, RunStopReason] = {
    "complete": "end_turn",
    "aborted": "aborted",
    "error": "error",
    "budget_exceeded": "budget",
    "awaiting_approval": "awaiting_approval",
}
"""The last event of a run, by type, and the run's `RunResult.stop_reason`."""


@dataclass
class Totals:
    """What a run's result would tell the run span, summed from its events."""

    usage: Usage = field(default_factory=Usage)
    cost: Cost = field(default_factory=lambda: Cost(Decimal(0)))
    iterations: int = 0
    model_stop_reason: StopReason | None = None
    stop_reason: RunStopReason = "error"
    calls: int = 0
    """Model calls added, the sub-agents' too."""

    def add(self, event: LLMResponseEvent, *, own: bool = True) -> None:
        """Add a model call: of the run (`own`), or of a sub-agent's run inside it."""
        self.usage += event.usage
        self.cost = self.cost + event.cost if self.calls else event.cost
        self.calls += 1
        if own:
            self.iterations += 1
            self.model_stop_reason = event.stop_reason

    def end(self, event: Event) -> bool:
        """Whether `event` ends the run; it sets `stop_reason` then."""
        stop = STOPS.get(event.type)
        if stop is None:
            return False
        if event.type == "error" and getattr(event, "error_type", "") == "MaxIterationsExceeded":
            stop = "max_iterations"
        self.stop_reason = stop
        return True


@dataclass(frozen=True)
class Options:
    """What a traced run exports besides the metadata."""

    capture_content: bool
    redact: Redact | None
    agent_name: str | None


class RunSpans:
    """The spans of one run; `observe` each event, then `finish` once."""

    def __init__(
        self,
        tracer: Tracer,
        options: Options,
        run_id: str,
        *,
        parent: tuple[Context, str | None] | None = None,
    ) -> None:
        """Start the run span.

        Args:
            tracer: Where the spans go.
            options: What is exported.
            run_id: The run's id.
            parent: For a sub-agent's run: the context of its call's span, and its agent.
        """
        self._tracer = tracer
        self._options = options
        self.run_id = run_id
        agent = options.agent_name if parent is None else parent[1]
        name = f"{names.INVOKE_AGENT} {agent}" if agent else names.INVOKE_AGENT
        attributes = names.run_attributes(agent, run_id)
        self._run = tracer.start_span(
            name,
            context=None if parent is None else parent[0],
            kind=SpanKind.INTERNAL,
            attributes=attributes,
        )
        self.context: Context = trace.set_span_in_context(self._run)
        """The context whose current span is the run span (the parent of the others)."""
        self._model_known = False
        self._chat: Span | None = None
        self._calls: dict[str, Span] = {}  # by call id (unique among an answer's calls)
        self._callees: dict[str, str] = {}  # call id -> the agent it runs (an agent as a tool)
        self._nested: dict[str, tuple[RunSpans, Totals]] = {}  # sub-agents' runs, any depth
        self._parents: dict[str, str | None] = {}  # a sub-agent's run id -> its parent's
        self._agent: str | None = None  # the agent handed to, after a handoff
        self._context_tools: dict[str, Span] = {}
        self._failure: Failure | None = None
        self._abort_reason: str | None = None
        self._warned = False

    # ---- events ------------------------------------------------------------------------

    def observe(self, event: Event) -> None:
        """Open, annotate or close the spans `event` concerns (a sub-agent's run's too)."""
        try:
            if event.depth and event.run_id != self.run_id:
                self._observe_nested(event)
            else:
                self._observe(event)
        except Exception:
            self._warn(f"a {event.type} event could not be traced")

    def _observe_nested(self, event: Event) -> None:
        """Trace an event of a sub-agent's run: its spans start below its call's span."""
        found = self._nested.get(event.run_id)
        if found is None:
            above = self._nested.get(event.parent_run_id or "")
            owner = self if above is None else above[0]
            call_id = event.parent_call_id or ""
            call = owner._calls.get(call_id)
            context = owner.context if call is None else trace.set_span_in_context(call)
            spans = RunSpans(
                self._tracer,
                self._options,
                event.run_id,
                parent=(context, owner._callees.get(call_id)),
            )
            found = self._nested[event.run_id] = (spans, Totals())
            self._parents[event.run_id] = event.parent_run_id
        spans, totals = found
        spans._observe(event)
        if isinstance(event, LLMResponseEvent):
            totals.add(event)
            parent = self._parents.get(event.run_id)
            while parent is not None and parent in self._nested:  # its parents' totals hold it
                self._nested[parent][1].add(event, own=False)
                parent = self._parents.get(parent)
        if totals.end(event):
            del self._nested[event.run_id]
            spans.finish(cast("RunResult[Any]", totals), None)

    def _observe(self, event: Event) -> None:
        if isinstance(event, LLMRequestEvent):
            self._request(event)
        elif isinstance(event, LLMRetryEvent):
            self._retry(event)
        elif isinstance(event, LLMResponseEvent):
            self._response(event)
        elif isinstance(event, FunctionCallStartEvent):
            self._call_start(event)
        elif isinstance(event, ToolProgressEvent):
            self._progress(event)
        elif isinstance(event, FunctionExecutionCompleteEvent):
            self._call_end(event)
        elif isinstance(event, ContextSelectionEvent):
            self._context_start(event)
        elif isinstance(event, ContextToolCompleteEvent):
            self._context_end(event)
        elif isinstance(event, ErrorEvent):
            data = self._redacted(event) or {}
            message = data.get("error")
            self._failure = (event.error_type, message if isinstance(message, str) else None)
        elif isinstance(event, AbortedEvent):
            self._abort_reason = event.reason
        elif isinstance(event, OutputRetryEvent):
            attributes = {"glassagent.retry.attempt": event.attempt}
            self._run.add_event("glassagent.output_retry", attributes)
        elif isinstance(event, ContextCompactedEvent):
            compacted = {
                "glassagent.context.policy": event.policy,
                "glassagent.context.messages_before": event.messages_before,
                "glassagent.context.messages_after": event.messages_after,
                "glassagent.context.tokens_before": event.tokens_before,
                "glassagent.context.tokens_after": event.tokens_after,
                "glassagent.context.new_summary": event.new_summary,
            }
            self._run.add_event("glassagent.context_compacted", compacted)
        elif isinstance(event, BudgetExceededEvent):
            self._run.set_attribute(names.BUDGET_LIMIT, event.limit)
        elif isinstance(event, HandoffEvent):
            self._agent = event.to_agent
            self._run.add_event(
                names.HANDOFF,
                {
                    names.HANDOFF_FROM: event.from_agent,
                    names.HANDOFF_TO: event.to_agent,
                    names.TOOL_CALL_ID: event.call_id,
                },
            )

    def _request(self, event: LLMRequestEvent) -> None:
        if self._chat is not None:  # a call that never answered: not expected, but closed
            self._end(self._chat, (names.ERROR_TYPE_OTHER, None))
        if not self._model_known:
            self._run.set_attributes(names.model_attributes(event.provider, event.model))
            self._model_known = True
        attributes = names.request_attributes(event)
        if self._agent is not None:  # the agent the run was handed to makes the call
            attributes[names.AGENT_NAME] = self._agent
        self._chat = self._tracer.start_span(
            f"{names.CHAT} {event.model}",
            context=self.context,
            kind=SpanKind.CLIENT,
            attributes=attributes,
        )
        if (data := self._content(event)) is not None:
            self._chat.set_attributes(content.request_content(data))

    def _retry(self, event: LLMRetryEvent) -> None:
        if self._chat is None:
            return
        attributes: dict[str, Any] = {
            "glassagent.retry.attempt": event.attempt,
            "glassagent.retry.delay": event.delay,
            names.ERROR_TYPE: event.error_type,
        }
        if event.status is not None:
            attributes["http.response.status_code"] = event.status
        self._chat.add_event("glassagent.llm_retry", attributes)

    def _response(self, event: LLMResponseEvent) -> None:
        span, self._chat = self._chat, None
        if span is None:
            return
        span.set_attributes(names.response_attributes(event))
        if (data := self._content(event)) is not None:
            span.set_attributes(content.response_content(data))
        span.end()

    def _call_start(self, event: FunctionCallStartEvent) -> None:
        span = self._start_tool(event.function_name, event.call_id)
        ui = event.ui_info
        agent = ui.get("agent") if isinstance(ui, dict) else None
        if isinstance(agent, str) and agent:  # an agent used as a tool
            self._callees[event.call_id] = agent
        if (data := self._content(event)) is not None:
            span.set_attribute(names.TOOL_ARGUMENTS, content.to_json(data.get("args")))
        self._calls[event.call_id] = span

    def _progress(self, event: ToolProgressEvent) -> None:
        span = self._calls.get(event.call_id)
        if span is None:
            return
        attributes: dict[str, Any] = {}
        if (data := self._content(event)) is not None and isinstance(data.get("message"), str):
            attributes[names.PROGRESS_MESSAGE] = data["message"]
        span.add_event("glassagent.tool_progress", attributes)

    def _call_end(self, event: FunctionExecutionCompleteEvent) -> None:
        execution = event.execution
        span = self._calls.pop(execution.call_id, None)
        if span is None:
            return
        data = self._content(event)
        outcome = data.get("execution") if data is not None else None
        result = outcome.get("result") if isinstance(outcome, dict) else None
        failure: Failure | None = None
        if execution.is_error:
            kind = names.UNKNOWN_TOOL if execution.tool_name is None else names.TOOL_ERROR
            failure = (kind, result if isinstance(result, str) else None)
        elif data is not None:
            span.set_attribute(names.TOOL_RESULT, content.as_text(result))
        self._end(span, failure)

    def _context_start(self, event: ContextSelectionEvent) -> None:
        for score in event.scores:
            if score.status == "selected":
                span = self._start_tool(score.tool_name, None)
                span.set_attributes({names.CONTEXT_TOOL: True, names.CONTEXT_SCORE: score.score})
                self._context_tools[score.tool_name] = span

    def _context_end(self, event: ContextToolCompleteEvent) -> None:
        span = self._context_tools.pop(event.tool_name, None)
        if span is None:
            return
        data = self._content(event)
        failure: Failure | None = None
        if event.is_error:
            error = data.get("error") if data is not None else None
            failure = (names.TOOL_ERROR, error if isinstance(error, str) else None)
        elif data is not None:
            span.set_attribute(names.TOOL_RESULT, content.as_text(data.get("output")))
        self._end(span, failure)

    def _start_tool(self, name: str, call_id: str | None) -> Span:
        return self._tracer.start_span(
            f"{names.EXECUTE_TOOL} {name}",
            context=self.context,
            kind=SpanKind.INTERNAL,
            attributes=names.tool_attributes(name, call_id),
        )

    # ---- the end -----------------------------------------------------------------------

    def finish(self, result: RunResult[Any] | None, error: BaseException | None) -> None:
        """End every open span, then the run span, with the run's outcome.

        Args:
            result: The run's result, when it has one.
            error: What stopped the consumer of the events, if anything did.
        """
        failure = self._outcome(result, error)
        for spans, _ in reversed(list(self._nested.values())):  # the deepest first
            spans.finish(None, error)
        self._nested.clear()
        try:
            open_spans = [*self._context_tools.values()]
            open_spans += self._calls.values()
            if self._chat is not None:
                open_spans.append(self._chat)
            for span in open_spans:
                self._end(span, failure)
            if result is not None:
                self._run.set_attributes(names.result_attributes(result))
        except Exception:
            self._warn("the end of the run could not be traced")
        finally:
            self._chat = None
            self._calls.clear()
            self._context_tools.clear()
            self._end(self._run, failure)

    def _outcome(
        self, result: RunResult[Any] | None, error: BaseException | None
    ) -> Failure | None:
        if self._abort_reason is not None or (result and result.stop_reason == "aborted"):
            return (names.ABORTED, self._abort_reason)
        if self._failure is not None:
            return self._failure
        if error is not None:  # e.g. HistoryAppendError, or a cancelled consumer
            return (type(error).__name__, None)
        return None

    @staticmethod
    def _end(span: Span, failure: Failure | None) -> None:
        if failure is not None:
            span.set_attribute(names.ERROR_TYPE, failure[0])
            span.set_status(Status(StatusCode.ERROR, failure[1]))
        span.end()

    # ---- content -----------------------------------------------------------------------

    def _content(self, event: BaseEvent) -> dict[str, Any] | None:
        """The event's dict after ``redact``, when content is exported; else `None`."""
        return self._redacted(event) if self._options.capture_content else None

    def _redacted(self, event: BaseEvent) -> dict[str, Any] | None:
        """The event's dict after ``redact``; `None` when the hook failed (nothing leaks)."""
        data = event.to_dict()
        if self._options.redact is None:
            return data
        try:
            redacted = self._options.redact(data)
        except Exception:
            self._warn(f"the redact hook failed on a {getattr(event, 'type', '?')} event")
            return None
        return redacted if isinstance(redacted, dict) else None

    def _warn(self, what: str) -> None:
        if not self._warned:  # once per run: a broken hook would otherwise flood the log
            self._warned = True
            _log.warning("glassagent.otel: %s; the run goes on", what, exc_info=True)
