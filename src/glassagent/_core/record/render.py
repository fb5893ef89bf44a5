"""A run's timeline as HTML (notebooks, the docs) and as Markdown.

Everything shown comes from the run's event dicts after the `redact` hook, and every piece of
it is escaped: model output, tool arguments and results are untrusted.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from glassagent._core.record.redact import Redact, redacted
from glassagent._core.record.timeline import (
    ModelStep,
    Timeline,
    ToolStep,
    cost_text,
    read,
    text,
)

if TYPE_CHECKING:
    from glassagent._core.events import Event

LIMIT = 4000
"""Characters of a tool's arguments or result shown; the rest is summarised."""

CSS = """
.ga-run{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;font-size:13px;
line-height:1.45;border:1px solid rgba(127,127,127,.35);border-radius:6px;padding:8px 12px;
margin:4px 0;text-align:left}
.ga-run .ga-head{font-weight:600;margin-bottom:4px}
.ga-run .ga-dim{opacity:.7;font-weight:normal}
.ga-run ol.ga-steps{margin:4px 0;padding-left:22px}
.ga-run li.ga-step{margin:6px 0}
.ga-run .ga-text{white-space:pre-wrap;word-break:break-word;margin:2px 0}
.ga-run pre{margin:2px 0;padding:4px 6px;background:rgba(127,127,127,.1);border-radius:4px;
white-space:pre-wrap;word-break:break-word;font-size:12px;line-height:1.35}
.ga-run ul.ga-tools{list-style:none;margin:4px 0;padding-left:0}
.ga-run li.ga-tool{border-left:3px solid rgba(46,160,67,.8);padding:2px 0 2px 8px;margin:4px 0}
.ga-run li.ga-tool.ga-error{border-left-color:#d73a49;background:rgba(215,58,73,.08)}
.ga-run .ga-badge{display:inline-block;padding:0 6px;border-radius:8px;font-size:11px;
background:rgba(127,127,127,.2)}
.ga-run .ga-ok{background:rgba(46,160,67,.2)}
.ga-run .ga-bad{background:rgba(215,58,73,.2)}
.ga-run .ga-note{font-size:12px;opacity:.8}
.ga-run .ga-end{margin-top:6px;padding:4px 8px;border-radius:4px}
.ga-run details>summary{cursor:pointer;opacity:.8}
.ga-run .ga-sub{border-left:2px dashed rgba(127,127,127,.5);margin:4px 0 4px 4px;
padding:2px 0 2px 10px}
.ga-run .ga-handoff{margin:4px 0;font-weight:600}
""".strip()

_BAD = frozenset({"error", "aborted", "budget_exceeded"})


def redacted_dicts(events: Iterable[Event], redact: Redact | None) -> list[dict[str, Any]]:
    """The dicts of `events` as the `redact` hook lets them out."""
    return [redacted(event, redact) for event in events]


def esc(value: Any) -> str:
    """Escaped display text."""
    return html.escape(text(value), quote=True)


def _ms(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value / 1000:.2f} s" if value >= 1000 else f"{value:.0f} ms"


def _json(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, indent=None, default=repr)
    except ValueError:
        return repr(value)


def _cut(value: str) -> str:
    if len(value) <= LIMIT:
        return value
    return value[:LIMIT] + f"\n… ({len(value) - LIMIT} more characters)"


def _summary(timeline: Timeline, status: str) -> list[str]:
    """The facts of the run's head line, as plain text."""
    facts: list[str] = []
    if timeline.steps:
        first = timeline.steps[0]
        facts.append("/".join(p for p in (first.provider, first.model) if p))
    calls, nested = len(timeline.steps), len(timeline.all_steps()) - len(timeline.steps)
    facts.append(f"{calls} model call{'' if calls == 1 else 's'}")
    if nested:
        facts.append(f"{nested} by sub-agents")
    tokens_in, tokens_out = timeline.tokens
    if tokens_in or tokens_out:
        facts.append(f"{tokens_in} in / {tokens_out} out tokens")
    if timeline.cost is not None:
        facts.append(timeline.cost)
    if timeline.seconds is not None and status != "not started":
        facts.append(f"{timeline.seconds:.2f} s")
    return [f for f in facts if f]


def _step_facts(step: ModelStep) -> list[str]:
    if not step.done:
        return ["streaming…"]
    facts = [_ms(step.latency_ms)]
    usage = step.usage
    tokens_in, tokens_out = usage.get("input_tokens"), usage.get("output_tokens")
    if tokens_in or tokens_out:
        facts.append(f"{text(tokens_in) or 0} in / {text(tokens_out) or 0} out tokens")
    facts.append(cost_text(step.cost) or "")
    if step.stop_reason not in ("", "end_turn", "tool_use"):
        facts.append(f"stopped: {step.stop_reason}")
    return [f for f in facts if f]


