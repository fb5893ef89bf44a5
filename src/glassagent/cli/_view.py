"""How a session looks: every event as it happens, for people (`HumanView`) or programs.

`HumanView` lays out the steps; a `Writer` puts its text on a stream, in colour (`RichWriter`
in ``_rich``) or plain (`PlainWriter`). `JsonView` prints each event's ``to_dict()`` as one
JSON line instead.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Protocol, TextIO

from glassagent import RunResult
from glassagent.errors import GlassAgentError
from glassagent.events import (
    AbortedEvent,
    BudgetExceededEvent,
    ContextCompactedEvent,
    ErrorEvent,
    Event,
    FunctionCallStartEvent,
    FunctionExecutionCompleteEvent,
    HandoffEvent,
    LLMRequestEvent,
    LLMResponseEvent,
    LLMRetryEvent,
    OutputRetryEvent,
    TextChunkEvent,
    ThinkingChunkEvent,
    ToolExecution,
    ToolProgressEvent,
)
from glassagent.history import HistoryMessage
from glassagent.profiles import Cost

STATUS_AFTER_SECONDS = 2.0
"""A model call quiet for this long gets a status line (elapsed time, text so far)."""
RESULT_LINES = 8
"""Lines of a tool's result shown; the rest is summed up as "(N more lines)"."""
LINE_CHARS = 160
"""Characters of one shown line before it is cut."""
VALUE_CHARS = 60
"""Characters of one tool argument before it is cut."""


class Writer(Protocol):
    """Puts text on a stream, in a style (a rich style name; plain writers ignore it)."""

    def write(self, text: str, style: str | None = None) -> None:
        """Write `text` now (flushed)."""

    def control(self, codes: str) -> None:
        """Write terminal control codes (moving the cursor, clearing a line) as they are."""


class PlainWriter:
    """Text as is: for pipes, files and terminals without rich."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str, style: str | None = None) -> None:
        """Write `text` and flush."""
        self.stream.write(text)
        self.stream.flush()

    def control(self, codes: str) -> None:
        """Write terminal control codes and flush."""
        self.write(codes)


@dataclass(frozen=True)
class Turn:
    """How one turn ended: its result (also when aborted or failed), its error, its time."""

    result: RunResult | None
    error: GlassAgentError | None
    seconds: float


@dataclass(frozen=True)
class Marks:
    """The symbols a view draws with."""

    model: str = "·"
    call: str = "⚙"
    progress: str = "│"
    ok: str = "✓"
    failed: str = "✗"
    rule: str = "──"
    more: str = "…"
    sep: str = "·"
    nested: str = "↳"
    handoff: str = "⇄"


PLAIN_MARKS = Marks("*", "->", "|", "ok", "!!", "--", "...", "-", ">", "<->")
"""ASCII marks, for output that is not a terminal."""


def one_line(text: str, limit: int = LINE_CHARS, more: str = "…") -> str:
    """`text` on one line (whitespace runs become one space), cut to `limit` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - len(more)] + more


def short(text: str, limit: int, more: str = "…") -> str:
    """`text` cut to `limit` characters."""
    return text if len(text) <= limit else text[: limit - len(more)] + more


def format_call(name: str, args: Mapping[str, Any] | str, more: str = "…") -> str:
    """``name(key=value, ...)`` with JSON values, each cut to `VALUE_CHARS`."""
    if isinstance(args, str):
        return f"{name}({short(args, VALUE_CHARS, more)})"
    shown = (
        f"{key}={short(json.dumps(value, ensure_ascii=False), VALUE_CHARS, more)}"
        for key, value in args.items()
    )
    return f"{name}({', '.join(shown)})"


def printable(text: str) -> str:
    """`text` on one line with each control character shown as ``?`` (no terminal codes)."""
    return "".join(c if c.isprintable() else "?" for c in " ".join(text.split()))


def tool_label(function_name: str, tool_name: str | None) -> str:
    """How people see a tool: ``Web検索 (web_search)``, or the function name alone.

    The display name (`Tool.display_name`, ``tool_name`` in events) comes first, the name
    the model called beside it when the two differ; control characters show as ``?``.
    """
    shown = display_name(function_name, tool_name)
    return function_name if shown is None else f"{shown} ({function_name})"


def display_name(function_name: str, tool_name: str | None) -> str | None:
    """The tool's display name as shown (printable, cut), or `None` when it is the name."""
    if not tool_name or tool_name == function_name:
        return None
    return short(printable(tool_name), VALUE_CHARS)


def is_declined(execution: ToolExecution) -> bool:
    """Whether the user declined the call (the workspace marks it in ``ui_info``)."""
    ui = execution.ui_info
    return isinstance(ui, Mapping) and bool(ui.get("declined"))


