"""An evaluation report as one self-contained HTML page: summary, charts, cases, attempts.

Everything shown comes from the report's dict (its JSON form), and every string of it is
escaped: case names, outputs and reasons are untrusted. The page needs no network: its style,
its script and its charts (SVG) are inline, and its Content-Security-Policy lets only its own
script run, so the page works from ``file://`` and injected markup stays inert.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import math
import re
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any
from urllib.parse import quote

from glassagent._evals.page import CSS, SCRIPT

OUTPUT_LIMIT = 20_000
"""Characters of an attempt's output shown; the rest is summarised."""

_SCRIPT_HASH = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
    f"script-src 'sha256-{_SCRIPT_HASH}'"
)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_STATUS_TEXT = {"pass": "passed", "fail": "failed", "partial": "partly passed"}


def render_html(report: Mapping[str, Any]) -> str:
    """The report as one HTML page with inline style, script and SVG charts.

    Args:
        report: A report in its JSON form (``Report.to_dict()``, or a saved report's JSON).

    Returns:
        The page. It loads nothing from the network and works when opened from a file.
        An attempt's recorded events are linked by their ``events`` path, taken as relative
        to the page (`Report.save_html` writes them so).
    """
    name = _str(report.get("name")) or _str(report.get("dataset")) or "Evaluation"
    cases = [c for c in _list(report.get("cases")) if isinstance(c, Mapping)]
    body = "".join(
        [
            _header(report, name),
            _cards(_map(report.get("summary")), _map(report.get("config"))),
            _charts(cases, _map(report.get("summary"))),
            _cases_section(cases, _str(_map(report.get("summary")).get("currency"))),
        ]
    )
    return _page(f"{name}: evaluation report", body)


def _page(title: str, body: str) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<link rel="icon" href="data:,"><title>{_esc(title)}</title><style>{CSS}</style>'
        f"</head><body>{body}<script>{SCRIPT}</script></body></html>\n"
    )


# ---- the head of the page ---------------------------------------------------------------------


def _header(report: Mapping[str, Any], name: str) -> str:
    config = _map(report.get("config"))
    model = " / ".join(_str(config.get(k)) for k in ("provider", "model") if config.get(k))
    facts = [
        f"dataset {_str(report.get('dataset'))}" if report.get("dataset") else "",
        model,
        _str(report.get("started_at")),
        f"took {_seconds(_num(report.get('duration_s')))}" if report.get("duration_s") else "",
    ]
    settings = [
        f"{key} {_str(config.get(key))}"
        for key in ("concurrency", "repeat", "timeout_s")
        if config.get(key) is not None
    ]
    if _list(config.get("evaluators")):
        settings.append("evaluators " + ", ".join(_str(e) for e in _list(config["evaluators"])))
    line = " · ".join(_esc(f) for f in facts if f)
    extra = f'<div class="dim">{_esc(" · ".join(settings))}</div>' if settings else ""
    return f'<header><h1>{_esc(name)}</h1><div class="facts">{line}</div>{extra}</header>'


def _cards(summary: Mapping[str, Any], config: Mapping[str, Any]) -> str:
    latency = _map(summary.get("latency_ms"))
    passed, attempts = _int(summary.get("passed")), _int(summary.get("attempts"))
    tokens_in, tokens_out = _int(summary.get("input_tokens")), _int(summary.get("output_tokens"))
    cost = _cost(summary.get("cost"), _str(summary.get("currency")))
    cards = [
        ("Pass rate", _pct(_num(summary.get("pass_rate"))), f"{passed} of {attempts} attempts"),
        (
            "Mean score",
            _fixed(_num(summary.get("mean_score"))),
            f"{_int(summary.get('cases'))} cases",
        ),
        ("Tokens", f"{tokens_in + tokens_out:,}", f"{tokens_in:,} in · {tokens_out:,} out"),
        ("Cost", cost, "no price known" if cost == "—" else "all attempts"),
        (
            "Latency p50 / p95",
            f"{_ms(_num(latency.get('p50')))} / {_ms(_num(latency.get('p95')))}",
            f"max {_ms(_num(latency.get('max')))}",
        ),
        ("Model calls", f"{_int(summary.get('model_calls')):,}", "all attempts"),
        ("Tool errors", f"{_int(summary.get('tool_errors')):,}", "all attempts"),
        ("Model", _str(config.get("model")) or "—", _str(config.get("provider")) or "—"),
    ]
    items = "".join(
        f'<div class="card" data-card="{_esc(label)}"><div class="label">{_esc(label)}</div>'
        f'<div class="value">{_esc(value)}</div><div class="dim">{_esc(note)}</div></div>'
        for label, value, note in cards
    )
    return f'<section class="cards">{items}</section>'


