"""Reports and comparisons as terminal tables (rich, imported when one is printed)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from glassagent._evals.stats import percentile

# Reports and comparisons are typed Any here: they import this module to print themselves.
Report = Any
CaseReport = Any
Comparison = Any

_REASON = 60
_FILE_WIDTH = 160


def _console(file: Any) -> Any:
    from rich.console import Console

    console = Console(file=file, highlight=False)
    if not console.is_terminal:  # a file or a CI log: wide enough for every column
        console = Console(file=file, highlight=False, width=_FILE_WIDTH)
    return console


def _cost(value: Decimal | None, currency: str) -> str:
    if value is None:
        return "-"
    return f"{value:.4f} {currency}" if value >= Decimal("0.0001") or not value else f"{value:.2e}"


def _why(case: CaseReport) -> Any:
    """The first reason an attempt of the case failed, for the last column."""
    for attempt in case.attempts:
        if attempt.error:
            return attempt.error
        for score in attempt.scores:
            if not score.passed:
                return f"{score.evaluator}: {score.reason}"
    return ""


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _REASON else text[: _REASON - 1] + "…"


def report_table(report: Report) -> Any:
    """The report as a rich `Table`: a row per case, the summary as its footer."""
    from rich.table import Table

    summary = report.summary
    repeats = max((len(case.attempts) for case in report.cases), default=1)
    table = Table(
        title=f"{report.name}: {summary.passed}/{summary.attempts} passed", show_footer=True
    )
    table.add_column("case", footer="all", no_wrap=True)
    table.add_column("pass", justify="right", footer=f"{summary.pass_rate:.0%}")
    table.add_column("score", justify="right", footer=f"{summary.mean_score:.2f}")
    if repeats > 1:
        table.add_column(f"pass@{repeats}", justify="right")
    table.add_column(
        "tokens in/out", justify="right", footer=f"{summary.input_tokens}/{summary.output_tokens}"
    )
    table.add_column("cost", justify="right", footer=_cost(summary.cost, summary.currency))
    latency = summary.latency_ms
    table.add_column(
        "latency p50", justify="right", footer=f"{latency['p50']:.0f} ms (p95 {latency['p95']:.0f})"
    )
    table.add_column("calls", justify="right", footer=str(summary.model_calls))
    table.add_column("tool errors", justify="right", footer=str(summary.tool_errors))
    table.add_column("why not", overflow="fold")
    for case in report.cases:
        attempts = case.attempts
        style = "green" if case.pass_rate == 1 else "red" if case.pass_rate == 0 else "yellow"
        cells = [
            case.name,
            f"[{style}]{case.passed}/{len(attempts)}[/{style}]",
            f"{case.mean_score:.2f}" + (f" ±{case.score_stdev:.2f}" if repeats > 1 else ""),
        ]
        if repeats > 1:
            cells.append(f"{case.pass_at_k.get(repeats, 0.0):.2f}")
        costs = [a.cost for a in attempts]
        total = None if None in costs else sum((c for c in costs if c is not None), Decimal(0))
        cells += [
            f"{sum(a.input_tokens for a in attempts)}/{sum(a.output_tokens for a in attempts)}",
            _cost(total, summary.currency),
            f"{percentile([a.latency_ms for a in attempts], 0.5):.0f} ms",
            str(sum(a.model_calls for a in attempts)),
            str(sum(a.tool_errors for a in attempts)),
            _cut(_why(case)),
        ]
        table.add_row(*cells)
    return table


def print_report(report: Report, *, file: Any = None) -> None:
    """Print the report's table to `file` (default: stdout)."""
    _console(file).print(report_table(report))


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _score(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


_STYLES = {
    "improved": "green",
    "regressed": "bold red",
    "unchanged": "dim",
    "added": "cyan",
    "removed": "magenta",
}


def comparison_table(comparison: Comparison) -> Any:
    """The comparison as a rich `Table`: a row per case that changed, and the totals.

    `comparison_line` says how many changed how.
    """
    from rich.table import Table

    before, after = comparison.before.summary, comparison.after.summary
    table = Table(show_footer=True)
    table.add_column("case", footer="all", no_wrap=True)
    table.add_column("change", footer="")
    table.add_column(
        "pass rate", justify="right", footer=f"{before.pass_rate:.0%} → {after.pass_rate:.0%}"
    )
    table.add_column(
        "score", justify="right", footer=f"{before.mean_score:.2f} → {after.mean_score:.2f}"
    )
    for change in comparison.changes:
        if change.kind == "unchanged":
            continue
        style = _STYLES[change.kind]
        table.add_row(
            change.name,
            f"[{style}]{change.kind}[/{style}]",
            f"{_rate(change.before_pass_rate)} → {_rate(change.after_pass_rate)}",
            f"{_score(change.before_score)} → {_score(change.after_score)}",
        )
    return table


def comparison_line(comparison: Comparison) -> str:
    """One line: the two reports' names and how many cases changed how."""
    counts = ", ".join(
        f"{len(getattr(comparison, kind))} {kind}"
        for kind in ("improved", "regressed", "unchanged", "added", "removed")
    )
    return f"{comparison.before.name} → {comparison.after.name}: {counts}"


def print_comparison(comparison: Comparison, *, file: Any = None) -> None:
    """Print the comparison's line and table to `file` (default: stdout)."""
    console = _console(file)
    console.print(comparison_line(comparison), markup=False)
    console.print(comparison_table(comparison))