def html_timeline(events: Iterable[Mapping[str, Any]], *, status: str | None = None) -> str:
    """The timeline of event dicts as one self-contained HTML fragment (with its style).

    Args:
        events: The run's event dicts, already redacted.
        status: Overrides the status read from the events (e.g. ``not started``).
    """
    timeline = read(events)
    status = status or timeline.status
    badge = "ga-bad" if status in _BAD else "ga-ok" if status == "complete" else ""
    run_id = f" <code>{esc(timeline.run_id[:12])}</code>" if timeline.run_id else ""
    facts = "".join(f' <span class="ga-dim">· {esc(f)}</span>' for f in _summary(timeline, status))
    parts = [
        f'<div class="ga-run"><style>{CSS}</style>',
        f'<div class="ga-head">Run{run_id} <span class="ga-badge {badge}">{esc(status)}</span>'
        f"{facts}</div>",
    ]
    parts.append(_html_body(timeline))
    parts.append("</div>")
    return "".join(parts)


def _html_body(timeline: Timeline) -> str:
    """The run's context notes, model calls and end (a sub-agent's run's too)."""
    parts = [f'<div class="ga-note">{esc(line)}</div>' for line in timeline.context]
    if timeline.steps:
        parts.append('<ol class="ga-steps">')
        last = _answer_step(timeline)
        parts += [_html_step(step, show_text=step is not last) for step in timeline.steps]
        parts.append("</ol>")
    parts.append(_html_end(timeline))
    return "".join(parts)


def _html_sub(run: Timeline) -> str:
    """A sub-agent's run inside the call that ran it: marked, indented, with its own steps."""
    status = run.status
    badge = "ga-bad" if status in _BAD else "ga-ok" if status == "complete" else ""
    calls = len(run.steps)
    return (
        f'<div class="ga-sub" data-depth="{run.depth}"><div class="ga-head">↳ {esc(run.agent)} '
        f'<span class="ga-dim">sub-agent run <code>{esc(run.run_id[:12])}</code> · '
        f"{calls} model call{'' if calls == 1 else 's'}</span> "
        f'<span class="ga-badge {badge}">{esc(status)}</span></div>{_html_body(run)}</div>'
    )


def _handoff_text(step: ModelStep) -> str:
    assert step.handoff is not None
    before, after = step.handoff
    return f"⇄ handed over from {before or 'the agent'} to {after}"


def _answer_step(timeline: Timeline) -> ModelStep | None:
    """The model call whose text is the final answer (shown once, at the end)."""
    end, steps = timeline.end, timeline.steps
    if end is None or end.get("type") != "complete" or not steps:
        return None
    return steps[-1] if steps[-1].text == text(end.get("text")) else None


def _html_step(step: ModelStep, *, show_text: bool = True) -> str:
    facts = "".join(f' <span class="ga-dim">· {esc(f)}</span>' for f in _step_facts(step))
    parts = [f'<li class="ga-step"><div><b>Model call {step.iteration}</b>{facts}</div>']
    parts += [f'<div class="ga-note">{esc(note)}</div>' for note in step.notes]
    if step.thinking:
        parts.append(
            f'<details class="ga-thinking"><summary>Thinking ({len(step.thinking)} '
            f'characters)</summary><div class="ga-text">{esc(step.thinking)}</div></details>'
        )
    if step.text and show_text:
        parts.append(f'<div class="ga-text">{esc(step.text)}</div>')
    if step.wire is not None:
        parts.append(
            '<details class="ga-wire"><summary>Wire: request and response bodies</summary>'
            f"<pre>{esc(_cut(_json(step.wire.get('request'))))}</pre>"
            f"<pre>{esc(_cut(_json(step.wire.get('response'))))}</pre></details>"
        )
    if step.tools:
        parts.append('<ul class="ga-tools">')
        parts += [_html_tool(tool) for tool in step.tools]
        parts.append("</ul>")
    if step.handoff is not None:
        parts.append(f'<div class="ga-handoff">{esc(_handoff_text(step))}</div>')
    parts.append("</li>")
    return "".join(parts)


def _html_tool(tool: ToolStep) -> str:
    state = _tool_state(tool)
    error = " ga-error" if tool.is_error or not tool.known else ""
    parts = [
        f'<li class="ga-tool{error}"><div><code>{esc(tool.name)}</code> '
        f'<span class="ga-dim">{esc(state)}</span></div>',
        f"<pre>{esc(_cut(_json(tool.args)))}</pre>",
    ]
    parts += [f'<div class="ga-note">{esc(line)}</div>' for line in tool.progress]
    parts += [_html_sub(run) for run in tool.runs]
    if tool.result is not None:
        label = "Error" if tool.is_error else "Result"
        parts.append(
            f"<details{' open' if tool.is_error or len(tool.result) < 300 else ''}>"
            f"<summary>{label} ({len(tool.result)} characters)</summary>"
            f"<pre>{esc(_cut(tool.result))}</pre></details>"
        )
    parts.append("</li>")
    return "".join(parts)