# ---- the charts -------------------------------------------------------------------------------

_W, _H, _LEFT, _TOP, _BOTTOM = 480.0, 220.0, 56.0, 14.0, 30.0


def _charts(cases: Sequence[Mapping[str, Any]], summary: Mapping[str, Any]) -> str:
    scores = [(_num(c.get("mean_score")), c) for c in cases]
    costs = [(_case_cost(c), c) for c in cases]
    latencies = [
        value
        for case in cases
        for attempt in _attempts(case)
        if (value := _num(attempt.get("latency_ms"))) is not None
    ]
    figures = [
        _figure("Score per case", "chart-score", _bars(scores, top=1.0, label=_fixed)),
        _figure(
            f"Cost per case ({_str(summary.get('currency')) or 'USD'})",
            "chart-cost",
            _cost_bars(costs),
        ),
        _figure(
            "Latency per attempt",
            "chart-latency",
            _histogram(latencies, _map(summary.get("latency_ms"))),
        ),
    ]
    return f'<section class="charts">{"".join(figures)}</section>'


def _figure(title: str, ident: str, svg: str) -> str:
    return f'<figure id="{ident}"><figcaption>{_esc(title)}</figcaption>{svg}</figure>'


def _svg(label: str, inner: str) -> str:
    return (
        f'<svg viewBox="0 0 {_W:g} {_H:g}" role="img" aria-label="{_esc(label)}" '
        f'preserveAspectRatio="xMidYMid meet">{inner}</svg>'
    )


def _axis(top: float, label: Any) -> str:
    """Horizontal grid lines at 0, half and `top`, labelled on the left."""
    parts = []
    for share in (0.0, 0.5, 1.0):
        y = _H - _BOTTOM - share * (_H - _TOP - _BOTTOM)
        parts.append(
            f'<line class="grid" x1="{_LEFT:g}" x2="{_W:g}" y1="{y:.1f}" y2="{y:.1f}"/>'
            f'<text class="tick" x="{_LEFT - 4:g}" y="{y + 3:.1f}" text-anchor="end">'
            f"{_esc(label(top * share))}</text>"
        )
    return "".join(parts)


def _bars(
    values: Sequence[tuple[float | None, Mapping[str, Any]]], *, top: float, label: Any
) -> str:
    """One bar per case with a value, coloured by the case's status; `top` is the axis' end."""
    width = (_W - _LEFT) / max(len(values), 1)
    parts = [_axis(top, label)]
    for index, (value, case) in enumerate(values):
        if value is None:
            continue
        share = max(0.0, min(value / top if top else 0.0, 1.0))
        height = max(share * (_H - _TOP - _BOTTOM), 2.0)  # a zero stays visible
        x = _LEFT + index * width + width * 0.1
        tip = f"#{index + 1} {_str(case.get('name'))}: {label(value)}"
        parts.append(
            f'<rect class="bar {_status(case)}" data-case="{index}" x="{x:.2f}" '
            f'y="{_H - _BOTTOM - height:.2f}" width="{width * 0.8:.2f}" height="{height:.2f}">'
            f"<title>{_esc(tip)}</title></rect>"
        )
        if len(values) <= 40:
            parts.append(
                f'<text class="tick" x="{x + width * 0.4:.2f}" y="{_H - _BOTTOM + 14:g}" '
                f'text-anchor="middle">{index + 1}</text>'
            )
    return _svg("bars, one per case", "".join(parts))


def _cost_bars(values: Sequence[tuple[Decimal | None, Mapping[str, Any]]]) -> str:
    known = [v for v, _ in values if v is not None]
    if not known:
        return _svg("no cost known", _empty("No cost known: the model has no price."))
    if max(known) == 0:
        return _svg("every cost is 0", _empty("Every case cost 0: the model is free."))
    top = float(max(known))
    floats = [(None if v is None else float(v), case) for v, case in values]
    return _bars(floats, top=top, label=_amount)


def _empty(message: str) -> str:
    return (
        f'<text class="empty" x="{_W / 2:g}" y="{_H / 2:g}" text-anchor="middle">'
        f"{_esc(message)}</text>"
    )


