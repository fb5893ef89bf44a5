"""Edge cases of evaluations: text no encoding can write, scores out of range, typed JSON
comparison, links to recordings from anywhere, strict loading, and slow evaluators."""

from __future__ import annotations

import asyncio
import json
import math
import re
import time
from pathlib import Path
from typing import Any

import pytest

from glassagent import Agent
from glassagent.errors import DatasetError, UserError
from glassagent.evals import (
    Case,
    Contains,
    Dataset,
    EvalContext,
    Exact,
    JsonEqual,
    Report,
    Score,
    compare,
    evaluate,
)
from glassagent.events import load_events
from glassagent.testing import FunctionClient

SURROGATE = "Par\ud800is"


def answering(text: str) -> Agent[Any, Any]:
    return Agent(FunctionClient(lambda *_: text))


def context(text: str, expected: Any = None, output: Any = None) -> EvalContext:
    case = Case("c", "q", expected_output=expected)
    return EvalContext(case, text if output is None else output, text, None)


# ---- text no encoding can write --------------------------------------------------------------


async def test_a_lone_surrogate_is_reported_and_recorded_without_sinking_the_run(
    tmp_path: Path,
) -> None:
    dataset = Dataset("d", [Case("bad", "hi", expected_output="Paris"), Case("ok", "hi")])

    def agent_for(case: Case) -> Agent[Any, Any]:
        return answering(SURROGATE if case.name == "bad" else "fine")

    report = await evaluate(agent_for, dataset, record_dir=tmp_path / "run", progress=False)
    bad, ok = (case.attempts[0] for case in report.cases)
    assert (bad.score, bad.events, bad.error) == (0.0, None, None)
    assert bad.record_error is not None
    assert bad.record_error.startswith("UnicodeEncodeError")
    assert repr(SURROGATE) in bad.scores[0].reason  # the reason shows the answer
    assert not (tmp_path / "run" / "cases" / "bad-0.jsonl").exists()  # no partial file
    assert ok.passed
    assert ok.record_error is None
    assert ok.events is not None
    assert load_events(tmp_path / "run" / ok.events)
    saved = Report.load(tmp_path / "run" / "report.json")
    assert saved.cases[0].attempts[0].output == SURROGATE
    assert saved.cases[0].attempts[0].record_error == bad.record_error
    report.save(tmp_path / "copy.json")
    assert Report.load(tmp_path / "copy.json").cases[0].attempts[0].output == SURROGATE
    report.save_html(tmp_path / "page.html")
    page = (tmp_path / "page.html").read_text(encoding="utf-8")
    assert "Par?is" in page
    assert "events not recorded: UnicodeEncodeError" in page


# ---- scores out of range ---------------------------------------------------------------------


@pytest.mark.parametrize("value", [2.0, -0.5, math.nan, math.inf, "0.5", True])
def test_a_score_must_be_a_number_from_0_to_1(value: Any) -> None:
    with pytest.raises(UserError, match=r"The score of 'x' must be a number from 0 to 1"):
        Score("x", value, True)
    assert Score("x", 1, True).score == 1.0


@pytest.mark.parametrize("value", [2.0, -1.0, math.nan, math.inf])
async def test_an_evaluator_out_of_range_scores_0_and_the_run_goes_on(
    value: float, tmp_path: Path
) -> None:
    def as_score(ctx: EvalContext) -> Score:
        return Score("as_score", value, True, "?")

    def as_float(ctx: EvalContext) -> float:
        return value

    report = await evaluate(
        answering("x"),
        [Case("c", "hi")],
        evaluators=[as_score, as_float],
        record_dir=tmp_path,
        progress=False,
    )
    (attempt,) = report.cases[0].attempts
    assert [s.score for s in attempt.scores] == [0.0, 0.0]
    assert not attempt.passed
    for score in attempt.scores:
        assert "must be a number from 0 to 1" in score.reason
    assert report.case("c").score_stdev == 0.0
    assert Report.load(tmp_path / "report.json").summary.mean_score == 0.0


# ---- exact and JSON comparison ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("expected", "answer", "passed"),
    [(9, "9", True), (9, " 9\n", True), (True, "true", True), (2.5, "2.5", True), (9, "8", False)],
)
def test_exact_compares_a_number_or_bool_with_a_text_answer_in_its_json_form(
    expected: Any, answer: str, passed: bool
) -> None:
    score = Exact()(context(answer, expected))
    assert score.passed is passed


def test_exact_shows_the_answer_when_data_differs() -> None:
    score = Exact()(context('{"a": 1}', {"a": 2}))
    assert score.reason == 'expected {"a": 2}, got \'{"a": 1}\''
    long = Exact()(context("y" * 5000, {"a": 2}))
    assert "got" in long.reason
    assert len(long.reason) < 300


async def test_a_dataset_number_matches_the_text_answer(tmp_path: Path) -> None:
    path = tmp_path / "num.jsonl"
    path.write_text('{"name": "n", "input": "sqrt 81?", "expected_output": 9}\n', "utf-8")
    report = await evaluate(answering("9"), Dataset.load(path), progress=False)
    assert report.cases[0].attempts[0].passed


