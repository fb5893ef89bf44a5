"""A run's events read into a timeline: its model calls, their tool calls, and its end.

The timeline is read from event dicts (after the `redact` hook), never from the events
themselves, and tolerates any shape a hook leaves: missing fields read as empty. A
sub-agent's run (an event with a ``depth`` above 0) is read into a timeline of its own, kept
by the tool call that ran it (``parent_call_id``), so its text never joins its parent's.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

TERMINAL = ("complete", "aborted", "error", "budget_exceeded")


@dataclass
class ToolStep:
    """One tool call: what the model asked for and what came back."""

    call_id: str
    name: str
    known: bool
    args: Any
    result: str | None = None
    is_error: bool = False
    duration_ms: float | None = None
    progress: list[str] = field(default_factory=list)
    agent: str | None = None
    """The sub-agent the call runs (an agent used as a tool), from its ``ui_info``."""
    runs: list[Timeline] = field(default_factory=list)
    """The sub-agents' runs inside the call."""


@dataclass
class ModelStep:
    """One model call, with the tool calls of its answer."""

    iteration: int
    provider: str
    model: str
    thinking: str = ""
    text: str = ""
    done: bool = False
    usage: Mapping[str, Any] = field(default_factory=dict)
    cost: Mapping[str, Any] = field(default_factory=dict)
    latency_ms: float | None = None
    stop_reason: str = ""
    notes: list[str] = field(default_factory=list)
    tools: list[ToolStep] = field(default_factory=list)
    wire: Mapping[str, Any] | None = None
    """The call's recorded wire bodies (``record_wire=True``), if any."""
    handoff: tuple[str, str] | None = None
    """After its tool calls, the run was handed from one agent to another: (from, to)."""


@dataclass
class Timeline:
    """A run, step by step."""

    run_id: str = ""
    context: list[str] = field(default_factory=list)
    steps: list[ModelStep] = field(default_factory=list)
    end: Mapping[str, Any] | None = None
    started: float | None = None
    last: float | None = None
    agent: str = ""
    """For a sub-agent's run: the agent (or the tool name of the call that runs it)."""
    depth: int = 0
    """0 for a top-level run, 1 for a sub-agent's run, ..."""

    def all_steps(self) -> list[ModelStep]:
        """The model calls of the run and of every sub-agent's run inside it."""
        steps: list[ModelStep] = []
        for step in self.steps:
            steps.append(step)
            for tool in step.tools:
                for run in tool.runs:
                    steps += run.all_steps()
        return steps

    @property
    def status(self) -> str:
        """``complete``, ``aborted``, ``error``, ``budget_exceeded`` or ``running``."""
        return str(self.end.get("type")) if self.end is not None else "running"

    @property
    def tokens(self) -> tuple[int, int]:
        """Input and output tokens of the finished model calls (sub-agents' included)."""
        done = [s.usage for s in self.all_steps()]
        return sum(_int(u.get("input_tokens")) for u in done), sum(
            _int(u.get("output_tokens")) for u in done
        )

    @property
    def cost(self) -> str | None:
        """The summed cost of the model calls (sub-agents' too); `None` when unknown."""
        return total_cost(s.cost for s in self.all_steps() if s.done)

    @property
    def seconds(self) -> float | None:
        """From the first event to the last, when they carry timestamps."""
        if self.started is None or self.last is None:
            return None
        return max(0.0, self.last - self.started)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def text(value: Any) -> str:
    """Any value as display text (`None` as empty)."""
    return "" if value is None else value if isinstance(value, str) else str(value)