def _histogram(latencies: Sequence[float], summary_latency: Mapping[str, Any]) -> str:
    """How many attempts took how long, in equal bins, with the p50 and p95 marked."""
    if not latencies:
        return _svg("no latency known", _empty("No attempt finished."))
    low, high = min(latencies), max(latencies)
    count = 1 if high <= low else min(20, max(5, math.ceil(math.sqrt(len(latencies)))))
    step = (high - low) / count or 1.0
    bins = [0] * count
    for value in latencies:
        bins[min(int((value - low) / step), count - 1)] += 1
    most, plot = max(bins), _H - _TOP - _BOTTOM
    width = (_W - _LEFT) / count
    parts = [_axis(float(most), lambda v: f"{v:g}")]
    for index, number in enumerate(bins):
        height = number / most * plot
        start = low + index * step
        tip = f"{number} attempt{'' if number == 1 else 's'}: {_ms(start)} to {_ms(start + step)}"
        parts.append(
            f'<rect class="bin" data-count="{number}" x="{_LEFT + index * width + 1:.2f}" '
            f'y="{_H - _BOTTOM - height:.2f}" width="{max(width - 2, 1):.2f}" '
            f'height="{height:.2f}"><title>{_esc(tip)}</title></rect>'
        )
    for edge, anchor in ((low, "start"), (high if high > low else low + step, "end")):
        x = _LEFT if anchor == "start" else _W
        parts.append(
            f'<text class="tick" x="{x:g}" y="{_H - _BOTTOM + 14:g}" text-anchor="{anchor}">'
            f"{_esc(_ms(edge))}</text>"
        )
    parts += _marks(summary_latency, low, step * count)
    return _svg("latency histogram", "".join(parts))


def _marks(latency: Mapping[str, Any], low: float, span: float) -> list[str]:
    """Dashed lines at the summary's p50 and p95 latency."""
    parts = []
    for key in ("p50", "p95"):
        value = _num(latency.get(key))
        if value is None or not low <= value <= low + span:
            continue
        x = _LEFT + (value - low) / span * (_W - _LEFT)
        parts.append(
            f'<line class="mark" data-mark="{key}" x1="{x:.2f}" x2="{x:.2f}" y1="{_TOP:g}" '
            f'y2="{_H - _BOTTOM:g}"/><text class="marklabel" x="{x + 3:.2f}" y="{_TOP + 10:g}">'
            f"{key}</text>"
        )
    return parts


# ---- the table of cases -----------------------------------------------------------------------

_COLUMNS = (
    ("index", "#", "num"),
    ("name", "Case", "text"),
    ("status", "Status", "text"),
    ("pass_rate", "Pass rate", "num"),
    ("score", "Mean score", "num"),
    ("tokens", "Tokens", "num"),
    ("cost", "Cost", "num"),
    ("latency", "Latency", "num"),
    ("model_calls", "Model calls", "num"),
    ("tool_errors", "Tool errors", "num"),
)


def _cases_section(cases: Sequence[Mapping[str, Any]], currency: str) -> str:
    tags = sorted({_str(t) for c in cases for t in _list(c.get("tags"))})
    options = "".join(f'<option value="{_esc(t)}">{_esc(t)}</option>' for t in tags)
    statuses = [("", "any status"), ("pass", "passed"), ("fail", "failed")]
    statuses += [("partial", "partly passed"), ("error", "with an error")]
    status_options = "".join(f'<option value="{v}">{_esc(t)}</option>' for v, t in statuses)
    heads = "".join(
        f'<th data-key="{key}" data-type="{kind}"><button type="button">{_esc(title)}'
        '<span class="arrow"></span></button></th>'
        for key, title, kind in _COLUMNS
    )
    rows = "".join(_case(index, case, currency) for index, case in enumerate(cases))
    return (
        '<section class="cases"><div class="controls">'
        '<label>Find <input id="find" type="search" placeholder="case name"></label>'
        f'<label>Tag <select id="tag"><option value="">any tag</option>{options}</select></label>'
        f'<label>Status <select id="status">{status_options}</select></label>'
        f'<span id="shown" class="dim">{len(cases)} of {len(cases)} cases</span>'
        '<button type="button" id="expand">Expand all</button>'
        '<button type="button" id="collapse">Collapse all</button></div>'
        f'<table id="cases" data-total="{len(cases)}"><thead><tr>{heads}</tr></thead>'
        f"{rows}</table></section>"
    )


