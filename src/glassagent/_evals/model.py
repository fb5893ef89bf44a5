"""The data of evaluations: cases, datasets, scores and what evaluators are given."""

from __future__ import annotations

import importlib
import json
import math
import os
import re
from collections.abc import Awaitable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from glassagent._core.errors import DatasetError, UserError
from glassagent._core.messages import Message

if TYPE_CHECKING:
    from glassagent._core.messages import ToolCall
    from glassagent._core.result import RunResult

BUILTIN_EVALUATORS = (
    "exact",
    "contains",
    "regex",
    "json_equal",
    "json_schema",
    "trajectory",
    "judge",
)
"""The names a case may give in ``evaluators``."""

_NEEDS_OUTPUT = frozenset({"exact", "contains", "regex", "json_equal"})
_ORDERS = ("in_order", "any_order")
_CASE_FIELDS = frozenset(
    {
        "name",
        "input",
        "expected_output",
        "expected_tool_calls",
        "tool_order",
        "evaluators",
        "tags",
        "metadata",
    }
)
_CALL_FIELDS = frozenset({"name", "arguments", "any_of", "optional"})


def _fail(where: str, field_name: str | None, problem: str) -> DatasetError:
    at = f"{where}: {field_name}: " if field_name else f"{where}: "
    return DatasetError(at + problem, where=where, field=field_name)


def _problem(exc: DatasetError) -> str:
    """What is wrong, without the place `_fail` put before it."""
    at = f"{exc.where}: {exc.field}: " if exc.field else f"{exc.where}: "
    return str(exc).removeprefix(at)


def _str_tuple(value: Any, where: str, field_name: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, (list, tuple, frozenset, set)):
        raise _fail(where, field_name, f"must be a list of strings, not {_kind(value)}.")
    for item in value:
        if not isinstance(item, str):
            raise _fail(where, field_name, f"must hold strings only, not {_kind(item)}.")
    return tuple(value)


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _given(data: Mapping[str, Any], key: str, default: Any) -> Any:
    """A field's value; `default` when it is missing or null (``false``, ``0``... are kept)."""
    value = data.get(key)
    return default if value is None else value