def number(value: Any) -> float | None:
    """A JSON number, or `None`."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return float(value) if ok else None


def cost_text(cost: Mapping[str, Any]) -> str | None:
    """One cost dict as ``0.00042 USD``; `None` when unpriced or absent."""
    amount = cost.get("amount") if isinstance(cost, Mapping) else None
    if amount is None:
        return None
    return f"{amount} {text(cost.get('currency')) or 'USD'}"


def total_cost(costs: Iterable[Mapping[str, Any]]) -> str | None:
    """The sum of cost dicts of one currency; `None` when one is unpriced or there are none."""
    amount, currency, seen = Decimal(0), None, False
    for cost in costs:
        if not isinstance(cost, Mapping) or cost.get("amount") is None:
            return None
        try:
            amount += Decimal(str(cost["amount"]))
        except InvalidOperation:
            return None
        if currency not in (None, cost.get("currency")):
            return None
        currency, seen = cost.get("currency"), True
    return f"{amount.normalize():f} {text(currency) or 'USD'}" if seen else None


def depth_of(event: Mapping[str, Any]) -> int:
    """How deep the run of an event dict is nested (0: a top-level run)."""
    depth = event.get("depth")
    return depth if isinstance(depth, int) and not isinstance(depth, bool) and depth > 0 else 0


def read(events: Iterable[Mapping[str, Any]]) -> Timeline:
    """The timeline of a run's event dicts (a running run's too), sub-agents' runs nested."""
    timeline = Timeline()
    top: dict[str, ToolStep] = {}
    runs: dict[str, tuple[Timeline, dict[str, ToolStep]]] = {}
    for event in events:
        stamp = number(event.get("timestamp"))
        if stamp is not None:
            timeline.started = stamp if timeline.started is None else timeline.started
            timeline.last = stamp
        if not depth_of(event):
            timeline.run_id = timeline.run_id or text(event.get("run_id"))
            runs.setdefault(text(event.get("run_id")), (timeline, top))
            _read_one(timeline, top, event)
        elif (found := _nested(timeline, top, runs, event)) is not None:
            _read_one(*found, event)
    return timeline


def _nested(
    timeline: Timeline,
    top: dict[str, ToolStep],
    runs: dict[str, tuple[Timeline, dict[str, ToolStep]]],
    event: Mapping[str, Any],
) -> tuple[Timeline, dict[str, ToolStep]] | None:
    """The timeline of a sub-agent's run, made in its parent's call at its first event.

    `None` when the parent run has no model call to hold it (a hook dropped its events).
    """
    run_id = text(event.get("run_id"))
    if run_id in runs:
        return runs[run_id]
    parent, calls = runs.get(text(event.get("parent_run_id")), (timeline, top))
    call_id = text(event.get("parent_call_id"))
    call = calls.get(call_id)
    if call is None:  # its call's events were dropped: show what is known
        if not parent.steps:
            return None
        call = calls[call_id] = ToolStep(call_id, "", True, None)
        parent.steps[-1].tools.append(call)
    label = call.agent or call.name or "sub-agent"
    child = Timeline(run_id=run_id, agent=label, depth=depth_of(event))
    call.runs.append(child)
    runs[run_id] = (child, {})
    return runs[run_id]


def _read_one(timeline: Timeline, calls: dict[str, ToolStep], event: Mapping[str, Any]) -> None:
    kind = event.get("type")
    step = timeline.steps[-1] if timeline.steps else None
    if kind == "llm_request":
        iteration = int(number(event.get("iteration")) or len(timeline.steps) + 1)
        provider, model = text(event.get("provider")), text(event.get("model"))
        timeline.steps.append(ModelStep(iteration, provider, model))
    elif kind in TERMINAL:
        timeline.end = event
    elif kind == "context_selection":
        timeline.context.append(_selection(event))
    elif kind == "context_compacted":
        timeline.context.append(compaction_line(event))
    elif kind == "context_tool_complete":
        state = "failed: " + text(event.get("error")) if event.get("is_error") else "done"
        timeline.context.append(f"context tool {text(event.get('tool_name'))}: {state}")
    elif step is not None:
        _read_step(step, calls, event)