def _case(index: int, case: Mapping[str, Any], currency: str) -> str:
    attempts = _attempts(case)
    status = _status(case)
    name = _str(case.get("name"))
    tags = [_str(t) for t in _list(case.get("tags"))]
    cost = _case_cost(case)
    latencies = [v for a in attempts if (v := _num(a.get("latency_ms"))) is not None]
    latency = sum(latencies) / len(latencies) if latencies else None
    tokens_in = sum(_int(a.get("input_tokens")) for a in attempts)
    tokens_out = sum(_int(a.get("output_tokens")) for a in attempts)
    errored = any(a.get("error") for a in attempts)
    stdev = _num(case.get("score_stdev"))
    score_text = _fixed(_num(case.get("mean_score")))
    if stdev and len(attempts) > 1:
        score_text += f" ± {stdev:.2f}"
    chips = "".join(f'<span class="tag">{_esc(t)}</span>' for t in tags)
    passed = sum(1 for a in attempts if a.get("passed") is True)
    cells = [
        _cell("index", index + 1, str(index + 1)),
        _cell(
            "name",
            name,
            f'<button type="button" class="toggle" aria-expanded="false" title="attempts">▸'
            f'</button> <span class="name">{_esc(name)}</span> {chips}',
            raw=True,
        ),
        _cell(
            "status",
            status,
            f'<span class="badge {status}">{_esc(_STATUS_TEXT[status])}</span>'
            + (' <span class="badge error">error</span>' if errored else ""),
            raw=True,
        ),
        _cell(
            "pass_rate",
            _num(case.get("pass_rate")),
            f"{_pct(_num(case.get('pass_rate')))} ({passed}/{len(attempts)})",
        ),
        _cell("score", _num(case.get("mean_score")), score_text),
        _cell("tokens", tokens_in + tokens_out, f"{tokens_in:,} / {tokens_out:,}"),
        _cell("cost", None if cost is None else float(cost), _cost(cost, currency)),
        _cell("latency", latency, _ms(latency)),
        _cell("model_calls", sum(_int(a.get("model_calls")) for a in attempts), None),
        _cell("tool_errors", sum(_int(a.get("tool_errors")) for a in attempts), None),
    ]
    detail = _detail(case, attempts, currency)
    return (
        f'<tbody id="case-{index}" data-index="{index}" data-name="{_esc(name)}" '
        f'data-status="{status}" data-error="{int(errored)}" '
        f'data-tags="{_esc(json.dumps(tags, ensure_ascii=False))}">'
        f'<tr class="case-row {status}">{"".join(cells)}</tr>'
        f'<tr class="detail" hidden><td colspan="{len(_COLUMNS)}">{detail}</td></tr></tbody>'
    )


def _cell(key: str, value: Any, shown: str | None, *, raw: bool = False) -> str:
    """A table cell: `value` sorts it, `shown` is its content (escaped unless `raw`)."""
    sort = "" if value is None else _str(value)
    if shown is None:
        shown = f"{value:,}" if isinstance(value, int) else _str(value)
    content = shown if raw else _esc(shown)
    return f'<td data-key="{key}" data-v="{_esc(sort)}">{content}</td>'


def _detail(case: Mapping[str, Any], attempts: Sequence[Mapping[str, Any]], currency: str) -> str:
    pass_at = _map(case.get("pass_at_k"))
    facts = [f"pass@{_str(k)} {_fixed(_num(v))}" for k, v in pass_at.items()]
    head = f'<div class="dim">{_esc(" · ".join(facts))}</div>' if facts else ""
    if not attempts:
        return head + '<div class="dim">No attempts.</div>'
    return head + "".join(_attempt(a, currency) for a in attempts)


def _attempt(attempt: Mapping[str, Any], currency: str) -> str:
    passed = attempt.get("passed") is True
    facts = [
        f"score {_fixed(_num(attempt.get('score')))}",
        f"stop {_str(attempt.get('stop_reason'))}" if attempt.get("stop_reason") else "",
        f"{_int(attempt.get('input_tokens')):,} in / {_int(attempt.get('output_tokens')):,} out "
        "tokens",
        _cost(attempt.get("cost"), currency),
        f"judging {_cost(attempt.get('evaluator_cost'), currency)}"
        if _decimal(attempt.get("evaluator_cost"))
        else "",
        _ms(_num(attempt.get("latency_ms"))),
        f"{_int(attempt.get('model_calls'))} model calls",
        f"{_int(attempt.get('tool_calls'))} tool calls",
        f"{_int(attempt.get('tool_errors'))} tool errors",
    ]
    head = (
        f'<div class="attempt-head"><b>Attempt {_int(attempt.get("repeat")) + 1}</b> '
        f'<span class="badge {"pass" if passed else "fail"}">{"passed" if passed else "failed"}'
        f'</span> <span class="dim">{_esc(" · ".join(f for f in facts if f))}</span>'
        f"{_events_link(attempt.get('events'))}</div>"
    )
    parts = [f'<div class="attempt {"pass" if passed else "fail"}">', head]
    if attempt.get("error"):
        parts.append(f'<pre class="error">{_esc(_cut(_str(attempt.get("error"))))}</pre>')
    if attempt.get("record_error"):
        why = _cut(_str(attempt.get("record_error")))
        parts.append(f'<div class="dim record-error">events not recorded: {_esc(why)}</div>')
    parts.append(
        f'<div class="label">Output</div><pre class="output">{_esc(_output(attempt))}</pre>'
    )
    parts.append(_scores(_list(attempt.get("scores"))))
    parts.append("</div>")
    return "".join(parts)


