"""How each case changed between two evaluation reports (what `compare` reports)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from glassagent._evals.report import CaseReport, Report

ChangeKind = Literal["improved", "regressed", "unchanged", "added", "removed"]
"""How a case changed between two reports."""

_SCORE_TOLERANCE = 1e-9


@dataclass(frozen=True)
class CaseChange:
    """One case in two reports: its pass rate and mean score before and after."""

    name: str
    """The case's name."""
    kind: ChangeKind
    """``improved`` or ``regressed`` (by pass rate, then by mean score), ``unchanged``,
    ``added`` (only in the second report) or ``removed`` (only in the first)."""
    before_pass_rate: float | None
    """Its pass rate in the first report (`None`: not there)."""
    after_pass_rate: float | None
    """Its pass rate in the second report (`None`: not there)."""
    before_score: float | None
    """Its mean score in the first report."""
    after_score: float | None
    """Its mean score in the second report."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of the change."""
        return {
            "name": self.name,
            "kind": self.kind,
            "before_pass_rate": self.before_pass_rate,
            "after_pass_rate": self.after_pass_rate,
            "before_score": self.before_score,
            "after_score": self.after_score,
        }


def _kind(before: CaseReport, after: CaseReport) -> ChangeKind:
    if after.pass_rate != before.pass_rate:
        return "improved" if after.pass_rate > before.pass_rate else "regressed"
    delta = after.mean_score - before.mean_score
    if abs(delta) <= _SCORE_TOLERANCE:
        return "unchanged"
    return "improved" if delta > 0 else "regressed"


def case_changes(before: Report, after: Report) -> tuple[CaseChange, ...]:
    """Every case of either report, matched by name: the second's order, then the removed."""
    old = {case.name: case for case in before.cases}
    new = {case.name: case for case in after.cases}
    changes = []
    for case in after.cases:
        was = old.get(case.name)
        if was is None:
            changes.append(
                CaseChange(case.name, "added", None, case.pass_rate, None, case.mean_score)
            )
            continue
        changes.append(
            CaseChange(
                case.name,
                _kind(was, case),
                was.pass_rate,
                case.pass_rate,
                was.mean_score,
                case.mean_score,
            )
        )
    for case in before.cases:
        if case.name not in new:
            changes.append(
                CaseChange(case.name, "removed", case.pass_rate, None, case.mean_score, None)
            )
    return tuple(changes)
