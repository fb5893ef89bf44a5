"""Reports: JSON round trip, summary numbers, the terminal table, and `compare`."""

from __future__ import annotations

import io
import json
from decimal import Decimal
from pathlib import Path

import pytest

from glassagent.errors import UserError
from glassagent.evals import Attempt, CaseReport, Report, Score, compare, pass_at_k


def attempt(repeat: int, passed: bool, score: float | None = None, **more: object) -> Attempt:
    value = float(passed) if score is None else score
    scores = (Score("exact", value, passed, "ok" if passed else "expected 'Paris'"),)
    return Attempt(repeat, passed, value, scores, **more)  # type: ignore[arg-type]


def report(name: str, cases: dict[str, list[Attempt]]) -> Report:
    return Report(
        name=name,
        dataset="capitals",
        started_at="2026-11-29T10:00:00+00:00",
        duration_s=1.5,
        config={"provider": "scripted", "model": "m", "concurrency": 4, "repeat": 2},
        cases=tuple(CaseReport(n, ("geo",), tuple(a)) for n, a in cases.items()),
    )


def sample() -> Report:
    return report(
        "run-a",
        {
            "paris": [
                attempt(0, True, latency_ms=10.0, cost=Decimal("0.001"), input_tokens=5),
                attempt(1, False, latency_ms=30.0, cost=Decimal("0.002"), output_tokens=7),
            ],
            "rome": [
                attempt(0, True, latency_ms=20.0, cost=Decimal("0.0005"), model_calls=2),
                attempt(
                    1,
                    False,
                    latency_ms=100.0,
                    cost=Decimal("0.0001"),
                    error="RunTimeoutError: 1 s",
                    tool_errors=1,
                    events="cases/rome-1.jsonl",
                ),
            ],
        },
    )


def test_the_summary_sums_and_averages_every_attempt() -> None:
    summary = sample().summary
    assert (summary.cases, summary.attempts, summary.passed, summary.pass_rate) == (2, 4, 2, 0.5)
    assert summary.mean_score == 0.5
    assert summary.cost == Decimal("0.0036")
    assert (summary.input_tokens, summary.output_tokens, summary.model_calls) == (5, 7, 2)
    assert summary.tool_errors == 1
    assert summary.latency_ms == {"p50": 25.0, "p95": pytest.approx(89.5), "max": 100.0}
    unpriced = report("x", {"a": [attempt(0, True, cost=Decimal(1)), attempt(1, True)]})
    assert unpriced.summary.cost is None  # a partial sum would read as the whole


def test_pass_at_k_is_the_unbiased_estimate() -> None:
    assert pass_at_k(10, 0, 5) == 0.0
    assert pass_at_k(10, 10, 1) == 1.0
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10)
    assert pass_at_k(5, 2, 4) == 1.0


def test_json_round_trip_keeps_everything(tmp_path: Path) -> None:
    original = sample()
    path = tmp_path / "out" / "a.json"
    original.save(path)
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["format"] == "glassagent.eval/1"
    assert data["summary"]["cost"] == "0.0036"
    assert data["summary"]["currency"] == "USD"
    paris = data["cases"][0]
    assert (paris["pass_rate"], paris["score_stdev"], paris["pass_at_k"]) == (
        0.5,
        0.5,
        {"1": 0.5, "2": 1.0},
    )
    assert paris["attempts"][0]["cost"] == "0.001"
    assert set(paris["attempts"][0]) >= {
        "repeat", "passed", "score", "scores", "output", "error", "stop_reason", "input_tokens",
        "output_tokens", "cost", "latency_ms", "model_calls", "tool_calls", "tool_errors", "events",
    }  # fmt: skip
    loaded = Report.load(path)
    assert loaded == original
    assert loaded.to_dict() == original.to_dict()


def test_load_refuses_what_is_not_a_report(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text('{"format": "other"}', encoding="utf-8")
    with pytest.raises(UserError, match="Not an evaluation report"):
        Report.load(tmp_path / "x.json")
    with pytest.raises(UserError, match="cannot read the report"):
        Report.load(tmp_path / "missing.json")
    with pytest.raises(UserError, match="An invalid evaluation report"):
        Report.from_dict({"format": "glassagent.eval/1", "name": "x", "cases": [{"tags": []}]})


def test_the_table_shows_each_case_and_the_totals() -> None:
    out = io.StringIO()
    sample().print(file=out)
    text = out.getvalue()
    assert "run-a: 2/4 passed" in text
    assert "paris" in text
    assert "rome" in text
    assert "RunTimeoutError: 1 s" in text  # why rome failed
    assert "exact: expected 'Paris'" in text  # why paris failed
    assert "pass@2" in text
    assert "50%" in text
    assert "0.0036 USD" in text


def test_compare_names_what_improved_and_regressed() -> None:
    before = sample()
    after = report(
        "run-b",
        {
            "paris": [attempt(0, True), attempt(1, True)],  # 50% -> 100%
            "rome": [attempt(0, True, 0.6), attempt(1, False)],  # same rate, lower score
            "oslo": [attempt(0, True)],
        },
    )
    comparison = compare(before, after)
    assert [c.name for c in comparison.improved] == ["paris"]
    assert [c.name for c in comparison.regressed] == ["rome"]
    assert [c.name for c in comparison.added] == ["oslo"]
    assert comparison.removed == ()
    assert comparison.has_regressions
    rome = comparison.regressed[0]
    assert (rome.before_pass_rate, rome.after_pass_rate) == (0.5, 0.5)
    assert (rome.before_score, rome.after_score) == (0.5, pytest.approx(0.3))
    back = compare(after, before)
    assert [c.name for c in back.removed] == ["oslo"]
    assert [c.name for c in back.regressed] == ["paris"]
    same = compare(before, before)
    assert [c.kind for c in same.changes] == ["unchanged", "unchanged"]
    assert not same.has_regressions
    out = io.StringIO()
    comparison.print(file=out)
    text = out.getvalue()
    assert "run-a → run-b: 1 improved, 1 regressed, 0 unchanged, 1 added" in text
    assert "regressed" in text
    assert "50% → 100%" in text
    assert comparison.to_dict()["changes"][0]["kind"] == "improved"
