"""`RunSpans`: the spans of one run, opened and closed as its events arrive.

The run is one ``invoke_agent`` span; each model call a ``chat {model}`` span and each tool
call (context tools too) an ``execute_tool {name}`` span, both children of the run span.
A span starts when the event that begins its step arrives and ends when the event that ends
it arrives; whatever is still open when the run ends is ended with the run's outcome.
Telemetry never breaks a run: a failure here is logged (``glassagent.otel``), not raised.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from glassagent._core.events import (
    AbortedEvent,
    BudgetExceededEvent,
    ContextSelectionEvent,
    ContextToolCompleteEvent,
    ErrorEvent,
    FunctionCallStartEvent,
    FunctionExecutionCompleteEvent,
    LLMRequestEvent,
    LLMResponseEvent,
    LLMRetryEvent,
    OutputRetryEvent,
    ToolProgressEvent,
)
from glassagent._otel import attributes as names
from glassagent._otel import content

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, Tracer

    from glassagent._core.events import BaseEvent, Event
    from glassagent._core.result import RunResult

Redact = Callable[[dict[str, Any]], dict[str, Any]]
"""A function given each standard event dict whose content may be exported; it returns the
dict to export (a changed copy, or the same dict changed in place)."""

Failure = tuple[str, "str | None"]  # error.type, status description

_log = logging.getLogger("glassagent.otel")


@dataclass(frozen=True)
class Options:
    """What a traced run exports besides the metadata."""

    capture_content: bool
    redact: Redact | None
    agent_name: str | None


class RunSpans:
    """The spans of one run; `observe` each event, then `finish` once."""

    def __init__(self, tracer: Tracer, options: Options, run_id: str) -> None:
        self._tracer = tracer
        self._options = options
        name = names.INVOKE_AGENT
        if options.agent_name:
            name = f"{name} {options.agent_name}"
        attributes = names.run_attributes(options.agent_name, run_id)
        self._run = tracer.start_span(name, kind=SpanKind.INTERNAL, attributes=attributes)
        self.context: Context = trace.set_span_in_context(self._run)
        """The context whose current span is the run span (the parent of the others)."""
        self._model_known = False
        self._chat: Span | None = None
        self._calls: dict[str, Span] = {}  # by call id (unique among an answer's calls)
        self._context_tools: dict[str, Span] = {}
        self._failure: Failure | None = None
        self._abort_reason: str | None = None
        self._warned = False

    # ---- events ------------------------------------------------------------------------

    def observe(self, event: Event) -> None:
        """Open, annotate or close the spans `event` concerns."""
        try:
            self._observe(event)
        except Exception:
            self._warn(f"a {event.type} event could not be traced")

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
        elif isinstance(event, BudgetExceededEvent):
            self._run.set_attribute(names.BUDGET_LIMIT, event.limit)

    def _request(self, event: LLMRequestEvent) -> None:
        if self._chat is not None:  # a call that never answered: not expected, but closed
            self._end(self._chat, (names.ERROR_TYPE_OTHER, None))
        if not self._model_known:
            self._run.set_attributes(names.model_attributes(event.provider, event.model))
            self._model_known = True
        self._chat = self._tracer.start_span(
            f"{names.CHAT} {event.model}",
            context=self.context,
            kind=SpanKind.CLIENT,
            attributes=names.request_attributes(event),
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
