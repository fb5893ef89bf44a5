"""The built-in evaluators, the judge, and how any evaluator is called."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import re
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from glassagent._core.cost import Cost
from glassagent._core.errors import DatasetError, UserError
from glassagent._evals.model import Case, EvalContext, Evaluator, Score, as_score, evaluator_name

if TYPE_CHECKING:
    from glassagent._core.client import BaseLLMClient

_MISSING: Any = object()
_FENCE = re.compile(r"^\s*```[A-Za-z0-9_-]*\s*\n(.*?)\n?```\s*$", re.DOTALL)
_charges: ContextVar[list[Cost] | None] = ContextVar("glassagent_eval_charges", default=None)


def _expected(given: Any, ctx: EvalContext, name: str) -> Any:
    expected = ctx.case.expected_output if given is _MISSING else given
    if expected is None:
        raise UserError(
            f"The evaluator {name!r} needs an expected output (case {ctx.case.name!r})."
        )
    return expected


def _short(value: Any, limit: int = 120) -> str:
    """A value as text (JSON when not text) cut to `limit` characters.

    JSON is encoded piece by piece and stops at the limit: data built with YAML aliases
    can be far larger than its file.
    """
    if isinstance(value, str):
        text = value
    else:
        pieces: list[str] = []
        size = 0
        try:
            for piece in json.JSONEncoder(default=str).iterencode(value):
                pieces.append(piece)
                size += len(piece)
                if size > limit:
                    break
        except (TypeError, ValueError, RecursionError):
            pieces = [f"<{type(value).__name__}>"]
        text = "".join(pieces)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def same_json(a: Any, b: Any) -> bool:
    """Whether two JSON values are equal, types included.

    Booleans are not numbers (``true != 1``); an int and a float of the same value are
    equal (``1 == 1.0``), as JSON has one kind of number. Lists must be in the same order.
    """
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        if isinstance(x, bool) or isinstance(y, bool):
            if not (isinstance(x, bool) and isinstance(y, bool) and x == y):
                return False
        elif isinstance(x, (int, float)) or isinstance(y, (int, float)):
            if not (isinstance(x, (int, float)) and isinstance(y, (int, float)) and x == y):
                return False
        elif isinstance(x, Mapping) or isinstance(y, Mapping):
            if not (isinstance(x, Mapping) and isinstance(y, Mapping)) or x.keys() != y.keys():
                return False
            stack.extend((x[key], y[key]) for key in x)
        elif isinstance(x, (list, tuple)) or isinstance(y, (list, tuple)):
            if not (isinstance(x, (list, tuple)) and isinstance(y, (list, tuple))):
                return False
            if len(x) != len(y):
                return False
            stack.extend(zip(x, y, strict=True))
        elif type(x) is not type(y) or x != y:
            return False
    return True


def _jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return value


class Exact:
    """Passes when the answer equals the expected output, both trimmed of outer whitespace.

    Text is compared with text. A number, bool or null expected of a text answer is
    compared in its JSON form (``9`` matches ``"9"``, ``true`` matches ``"true"``). Any
    other expected value is compared with the run's typed output (see `same_json`).
    """

    name = "exact"

    def __init__(self, expected: Any = _MISSING, *, ignore_case: bool = False) -> None:
        """Compare with `expected` (default: the case's ``expected_output``)."""
        self.expected = expected
        self.ignore_case = ignore_case

    def __call__(self, ctx: EvalContext) -> Score:
        """Score one attempt."""
        expected = _expected(self.expected, ctx, self.name)
        if isinstance(expected, (bool, int, float)) and isinstance(ctx.output, str):
            expected = json.dumps(expected)
        if not isinstance(expected, str):
            answer = _jsonable(ctx.output)
            if same_json(answer, expected):
                return Score(self.name, 1.0, True, "equal")
            got = repr(_short(answer)) if isinstance(answer, str) else _short(answer)
            return Score(self.name, 0.0, False, f"expected {_short(expected)}, got {got}")
        answer, want = ctx.text.strip(), expected.strip()
        if self.ignore_case:
            answer, want = answer.casefold(), want.casefold()
        if answer == want:
            return Score(self.name, 1.0, True, "the answer is the expected text")
        return Score(self.name, 0.0, False, f"expected {_short(want)!r}, got {_short(answer)!r}")


class Contains:
    """Passes when the answer contains the expected text (or each of a list of texts).

    The score is the share of the texts found. Anything but text is refused: a dataset
    whose ``contains`` case expects a number fails to load.
    """

    name = "contains"

    def __init__(self, expected: Any = _MISSING, *, ignore_case: bool = False) -> None:
        """Look for `expected` (default: the case's ``expected_output``), a text or a list."""
        self.expected = expected
        self.ignore_case = ignore_case

    def __call__(self, ctx: EvalContext) -> Score:
        """Score one attempt."""
        expected = _expected(self.expected, ctx, self.name)
        if isinstance(expected, str):
            wanted = [expected]
        elif isinstance(expected, (list, tuple)) and all(isinstance(w, str) for w in expected):
            wanted = list(expected)
        else:
            raise UserError(f"'contains' needs a text or a list of texts, not {_short(expected)}.")
        answer = ctx.text.casefold() if self.ignore_case else ctx.text
        missing = [w for w in wanted if (w.casefold() if self.ignore_case else w) not in answer]
        score = (len(wanted) - len(missing)) / len(wanted) if wanted else 1.0
        if not missing:
            return Score(self.name, score, True, "every expected text is in the answer")
        shown = ", ".join(repr(_short(m, 60)) for m in missing)
        return Score(self.name, score, False, f"missing from the answer: {shown}")


class Regex:
    """Passes when a regular expression matches the answer (`re.search`, or whole with `full`)."""

    name = "regex"

    def __init__(self, pattern: str | None = None, *, flags: int = 0, full: bool = False) -> None:
        """Match `pattern` (default: the case's ``expected_output``)."""
        self.pattern = pattern
        self.flags = flags
        self.full = full

    def __call__(self, ctx: EvalContext) -> Score:
        """Score one attempt."""
        pattern = self.pattern if self.pattern is not None else _expected(_MISSING, ctx, self.name)
        try:
            compiled = re.compile(str(pattern), self.flags)
        except re.error as exc:
            raise UserError(f"Case {ctx.case.name!r}: invalid regular expression: {exc}") from None
        text = ctx.text.strip()
        found = compiled.fullmatch(text) if self.full else compiled.search(text)
        if found:
            return Score(self.name, 1.0, True, f"matches /{pattern}/")
        return Score(self.name, 0.0, False, f"/{pattern}/ does not match {_short(text)!r}")


def answer_json(ctx: EvalContext) -> Any:
    """The run's answer as JSON data: its typed output, or its text read as JSON.

    A text in a Markdown code fence is read inside the fence.

    Raises:
        ValueError: When the text is not JSON.
    """
    if ctx.output is not None and not isinstance(ctx.output, str):
        return _jsonable(ctx.output)
    text = ctx.text.strip()
    fenced = _FENCE.match(text)
    return json.loads(fenced.group(1) if fenced else text)


class JsonEqual:
    """Passes when the answer, read as JSON, equals the expected value, types included.

    ``true`` is not ``1``; an int equals a float of the same value (``1 == 1.0``).
    """

    name = "json_equal"

    def __init__(self, expected: Any = _MISSING) -> None:
        """Compare with `expected` (default: the case's ``expected_output``).

        An expected text is read as JSON first.
        """
        self.expected = expected

    def __call__(self, ctx: EvalContext) -> Score:
        """Score one attempt."""
        expected = _expected(self.expected, ctx, self.name)
        if isinstance(expected, str):
            with contextlib.suppress(ValueError):  # else a JSON string value
                expected = json.loads(expected)
        try:
            answer = answer_json(ctx)
        except (ValueError, RecursionError):
            return Score(self.name, 0.0, False, f"the answer is not JSON: {_short(ctx.text)!r}")
        if same_json(answer, expected):
            return Score(self.name, 1.0, True, "the JSON is equal")
        return Score(self.name, 0.0, False, f"expected {_short(expected)}, got {_short(answer)}")


class JsonSchemaValid:
    """Passes when the answer, read as JSON, is valid against a JSON Schema.

    The schema is the case's ``metadata["schema"]``, else `schema`, else `output_type`'s.
    """

    name = "json_schema"

    def __init__(self, schema: Mapping[str, Any] | None = None, *, output_type: Any = None) -> None:
        """Validate against `schema`, or the JSON Schema of `output_type` (a pydantic type)."""
        if schema is None and output_type is not None:
            from pydantic import TypeAdapter

            schema = TypeAdapter(output_type).json_schema()
        self.schema = schema

    def __call__(self, ctx: EvalContext) -> Score:
        """Score one attempt."""
        import jsonschema

        schema = ctx.case.metadata.get("schema", self.schema)
        if not isinstance(schema, Mapping):
            raise UserError(
                f"The evaluator 'json_schema' has no schema for case {ctx.case.name!r}: "
                'give one in its metadata ("schema") or to JsonSchemaValid.'
            )
        try:
            answer = answer_json(ctx)
        except (ValueError, RecursionError):
            return Score(self.name, 0.0, False, f"the answer is not JSON: {_short(ctx.text)!r}")
        validator = jsonschema.validators.validator_for(schema)(schema)
        error = jsonschema.exceptions.best_match(validator.iter_errors(answer))
        if error is None:
            return Score(self.name, 1.0, True, "valid against the schema")
        where = "/".join(str(p) for p in error.absolute_path) or "the answer"
        return Score(self.name, 0.0, False, f"{where}: {error.message}")


class _Verdict(BaseModel):
    score: float = Field(ge=0, le=1, description="0 = fails the rubric, 1 = meets it fully")
    reason: str = Field(description="one or two sentences: why this score")


JUDGE_SYSTEM = (
    "You grade the answer of an AI assistant against a rubric. Read the task, the rubric, "
    "the reference answer when one is given, and the answer. Give a score from 0 (fails "
    "the rubric) to 1 (meets it fully) and a short reason. Judge only what the rubric asks."
)
"""The judge's system prompt."""

DEFAULT_RUBRIC = "The answer is correct, complete and answers the task that was asked."
"""The rubric of a judge given none (neither to `Judge` nor in the case's metadata)."""


class Judge:
    """An LLM grades the answer with a rubric (LLM-as-judge); its cost counts in the report.

    The rubric is the case's ``metadata["rubric"]``, else `rubric`, else `DEFAULT_RUBRIC`.
    The judge sees the task, the case's ``expected_output`` as a reference when it has
    one, and the answer; it answers a score from 0 to 1 and a reason. Any client works:
    the judge is an agent run with a typed output. A judge that fails scores 0.
    """

    name = "judge"

    def __init__(
        self,
        client: BaseLLMClient,
        *,
        rubric: str | None = None,
        threshold: float = 0.5,
        system: str = JUDGE_SYSTEM,
    ) -> None:
        """Grade with `client`; an attempt passes with a score of at least `threshold`."""
        self.client = client
        self.rubric = rubric
        self.threshold = threshold
        self.system = system

    def prompt(self, ctx: EvalContext) -> str:
        """The message the judge's model is sent for one attempt."""
        case = ctx.case
        rubric = case.metadata.get("rubric") or self.rubric or DEFAULT_RUBRIC
        if isinstance(case.input, str):
            task = case.input
        else:
            task = "\n".join(f"[{m.role}] {m.content}" for m in case.input)
        parts = [f"<task>\n{task}\n</task>", f"<rubric>\n{rubric}\n</rubric>"]
        if case.expected_output is not None:
            reference = _short(case.expected_output, 4000)
            parts.append(f"<reference_answer>\n{reference}\n</reference_answer>")
        parts.append(f"<answer>\n{ctx.text}\n</answer>")
        return "\n\n".join(parts)

    async def __call__(self, ctx: EvalContext) -> Score:
        """Score one attempt."""
        from glassagent._agent.agent import Agent

        judge = Agent(self.client, system=self.system, output_type=_Verdict)
        try:
            result = await judge.run(self.prompt(ctx))
        except Exception as exc:
            partial = getattr(exc, "result", None)
            if partial is not None:
                charge(partial.cost)
            return Score(self.name, 0.0, False, f"the judge failed: {type(exc).__name__}: {exc}")
        charge(result.cost)
        verdict = result.output
        passed = verdict.score >= self.threshold
        return Score(self.name, verdict.score, passed, verdict.reason)


def charge(cost: Cost) -> None:
    """Count what an evaluator's own model calls cost in the attempt being scored.

    `Judge` calls it; a custom evaluator that calls a model may too. Outside `evaluate`
    it does nothing.
    """
    charges = _charges.get()
    if charges is not None:
        charges.append(cost)


@contextmanager
def charges() -> Iterator[list[Cost]]:
    """Collect the costs `charge` is given while the block runs (one attempt's scoring)."""
    collected: list[Cost] = []
    token = _charges.set(collected)
    try:
        yield collected
    finally:
        _charges.reset(token)


def evaluator_named(name: str, case: Case) -> Evaluator:
    """The built-in evaluator a dataset names, for `case`.

    ``judge`` needs a client: pass ``Judge(client)`` to `evaluate` (the case's name then
    picks it) rather than asking for it here.

    Raises:
        DatasetError: For an unknown name, or ``judge``.
    """
    if name == "exact":
        return Exact()
    if name == "contains":
        return Contains()
    if name == "regex":
        return Regex()
    if name == "json_equal":
        return JsonEqual()
    if name == "json_schema":
        return JsonSchemaValid()
    if name == "trajectory":
        from glassagent._evals.trajectory import Trajectory

        return Trajectory()
    problem = (
        "needs a model: pass Judge(client) in evaluate(evaluators=...)"
        if name == "judge"
        else "is not a built-in evaluator"
    )
    where = f"case {case.name!r}"
    raise DatasetError(f"{where}: evaluators: {name!r} {problem}.", where=where, field="evaluators")


async def run_evaluator(
    evaluator: Any, ctx: EvalContext, *, deadline: float | None = None
) -> Score:
    """Call an evaluator (sync or async) and read what it returns as a `Score`.

    An evaluator that raises, or returns a score that is not from 0 to 1, scores 0, its
    error as the reason. With a `deadline` (a `time.monotonic` time), an async evaluator
    still running then is cancelled and scores 0 (a sync one cannot be interrupted).
    """
    name = evaluator_name(evaluator)
    try:
        value = evaluator(ctx)
        if inspect.isawaitable(value):
            if deadline is None:
                value = await value
            else:
                value = await asyncio.wait_for(value, max(0.0, deadline - time.monotonic()))
        return as_score(value, name)
    except Exception as exc:
        if isinstance(exc, TimeoutError) and deadline is not None and time.monotonic() >= deadline:
            return Score(name, 0.0, False, "the evaluator ran out of time (the timeout)")
        return Score(name, 0.0, False, f"the evaluator raised {type(exc).__name__}: {exc}")
