"""The report of an evaluation: attempts, cases and their summary, as objects and as JSON."""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from glassagent._core.errors import UserError
from glassagent._evals.model import Score
from glassagent._evals.stats import pass_at_k, percentile

FORMAT = "glassagent.eval/1"
"""The ``format`` of a report's JSON; `Report.from_dict` refuses others."""


def _decimal(value: Any) -> Decimal | None:
    return None if value is None else Decimal(str(value))


def _text(value: Decimal | None) -> str | None:
    return None if value is None else str(value)


def _total(values: Sequence[Decimal | None]) -> Decimal | None:
    """The sum, or `None` when any is unknown (a partial sum would read as the whole)."""
    if not values or any(value is None for value in values):
        return None
    return sum((value for value in values if value is not None), Decimal(0))


@dataclass(frozen=True)
class Attempt:
    """One run of one case, and its scores."""

    repeat: int
    """Which repeat of the case (0, 1, ...)."""
    passed: bool
    """Whether every evaluator passed it (and the run did not fail)."""
    score: float
    """The mean of its evaluators' scores (0 when the run failed)."""
    scores: tuple[Score, ...] = ()
    """Each evaluator's score."""
    output: Any = None
    """The run's answer: its text, or its typed output as JSON data."""
    error: str | None = None
    """Why the run failed (``RunTimeoutError: ...``), or `None`."""
    stop_reason: str | None = None
    """How the run ended (``end_turn``, ``budget``...), or `None` when it raised."""
    input_tokens: int = 0
    """Input tokens of its model calls."""
    output_tokens: int = 0
    """Output tokens of its model calls."""
    cost: Decimal | None = None
    """What its model calls and its evaluators' cost, or `None` when not known."""
    evaluator_cost: Decimal | None = None
    """The part of `cost` the evaluators' own model calls (a judge's) cost."""
    latency_ms: float = 0.0
    """Wall time of the run, in milliseconds."""
    model_calls: int = 0
    """Model calls the run made (sub-agents' included)."""
    tool_calls: int = 0
    """Tool calls the model asked for."""
    tool_errors: int = 0
    """Tool calls that ended in an error."""
    events: str | None = None
    """The recording of the run's events, relative to the report's folder, or `None`."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of the attempt."""
        return {
            "repeat": self.repeat,
            "passed": self.passed,
            "score": self.score,
            "scores": [score.to_dict() for score in self.scores],
            "output": self.output,
            "error": self.error,
            "stop_reason": self.stop_reason,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost": _text(self.cost),
            "evaluator_cost": _text(self.evaluator_cost),
            "latency_ms": self.latency_ms,
            "model_calls": self.model_calls,
            "tool_calls": self.tool_calls,
            "tool_errors": self.tool_errors,
            "events": self.events,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Attempt:
        """Read an attempt from its JSON form."""
        return cls(
            repeat=int(data["repeat"]),
            passed=bool(data["passed"]),
            score=float(data["score"]),
            scores=tuple(Score.from_dict(score) for score in data.get("scores", ())),
            output=data.get("output"),
            error=data.get("error"),
            stop_reason=data.get("stop_reason"),
            input_tokens=int(data.get("input_tokens", 0)),
            output_tokens=int(data.get("output_tokens", 0)),
            cost=_decimal(data.get("cost")),
            evaluator_cost=_decimal(data.get("evaluator_cost")),
            latency_ms=float(data.get("latency_ms", 0.0)),
            model_calls=int(data.get("model_calls", 0)),
            tool_calls=int(data.get("tool_calls", 0)),
            tool_errors=int(data.get("tool_errors", 0)),
            events=data.get("events"),
        )


@dataclass(frozen=True)
class CaseReport:
    """Every attempt of one case, with their pass rate, mean score and spread."""

    name: str
    """The case's name."""
    tags: tuple[str, ...] = ()
    """The case's tags."""
    attempts: tuple[Attempt, ...] = ()
    """Its attempts, by repeat."""

    @property
    def passed(self) -> int:
        """How many attempts passed."""
        return sum(attempt.passed for attempt in self.attempts)

    @property
    def pass_rate(self) -> float:
        """The share of attempts that passed."""
        return self.passed / len(self.attempts) if self.attempts else 0.0

    @property
    def mean_score(self) -> float:
        """The mean score of the attempts."""
        return statistics.fmean(a.score for a in self.attempts) if self.attempts else 0.0

    @property
    def score_stdev(self) -> float:
        """The spread of the attempts' scores (population standard deviation)."""
        return statistics.pstdev(a.score for a in self.attempts) if self.attempts else 0.0

    @property
    def pass_at_k(self) -> dict[int, float]:
        """pass@k for k = 1 to the number of attempts (see `pass_at_k`)."""
        n = len(self.attempts)
        return {k: pass_at_k(n, self.passed, k) for k in range(1, n + 1)}

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of the case's report."""
        return {
            "name": self.name,
            "tags": list(self.tags),
            "pass_rate": self.pass_rate,
            "mean_score": self.mean_score,
            "score_stdev": self.score_stdev,
            "pass_at_k": {str(k): value for k, value in self.pass_at_k.items()},
            "attempts": [attempt.to_dict() for attempt in self.attempts],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CaseReport:
        """Read a case's report from its JSON form (its rates are computed again)."""
        return cls(
            name=str(data["name"]),
            tags=tuple(data.get("tags", ())),
            attempts=tuple(Attempt.from_dict(a) for a in data.get("attempts", ())),
        )


@dataclass(frozen=True)
class Summary:
    """The whole evaluation's numbers, over every attempt of every case."""

    cases: int
    """How many cases."""
    attempts: int
    """How many attempts (cases times repeats)."""
    passed: int
    """How many attempts passed."""
    pass_rate: float
    """The share of attempts that passed."""
    mean_score: float
    """The mean score of the attempts (what ``--min-score`` is checked against)."""
    input_tokens: int
    """Input tokens of every attempt."""
    output_tokens: int
    """Output tokens of every attempt."""
    cost: Decimal | None
    """What every attempt cost (evaluators included), or `None` when any is not known."""
    currency: str
    """The currency of `cost`."""
    latency_ms: Mapping[str, float]
    """The attempts' wall times in milliseconds: ``p50``, ``p95`` and ``max``."""
    model_calls: int
    """Model calls of every attempt."""
    tool_errors: int
    """Tool calls that ended in an error, in every attempt."""

    @classmethod
    def of(cls, cases: Sequence[CaseReport], currency: str = "USD") -> Summary:
        """Sum and average the attempts of `cases`."""
        attempts = [attempt for case in cases for attempt in case.attempts]
        latencies = [attempt.latency_ms for attempt in attempts]
        passed = sum(attempt.passed for attempt in attempts)
        return cls(
            cases=len(cases),
            attempts=len(attempts),
            passed=passed,
            pass_rate=passed / len(attempts) if attempts else 0.0,
            mean_score=statistics.fmean(a.score for a in attempts) if attempts else 0.0,
            input_tokens=sum(attempt.input_tokens for attempt in attempts),
            output_tokens=sum(attempt.output_tokens for attempt in attempts),
            cost=_total([attempt.cost for attempt in attempts]),
            currency=currency,
            latency_ms={
                "p50": percentile(latencies, 0.5),
                "p95": percentile(latencies, 0.95),
                "max": max(latencies, default=0.0),
            },
            model_calls=sum(attempt.model_calls for attempt in attempts),
            tool_errors=sum(attempt.tool_errors for attempt in attempts),
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of the summary."""
        return {
            "cases": self.cases,
            "attempts": self.attempts,
            "passed": self.passed,
            "pass_rate": self.pass_rate,
            "mean_score": self.mean_score,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost": _text(self.cost),
            "currency": self.currency,
            "latency_ms": dict(self.latency_ms),
            "model_calls": self.model_calls,
            "tool_errors": self.tool_errors,
        }


@dataclass(frozen=True)
class Report:
    """What an evaluation found: every case's attempts, and their summary.

    Save it as JSON (`save`, read back with `load`), as an HTML page (`save_html`), or print
    it as a table (`print`). `compare` two reports to see what changed.
    """

    name: str
    """The evaluation's name (default: the dataset's)."""
    dataset: str
    """The dataset's name."""
    started_at: str
    """When the evaluation started (ISO 8601, UTC)."""
    duration_s: float
    """How long it took, in seconds."""
    config: Mapping[str, Any] = field(default_factory=dict)
    """How it ran: ``provider``, ``model``, ``concurrency``, ``repeat``, ``timeout_s``..."""
    cases: tuple[CaseReport, ...] = ()
    """Each case's report, in the dataset's order."""
    currency: str = "USD"
    """The currency of the costs."""

    @property
    def summary(self) -> Summary:
        """The numbers over every attempt."""
        return Summary.of(self.cases, self.currency)

    def case(self, name: str) -> CaseReport:
        """The report of the case named `name` (`KeyError` when there is none)."""
        for case in self.cases:
            if case.name == name:
                return case
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of the report (format ``glassagent.eval/1``)."""
        return {
            "format": FORMAT,
            "name": self.name,
            "dataset": self.dataset,
            "started_at": self.started_at,
            "duration_s": self.duration_s,
            "config": dict(self.config),
            "summary": self.summary.to_dict(),
            "cases": [case.to_dict() for case in self.cases],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Report:
        """Read a report from its JSON form.

        Raises:
            UserError: When it is not a report of this format.
        """
        if not isinstance(data, Mapping) or data.get("format") != FORMAT:
            found = data.get("format") if isinstance(data, Mapping) else type(data).__name__
            raise UserError(f"Not an evaluation report of format {FORMAT!r} (found {found!r}).")
        try:
            summary = data.get("summary") or {}
            return cls(
                name=str(data["name"]),
                dataset=str(data.get("dataset", "")),
                started_at=str(data.get("started_at", "")),
                duration_s=float(data.get("duration_s", 0.0)),
                config=dict(data.get("config") or {}),
                cases=tuple(CaseReport.from_dict(case) for case in data.get("cases", ())),
                currency=str(summary.get("currency") or "USD"),
            )
        except (KeyError, TypeError, ValueError, ArithmeticError) as exc:
            raise UserError(f"An invalid evaluation report: {type(exc).__name__}: {exc}") from None

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the report as JSON (its folder is created)."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(self.to_dict(), indent=2, ensure_ascii=False, default=str)
        target.write_text(text + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Report:
        """Read a report `save` wrote.

        Raises:
            UserError: When the file cannot be read or is not a report.
        """
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise UserError(f"{path}: cannot read the report ({exc}).") from None
        return cls.from_dict(data)

    def save_html(self, path: str | os.PathLike[str]) -> None:
        """Write the report as a self-contained HTML page with charts (its folder is created)."""
        from glassagent._evals.html import render_html

        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(render_html(self.to_dict()), encoding="utf-8")

    def print(self, *, file: Any = None) -> None:
        """Print the report as a table (rich; needs ``pip install "glassagent[cli]"``)."""
        from glassagent._evals.table import print_report

        print_report(self, file=file)