def _tool_state(tool: ToolStep) -> str:
    if not tool.known:
        state = "no such tool"
    elif tool.result is None:
        state = "running…"
    else:
        state = "failed" if tool.is_error else "ok"
    duration = _ms(tool.duration_ms)
    return f"{state} · {duration}" if duration and tool.result is not None else state


def _ending(timeline: Timeline, end: Mapping[str, Any]) -> tuple[str, str]:
    """The label and the text of the run's last event."""
    kind = end.get("type")
    if kind == "complete":
        stop = text(end.get("stop_reason"))
        cut = f" (cut short: {stop})" if stop not in ("", "end_turn") else ""
        return f"Answer{cut}", text(end.get("text"))
    if kind == "error":
        return f"Error: {text(end.get('error_type'))}", text(end.get("error"))
    if kind == "aborted":
        return f"Aborted: {text(end.get('reason'))}", text(end.get("text"))
    return f"Budget exceeded ({text(end.get('limit'))})", text(end.get("reason"))


def _html_end(timeline: Timeline) -> str:
    end = timeline.end
    if end is None:
        return ""
    label, body = _ending(timeline, end)
    tone = "ga-ok" if end.get("type") == "complete" else "ga-bad"
    content = f'<div class="ga-text">{esc(body)}</div>' if body else ""
    return f'<div class="ga-end {tone}"><b>{esc(label)}</b>{content}</div>'


_BACKTICKS = re.compile(r"`+")


def _code(value: Any) -> str:
    """An inline code span that holds any text (no Markdown or HTML inside is read)."""
    value = " ".join(text(value).split()) or " "
    ticks = "`" * (max((len(m) for m in _BACKTICKS.findall(value)), default=0) + 1)
    pad = " " if value.startswith("`") or value.endswith("`") else ""
    return f"{ticks}{pad}{value}{pad}{ticks}"


def _fence(value: str, indent: str = "") -> list[str]:
    """A fenced block that holds any text."""
    ticks = "`" * max(3, max((len(m) for m in _BACKTICKS.findall(value)), default=0) + 1)
    body = [f"{indent}{line}" for line in value.split("\n")]
    return [f"{indent}{ticks}text", *body, f"{indent}{ticks}"]


def markdown_timeline(events: Iterable[Mapping[str, Any]], *, status: str | None = None) -> str:
    """The timeline of event dicts as Markdown; untrusted text goes in code spans and blocks.

    Args:
        events: The run's event dicts, already redacted.
        status: Overrides the status read from the events.
    """
    timeline = read(events)
    status = status or timeline.status
    head = " · ".join([f"**Run** {_code(timeline.run_id[:12])}", f"**{status}**"])
    lines = [" · ".join([head, *(_code(f) for f in _summary(timeline, status))]), ""]
    lines += _markdown_body(timeline)
    return "\n".join(lines).strip() + "\n"


def _markdown_body(timeline: Timeline) -> list[str]:
    """The run's lines; a sub-agent's run is a block quote inside its call."""
    lines = [f"- {_code(line)}" for line in timeline.context]
    last = _answer_step(timeline)
    for step in timeline.steps:
        facts = "".join(f" · {_code(f)}" for f in _step_facts(step))
        lines += ["", f"**Model call {step.iteration}**{facts}", ""]
        lines += [f"- {_code(note)}" for note in step.notes]
        if step.thinking:
            lines += ["Thinking:", *_fence(step.thinking), ""]
        if step.text and step is not last:
            lines += [*_fence(step.text), ""]
        for tool in step.tools:
            lines.append(f"- {_code(tool.name)} {_code(_tool_state(tool))}")
            lines += _fence(_cut(_json(tool.args)), "  ")
            for run in tool.runs:
                head = f"**↳ {_code(run.agent)}** sub-agent run {_code(run.run_id[:12])}"
                quoted = ["", f"{head} · **{run.status}**", *_markdown_body(run)]
                lines += ["", *(f"> {line}".rstrip() for line in quoted), ""]
            if tool.result is not None:
                lines += _fence(_cut(tool.result), "  ")
        if step.handoff is not None:
            lines += ["", f"**{_code(_handoff_text(step))}**"]
    if timeline.end is not None:
        label, body = _ending(timeline, timeline.end)
        lines += ["", f"**End** {_code(label)}", *(_fence(body) if body else [])]
    return lines
