"""`compare`: what changed between two evaluation reports, case by case."""

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


@dataclass(frozen=True)
class Comparison:
    """What changed from report `before` to report `after`."""

    before: Report
    """The first report (the baseline)."""
    after: Report
    """The second report."""
    changes: tuple[CaseChange, ...]
    """Every case of either report: the second's order, then the removed ones."""

    def _of(self, kind: ChangeKind) -> tuple[CaseChange, ...]:
        return tuple(change for change in self.changes if change.kind == kind)

    @property
    def improved(self) -> tuple[CaseChange, ...]:
        """Cases that pass more often, or score higher at the same pass rate."""
        return self._of("improved")

    @property
    def regressed(self) -> tuple[CaseChange, ...]:
        """Cases that pass less often, or score lower at the same pass rate."""
        return self._of("regressed")

    @property
    def unchanged(self) -> tuple[CaseChange, ...]:
        """Cases with the same pass rate and mean score."""
        return self._of("unchanged")

    @property
    def added(self) -> tuple[CaseChange, ...]:
        """Cases only in the second report."""
        return self._of("added")

    @property
    def removed(self) -> tuple[CaseChange, ...]:
        """Cases only in the first report."""
        return self._of("removed")

    @property
    def has_regressions(self) -> bool:
        """Whether any case regressed (what CI fails on)."""
        return bool(self.regressed)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of the comparison (with both summaries)."""
        return {
            "before": {"name": self.before.name, "summary": self.before.summary.to_dict()},
            "after": {"name": self.after.name, "summary": self.after.summary.to_dict()},
            "changes": [change.to_dict() for change in self.changes],
        }

    def print(self, *, file: Any = None) -> None:
        """Print the comparison as a table (rich; needs ``pip install "glassagent[cli]"``)."""
        from glassagent._evals.table import print_comparison

        print_comparison(self, file=file)


def _kind(before: CaseReport, after: CaseReport) -> ChangeKind:
    if after.pass_rate != before.pass_rate:
        return "improved" if after.pass_rate > before.pass_rate else "regressed"
    delta = after.mean_score - before.mean_score
    if abs(delta) <= _SCORE_TOLERANCE:
        return "unchanged"
    return "improved" if delta > 0 else "regressed"


def compare(before: Report, after: Report) -> Comparison:
    """Compare two reports case by case (cases are matched by name).

    A case whose pass rate went up improved, down regressed; at the same pass rate its
    mean score decides.
    """
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
    return Comparison(before, after, tuple(changes))