@dataclass(frozen=True)
class ExpectedCall:
    """A tool call a case expects the model to make.

    Arguments are compared the BFCL way: each of `arguments` must be equal, each of `any_of`
    must be one of its acceptable values, those of `optional` may be left out, and no other
    argument may be given.
    """

    name: str
    """The tool's name."""
    arguments: Mapping[str, Any] = field(default_factory=dict)
    """Arguments whose value must be equal."""
    any_of: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    """Arguments with several acceptable values."""
    optional: frozenset[str] = frozenset()
    """Arguments the call may leave out."""

    def __post_init__(self) -> None:
        where = f"expected call {self.name!r}"
        if not isinstance(self.name, str) or not self.name:
            raise _fail("expected call", "name", "must be a non-empty string.")
        if not isinstance(self.arguments, Mapping):
            raise _fail(where, "arguments", f"must be an object, not {_kind(self.arguments)}.")
        if not isinstance(self.any_of, Mapping):
            raise _fail(where, "any_of", f"must be an object, not {_kind(self.any_of)}.")
        any_of: dict[str, tuple[Any, ...]] = {}
        for key, values in self.any_of.items():
            if isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple)):
                raise _fail(where, f"any_of.{key}", "must be a list of acceptable values.")
            any_of[key] = tuple(values)
        object.__setattr__(self, "any_of", any_of)
        object.__setattr__(self, "arguments", dict(self.arguments))
        optional = _str_tuple(self.optional, where, "optional")
        object.__setattr__(self, "optional", frozenset(optional))

    @classmethod
    def from_dict(cls, data: Any, *, where: str) -> ExpectedCall:
        """Read a call from its JSON form; a `DatasetError` names `where` and the field."""
        if not isinstance(data, Mapping):
            raise _fail(where, None, f"must be an object with a name, not {_kind(data)}.")
        unknown = sorted(set(data) - _CALL_FIELDS)
        if unknown:
            raise _fail(
                where, unknown[0], f"unknown field (known: {', '.join(sorted(_CALL_FIELDS))})."
            )
        name = data.get("name")
        if not isinstance(name, str) or not name:
            raise _fail(where, "name", f"must be a non-empty string, not {_kind(name)}.")
        try:
            return cls(
                name=name,
                arguments=_given(data, "arguments", {}),
                any_of=_given(data, "any_of", {}),
                optional=frozenset(_str_tuple(_given(data, "optional", []), where, "optional")),
            )
        except DatasetError as exc:
            raise _fail(where, exc.field, _problem(exc)) from None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of the call."""
        data: dict[str, Any] = {"name": self.name, "arguments": dict(self.arguments)}
        if self.any_of:
            data["any_of"] = {key: list(values) for key, values in self.any_of.items()}
        if self.optional:
            data["optional"] = sorted(self.optional)
        return data


@dataclass(frozen=True)
class Case:
    """One case of a dataset: an input, and what a good run does with it.

    A case with `expected_output` and no `evaluators` named is scored by equality after
    trimming (``exact``); one with `expected_tool_calls` and none named, by ``trajectory``.
    Lists given for the tuple fields become tuples.
    """

    name: str
    """Unique within its dataset; names the case in reports and recordings."""
    input: str | tuple[Message, ...]
    """A prompt, or a conversation to continue whose last message is the user's."""
    expected_output: Any = None
    """The expected answer (text, or JSON data for ``json_equal``), or `None`."""
    expected_tool_calls: tuple[ExpectedCall, ...] | None = None
    """The tool calls a good run makes, or `None` not to check them."""
    tool_order: Literal["in_order", "any_order"] = "in_order"
    """Whether `expected_tool_calls` must come in their order, or as a set."""
    evaluators: tuple[str, ...] = ()
    """Names of built-in evaluators to apply (see `BUILTIN_EVALUATORS`)."""
    tags: tuple[str, ...] = ()
    """Labels to group cases by in reports."""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    """Anything else: ``schema`` for ``json_schema``, ``rubric`` for ``judge``..."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise _fail("case", "name", f"must be a non-empty string, not {self.name!r}.")
        where = f"case {self.name!r}"
        object.__setattr__(self, "input", _input(self.input, where))
        calls = self.expected_tool_calls
        if calls is not None:
            if isinstance(calls, (str, Mapping)) or not isinstance(calls, Iterable):
                raise _fail(where, "expected_tool_calls", "must be a list of ExpectedCall.")
            calls = tuple(calls)
            for index, call in enumerate(calls):
                if not isinstance(call, ExpectedCall):
                    raise _fail(where, f"expected_tool_calls[{index}]", "must be an ExpectedCall.")
            object.__setattr__(self, "expected_tool_calls", calls)
        if self.tool_order not in _ORDERS:
            raise _fail(
                where, "tool_order", f"must be 'in_order' or 'any_order', not {self.tool_order!r}."
            )
        object.__setattr__(self, "evaluators", _str_tuple(self.evaluators, where, "evaluators"))
        object.__setattr__(self, "tags", _str_tuple(self.tags, where, "tags"))
        if not isinstance(self.metadata, Mapping):
            raise _fail(where, "metadata", f"must be an object, not {_kind(self.metadata)}.")
        self._check_evaluators(where)

    def _check_evaluators(self, where: str) -> None:
        for index, name in enumerate(self.evaluators):
            at = f"evaluators[{index}]"
            if name not in BUILTIN_EVALUATORS:
                known = ", ".join(BUILTIN_EVALUATORS)
                raise _fail(where, at, f"unknown evaluator {name!r} (known: {known}).")
            if name in _NEEDS_OUTPUT and self.expected_output is None:
                raise _fail(where, "expected_output", f"is needed by the evaluator {name!r}.")
            if name == "trajectory" and self.expected_tool_calls is None:
                raise _fail(
                    where, "expected_tool_calls", "is needed by the evaluator 'trajectory'."
                )
            if name == "json_schema" and not isinstance(self.metadata.get("schema"), Mapping):
                raise _fail(where, "metadata.schema", "is needed (a JSON Schema) by 'json_schema'.")
            if name == "regex":
                _check_regex(self.expected_output, where)
            if name == "contains" and not _texts(self.expected_output):
                raise _fail(
                    where, "expected_output", "must be a text or a list of texts for 'contains'."
                )

    def scored_by(self) -> tuple[str, ...]:
        """The names of the built-in evaluators that score this case.

        Those named in `evaluators`; when none are: ``exact`` for a case with an
        `expected_output`, ``trajectory`` for one with `expected_tool_calls` (both for both).
        """
        if self.evaluators:
            return self.evaluators
        names: list[str] = []
        if self.expected_output is not None:
            names.append("exact")
        if self.expected_tool_calls is not None:
            names.append("trajectory")
        return tuple(names)

    @classmethod
    def from_dict(cls, data: Any, *, where: str) -> Case:
        """Read a case from its JSON form; a `DatasetError` names `where`, the case and field."""
        if not isinstance(data, Mapping):
            raise _fail(where, None, f"a case must be an object, not {_kind(data)}.")
        name = data.get("name")
        if not isinstance(name, str) or not name.strip():
            raise _fail(where, "name", f"must be a non-empty string, not {_kind(name)}.")
        where = f"{where} (case {name!r})"
        unknown = sorted(set(data) - _CASE_FIELDS)
        if unknown:
            known = ", ".join(sorted(_CASE_FIELDS))
            raise _fail(where, unknown[0], f"unknown field (known: {known}).")
        if "input" not in data:
            raise _fail(where, "input", "is missing (a prompt, or a list of messages).")
        calls = data.get("expected_tool_calls")
        if calls is not None:
            if not isinstance(calls, list):
                raise _fail(where, "expected_tool_calls", f"must be a list, not {_kind(calls)}.")
            calls = tuple(_call(call, where, index) for index, call in enumerate(calls))
        try:
            return cls(
                name=name,
                input=_input_from_json(data["input"], where),
                expected_output=data.get("expected_output"),
                expected_tool_calls=calls,
                tool_order=data.get("tool_order", "in_order"),
                evaluators=_str_tuple(_given(data, "evaluators", []), where, "evaluators"),
                tags=_str_tuple(_given(data, "tags", []), where, "tags"),
                metadata=_given(data, "metadata", {}),
            )
        except DatasetError as exc:
            raise _fail(where, exc.field, _problem(exc)) from None


def _check_regex(pattern: Any, where: str) -> None:
    if not isinstance(pattern, str):
        raise _fail(where, "expected_output", "must be a regular expression (a string).")
    try:
        re.compile(pattern)
    except re.error as exc:
        problem = f"is not a valid regular expression ({exc})."
        raise _fail(where, "expected_output", problem) from None


def _texts(value: Any) -> bool:
    """Whether `value` is a text, or a list of texts (what ``contains`` looks for)."""
    if isinstance(value, str):
        return True
    return isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value)


def _call(data: Any, where: str, index: int) -> ExpectedCall:
    try:
        return ExpectedCall.from_dict(data, where=where)
    except DatasetError as exc:
        at = f"expected_tool_calls[{index}]" + (f".{exc.field}" if exc.field else "")
        raise _fail(where, at, _problem(exc)) from None


def _input(value: Any, where: str) -> str | tuple[Message, ...]:
    if isinstance(value, str):
        if not value.strip():
            raise _fail(where, "input", "is an empty prompt.")
        return value
    if isinstance(value, (list, tuple)) and value:
        for index, message in enumerate(value):
            if not isinstance(message, Message):
                raise _fail(where, f"input[{index}]", f"must be a Message, not {_kind(message)}.")
        if value[-1].role != "user":
            raise _fail(where, "input", "a conversation must end with the user's message.")
        return tuple(value)
    raise _fail(where, "input", f"must be a prompt or a list of messages, not {_kind(value)}.")


def _input_from_json(value: Any, where: str) -> str | tuple[Message, ...]:
    if not isinstance(value, list):
        return _input(value, where)
    from pydantic import TypeAdapter, ValidationError

    adapter: TypeAdapter[Message] = TypeAdapter(Message)
    messages = []
    for index, item in enumerate(value):
        if not isinstance(item, Mapping) or not isinstance(item.get("role"), str):
            raise _fail(where, f"input[{index}]", "must be a message: {role, content}.")
        try:
            messages.append(adapter.validate_python(dict(item)))
        except (ValidationError, UserError) as exc:
            problem = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise _fail(where, f"input[{index}]", f"is not a message ({problem}).") from None
    return _input(messages, where)


class Dataset:
    """Named cases to evaluate an agent on; iterable. Duplicate case names are refused.

    Build one in Python, ``Dataset("smoke", [Case(...), ...])``, or read one with `load`
    (JSON Lines, YAML or JSON: one case per line or item).
    """

    def __init__(self, name: str, cases: Iterable[Case]) -> None:
        self.name = name
        self.cases = tuple(cases)
        seen: dict[str, int] = {}
        for index, case in enumerate(self.cases):
            if not isinstance(case, Case):
                raise _fail(f"dataset {name!r}, case {index}", None, "must be a Case.")
            if case.name in seen:
                raise _fail(
                    f"dataset {name!r}, case {index} ({case.name!r})",
                    "name",
                    f"the name is already that of case {seen[case.name]}.",
                )
            seen[case.name] = index

    def __iter__(self) -> Iterator[Case]:
        return iter(self.cases)

    def __len__(self) -> int:
        return len(self.cases)

    def __repr__(self) -> str:
        return f"Dataset({self.name!r}, {len(self.cases)} cases)"

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Dataset:
        """Read a dataset from a ``.jsonl``, ``.yaml``/``.yml`` or ``.json`` file.

        Its name is the file's stem. A YAML or JSON file holds a list of cases, or an object
        with ``name`` and ``cases``. Raises `DatasetError` naming the file, case and field.
        """
        suffix = Path(path).suffix.lower()
        if suffix == ".jsonl":
            return cls.from_jsonl(path)
        if suffix in (".yaml", ".yml"):
            return cls.from_yaml(path)
        if suffix == ".json":
            return cls._from_document(path, _read_json(path))
        raise DatasetError(
            f"{path}: a dataset is a .jsonl, .yaml, .yml or .json file.", where=str(path)
        )

    @classmethod
    def from_jsonl(cls, path: str | os.PathLike[str]) -> Dataset:
        """Read a dataset from JSON Lines: one case per line; blank lines are skipped."""
        cases = []
        for number, line in enumerate(_read_text(path).splitlines(), start=1):
            if not line.strip():
                continue
            where = f"{path}, line {number}"
            try:
                data = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{where}: not JSON ({exc.msg}).", where=where) from None
            except RecursionError:
                raise _too_deep(where) from None
            cases.append(Case.from_dict(data, where=where))
        return cls._named(path, cases)

    @classmethod
    def from_yaml(cls, path: str | os.PathLike[str]) -> Dataset:
        """Read a dataset from YAML: a list of cases, or ``{name, cases}``; needs PyYAML."""
        try:
            yaml: Any = importlib.import_module("yaml")
        except ImportError:
            raise DatasetError(
                f"{path}: reading YAML needs PyYAML: install the evals extra "
                "(pip install -e '.[evals]' from this checkout, or pip install pyyaml)",
                where=str(path),
            ) from None
        try:
            document = yaml.safe_load(_read_text(path))
        except yaml.YAMLError as exc:
            raise DatasetError(f"{path}: not YAML ({exc}).", where=str(path)) from None
        except RecursionError:
            raise _too_deep(str(path)) from None
        return cls._from_document(path, document)

    @classmethod
    def _from_document(cls, path: str | os.PathLike[str], document: Any) -> Dataset:
        name = Path(path).stem
        if isinstance(document, Mapping):
            name = str(document.get("name") or name)
            document = document.get("cases")
        if not isinstance(document, list):
            raise DatasetError(
                f"{path}: cases: must be a list of cases, not {_kind(document)}.",
                where=str(path),
                field="cases",
            )
        cases = [Case.from_dict(data, where=f"{path}, case {i}") for i, data in enumerate(document)]
        return cls._named(path, cases, name)

    @classmethod
    def _named(
        cls, path: str | os.PathLike[str], cases: Sequence[Case], name: str | None = None
    ) -> Dataset:
        try:
            return cls(name or Path(path).stem, cases)
        except DatasetError as exc:
            raise DatasetError(
                f"{path}: {exc}", where=f"{path}: {exc.where}", field=exc.field
            ) from None


def _read_text(path: str | os.PathLike[str]) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise DatasetError(f"{path}: cannot be read ({exc.strerror}).", where=str(path)) from None
    except UnicodeDecodeError:
        raise DatasetError(f"{path}: is not UTF-8 text.", where=str(path)) from None


def _read_json(path: str | os.PathLike[str]) -> Any:
    try:
        return json.loads(_read_text(path))
    except json.JSONDecodeError as exc:
        where = f"{path}, line {exc.lineno}"
        raise DatasetError(f"{where}: not JSON ({exc.msg}).", where=where) from None
    except RecursionError:
        raise _too_deep(str(path)) from None


def _too_deep(where: str) -> DatasetError:
    return DatasetError(f"{where}: the data is nested too deeply to read.", where=where)


@dataclass(frozen=True)
class Score:
    """What one evaluator made of one attempt."""

    evaluator: str
    """The evaluator's name."""
    score: float
    """From 0 (wrong) to 1 (right)."""
    passed: bool
    """Whether the attempt passes this evaluator."""
    reason: str = ""
    """Why, in a sentence."""

    def __post_init__(self) -> None:
        score = self.score
        if (
            isinstance(score, bool)
            or not isinstance(score, (int, float))
            or not math.isfinite(score)
            or not 0 <= score <= 1
        ):
            raise UserError(
                f"The score of {self.evaluator!r} must be a number from 0 to 1, got {score!r}."
            )
        object.__setattr__(self, "score", float(score))

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of the score."""
        return {
            "evaluator": self.evaluator,
            "score": self.score,
            "passed": self.passed,
            "reason": self.reason,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Score:
        """Read a score from its JSON form (`UserError` for a score that is not from 0 to 1)."""
        return cls(
            evaluator=str(data["evaluator"]),
            score=data["score"],
            passed=bool(data["passed"]),
            reason=str(data.get("reason", "")),
        )


@dataclass(frozen=True)
class EvalContext:
    """What an evaluator is given: the case, and what one attempt of it did."""

    case: Case
    """The case run."""
    output: Any
    """The run's output (its text, or its validated ``output_type``); `None` after an error."""
    text: str
    """The run's final text ("" after an error)."""
    result: RunResult[Any] | None
    """The run's result; `None` when the run failed before one."""
    tool_calls: tuple[ToolCall, ...] = ()
    """Every tool call the model made, in order (the agent's own, not sub-agents')."""
    error: str | None = None
    """Why the run failed, or `None`."""