def _scores(scores: Sequence[Any]) -> str:
    rows = "".join(
        f'<tr class="{"pass" if s.get("passed") is True else "fail"}">'
        f"<td>{_esc(_str(s.get('evaluator')))}</td><td>{_esc(_fixed(_num(s.get('score'))))}</td>"
        f"<td>{'passed' if s.get('passed') is True else 'failed'}</td>"
        f'<td class="reason">{_esc(_str(s.get("reason")))}</td></tr>'
        for s in scores
        if isinstance(s, Mapping)
    )
    if not rows:
        return '<div class="dim">No scores.</div>'
    return (
        '<table class="scores"><thead><tr><th>Evaluator</th><th>Score</th><th>Result</th>'
        f"<th>Reason</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def _events_link(path: Any) -> str:
    """A link to the attempt's recorded events: a relative path only, never a URL."""
    if not isinstance(path, str) or not path:
        return ""
    path = path.replace("\\", "/")
    if _SCHEME.match(path) or path.startswith("//"):
        return f' <span class="events">events: <code>{_esc(path)}</code></span>'
    href = quote(path, safe="/")
    return f' <a class="events" href="{_esc(href)}">events: <code>{_esc(path)}</code></a>'


# ---- values -----------------------------------------------------------------------------------


def _status(case: Mapping[str, Any]) -> str:
    rate = _num(case.get("pass_rate")) or 0.0
    return "pass" if rate >= 1 else "fail" if rate <= 0 else "partial"


def _attempts(case: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [a for a in _list(case.get("attempts")) if isinstance(a, Mapping)]


def _case_cost(case: Mapping[str, Any]) -> Decimal | None:
    """The sum of the attempts' costs; `None` when one is unknown (as in the summary)."""
    costs = [_decimal(a.get("cost")) for a in _attempts(case)]
    if not costs or None in costs:
        return None
    return sum((c for c in costs if c is not None), Decimal(0))


def _output(attempt: Mapping[str, Any]) -> str:
    output = attempt.get("output")
    if output is None:
        return ""
    if not isinstance(output, str):
        output = json.dumps(output, ensure_ascii=False, indent=2, default=str)
    return _cut(output)


def _cut(value: str) -> str:
    if len(value) <= OUTPUT_LIMIT:
        return value
    return value[:OUTPUT_LIMIT] + f"\n… ({len(value) - OUTPUT_LIMIT} more characters)"


def _esc(value: Any) -> str:
    return html.escape(_str(value), quote=True)


def _str(value: Any) -> str:
    return "" if value is None else value if isinstance(value, str) else str(value)


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else []


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, str, Decimal)):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _int(value: Any) -> int:
    number = _num(value)
    return int(number) if number is not None else 0


def _decimal(value: Any) -> Decimal | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        number = Decimal(str(value))
    except InvalidOperation:
        return None
    return number if number.is_finite() else None


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.1f}".removesuffix(".0") + "%"


def _fixed(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def _ms(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value / 1000:.2f} s" if value >= 1000 else f"{value:.0f} ms"


def _seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f} s"


def _cost(value: Any, currency: str) -> str:
    """A cost as ``0.0012 USD``; ``—`` when unknown."""
    amount = _decimal(value)
    return "—" if amount is None else f"{amount.normalize():f} {currency or 'USD'}"


def _amount(value: float) -> str:
    """An amount for a chart's axis: at most 6 decimals, no trailing zeros."""
    rounded = Decimal(str(value)).quantize(Decimal("0.000001"))
    return f"{rounded.normalize():f}"
