"""The trajectory evaluator: BFCL's checking rules on answers written in BFCL's own format.

Each answer here is a ``possible_answer`` entry as BFCL writes it (acceptable values in a
list, ``""`` for an argument that may be left out), read with `load_bfcl`, and judged
against calls a model could have made.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from glassagent._core.messages import ToolCall
from glassagent._evals.bfcl import load_bfcl
from glassagent._evals.model import Case, EvalContext, ExpectedCall
from glassagent._evals.trajectory import Trajectory, match_calls, same_value
from tests.support.bfcl import call, function, judge, write_bfcl

TRIANGLE = function(
    "geometry.triangle_area",
    {
        "base": {"type": "integer"},
        "height": {"type": "float"},
        "unit": {"type": "string", "optional": True},
    },
    ["base", "height"],
)
WEATHER = function(
    "get_weather",
    {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
    ["city"],
)
QUERY = function(
    "db.query",
    {
        "filter": {
            "type": "dict",
            "properties": {"field": {"type": "string"}, "limit": {"type": "integer"}},
        },
        "tags": {"type": "array", "items": {"type": "string"}},
    },
)


def bfcl_case(
    tmp_path: Path,
    functions: list[dict[str, Any]],
    truth: list[dict[str, Any]],
    category: str = "simple_python",
) -> Case:
    write_bfcl(tmp_path, category, [(f"{category}_0", "Do it.", functions, truth)])
    (case,) = load_bfcl(category, data=tmp_path)
    return case


@pytest.fixture
def triangle(tmp_path: Path) -> Case:
    truth = {"base": [10], "height": [5], "unit": ["units", "cm", ""]}
    return bfcl_case(tmp_path, [TRIANGLE], [{"geometry.triangle_area": truth}])


def test_the_documented_answer_passes_and_the_optional_argument_may_be_left_out(
    triangle: Case,
) -> None:
    for given in ({}, {"unit": "units"}, {"unit": "CM"}):
        score = judge(triangle, [call("geometry_triangle_area", base=10, height=5.0, **given)])
        assert (score.score, score.passed) == (1.0, True), given
        assert score.reason == "the expected call matched"


def test_an_integer_passes_for_a_float_but_not_a_float_for_an_integer(triangle: Case) -> None:
    assert judge(triangle, [call("geometry_triangle_area", base=10, height=5)]).passed
    score = judge(triangle, [call("geometry_triangle_area", base=10.0, height=5)])
    assert not score.passed
    assert score.reason == (
        "call 1: 'geometry_triangle_area' got base=10.0, expected 10: "
        "geometry_triangle_area(base=10.0, height=5)"
    )


def test_a_value_outside_the_acceptable_ones_is_named(triangle: Case) -> None:
    score = judge(triangle, [call("geometry_triangle_area", base=10, height=5, unit="inches")])
    assert (score.score, score.passed) == (0.0, False)
    assert "got unit='inches', expected one of 'units', 'cm'" in score.reason


def test_strings_are_compared_without_case_spaces_and_punctuation(tmp_path: Path) -> None:
    truth = [{"get_weather": {"city": ["San Francisco, CA"], "unit": ["", "celsius"]}}]
    case = bfcl_case(tmp_path, [WEATHER], truth)
    for city in ("san francisco ca", "SAN-FRANCISCO/CA", "San_Francisco.CA", "sanfrancisco,ca"):
        assert judge(case, [call("get_weather", city=city)]).passed, city
    for city in ("San Francisco, California", "Los Angeles, CA", "San Francisco!"):
        assert not judge(case, [call("get_weather", city=city)]).passed, city
    assert not judge(case, [call("get_weather", city=7)]).passed  # a string needs a string
    assert same_value("it's", 'it"s')  # BFCL reads ' as "


def test_a_wrong_function_fails_naming_both(tmp_path: Path) -> None:
    truth = [{"get_weather": {"city": ["Paris"]}}]
    case = bfcl_case(tmp_path, [WEATHER, TRIANGLE], truth, "multiple")
    score = judge(case, [call("geometry_triangle_area", base=1, height=2)])
    assert not score.passed
    assert score.reason.startswith(
        "call 1: called 'geometry_triangle_area' instead of 'get_weather'"
    )


def test_an_extra_or_missing_argument_fails(tmp_path: Path) -> None:
    case = bfcl_case(tmp_path, [WEATHER], [{"get_weather": {"city": ["Paris"], "unit": [""]}}])
    assert judge(case, [call("get_weather", city="Paris")]).passed
    extra = judge(case, [call("get_weather", city="Paris", country="France")])
    assert not extra.passed
    assert "got the unexpected argument 'country'" in extra.reason
    # an argument whose only acceptable value is "" must be left out
    left_out = judge(case, [call("get_weather", city="Paris", unit="celsius")])
    assert "got unit='celsius'; it should be left out" in left_out.reason
    missing = judge(case, [call("get_weather")])
    assert "is missing the argument 'city'" in missing.reason


def test_objects_and_lists_are_compared_inside(tmp_path: Path) -> None:
    truth = {
        "filter": [{"field": ["Name", "name"], "limit": ["", 10]}],
        "tags": [["red", "Dark Blue"], ["red"]],
    }
    case = bfcl_case(tmp_path, [QUERY], [{"db.query": truth}])
    right = [
        {"filter": {"field": "NAME"}, "tags": ["red", "dark blue"]},
        {"filter": {"field": "name", "limit": 10}, "tags": ["Red"]},
    ]
    for arguments in right:
        assert judge(case, [call("db_query", **arguments)]).passed, arguments
    wrong = [
        {"filter": {"field": "name", "limit": 11}, "tags": ["red"]},
        {"filter": {"field": "name", "sort": "asc"}, "tags": ["red"]},  # an extra key
        {"filter": {"limit": 10}, "tags": ["red"]},  # a key missing
        {"filter": {"field": "name"}, "tags": ["dark blue", "red"]},  # lists keep their order
        {"filter": "name", "tags": ["red"]},
    ]
    for arguments in wrong:
        assert not judge(case, [call("db_query", **arguments)]).passed, arguments


def test_parallel_calls_match_in_any_order(tmp_path: Path) -> None:
    truth = [
        {"get_weather": {"city": ["Paris"], "unit": ["", "celsius"]}},
        {"get_weather": {"city": ["Tokyo"]}},
    ]
    case = bfcl_case(tmp_path, [WEATHER], truth, "parallel")
    assert case.tool_order == "any_order"
    paris, tokyo = call("get_weather", city="paris"), call("get_weather", city="Tokyo")
    assert judge(case, [tokyo, paris]).passed
    assert judge(case, [paris, tokyo]).passed
    one_wrong = judge(case, [tokyo, call("get_weather", city="Rome")])
    assert (one_wrong.score, one_wrong.passed) == (0.5, False)
    assert one_wrong.reason == (
        "expected call 1 ('get_weather') not made: 'get_weather' got city='Rome', "
        "expected 'Paris': get_weather(city='Rome')"
    )
    twice = judge(case, [paris, tokyo, tokyo])
    assert (twice.score, twice.passed) == (pytest.approx(2 / 3), False)
    assert twice.reason.startswith("unexpected call get_weather(city='Tokyo')")
    assert judge(case, [paris, tokyo, tokyo], allow_extra_calls=True).passed
    only_one = judge(case, [paris])
    assert (only_one.score, only_one.passed) == (0.5, False)
    assert "expected call 2 ('get_weather') not made" in only_one.reason


def test_any_order_finds_the_matching_a_greedy_pass_misses() -> None:
    # the first expected call fits both calls made, the second only the first one
    expected = [
        ExpectedCall("pick", any_of={"x": (1, 2)}),
        ExpectedCall("pick", {"x": 1}),
    ]
    calls = [ToolCall("a", "pick", {"x": 1}), ToolCall("b", "pick", {"x": 2})]
    assert match_calls(expected, calls, order="any_order").passed


def test_in_order_calls_must_come_in_their_order() -> None:
    expected = [ExpectedCall("first"), ExpectedCall("second")]
    first, second = call("first"), call("second")
    assert match_calls(expected, [first, second]).passed
    swapped = match_calls(expected, [second, first])
    assert (swapped.score, swapped.passed) == (0.5, False)
    assert swapped.reason == "call 1: called 'second' instead of 'first': second()"
    short = match_calls(expected, [first])
    assert short.reason == "call 2: expected 'second', but the model made only 1 call"
    # with other calls allowed in between, the reason names the expected call not reached
    between = match_calls(expected, [first, call("other"), second], allow_extra=True)
    assert (between.score, between.passed) == (1.0, True)
    missed = match_calls(expected, [second, call("other"), first], allow_extra=True)
    assert not missed.passed
    assert missed.reason == "expected call 2 ('second') not made after call 3: no call to 'second'"
    absent = match_calls(expected, [call("other"), second], allow_extra=True)
    assert absent.reason == (
        "expected call 1 ('first') not made: no call to 'first' among: other, second"
    )


def test_booleans_none_and_numbers_keep_their_kinds() -> None:
    rules = [
        ((True, 1), False),
        ((1, True), False),
        ((0, False), False),
        ((False, False), True),
        ((False, True), False),
        ((None, None), True),
        (("", None), False),
        ((3, 3.0), True),
        ((3.0, 3), False),
        ((3.5, 3.0), False),
        (((1, 2), (1, 2)), True),
        (((1, 2), (1, 2, 3)), False),
    ]
    for (value, expected), same in rules:
        assert same_value(value, expected) is same, (value, expected)
    assert same_value((1, 2), [1, 2])


def test_arguments_optional_without_a_value_take_any_value() -> None:
    expected = [ExpectedCall("search", {"q": "cats"}, optional=frozenset({"page"}))]
    assert match_calls(expected, [call("search", q="Cats")]).passed
    assert match_calls(expected, [call("search", q="cats", page=3)]).passed
    assert not match_calls(expected, [call("search", q="cats", size=3)]).passed


def test_no_expected_calls_and_unreadable_arguments() -> None:
    assert match_calls([], []).reason == "no tool calls were expected and none were made"
    stray = match_calls([], [call("search")])
    assert (stray.score, stray.passed) == (0.0, False)
    assert stray.reason == "no tool calls were expected; the model made 1: search"
    broken = ToolCall("c", "search", {}, arguments_error="Expecting value: line 1")
    score = match_calls([ExpectedCall("search")], [broken])
    assert "arguments that could not be read (Expecting value: line 1)" in score.reason


def test_the_evaluator_reads_the_case_and_names_itself() -> None:
    case = Case(
        "two",
        "Look up both.",
        expected_tool_calls=(ExpectedCall("a"), ExpectedCall("b")),
        tool_order="any_order",
    )
    score = judge(case, [call("b"), call("a")])
    assert (score.evaluator, score.passed) == ("trajectory", True)
    assert score.reason == "all 2 expected calls matched in any order"
    no_expectation = Trajectory()(EvalContext(Case("x", "hi"), None, "", None))
    assert (no_expectation.passed, no_expectation.reason) == (
        False,
        "the case has no expected_tool_calls",
    )