@pytest.mark.parametrize(
    ("expected", "answer", "passed"),
    [
        ({"ok": True}, '{"ok": 1}', False),
        ([1, 0], "[true, false]", False),
        ({"ok": 1}, '{"ok": true}', False),
        ({"n": 1}, '{"n": 1.0}', True),
        ({"ok": True, "list": [1, "a", None]}, '{"list": [1, "a", null], "ok": true}', True),
        ([1, 2], "[2, 1]", False),
        ({"a": None}, "{}", False),
    ],
)
def test_json_equal_keeps_bools_apart_from_numbers(
    expected: Any, answer: str, passed: bool
) -> None:
    assert JsonEqual(expected)(context(answer)).passed is passed


def test_a_reason_about_data_built_from_aliases_is_cut_while_written(tmp_path: Path) -> None:
    pytest.importorskip("yaml")
    lines = ['a: &a ["x","x","x","x","x","x","x","x","x"]']
    previous = "a"
    for level in range(8):  # 9**9 strings once expanded
        lines.append(f"l{level}: &l{level} [" + ",".join([f"*{previous}"] * 9) + "]")
        previous = f"l{level}"
    lines += ["name: bomb", "cases:", "  - name: x", "    input: hi"]
    lines += [f"    expected_output: *{previous}", "    evaluators: [json_equal]"]
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    (case,) = Dataset.load(path)
    started = time.perf_counter()
    score = JsonEqual()(EvalContext(case, "[1]", "[1]", None))
    assert time.perf_counter() - started < 2
    assert score.reason.startswith("expected [[[[")
    assert len(score.reason) < 300


def test_contains_refuses_what_is_not_text() -> None:
    with pytest.raises(UserError, match="'contains' needs a text or a list of texts"):
        Contains(5)(context("5"))
    assert Contains(["a", "b"])(context("a b")).passed


# ---- links to the recordings -----------------------------------------------------------------


async def test_links_to_the_recordings_work_wherever_the_report_is_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    report = await evaluate(
        answering("x"), [Case("c", "hi", expected_output="x")], record_dir="eval-run",
        progress=False,
    )  # fmt: skip
    assert report.cases[0].attempts[0].events == "cases/c-0.jsonl"  # relative to the record
    report.save("eval.json")
    report.save_html("eval.html")
    report.save_html("deep/er/eval.html")
    for page in (tmp_path / "eval.html", tmp_path / "deep" / "er" / "eval.html"):
        href = re.search(r'class="events" href="([^"]+)"', page.read_text("utf-8"))
        assert href is not None
        assert (page.parent / href.group(1)).is_file(), href.group(1)
    saved = json.loads((tmp_path / "eval.json").read_text("utf-8"))
    assert saved["config"]["record_dir"] == "eval-run"
    assert saved["cases"][0]["attempts"][0]["events"] == "eval-run/cases/c-0.jsonl"
    inside = json.loads((tmp_path / "eval-run" / "report.json").read_text("utf-8"))
    assert inside["config"]["record_dir"] == "."
    assert inside["cases"][0]["attempts"][0]["events"] == "cases/c-0.jsonl"
    loaded = Report.load("eval.json")
    assert loaded == report  # the same record folder, the same paths relative to it
    loaded.save("elsewhere/again.json")
    again = json.loads((tmp_path / "elsewhere" / "again.json").read_text("utf-8"))
    events = again["cases"][0]["attempts"][0]["events"]
    assert (tmp_path / "elsewhere" / events).is_file()


async def test_names_differing_by_case_are_recorded_in_different_files(tmp_path: Path) -> None:
    report = await evaluate(
        answering("x"), [Case("Paris", "hi"), Case("paris", "hi")], record_dir=tmp_path,
        progress=False,
    )  # fmt: skip
    first, second = (case.attempts[0].events for case in report.cases)
    assert first is not None
    assert second is not None
    assert first.lower() != second.lower()
    assert second == "cases/paris-0.jsonl"  # lower case names stay as they are


# ---- strict loading --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"tags": False}, "tags: must be a list of strings, not bool."),
        ({"metadata": False}, "metadata: must be an object, not bool."),
        ({"evaluators": 0}, "evaluators: must be a list of strings, not int."),
        (
            {"expected_tool_calls": [{"name": "f", "arguments": 0}]},
            "expected_tool_calls[0].arguments: must be an object, not int.",
        ),
        (
            {"expected_output": "(", "evaluators": ["regex"]},
            "expected_output: is not a valid regular expression",
        ),
        (
            {"expected_output": 5, "evaluators": ["contains"]},
            "expected_output: must be a text or a list of texts for 'contains'.",
        ),
    ],
)
def test_a_field_of_the_wrong_kind_is_refused_at_load(
    tmp_path: Path, row: dict[str, Any], message: str
) -> None:
    path = tmp_path / "cases.jsonl"
    path.write_text(json.dumps({"name": "a", "input": "hi", **row}) + "\n", encoding="utf-8")
    with pytest.raises(DatasetError) as caught:
        Dataset.load(path)
    assert str(caught.value).startswith(f"{path}, line 1 (case 'a'): {message}")


