"""The report of an evaluation: attempts, cases and their summary, as objects and as JSON."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from glassagent._core.errors import UserError
from glassagent._evals.model import Score
from glassagent._evals.stats import pass_at_k, percentile

FORMAT = "glassagent.eval/1"
"""The ``format`` of a report's JSON; `Report.from_dict` refuses others."""


class _Invalid(ValueError):
    """A field of a report's JSON that is not what `save` writes: ``where: problem``."""


def _decimal(value: Any, where: str = "cost") -> Decimal | None:
    if value is None:
        return None
    try:
        number = None if isinstance(value, bool) else Decimal(str(value))
    except InvalidOperation:
        number = None
    if number is None or not number.is_finite() or number < 0 or math.isinf(float(number)):
        raise _Invalid(f"{where}: must be a decimal amount (a string), got {value!r}")
    return number


def _number(
    data: Mapping[str, Any], key: str, where: str, default: float = 0.0, top: float = math.inf
) -> float:
    value = data.get(key, default)
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or not 0 <= value <= top
    ):
        span = "from 0 to 1" if top == 1 else "of at least 0"
        raise _Invalid(f"{where}.{key}: must be a number {span}, got {value!r}")
    return float(value)


def _count(data: Mapping[str, Any], key: str, where: str) -> int:
    value = data.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _Invalid(f"{where}.{key}: must be a whole number of at least 0, got {value!r}")
    return value