def compaction_line(event: Mapping[str, Any]) -> str:
    """A ``context_compacted`` event dict in one line: what the request sends of how much."""
    summary = ""
    if event.get("summary") is not None:
        summary = ", summary written" if event.get("new_summary") else ", summary reused"
    return (
        f"context compacted: sent {text(event.get('messages_after'))} of "
        f"{text(event.get('messages_before'))} messages ({text(event.get('tokens_before'))} -> "
        f"{text(event.get('tokens_after'))} tokens{summary})"
    )


def _selection(event: Mapping[str, Any]) -> str:
    scores = event.get("scores")
    scores = scores if isinstance(scores, list) else []
    chosen = [
        f"{text(s.get('tool_name'))} ({text(s.get('score'))})"
        for s in scores
        if isinstance(s, Mapping) and s.get("status") == "selected"
    ]
    return "context tools selected: " + (", ".join(chosen) or "none")


def _read_step(step: ModelStep, calls: dict[str, ToolStep], event: Mapping[str, Any]) -> None:
    kind = event.get("type")
    if kind == "thinking_chunk":
        step.thinking += text(event.get("text"))
    elif kind == "text_chunk":
        step.text += text(event.get("text"))
    elif kind == "llm_retry":
        status = f" (HTTP {event['status']})" if event.get("status") else ""
        step.notes.append(
            f"retry {text(event.get('attempt'))} after {text(event.get('error_type'))}{status}: "
            f"{text(event.get('error'))}"
        )
    elif kind == "output_retry":
        errors = event.get("errors")
        errors = "; ".join(text(e) for e in errors) if isinstance(errors, list) else ""
        step.notes.append(f"not valid output, asked again ({text(event.get('attempt'))}): {errors}")
    elif kind == "llm_response":
        step.done = True
        step.text = text(event.get("text"))
        step.thinking = text(event.get("thinking")) or step.thinking
        usage, cost = event.get("usage"), event.get("cost")
        step.usage = usage if isinstance(usage, Mapping) else {}
        step.cost = cost if isinstance(cost, Mapping) else {}
        step.latency_ms = number(event.get("latency_ms"))
        step.stop_reason = text(event.get("stop_reason"))
        if event.get("protocol_error"):
            step.notes.append(f"tool protocol not followed: {text(event['protocol_error'])}")
        wire = event.get("wire")
        step.wire = wire if isinstance(wire, Mapping) else None
    elif kind == "function_call_start":
        ui_info = event.get("ui_info")
        agent = ui_info.get("agent") if isinstance(ui_info, Mapping) else None
        call = ToolStep(
            call_id=text(event.get("call_id")),
            name=text(event.get("function_name")),
            known=event.get("tool_name") is not None,
            args=event.get("args"),
            agent=agent if isinstance(agent, str) and agent else None,
        )
        calls[call.call_id] = call
        step.tools.append(call)
    elif kind == "handoff":
        step.handoff = (text(event.get("from_agent")), text(event.get("to_agent")))
    elif kind == "tool_progress" and (running := calls.get(text(event.get("call_id")))):
        running.progress.append(text(event.get("message")))
    elif kind == "function_execution_complete":
        _read_execution(step, calls, event.get("execution"))


def _read_execution(step: ModelStep, calls: dict[str, ToolStep], execution: Any) -> None:
    if not isinstance(execution, Mapping):
        return
    call = calls.get(text(execution.get("call_id")))
    if call is None:  # a redact hook dropped its start: show what is known
        name = text(execution.get("function_name"))
        call = ToolStep(text(execution.get("call_id")), name, True, None)
        step.tools.append(call)
    result = execution.get("result")
    if isinstance(result, (Mapping, list)):  # a tool's dict or list: shown as JSON
        call.result = json.dumps(result, ensure_ascii=False, default=str)
    else:
        call.result = text(result)
    call.is_error = bool(execution.get("is_error"))
    call.duration_ms = number(execution.get("duration_ms"))
