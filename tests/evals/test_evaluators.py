"""The built-in evaluators, the judge (and its cost), custom evaluators sync and async."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from glassagent import LLMResponse, ToolCall, Usage
from glassagent.errors import DatasetError
from glassagent.evals import (
    Case,
    Contains,
    EvalContext,
    Exact,
    JsonEqual,
    JsonSchemaValid,
    Judge,
    Regex,
    Score,
    Trajectory,
    charge,
    evaluator_named,
)
from glassagent.testing import ScriptedClient
from tests.support.profiles import acme_profiles


def ctx(text: str, expected: Any = None, output: Any = None, **case: Any) -> EvalContext:
    made = Case("c", "What is the capital of France?", expected, **case)
    return EvalContext(made, text if output is None else output, text, None)


def test_exact_trims_and_compares_text() -> None:
    assert Exact()(ctx("  Paris\n", "Paris ")) == Score(
        "exact", 1.0, True, "the answer is the expected text"
    )
    wrong = Exact()(ctx("paris", "Paris"))
    assert (wrong.score, wrong.passed) == (0.0, False)
    assert wrong.reason == "expected 'Paris', got 'paris'"
    assert Exact(ignore_case=True)(ctx("paris", "Paris")).passed
    assert Exact("Lyon")(ctx("Lyon", "Paris")).passed  # its own expected value first


def test_exact_compares_typed_output_with_data() -> None:
    class Point(BaseModel):
        x: int
        y: int

    point = Point(x=1, y=2)
    assert Exact()(ctx('{"x":1,"y":2}', {"x": 1, "y": 2}, output=point)).passed
    assert not Exact()(ctx('{"x":1,"y":3}', {"x": 1, "y": 2}, output=Point(x=1, y=3))).passed


def test_contains_scores_the_share_found() -> None:
    assert Contains()(ctx("It is Paris.", "Paris")).passed
    partial = Contains()(ctx("Paris, France", ["Paris", "Seine", "France", "Louvre"]))
    assert (partial.score, partial.passed) == (0.5, False)
    assert partial.reason == "missing from the answer: 'Seine', 'Louvre'"
    assert Contains(ignore_case=True)(ctx("PARIS", "paris")).passed
    assert not Contains()(ctx("PARIS", "paris")).passed


def test_regex_searches_or_matches_whole() -> None:
    assert Regex()(ctx("The answer is 42.", r"\b42\b")).passed
    assert not Regex(full=True)(ctx("The answer is 42.", r"\d+")).passed
    assert Regex(r"^\d+$", full=True)(ctx(" 42 ")).passed
    missed = Regex()(ctx("forty-two", r"\d+"))
    assert (missed.passed, missed.reason) == (False, r"/\d+/ does not match 'forty-two'")


def test_json_equal_reads_text_fences_and_typed_output() -> None:
    assert JsonEqual()(ctx('{"a": 1, "b": [1, 2]}', {"b": [1, 2], "a": 1.0})).passed
    assert JsonEqual()(ctx('```json\n{"a": 1}\n```', '{"a": 1}')).passed
    assert not JsonEqual()(ctx('{"a": 2}', {"a": 1})).passed
    not_json = JsonEqual()(ctx("a is 1", {"a": 1}))
    assert (not_json.passed, not_json.reason) == (False, "the answer is not JSON: 'a is 1'")


def test_json_schema_from_the_case_a_schema_or_an_output_type() -> None:
    schema = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
    in_case = ctx('{"x": 1}', evaluators=["json_schema"], metadata={"schema": schema})
    assert JsonSchemaValid()(in_case).passed
    bad = JsonSchemaValid(schema)(ctx('{"x": "one"}'))
    assert (bad.passed, bad.reason) == (False, "x: 'one' is not of type 'integer'")

    class Point(BaseModel):
        x: int

    assert JsonSchemaValid(output_type=Point)(ctx('{"x": 3}')).passed
    assert not JsonSchemaValid(output_type=Point)(ctx("{}")).passed
    assert not JsonSchemaValid(output_type=Point)(ctx("x=3")).passed


def test_evaluator_named_maps_the_dataset_names() -> None:
    case = Case("c", "q", "a")
    kinds = {
        name: type(evaluator_named(name, case))
        for name in ("exact", "contains", "regex", "json_equal", "json_schema", "trajectory")
    }
    assert kinds == {
        "exact": Exact,
        "contains": Contains,
        "regex": Regex,
        "json_equal": JsonEqual,
        "json_schema": JsonSchemaValid,
        "trajectory": Trajectory,
    }
    with pytest.raises(DatasetError, match=r"case 'c': evaluators: 'judge' needs a model"):
        evaluator_named("judge", case)


@pytest.fixture
def priced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    with acme_profiles(tmp_path / "profiles", monkeypatch):
        yield


def verdict(score: float, reason: str, usage: Usage | None = None) -> LLMResponse:
    call = ToolCall("v1", "final_result", {"score": score, "reason": reason})
    return LLMResponse(tool_calls=[call], usage=usage or Usage(1000, 100))


async def test_the_judge_grades_with_the_rubric_and_charges_its_cost(priced: None) -> None:
    client = ScriptedClient([verdict(0.8, "Right city, terse.")], model="acme-priced")
    judge = Judge(client, rubric="Names the right city.")
    case = Case("c", "Capital of France?", "Paris", metadata={"rubric": "One word, correct."})
    from glassagent._evals.evaluators import charges

    with charges() as charged:
        score = await judge(EvalContext(case, "Paris", "Paris", None))
    assert score == Score("judge", 0.8, True, "Right city, terse.")
    sent = client.requests[0].messages[-1].content
    assert "<rubric>\nOne word, correct.\n</rubric>" in sent  # the case's rubric wins
    assert "<reference_answer>\nParis\n</reference_answer>" in sent
    assert "<answer>\nParis\n</answer>" in sent
    assert [cost.amount for cost in charged] == [Decimal("0.0014")]  # 1000 x $1 + 100 x $4 per 1M


async def test_a_low_verdict_fails_and_a_failing_judge_scores_zero() -> None:
    low = await Judge(ScriptedClient([verdict(0.3, "Wrong.")]))(ctx("Lyon", "Paris"))
    assert (low.score, low.passed, low.reason) == (0.3, False, "Wrong.")
    strict = await Judge(ScriptedClient([verdict(0.8, "ok")]), threshold=0.9)(ctx("Paris"))
    assert not strict.passed
    broken = await Judge(ScriptedClient([]))(ctx("Paris"))
    assert (broken.score, broken.passed) == (0.0, False)
    assert broken.reason.startswith("the judge failed: UserError: ScriptedClient ran out")


def test_charge_outside_an_evaluation_does_nothing() -> None:
    from glassagent._core.cost import Cost

    charge(Cost(Decimal(1)))  # no error, nowhere to count it