def money(cost: Cost) -> str | None:
    """A priced cost for people, or `None` when it is not priced.

    Four significant digits, and at least two decimals: ``0.00224 USD``, ``1.50 USD``.
    """
    amount = cost.amount
    if amount is None:
        return None
    if amount:
        amount = round(amount, max(2, 3 - amount.adjusted())).normalize()
    exponent = amount.as_tuple().exponent
    if isinstance(exponent, int) and exponent > -2:
        amount = amount.quantize(Decimal("0.01"))
    return f"{amount:f} {cost.currency}"


def error_line(error: BaseException) -> str:
    """An error as one clear line: its type and its message."""
    return one_line(f"{type(error).__name__}: {error}", 600)


class HumanView:
    """Each step as it happens: thinking dimmed, calls, progress, results, the streamed answer."""

    def __init__(self, out: Writer, marks: Marks, *, live: bool = False) -> None:
        self.out = out
        self.marks = marks
        self.live = live
        """Whether `tick` may draw a status line (a terminal that can redraw a line)."""
        self._column = 0  # 0: at the start of a line
        self._stream: str | None = None  # "text" or "thinking" while one streams
        self._call: tuple[float, int] | None = None  # (start, characters) of a model call
        self._quiet_since = time.monotonic()
        self._status = False  # a status line is on screen
        self._agents: dict[str, str] = {}  # a sub-agent's run id -> its agent
        self._callees: dict[tuple[str, str], str] = {}  # (run id, call id) -> the agent it runs

    # ---- building blocks ---------------------------------------------------------------

    def _put(self, text: str, style: str | None = None) -> None:
        if text:
            if self._status:
                self.out.control("\r\x1b[K")  # the status line gives way
                self._status = False
            self.out.write(text, style)
            self._quiet_since = time.monotonic()
            last = text.rfind("\n")
            self._column = len(text) - last - 1 if last >= 0 else self._column + len(text)

    def status_line(self, now: float) -> str | None:
        """The line to show while a model call works and nothing came for 2 s, else `None`.

        It tells how long the call has worked and how much of its answer streamed so far.
        """
        if self._call is None or now - self._quiet_since < STATUS_AFTER_SECONDS:
            return None
        started, chars = self._call
        so_far = f", {chars:,} characters so far" if chars else ", nothing streamed yet"
        return f"  {self.marks.more} the model is working: {now - started:.0f} s{so_far}"

    def tick(self, now: float | None = None) -> None:
        """Redraw the status line (on a live terminal) while a model call works quietly."""
        line = self.status_line(time.monotonic() if now is None else now)
        if not self.live or line is None:
            return
        self.out.control("\n" if self._column else "\r\x1b[K")
        self._column = 0
        self.out.write(line, "dim")
        self._status = True

    def end_line(self) -> None:
        """End the line in progress and clear the status line: the screen is at a line start.

        Called before another stream (standard error) writes a line to the same screen.
        """
        if self._status:
            self.out.control("\r\x1b[K")
            self._status = False
        if self._column:
            self._put("\n")

    def _line(self, text: str, style: str | None = None) -> None:
        """`text` on a line of its own."""
        self._stream = None
        if self._column:
            self._put("\n")
        self._put(text + "\n", style)

    def _streamed(self, kind: str, text: str, style: str | None) -> None:
        if self._stream != kind:
            if self._column:
                self._put("\n")
            self._stream = kind
        self._put(text, style)

    def note(self, text: str, style: str | None = "dim") -> None:
        """A line of the session's own (a banner, a command's answer)."""
        self._line(text, style)

    # ---- events ------------------------------------------------------------------------

    def show(self, event: Event) -> None:
        """Show one event of a run."""
        marks = self.marks
        self._follow(event)
        if isinstance(event, FunctionCallStartEvent):
            ui = event.ui_info
            agent = ui.get("agent") if isinstance(ui, Mapping) else None
            callee = agent if isinstance(agent, str) and agent else event.function_name
            self._callees[(event.run_id, event.call_id)] = printable(callee)
        if isinstance(event, HandoffEvent):
            self._handoff(event)
        elif event.depth:
            self._nested(event)
            return
        match event:
            case TextChunkEvent(text=text):
                self._streamed("text", text, None)
            case ThinkingChunkEvent(text=text):
                self._streamed("thinking", text, "dim italic")
            case LLMRequestEvent(iteration=iteration, provider=provider, model=model):
                self._line(f"{marks.model} model call {iteration} ({provider}/{model})", "dim")
            case LLMRetryEvent():
                self._line(
                    f"{marks.model} retry {event.attempt} in {event.delay:.1f} s: "
                    f"{one_line(event.error, more=marks.more)}",
                    "yellow",
                )
            case LLMResponseEvent():
                self._response(event)
            case OutputRetryEvent():
                errors = one_line("; ".join(event.errors), more=marks.more)
                self._line(f"{marks.model} not valid output, asked again: {errors}", "yellow")
            case ContextCompactedEvent():
                self._compacted(event)
            case FunctionCallStartEvent():
                self._call_line(event)
            case ToolProgressEvent(message=message):
                text = short(message.rstrip("\n"), LINE_CHARS, marks.more)
                self._line(f"  {marks.progress} {text}", "dim")
            case FunctionExecutionCompleteEvent(execution=execution):
                self._result(execution)
            case BudgetExceededEvent(reason=reason):
                self._line(f"(the budget stopped the turn: {reason}; what came so far is kept)",
                           "yellow")  # fmt: skip
            case _:  # the run's start of tools, sending results, and its end: nothing to add
                pass

    def _handoff(self, event: HandoffEvent) -> None:
        """``⇄ handed over from triage to billing``, indented as deep as its run."""
        to, marks = printable(event.to_agent), self.marks
        self._line(
            f"{'  ' * event.depth}{marks.handoff} handed over from "
            f"{printable(event.from_agent)} to {to}",
            "magenta",
        )
        if event.depth:
            self._agents[event.run_id] = to

    def _nested(self, event: Event) -> None:
        """An event of a sub-agent's run: one indented line, ``↳ researcher: ...``.

        Its text is not streamed (it would run into its parent's answer): each answer shows
        as one line when its model call ends.
        """
        marks = self.marks
        agent = self._agents.get(event.run_id)
        if agent is None:
            key = (event.parent_run_id or "", event.parent_call_id or "")
            agent = self._agents[event.run_id] = self._callees.get(key, "sub-agent")
        head = f"{'  ' * event.depth}{marks.nested} {agent}: "
        match event:
            case LLMRequestEvent(iteration=iteration, model=model):
                self._line(f"{head}{marks.model} model call {iteration} ({model})", "dim")
            case LLMResponseEvent(text=text) if text.strip():
                self._line(head + one_line(printable(text), more=marks.more))
            case LLMRetryEvent() | OutputRetryEvent():
                what = "retry" if isinstance(event, LLMRetryEvent) else "not valid output"
                self._line(f"{head}{marks.model} {what}, asked again", "yellow")
            case FunctionCallStartEvent(function_name=name, args=args):
                self._line(f"{head}{marks.call} {format_call(name, args, marks.more)}", "cyan")
            case ToolProgressEvent(message=message):
                text = short(printable(message), LINE_CHARS, marks.more)
                self._line(f"{'  ' * event.depth}  {marks.progress} {text}", "dim")
            case FunctionExecutionCompleteEvent(execution=run):
                ok, style = (marks.failed, "red") if run.is_error else (marks.ok, "green")
                self._line(f"{head}{ok} {run.function_name} ({run.duration_ms:.0f} ms)", style)
            case ErrorEvent(error=error):
                self._line(f"{head}{marks.failed} {one_line(error, more=marks.more)}", "red")
            case AbortedEvent(reason=reason) | BudgetExceededEvent(reason=reason):
                self._line(f"{head}stopped: {one_line(reason, more=marks.more)}", "yellow")
            case _:  # its start of tools, chunks, sending results, its end: nothing to add
                pass

    def _compacted(self, event: ContextCompactedEvent) -> None:
        """``context compacted: sent 6 of 40 messages (3900 -> 900 tokens, summary written)``."""
        summary = ""
        if event.summary is not None:
            summary = ", summary written" if event.new_summary else ", summary reused"
        self._line(
            f"{self.marks.model} context compacted: sent {event.messages_after} of "
            f"{event.messages_before} messages ({event.tokens_before} -> {event.tokens_after} "
            f"tokens{summary})",
            "dim",
        )

    def _follow(self, event: Event) -> None:
        """Keep track of the model call in progress, for `status_line`."""
        if isinstance(event, LLMRequestEvent):
            self._call = (time.monotonic(), 0)
        elif isinstance(event, TextChunkEvent | ThinkingChunkEvent) and self._call is not None:
            self._call = (self._call[0], self._call[1] + len(event.text))
        elif self._call is not None and not isinstance(event, LLMRetryEvent):
            self._call = None

    def _response(self, event: LLMResponseEvent) -> None:
        self._stream = None
        if self._column:
            self._put("\n")
        if event.protocol_error:
            self._line(f"  (the model broke the tool protocol: {event.protocol_error})", "yellow")
        if event.stop_reason in ("max_tokens", "content_filter"):
            self._line(f"  (the answer was cut short: {event.stop_reason})", "yellow")

    def _call_line(self, event: FunctionCallStartEvent) -> None:
        """``⚙ name(args)``, or ``⚙ Display (name): args`` when the tool has a display name."""
        marks, name, args = self.marks, event.function_name, event.args
        label = tool_label(name, event.tool_name)
        if label == name:
            unknown = "" if event.tool_name else " (no such tool)"
            self._line(f"{marks.call} {format_call(name, args, marks.more)}{unknown}", "cyan")
            return
        shown = format_call("", args, marks.more)[1:-1]
        self._line(f"{marks.call} {label}{': ' + shown if shown else ''}", "cyan")

    def _result(self, execution: ToolExecution) -> None:
        marks = self.marks
        name, ms = execution.function_name, execution.duration_ms
        label = tool_label(name, execution.tool_name)
        if is_declined(execution):
            self._line(f"  {marks.failed} {label} declined", "yellow")
            return
        if execution.is_error:
            self._line(f"  {marks.failed} {label} failed ({ms:.0f} ms)", "red")
        else:
            shown = display_name(name, execution.tool_name)  # "Web検索 (web_search, 3 ms)"
            where = f"{name} (" if shown is None else f"{shown} ({name}, "
            self._line(f"  {marks.ok} {where}{ms:.0f} ms)", "green")
        result = execution.result
        text = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)
        lines = text.splitlines()
        for line in lines[:RESULT_LINES]:
            self._line(f"    {short(line, LINE_CHARS, marks.more)}", "dim")
        if len(lines) > RESULT_LINES:
            self._line(f"    {marks.more} ({len(lines) - RESULT_LINES} more lines)", "dim")

    def turn_done(self, turn: Turn) -> None:
        """The turn's end: how it ended, its tokens and its time."""
        result = turn.result
        if result is not None and result.stop_reason == "aborted":
            self._line("(aborted; what came so far is kept)", "yellow")
        if result is None:
            return
        usage, marks = result.usage, self.marks
        calls = "call" if result.iterations == 1 else "calls"
        nested = sum(1 for e in result.events if e.depth and isinstance(e, LLMResponseEvent))
        if nested:
            calls += f" (+{nested} by sub-agents)"
        cost = money(result.cost) if result.iterations else None
        priced = f" {marks.sep} {cost}" if cost else ""
        self._line(
            f"{marks.rule} {usage.input_tokens:,} in / {usage.output_tokens:,} out tokens "
            f"{marks.sep} {result.iterations} model {calls}{priced} {marks.sep} "
            f"{turn.seconds:.1f} s",
            "dim",
        )

    def thread(self, messages: Sequence[HistoryMessage]) -> None:
        """Show a conversation thread (``/history``)."""
        if not messages:
            self.note("(the conversation is empty)")
        for message in messages:
            status = "" if message.status == "completed" else f" [{message.status}]"
            role = f"{message.name} result" if message.role == "tool" else message.role
            role = "protocol" if message.protocol else role
            text = message.content or ""
            if message.tool_calls:
                calls = "; ".join(
                    format_call(c.function_name, c.arguments, self.marks.more)
                    for c in message.tool_calls
                )
                text = f"{text} {self.marks.call} {calls}" if text else f"{self.marks.call} {calls}"
            self._line(f"{role}{status}: {one_line(text, 300, self.marks.more)}")


