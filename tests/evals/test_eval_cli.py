"""``glassagent eval run|compare|bfcl`` as real subprocesses against a scripted model server."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from glassagent.evals import Report
from tests.support.bfcl import function, write_bfcl
from tests.support.cli import ScriptedModel, call, run_cli, say

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes")


def dataset(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


CASES = [
    {"name": "capital", "input": "Capital of France? One word.", "expected_output": "Paris"},
    {"name": "sum", "input": "2 + 2? Digits only.", "expected_output": "4", "tags": ["math"]},
]


def test_run_prints_the_table_writes_json_html_and_recordings(tmp_path: Path) -> None:
    data = dataset(tmp_path / "smoke.jsonl", CASES)
    with ScriptedModel(say("Paris"), say("5")) as model:
        done = run_cli(
            "eval", "run", str(data), *model.args(), "--concurrency", "1",
            "--json", "out/a.json", "--report", "out/a.html", "--record", "rec",
            "--min-score", "0.5", cwd=tmp_path,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "smoke: 1/2 passed" in done.stdout
    assert "exact: expected '4', got '5'" in done.stdout
    report = Report.load(tmp_path / "out" / "a.json")
    assert [(c.name, c.pass_rate) for c in report.cases] == [("capital", 1.0), ("sum", 0.0)]
    assert report.config["provider"] == "openai_compatible"
    assert report.cases[0].attempts[0].input_tokens == 50  # the server's usage
    assert (tmp_path / "rec" / "cases" / "capital-0.jsonl").is_file()
    assert (tmp_path / "rec" / "report.json").is_file()
    html = (tmp_path / "out" / "a.html").read_text(encoding="utf-8")
    assert html.lstrip().lower().startswith("<!doctype html")
    assert "capital" in html
    assert "report written to out/a.json" in done.stderr
    assert model.bodies[0]["messages"][-1]["content"] == "Capital of France? One word."


def test_a_mean_score_below_min_score_exits_1(tmp_path: Path) -> None:
    data = dataset(tmp_path / "smoke.jsonl", CASES)
    with ScriptedModel(say("Paris"), say("5")) as model:
        done = run_cli(
            "eval", "run", str(data), *model.args(), "--concurrency", "1", "--min-score", "0.9",
            cwd=tmp_path,
        )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "the mean score 0.500 is below --min-score 0.9" in done.stderr


def test_an_invalid_dataset_exits_2_naming_case_and_field_before_any_call(tmp_path: Path) -> None:
    data = dataset(tmp_path / "bad.jsonl", [CASES[0], {"name": "x", "input": "q", "tags": 3}])
    with ScriptedModel(say("Paris")) as model:
        done = run_cli("eval", "run", str(data), *model.args(), cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"glassagent: {data}, line 2 (case 'x'): tags: must be a list of strings, not int."
    )
    assert model.bodies == []
    usage = run_cli("eval", "run", str(data), "--repeat", "0", cwd=tmp_path)
    assert usage.returncode == 2
    assert "--repeat" in usage.stderr


def test_compare_exits_1_when_a_case_regressed(tmp_path: Path) -> None:
    data = dataset(tmp_path / "smoke.jsonl", CASES)
    with ScriptedModel(say("Paris"), say("4"), say("Lyon"), say("4")) as model:
        for name in ("a", "b"):
            done = run_cli(
                "eval", "run", str(data), *model.args(), "--concurrency", "1",
                "--json", f"{name}.json", "--name", name, cwd=tmp_path,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
    worse = run_cli("eval", "compare", "a.json", "b.json", cwd=tmp_path)
    assert worse.returncode == 1, worse.stderr
    assert "a → b: 0 improved, 1 regressed, 1 unchanged, 0 added, 0 removed" in worse.stdout
    assert "capital" in worse.stdout
    assert "100% → 0%" in worse.stdout
    better = run_cli("eval", "compare", "b.json", "a.json", cwd=tmp_path)
    assert better.returncode == 0, better.stderr
    assert "1 improved, 0 regressed" in better.stdout
    missing = run_cli("eval", "compare", "a.json", "nope.json", cwd=tmp_path)
    assert missing.returncode == 2
    assert "nope.json: cannot read the report" in missing.stderr


def test_bfcl_runs_the_questions_with_their_functions_as_tools(tmp_path: Path) -> None:
    area = function("area", {"base": {"type": "integer"}, "height": {"type": "integer"}})
    truth = [{"area": {"base": [10], "height": [5]}}]
    data = write_bfcl(
        tmp_path / "bfcl",
        "simple_python",
        [("simple_0", "Area of a triangle, base 10, height 5?", [area], truth)],
    )
    with ScriptedModel(call(("area", {"base": 10, "height": 5})), say("25")) as model:
        done = run_cli(
            "eval", "bfcl", "--data", str(data), *model.args(), "--json", "bfcl.json",
            "--tool-protocol", "native", "--record", "rec", cwd=tmp_path,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = Report.load(tmp_path / "bfcl.json")
    assert report.dataset == "bfcl-simple_python"
    assert report.config["tool_protocol"] == "native"
    assert Report.load(tmp_path / "rec" / "report.json").config["tool_protocol"] == "native"
    (attempt,) = report.cases[0].attempts
    assert attempt.passed
    assert [s.evaluator for s in attempt.scores] == ["trajectory"]
    assert [t["function"]["name"] for t in model.bodies[0]["tools"]] == ["area"]


def test_eval_is_listed_and_has_its_own_help(tmp_path: Path) -> None:
    top = run_cli("--help", cwd=tmp_path)
    assert "eval" in top.stdout
    own = run_cli("eval", "--help", cwd=tmp_path)
    assert own.returncode == 0
    assert "{run,compare,bfcl}" in own.stdout


def test_judge_grades_with_the_same_model_and_is_needed_when_named(tmp_path: Path) -> None:
    data = dataset(
        tmp_path / "judged.jsonl",
        [{"name": "poem", "input": "A haiku on rain.", "evaluators": ["judge"],
          "metadata": {"rubric": "Three lines about rain."}}],
    )  # fmt: skip
    with ScriptedModel(say("Rain taps the roof")) as model:
        refused = run_cli("eval", "run", str(data), *model.args(), cwd=tmp_path)
    assert refused.returncode == 2
    assert "the case 'poem' names the 'judge' evaluator: add --judge" in refused.stderr
    assert model.bodies == []
    verdict = json.dumps({"score": 0.25, "reason": "One line only."})
    with ScriptedModel(say("Rain taps the roof"), say(verdict)) as model:
        done = run_cli(
            "eval", "run", str(data), *model.args(), "--judge", "--json", "j.json", cwd=tmp_path
        )
    assert done.returncode == 0, done.stderr
    (attempt,) = Report.load(tmp_path / "j.json").cases[0].attempts
    assert [(s.evaluator, s.score, s.reason) for s in attempt.scores] == [
        ("judge", 0.25, "One line only.")
    ]
    assert "Three lines about rain." in json.dumps(model.bodies[1]["messages"])


def test_an_answer_no_encoding_can_write_still_reports_and_records(tmp_path: Path) -> None:
    data = dataset(tmp_path / "smoke.jsonl", CASES)
    with ScriptedModel(say("Par\ud800is", pieces=1), say("4")) as model:
        done = run_cli(
            "eval", "run", str(data), *model.args(), "--concurrency", "1", "--record", "rec",
            "--json", "out.json", "--report", "out.html", cwd=tmp_path,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    capital, total = Report.load(tmp_path / "out.json").cases
    assert capital.attempts[0].events is None
    assert (capital.attempts[0].record_error or "").startswith("UnicodeEncodeError")
    assert total.attempts[0].passed
    assert (tmp_path / "rec" / "cases" / "sum-0.jsonl").is_file()
    assert (tmp_path / "out.html").is_file()


def test_no_cases_or_every_attempt_failing_exits_1(tmp_path: Path) -> None:
    empty = dataset(tmp_path / "empty.jsonl", [])
    with ScriptedModel() as model:
        done = run_cli("eval", "run", str(empty), *model.args(), cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "glassagent: the dataset has no cases: nothing was evaluated" in done.stderr
    data = dataset(tmp_path / "smoke.jsonl", CASES)
    with ScriptedModel() as model:  # every call: HTTP 500
        done = run_cli("eval", "run", str(data), *model.args(), "--timeout", "5", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "glassagent: every attempt failed (2)" in done.stderr


def test_compare_exits_1_for_a_removed_case_2_for_a_broken_report_and_writes_a_page(
    tmp_path: Path,
) -> None:
    data = dataset(tmp_path / "smoke.jsonl", CASES)
    fewer = dataset(tmp_path / "fewer.jsonl", CASES[:1])
    with ScriptedModel(say("Paris"), say("4"), say("Paris")) as model:
        for name, cases in (("a", data), ("b", fewer)):
            done = run_cli(
                "eval", "run", str(cases), *model.args(), "--concurrency", "1",
                "--json", f"{name}.json", "--name", name, cwd=tmp_path,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
    removed = run_cli("eval", "compare", "a.json", "b.json", "--report", "c.html", cwd=tmp_path)
    assert removed.returncode == 1, removed.stderr
    assert "1 case(s) of a.json are not in b.json" in removed.stderr
    assert "a → b" in (tmp_path / "c.html").read_text(encoding="utf-8")
    added = run_cli("eval", "compare", "b.json", "a.json", cwd=tmp_path)
    assert added.returncode == 0, added.stderr
    broken = json.loads((tmp_path / "a.json").read_text(encoding="utf-8"))
    broken["summary"] = [1]
    (tmp_path / "broken.json").write_text(json.dumps(broken), encoding="utf-8")
    refused = run_cli("eval", "compare", "a.json", "broken.json", cwd=tmp_path)
    assert refused.returncode == 2
    assert "broken.json: An invalid evaluation report: summary: must be an object" in (
        refused.stderr
    )
