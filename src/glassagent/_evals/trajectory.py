"""The ``trajectory`` evaluator: the tool calls a run made against those a case expects.

Arguments are compared the way the Berkeley Function Calling Leaderboard's AST checker
compares them: strings without case, spaces and ``,./-_*^`` (and ``'`` read as ``"``), an
integer passes for a float (not a float for an integer), booleans only as booleans, lists
item by item, objects key by key; an argument may have several acceptable values
(`ExpectedCall.any_of`), may be left out when it is `ExpectedCall.optional`, and no argument
the case does not name may be given.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from glassagent._core.messages import ToolCall
from glassagent._evals.model import EvalContext, ExpectedCall, Score

__all__ = ["Trajectory", "call_mismatch", "match_calls", "same_value"]

_IGNORED = re.compile(r"[ ,./\-_*^]")
_SHOWN = 160  # characters of a call or value shown in a reason


def _standard(text: str) -> str:
    """A string as BFCL compares it: no spaces or ``,./-_*^``, lower case, ``'`` as ``"``."""
    return _IGNORED.sub("", text).lower().replace("'", '"')


def same_value(value: Any, expected: Any) -> bool:
    """Whether an argument's `value` fits one `expected` value, by BFCL's rules.

    Strings are compared without case, spaces and ``,./-_*^``; an integer passes for a
    float, a float does not pass for an integer; booleans and `None` only match themselves;
    lists (or tuples) item by item, objects key by key (same keys).
    """
    if isinstance(expected, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(expected, bool) and value is expected
    if expected is None:
        return value is None
    if isinstance(expected, str):
        return isinstance(value, str) and _standard(value) == _standard(expected)
    if isinstance(expected, float):
        return isinstance(value, int | float) and float(value) == expected
    if isinstance(expected, int):
        return isinstance(value, int) and value == expected
    if isinstance(expected, list | tuple):
        return (
            isinstance(value, list | tuple)
            and len(value) == len(expected)
            and all(same_value(v, e) for v, e in zip(value, expected, strict=True))
        )
    if isinstance(expected, Mapping):
        return (
            isinstance(value, Mapping)
            and set(value) == set(expected)
            and all(same_value(value[key], expected[key]) for key in expected)
        )
    return bool(value == expected)


def _acceptable(expected: ExpectedCall) -> dict[str, tuple[Any, ...] | None]:
    """Each argument the call may have: its acceptable values (`None`: any value)."""
    accepted: dict[str, tuple[Any, ...] | None] = dict.fromkeys(expected.optional)
    for key, value in expected.arguments.items():
        accepted[key] = (value,)
    for key, values in expected.any_of.items():
        accepted[key] = (*(accepted.get(key) or ()), *values)
    return accepted


def call_mismatch(expected: ExpectedCall, call: ToolCall) -> str | None:
    """Why `call` does not fit `expected` (the first problem found), or `None` when it does."""
    if call.name != expected.name:
        return f"called {call.name!r} instead of {expected.name!r}"
    if call.arguments_error is not None:
        return f"{call.name!r} got arguments that could not be read ({call.arguments_error})"
    accepted = _acceptable(expected)
    for key in call.input:
        if key not in accepted:
            return f"{call.name!r} got the unexpected argument {key!r}"
    for key, values in accepted.items():
        if key not in call.input:
            if key not in expected.optional:
                return f"{call.name!r} is missing the argument {key!r}"
            continue
        value = call.input[key]
        if values is None or any(same_value(value, option) for option in values):
            continue
        got = _short(repr(value))
        if not values:
            return f"{call.name!r} got {key}={got}; it should be left out"
        if len(values) == 1:
            return f"{call.name!r} got {key}={got}, expected {_short(repr(values[0]))}"
        wanted = _short(", ".join(map(repr, values)))
        return f"{call.name!r} got {key}={got}, expected one of {wanted}"
    return None


def _short(text: str) -> str:
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def _describe(call: ToolCall) -> str:
    arguments = ", ".join(f"{key}={value!r}" for key, value in call.input.items())
    return _short(f"{call.name}({arguments})")


def _names(calls: Sequence[ToolCall]) -> str:
    return ", ".join(call.name for call in calls) or "none"


def _count(n: int) -> str:
    return f"{n} call" if n == 1 else f"{n} calls"


def _in_order_matches(expected: Sequence[ExpectedCall], calls: Sequence[ToolCall]) -> int:
    """The most expected calls matched by calls made in the same order (a common subsequence)."""
    best = [[0] * (len(calls) + 1) for _ in range(len(expected) + 1)]
    for i, want in enumerate(expected):
        for j, call in enumerate(calls):
            if call_mismatch(want, call) is None:
                best[i + 1][j + 1] = best[i][j] + 1
            else:
                best[i + 1][j + 1] = max(best[i][j + 1], best[i + 1][j])
    return best[-1][-1]


def _any_order_matches(
    expected: Sequence[ExpectedCall], calls: Sequence[ToolCall]
) -> dict[int, int]:
    """A largest matching of expected calls to calls made (expected index -> call index)."""
    fits = [
        [j for j, call in enumerate(calls) if call_mismatch(want, call) is None]
        for want in expected
    ]
    owner: dict[int, int] = {}  # call index -> expected index

    def place(i: int, seen: set[int]) -> bool:
        for j in fits[i]:
            if j in seen:
                continue
            seen.add(j)
            if j not in owner or place(owner[j], seen):
                owner[j] = i
                return True
        return False

    for i in range(len(expected)):
        place(i, set())
    return {i: j for j, i in owner.items()}


def _in_order_reason(
    expected: Sequence[ExpectedCall], calls: Sequence[ToolCall], allow_extra: bool
) -> str:
    """The first position where the calls made differ from the expected ones."""
    if allow_extra:  # the first expected call the calls made (in order) do not reach
        position = 0
        for number, want in enumerate(expected, start=1):
            found = next(
                (j for j in range(position, len(calls)) if call_mismatch(want, calls[j]) is None),
                None,
            )
            if found is None:
                after = f" after call {position}" if position else ""
                head = f"expected call {number} ({want.name!r}) not made{after}: "
                return head + _closest(want, calls[position:])
            position = found + 1
    for number, (want, call) in enumerate(zip(expected, calls, strict=False), start=1):
        problem = call_mismatch(want, call)
        if problem is not None:
            return f"call {number}: {problem}: {_describe(call)}"
    if len(calls) < len(expected):
        missing = expected[len(calls)]
        return (
            f"call {len(calls) + 1}: expected {missing.name!r}, but the model made only "
            f"{_count(len(calls))}"
        )
    extra = calls[len(expected)]
    return (
        f"call {len(expected) + 1}: unexpected call {_describe(extra)} "
        f"({_count(len(expected))} expected)"
    )


def _closest(want: ExpectedCall, calls: Sequence[ToolCall]) -> str:
    """Why none of `calls` fits `want`, told against the closest one."""
    same_name = [call for call in calls if call.name == want.name]
    if same_name:
        call = same_name[0]
        return f"{call_mismatch(want, call)}: {_describe(call)}"
    return f"no call to {want.name!r}" + (f" among: {_names(calls)}" if calls else "")


def _any_order_reason(
    expected: Sequence[ExpectedCall], calls: Sequence[ToolCall], matched: Mapping[int, int]
) -> str:
    left = [call for j, call in enumerate(calls) if j not in set(matched.values())]
    for number, want in enumerate(expected, start=1):
        if number - 1 not in matched:
            return f"expected call {number} ({want.name!r}) not made: " + _closest(want, left)
    return (
        f"unexpected call {_describe(left[0])} ({_count(len(expected))} expected, "
        f"{len(calls)} made)"
    )


def match_calls(
    expected: Sequence[ExpectedCall],
    calls: Sequence[ToolCall],
    *,
    order: Literal["in_order", "any_order"] = "in_order",
    allow_extra: bool = False,
    name: str = "trajectory",
) -> Score:
    """Score the `calls` a model made against the `expected` ones.

    The score is the share of expected calls matched; unless `allow_extra`, calls beyond the
    expected number count as misses (matched / the larger of the two counts). ``in_order``
    matches calls in their order, ``any_order`` as a set (each call made matches one expected
    call at most). A run passes when every expected call is matched and, unless
    `allow_extra`, no other call was made. The reason names the first mismatch.
    """
    if order == "in_order":
        matched = _in_order_matches(expected, calls)
        pairs: Mapping[int, int] = {}
    else:
        pairs = _any_order_matches(expected, calls)
        matched = len(pairs)
    extra = len(calls) - matched
    passed = matched == len(expected) and (allow_extra or extra == 0)
    total = len(expected) if allow_extra else max(len(expected), len(calls))
    score = matched / total if total else 1.0
    if passed:
        how = "in order" if order == "in_order" else "in any order"
        if not expected:
            reason = "no tool calls were expected" + (" and none were made" if not calls else "")
        else:
            reason = (
                "the expected call matched"
                if len(expected) == 1
                else f"all {len(expected)} expected calls matched {how}"
            )
        return Score(name, score, True, reason)
    if not expected:
        reason = f"no tool calls were expected; the model made {len(calls)}: {_names(calls)}"
    elif order == "in_order":
        reason = _in_order_reason(expected, calls, allow_extra)
    else:
        reason = _any_order_reason(expected, calls, pairs)
    return Score(name, score, False, reason)


class Trajectory:
    """Scores the tool calls of a run against the case's `expected_tool_calls`.

    The case's `tool_order` says whether they must come in their order (``in_order``) or
    form a set (``any_order``). Arguments are compared as BFCL compares them (see
    `same_value`). The score is the share of expected calls matched (calls beyond the
    expected number count as misses); the reason names the first mismatch.

    Example:
        ```python
        case = Case(
            "weather",
            "What is the weather in Paris?",
            expected_tool_calls=[ExpectedCall("get_weather", {"city": "Paris"})],
        )
        report = await evaluate(agent, [case], evaluators=[Trajectory()])
        ```
    """

    name = "trajectory"

    def __init__(self, *, allow_extra_calls: bool = False) -> None:
        """Create the evaluator.

        Args:
            allow_extra_calls: Whether calls beyond the expected ones are allowed (they
                neither fail the run nor lower its score).
        """
        self.allow_extra_calls = allow_extra_calls

    def __repr__(self) -> str:
        return f"Trajectory(allow_extra_calls={self.allow_extra_calls})"

    def __call__(self, ctx: EvalContext) -> Score:
        """Score one attempt (a case without `expected_tool_calls` fails with a reason)."""
        expected = ctx.case.expected_tool_calls
        if expected is None:
            return Score(self.name, 0.0, False, "the case has no expected_tool_calls")
        return match_calls(
            expected,
            ctx.tool_calls,
            order=ctx.case.tool_order,
            allow_extra=self.allow_extra_calls,
            name=self.name,
        )
