"""Two evaluation reports compared, as one self-contained HTML page (see `_evals.html`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from glassagent._evals.diff import CaseChange, case_changes
from glassagent._evals.html import _cell, _cost, _esc, _fixed, _ms, _num, _page, _pct, _str
from glassagent._evals.report import Report

_KINDS = ("regressed", "improved", "added", "removed", "unchanged")
_COLUMNS = (
    ("index", "#", "num"),
    ("name", "Case", "text"),
    ("kind", "Change", "text"),
    ("before_pass_rate", "Pass rate before", "num"),
    ("after_pass_rate", "Pass rate after", "num"),
    ("before_score", "Score before", "num"),
    ("after_score", "Score after", "num"),
    ("delta", "Score change", "num"),
)


def render_compare_html(before: Mapping[str, Any], after: Mapping[str, Any]) -> str:
    """What changed from report `before` to report `after`, as one HTML page.

    Args:
        before: The baseline report, in its JSON form.
        after: The new report, in its JSON form.

    Returns:
        The page: both summaries side by side with their changes, and a row per case with
        its pass rate and mean score in each report (sortable, filtered by kind of change).

    Raises:
        UserError: When either is not a report.
    """
    old, new = Report.from_dict(before), Report.from_dict(after)
    changes = case_changes(old, new)
    title = f"{old.name} → {new.name}"
    body = "".join(
        [
            f'<header><h1>{_esc(title)}</h1><div class="facts">{_esc(_facts(old))} → '
            f"{_esc(_facts(new))}</div></header>",
            _cards(old.summary.to_dict(), new.summary.to_dict(), changes),
            _table(changes),
        ]
    )
    return _page(f"{title}: comparison", body)


def _facts(report: Report) -> str:
    model = " / ".join(
        _str(report.config.get(k)) for k in ("provider", "model") if report.config.get(k)
    )
    return " · ".join(part for part in (report.name, model, report.started_at) if part)


def _cards(old: Mapping[str, Any], new: Mapping[str, Any], changes: tuple[CaseChange, ...]) -> str:
    def latency(summary: Mapping[str, Any], key: str) -> float | None:
        return _num(summary["latency_ms"].get(key))

    rows: list[tuple[str, str, str, str, str]] = [
        _row("Pass rate", _num(old["pass_rate"]), _num(new["pass_rate"]), _pct, higher=True),
        _row("Mean score", _num(old["mean_score"]), _num(new["mean_score"]), _fixed, higher=True),
        _row(
            "Tokens",
            float(old["input_tokens"] + old["output_tokens"]),
            float(new["input_tokens"] + new["output_tokens"]),
            lambda v: "—" if v is None else f"{v:,.0f}",
            higher=False,
        ),
        _row(
            "Cost",
            _num(old["cost"]),
            _num(new["cost"]),
            lambda v: _cost(v, _str(new["currency"])),
            higher=False,
        ),
        _row("Latency p50", latency(old, "p50"), latency(new, "p50"), _ms, higher=False),
        _row("Latency p95", latency(old, "p95"), latency(new, "p95"), _ms, higher=False),
        _row(
            "Model calls",
            float(old["model_calls"]),
            float(new["model_calls"]),
            _count,
            higher=False,
        ),
        _row(
            "Tool errors",
            float(old["tool_errors"]),
            float(new["tool_errors"]),
            _count,
            higher=False,
        ),
    ]
    cards = "".join(
        f'<div class="card" data-card="{_esc(label)}"><div class="label">{_esc(label)}</div>'
        f'<div class="value">{_esc(after)}</div><div class="dim">was {_esc(was)} '
        f'<span class="delta {direction}">{_esc(delta)}</span></div></div>'
        for label, was, after, delta, direction in rows
    )
    counts = "".join(
        f'<div class="card" data-card="{kind}"><div class="label">{kind}</div>'
        f'<div class="value">{sum(1 for c in changes if c.kind == kind)}</div>'
        '<div class="dim">cases</div></div>'
        for kind in _KINDS
    )
    return f'<section class="cards">{counts}{cards}</section>'


def _row(
    label: str, old: float | None, new: float | None, shown: Any, *, higher: bool
) -> tuple[str, str, str, str, str]:
    """A card's label, both values and the change as shown, and whether it is for the better.

    `higher` says whether a rise is better (``up``) or worse (``down``).
    """
    if old is None or new is None or new == old:
        return label, shown(old), shown(new), "", ""
    delta = new - old
    sign = "+" if delta > 0 else "-"
    better = "up" if (delta > 0) == higher else "down"
    return label, shown(old), shown(new), f"{sign}{shown(abs(delta))}", better


def _count(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


def _table(changes: tuple[CaseChange, ...]) -> str:
    options = "".join(f'<option value="{kind}">{kind}</option>' for kind in _KINDS)
    heads = "".join(
        f'<th data-key="{key}" data-type="{kind}"><button type="button">{_esc(title)}'
        '<span class="arrow"></span></button></th>'
        for key, title, kind in _COLUMNS
    )
    rows = "".join(_change(index, change) for index, change in enumerate(changes))
    total = len(changes)
    return (
        '<section class="cases"><div class="controls">'
        '<label>Find <input id="find" type="search" placeholder="case name"></label>'
        f'<label>Change <select id="status"><option value="">any</option>{options}</select>'
        f'</label><span id="shown" class="dim">{total} of {total} cases</span></div>'
        f'<table id="cases" data-total="{total}"><thead><tr>{heads}</tr></thead>{rows}</table>'
        "</section>"
    )


def _change(index: int, change: CaseChange) -> str:
    delta = None
    if change.before_score is not None and change.after_score is not None:
        delta = change.after_score - change.before_score
    cells = [
        _cell("index", index + 1, str(index + 1)),
        _cell("name", change.name, f'<span class="name">{_esc(change.name)}</span>', raw=True),
        _cell(
            "kind",
            change.kind,
            f'<span class="badge {change.kind}">{change.kind}</span>',
            raw=True,
        ),
        _cell("before_pass_rate", change.before_pass_rate, _pct(change.before_pass_rate)),
        _cell("after_pass_rate", change.after_pass_rate, _pct(change.after_pass_rate)),
        _cell("before_score", change.before_score, _fixed(change.before_score)),
        _cell("after_score", change.after_score, _fixed(change.after_score)),
        _cell("delta", delta, "—" if delta is None else f"{delta:+.2f}"),
    ]
    return (
        f'<tbody id="case-{index}" data-index="{index}" data-name="{_esc(change.name)}" '
        f'data-status="{change.kind}" data-error="0" data-tags="[]">'
        f'<tr class="case-row">{"".join(cells)}</tr></tbody>'
    )