def _text_or_none(data: Mapping[str, Any], key: str, where: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise _Invalid(f"{where}.{key}: must be a string or null, got {type(value).__name__}")
    return value


def _object(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _Invalid(f"{where}: must be an object, got {type(value).__name__}")
    return value


def _array(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise _Invalid(f"{where}: must be a list, got {type(value).__name__}")
    return value


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
    """The recording of the run's events, or `None`: a path relative to the record folder
    (``config["record_dir"]``); in a saved report's JSON, relative to the report's folder."""
    record_error: str | None = None
    """Why the run's events could not be recorded (the attempt still counts), or `None`."""

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
            "record_error": self.record_error,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "attempt") -> Attempt:
        """Read an attempt from its JSON form (`ValueError` naming the field it refuses)."""
        data = _object(data, where)
        scores = []
        for index, item in enumerate(_array(data.get("scores", []), f"{where}.scores")):
            try:
                scores.append(Score.from_dict(_object(item, f"{where}.scores[{index}]")))
            except (UserError, KeyError, TypeError) as exc:
                raise _Invalid(f"{where}.scores[{index}]: {exc}") from None
        if not isinstance(data.get("passed"), bool):
            raise _Invalid(f"{where}.passed: must be true or false")
        return cls(
            repeat=_count(data, "repeat", where),
            passed=data["passed"],
            score=_number(data, "score", where, top=1),
            scores=tuple(scores),
            output=data.get("output"),
            error=_text_or_none(data, "error", where),
            stop_reason=_text_or_none(data, "stop_reason", where),
            input_tokens=_count(data, "input_tokens", where),
            output_tokens=_count(data, "output_tokens", where),
            cost=_decimal(data.get("cost"), f"{where}.cost"),
            evaluator_cost=_decimal(data.get("evaluator_cost"), f"{where}.evaluator_cost"),
            latency_ms=_number(data, "latency_ms", where),
            model_calls=_count(data, "model_calls", where),
            tool_calls=_count(data, "tool_calls", where),
            tool_errors=_count(data, "tool_errors", where),
            events=_text_or_none(data, "events", where),
            record_error=_text_or_none(data, "record_error", where),
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
    def from_dict(cls, data: Mapping[str, Any], where: str = "case") -> CaseReport:
        """Read a case's report from its JSON form (its rates are computed again)."""
        data = _object(data, where)
        name = data.get("name")
        if not isinstance(name, str):
            raise _Invalid(f"{where}.name: must be a string")
        tags = _array(data.get("tags", []), f"{where}.tags")
        if not all(isinstance(tag, str) for tag in tags):
            raise _Invalid(f"{where}.tags: must be a list of strings")
        attempts = _array(data.get("attempts", []), f"{where}.attempts")
        return cls(
            name=name,
            tags=tuple(tags),
            attempts=tuple(
                Attempt.from_dict(a, f"{where}.attempts[{i}]") for i, a in enumerate(attempts)
            ),
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
            summary = _object(data.get("summary", {}), "summary")
            currency = summary.get("currency") or "USD"
            if not isinstance(currency, str):
                raise _Invalid("summary.currency: must be a string")
            cases = _array(data.get("cases", []), "cases")
            return cls(
                name=str(data["name"]),
                dataset=str(data.get("dataset", "")),
                started_at=str(data.get("started_at", "")),
                duration_s=_number(data, "duration_s", "report"),
                config=dict(_object(data.get("config", {}), "config")),
                cases=tuple(CaseReport.from_dict(c, f"cases[{i}]") for i, c in enumerate(cases)),
                currency=currency,
            )
        except KeyError as exc:
            raise UserError(f"An invalid evaluation report: {exc} is missing.") from None
        except (TypeError, ValueError, ArithmeticError) as exc:
            raise UserError(f"An invalid evaluation report: {exc}.") from None

    def _placed(self, folder: Path) -> Report:
        """The report as saved in `folder`: its events' paths relative to that folder."""
        record = self.config.get("record_dir")
        if not isinstance(record, str) or not record:
            return self
        base = os.path.abspath(record)

        def moved(attempt: Attempt) -> Attempt:
            if not attempt.events:
                return attempt
            return dataclasses.replace(
                attempt, events=_relative(os.path.join(base, attempt.events), folder)
            )

        cases = tuple(
            dataclasses.replace(case, attempts=tuple(moved(a) for a in case.attempts))
            for case in self.cases
        )
        config = {**self.config, "record_dir": _relative(base, folder)}
        return dataclasses.replace(self, config=config, cases=cases)

    def _found_in(self, folder: Path) -> Report:
        """The report read from `folder`: the opposite of `_placed`."""
        record = self.config.get("record_dir")
        if not isinstance(record, str) or not record:
            return self  # its events' paths are relative to `folder` and stay so
        base = os.path.abspath(folder / record)

        def found(attempt: Attempt) -> Attempt:
            if not attempt.events:
                return attempt
            events = _relative(os.path.join(os.path.abspath(folder), attempt.events), Path(base))
            return dataclasses.replace(attempt, events=events)

        cases = tuple(
            dataclasses.replace(case, attempts=tuple(found(a) for a in case.attempts))
            for case in self.cases
        )
        return dataclasses.replace(self, config={**self.config, "record_dir": base}, cases=cases)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the report as JSON (its folder is created).

        The paths of recorded events are written relative to the file's folder, so they
        resolve wherever the report is saved. Text is written ASCII-escaped, so that any
        output, even one with a lone surrogate, can be written.
        """
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        data = self._placed(target.parent).to_dict()
        text = json.dumps(data, indent=2, ensure_ascii=True, default=str)
        target.write_text(text + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Report:
        """Read a report `save` wrote.

        Raises:
            UserError: When the file cannot be read or is not a report.
        """
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise UserError(f"{path}: cannot read the report ({exc}).") from None
        try:
            report = cls.from_dict(data)
        except UserError as exc:
            raise UserError(f"{path}: {exc}") from None
        return report._found_in(Path(path).parent)

    def save_html(self, path: str | os.PathLike[str]) -> None:
        """Write the report as a self-contained HTML page with charts (its folder is created).

        Its links to recorded events are relative to the page's folder.
        """
        from glassagent._evals.html import render_html

        target = Path(path)
        write_page(target, render_html(self._placed(target.parent).to_dict()))

    def print(self, *, file: Any = None) -> None:
        """Print the report as a table (rich; needs ``pip install "glassagent[cli]"``)."""
        from glassagent._evals.table import print_report

        print_report(self, file=file)


def _relative(target: str, folder: Path) -> str:
    """`target` relative to `folder`, with ``/``; absolute when there is no such path."""
    try:
        return Path(os.path.relpath(target, os.path.abspath(folder))).as_posix()
    except ValueError:  # another drive
        return Path(target).as_posix()


def write_page(target: Path, page: str) -> None:
    """Write an HTML page as UTF-8 (its folder is created); unencodable characters become ``?``."""
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(page.encode("utf-8", errors="replace"))