EvaluatorResult = Score | float | bool
"""What an evaluator returns: a `Score`, a score from 0 to 1 (passed from 0.5), or pass/fail."""


class Evaluator(Protocol):
    """Scores one attempt: ``(ctx) -> Score | float | bool``, or an async function of it.

    A float is a score (passed when at least 0.5), a bool pass or fail. An evaluator's
    ``name`` attribute (or its function's name) names it in reports.
    """

    def __call__(
        self, ctx: EvalContext, /
    ) -> EvaluatorResult | Awaitable[EvaluatorResult]: ...  # pragma: no cover


def evaluator_name(evaluator: Any) -> str:
    """The name an evaluator is reported under."""
    name = getattr(evaluator, "name", None)
    if isinstance(name, str) and name:
        return name
    return str(getattr(evaluator, "__name__", type(evaluator).__name__))


def as_score(value: Any, name: str) -> Score:
    """An evaluator's return value as a `Score` (a `UserError` for anything else)."""
    if isinstance(value, Score):
        return value
    if isinstance(value, bool):
        return Score(name, 1.0 if value else 0.0, value, "passed" if value else "failed")
    if isinstance(value, (int, float)):
        score = Score(name, value, value >= 0.5)  # a UserError when not from 0 to 1
        return Score(name, score.score, score.passed, f"score {score.score:.2f}")
    raise UserError(
        f"The evaluator {name!r} returned {_kind(value)}: return a Score, a float or a bool."
    )