def message_dict(message: HistoryMessage) -> dict[str, Any]:
    """The parts of a stored message a reader of ``/history`` needs, as JSON values."""
    return {
        "id": message.id,
        "role": message.role,
        "content": message.content,
        "status": message.status,
        "protocol": message.protocol,
        "thinking": message.thinking,
        "tool_calls": [
            {"id": c.tool_call_id, "name": c.function_name, "arguments": _plain(c.arguments)}
            for c in message.tool_calls
        ],
        "tool_call_id": message.tool_call_id,
        "name": message.name,
        "is_error": message.is_error,
    }


def _plain(value: Mapping[str, Any] | str) -> dict[str, Any] | str:
    return value if isinstance(value, str) else dict(value)


class JsonView:
    """Each event as one JSON line (its ``to_dict()``) on a stream, nothing else there."""

    def __init__(self, stream: TextIO, notes: HumanView) -> None:
        self.stream = stream
        self.notes = notes

    def _print(self, data: Any) -> None:
        self.stream.write(json.dumps(data, ensure_ascii=False, default=repr) + "\n")
        self.stream.flush()

    def show(self, event: Event) -> None:
        """Print the event's dict."""
        self._print(event.to_dict())

    def note(self, text: str, style: str | None = "dim") -> None:
        """Session notes go to the notes view (standard error), never among the events."""
        self.notes.note(text, style)

    def turn_done(self, turn: Turn) -> None:
        """Nothing to add: the run's last event tells how it ended."""

    def thread(self, messages: Sequence[HistoryMessage]) -> None:
        """The thread as one JSON line: ``{"type": "history", "messages": [...]}``."""
        self._print({"type": "history", "messages": [message_dict(m) for m in messages]})


View = HumanView | JsonView
"""A session's view."""
