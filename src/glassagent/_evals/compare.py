"""`compare`: what changed between two evaluation reports, case by case."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from glassagent._evals import diff
from glassagent._evals.report import Report, write_page

__all__ = ["CaseChange", "ChangeKind", "Comparison", "compare"]

# Defined in `diff`, which the comparison's HTML page imports too (this module imports it).
ChangeKind = diff.ChangeKind
"""How a case changed between two reports."""
CaseChange = diff.CaseChange
"""One case in two reports: its pass rate and mean score before and after."""


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
        """Whether any case regressed or was removed (what CI fails on).

        A removed case counts: what it checked is no longer checked.
        """
        return bool(self.regressed or self.removed)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of the comparison (with both summaries)."""
        return {
            "before": {"name": self.before.name, "summary": self.before.summary.to_dict()},
            "after": {"name": self.after.name, "summary": self.after.summary.to_dict()},
            "changes": [change.to_dict() for change in self.changes],
        }

    def save_html(self, path: str | os.PathLike[str]) -> None:
        """Write the comparison as a self-contained HTML page (its folder is created)."""
        from glassagent._evals.compare_html import render_compare_html

        page = render_compare_html(self.before.to_dict(), self.after.to_dict())
        write_page(Path(path), page)

    def print(self, *, file: Any = None) -> None:
        """Print the comparison as a table (rich; needs ``pip install "glassagent[cli]"``)."""
        from glassagent._evals.table import print_comparison

        print_comparison(self, file=file)


def compare(before: Report, after: Report) -> Comparison:
    """Compare two reports case by case (cases are matched by name).

    A case whose pass rate went up improved, down regressed; at the same pass rate its
    mean score decides.
    """
    return Comparison(before, after, diff.case_changes(before, after))