def test_null_fields_are_as_good_as_missing(tmp_path: Path) -> None:
    path = tmp_path / "cases.jsonl"
    row = {"name": "a", "input": "hi", "tags": None, "metadata": None, "evaluators": None}
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    (case,) = Dataset.load(path)
    assert (case.tags, dict(case.metadata), case.evaluators) == ((), {}, ())


def test_data_nested_too_deeply_is_a_dataset_error(tmp_path: Path) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    jsonl = tmp_path / "deep.jsonl"
    jsonl.write_text('{"name": "a", "input": "hi"}\n' + deep + "\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=r"deep\.jsonl, line 2: the data is nested too deeply"):
        Dataset.load(jsonl)
    whole = tmp_path / "deep.json"
    whole.write_text(deep, encoding="utf-8")
    with pytest.raises(DatasetError, match="nested too deeply"):
        Dataset.load(whole)
    pytest.importorskip("yaml")
    yaml = tmp_path / "deep.yaml"
    yaml.write_text("- name: a\n  input: hi\n  metadata: " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(DatasetError, match=r"deep\.yaml: the data is nested too deeply"):
        Dataset.load(yaml)


# ---- reports read back -----------------------------------------------------------------------


def saved_report(tmp_path: Path, change: Any) -> Path:
    report = Report(
        "r", "d", "2026-01-01T00:00:00+00:00", 1.0,
        cases=(compare_case("c", 1.0),),
    )  # fmt: skip
    data = report.to_dict()
    change(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def compare_case(name: str, score: float) -> Any:
    from glassagent.evals import Attempt, CaseReport

    return CaseReport(name, (), (Attempt(0, score >= 0.5, score, (Score("e", score, True),)),))


def _attempt(data: dict[str, Any]) -> dict[str, Any]:
    attempt: dict[str, Any] = data["cases"][0]["attempts"][0]
    return attempt


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(summary=[1]), "summary: must be an object, got list"),
        (lambda d: d.update(cases={"a": 1}), "cases: must be a list, got dict"),
        (lambda d: d.update(cases=["x"]), "cases[0]: must be an object, got str"),
        (lambda d: d.update(config=[[1]]), "config: must be an object, got list"),
        (lambda d: d["cases"][0].update(tags="abc"), "cases[0].tags: must be a list, got str"),
        (
            lambda d: _attempt(d).update(score="nan"),
            "cases[0].attempts[0].score: must be a number from 0 to 1, got 'nan'",
        ),
        (
            lambda d: _attempt(d).update(score=float("nan")),
            "cases[0].attempts[0].score: must be a number from 0 to 1, got nan",
        ),
        (
            lambda d: _attempt(d).update(cost="1e999999"),
            "cases[0].attempts[0].cost: must be a decimal amount",
        ),
        (
            lambda d: _attempt(d)["scores"][0].update(score=2),
            "cases[0].attempts[0].scores[0]: The score of 'e' must be a number from 0 to 1",
        ),
        (lambda d: _attempt(d).update(repeat=1e300), "cases[0].attempts[0].repeat: must be a"),
    ],
)
def test_a_report_of_the_wrong_shape_is_refused_on_load(
    tmp_path: Path, change: Any, message: str
) -> None:
    path = saved_report(tmp_path, change)
    with pytest.raises(UserError) as caught:
        Report.load(path)
    assert str(caught.value).startswith(f"{path}: An invalid evaluation report: {message}")


def test_a_removed_case_counts_as_a_regression_and_a_comparison_has_a_page(
    tmp_path: Path,
) -> None:
    both = Report("a", "d", "t", 1.0, cases=(compare_case("x", 1.0), compare_case("y", 1.0)))
    fewer = Report("b", "d", "t", 1.0, cases=(compare_case("x", 1.0),))
    comparison = compare(both, fewer)
    assert [c.name for c in comparison.removed] == ["y"]
    assert comparison.regressed == ()
    assert comparison.has_regressions
    assert not compare(fewer, both).has_regressions  # an added case is no regression
    comparison.save_html(tmp_path / "out" / "compare.html")
    page = (tmp_path / "out" / "compare.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    assert "a → b" in page
    assert "removed" in page


# ---- slow evaluators -------------------------------------------------------------------------


async def test_the_timeout_bounds_the_evaluators_too() -> None:
    async def slow(ctx: EvalContext) -> bool:
        await asyncio.sleep(5)
        return True

    def quick(ctx: EvalContext) -> bool:
        return True

    started = time.perf_counter()
    report = await evaluate(
        answering("x"), [Case("c", "hi")], evaluators=[slow, quick], timeout=0.2, progress=False
    )
    assert time.perf_counter() - started < 2
    (attempt,) = report.cases[0].attempts
    assert [(s.evaluator, s.score, s.passed) for s in attempt.scores] == [
        ("slow", 0.0, False),
        ("quick", 1.0, True),
    ]
    assert attempt.scores[0].reason == "the evaluator ran out of time (the timeout)"
    assert attempt.latency_ms < 1000  # the run's time, not the scoring's
