"""The Berkeley Function Calling Leaderboard's single-turn sets as datasets.

BFCL (Apache-2.0) is read at run time from the ``bfcl-eval`` package: installed, or its
wheel or unpacked data folder given as ``data`` (``pip download bfcl-eval --no-deps -d
DIR``). It is never a dependency, and nothing of it is copied here.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import re
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from glassagent._core.errors import ConfigurationError, DatasetError, UserError
from glassagent._core.messages import Message
from glassagent._evals.model import Case, Dataset, ExpectedCall

if TYPE_CHECKING:
    from glassagent._agent.agent import Agent
    from glassagent._core.client import BaseLLMClient
    from glassagent._core.messages import ModelSettings

__all__ = ["BFCL_CATEGORIES", "bfcl_agent", "load_bfcl"]

BFCL_CATEGORIES: Mapping[str, Literal["in_order", "any_order"]] = {
    "simple_python": "in_order",
    "multiple": "in_order",
    "parallel": "any_order",
    "parallel_multiple": "any_order",
    "live_simple": "in_order",
    "live_multiple": "in_order",
    "live_parallel": "any_order",
    "live_parallel_multiple": "any_order",
}
"""The BFCL categories `load_bfcl` reads, and the order their expected calls are checked in."""

_OLD_NAMES = {"simple_python": "simple"}  # the name of the set before BFCL v4
_TYPES = {"dict": "object", "float": "number", "tuple": "array"}
_MAX_ALTERNATIVES = 512
_NO_DATA = (
    "No BFCL data: install bfcl-eval, or pass its wheel or data folder as `data` "
    "(pip download bfcl-eval --no-deps -d DIR)."
)
_OMIT = object()  # an argument of a nested object that may be left out
Root = Path | zipfile.Path


def _data_root(data: str | os.PathLike[str] | None) -> Root:
    """The folder holding BFCL's question files (and ``possible_answer``)."""
    if data is None:
        spec = importlib.util.find_spec("bfcl_eval")
        if spec is None or not spec.submodule_search_locations:
            raise ConfigurationError(_NO_DATA)
        return Path(next(iter(spec.submodule_search_locations))) / "data"
    path = Path(data)
    if path.is_dir():
        for inner in (path / "bfcl_eval" / "data", path / "data"):
            if inner.is_dir():
                return inner
        wheels = sorted(path.glob("bfcl_eval-*.whl"))
        if wheels and not any(path.glob("BFCL_v*.json")):
            path = wheels[-1]
        else:
            return path
    if path.suffix == ".whl" and path.is_file():
        try:
            return zipfile.Path(path) / "bfcl_eval" / "data"
        except (OSError, zipfile.BadZipFile) as exc:
            raise DatasetError(f"{path}: not a readable wheel ({exc}).", where=str(path)) from None
    raise ConfigurationError(f"{data}: neither a bfcl-eval wheel nor a folder. {_NO_DATA}")


def _set_name(root: Root, category: str) -> str:
    """The file name of the newest version of `category` in `root`."""
    found: list[tuple[int, str]] = []
    try:
        names = [entry.name for entry in root.iterdir()]
    except (OSError, KeyError, ValueError):  # a wheel without the folder: ValueError
        names = []
    for wanted in (category, _OLD_NAMES.get(category)):
        pattern = re.compile(rf"BFCL_v(\d+)_{wanted}\.json")
        found = [(int(m[1]), m[0]) for m in map(pattern.fullmatch, names) if m]
        if found:
            return max(found)[1]
    raise DatasetError(f"{root}: no BFCL_v*_{category}.json here. {_NO_DATA}", where=str(root))


def _read_rows(path: Root) -> list[dict[str, Any]]:
    rows = []
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, KeyError) as exc:
        raise DatasetError(f"{path}: cannot be read ({exc}).", where=str(path)) from None
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                where = f"{path}, line {number}"
                raise DatasetError(f"{where}: not JSON ({exc.msg}).", where=where) from None
    return rows


def json_schema(value: Any) -> Any:
    """A BFCL parameter schema as JSON Schema (its ``dict``, ``float``, ``tuple``, ``any``)."""
    if isinstance(value, list):
        return [json_schema(item) for item in value]
    if not isinstance(value, dict):
        return value
    out = {key: json_schema(item) for key, item in value.items() if key != "optional"}
    kind = out.get("type")
    if kind == "any":
        del out["type"]
    elif isinstance(kind, str):
        out["type"] = _TYPES.get(kind, kind)
    return out


def _typed(value: Any, schema: Any) -> Any:
    """`value` with the integers a ``float`` parameter takes made floats."""
    if not isinstance(schema, Mapping):
        return value
    kind = schema.get("type")
    if kind == "float" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if kind in ("array", "tuple") and isinstance(value, list):
        return [_typed(item, schema.get("items")) for item in value]
    if kind == "dict" and isinstance(value, dict):
        properties = schema.get("properties") or {}
        return {key: _typed(item, properties.get(key)) for key, item in value.items()}
    return value


def _alternatives(value: Any, schema: Any) -> list[Any]:
    """Each concrete value BFCL's answer `value` accepts.

    An object in an answer gives each key its acceptable values (``""``: may be left out),
    so it stands for every combination of them; a list stands for each combination of its
    items' alternatives.
    """
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    if isinstance(value, dict):
        keys = list(value)
        options = []
        for key in keys:
            acceptable = value[key] if isinstance(value[key], list) else [value[key]]
            field = (properties or {}).get(key)
            choices: list[Any] = [_OMIT] if "" in acceptable else []
            for item in acceptable:
                if item != "":
                    choices.extend(_alternatives(item, field))
            options.append(choices)
        combos = _bounded(itertools.product(*options))
        return [
            {k: v for k, v in zip(keys, combo, strict=True) if v is not _OMIT} for combo in combos
        ]
    if isinstance(value, list) and any(isinstance(item, dict) for item in value):
        items = schema.get("items") if isinstance(schema, Mapping) else None
        return [
            list(combo)
            for combo in _bounded(itertools.product(*(_alternatives(i, items) for i in value)))
        ]
    return [_typed(value, schema)]


def _bounded(combos: Any) -> list[Any]:
    out = list(itertools.islice(combos, _MAX_ALTERNATIVES + 1))
    if len(out) > _MAX_ALTERNATIVES:
        raise DatasetError(
            f"an answer has more than {_MAX_ALTERNATIVES} acceptable values", field="ground_truth"
        )
    return out


def _expected_call(name: str, answer: Any, function: Mapping[str, Any]) -> ExpectedCall:
    """One call of BFCL's ``ground_truth``: each argument's acceptable values."""
    properties = (function.get("parameters") or {}).get("properties") or {}
    arguments: dict[str, Any] = {}
    any_of: dict[str, tuple[Any, ...]] = {}
    optional = set()
    for key, acceptable in answer.items():
        acceptable = acceptable if isinstance(acceptable, list) else [acceptable]
        if "" in acceptable:
            optional.add(key)
        values = [
            option
            for item in acceptable
            if item != ""
            for option in _alternatives(item, properties.get(key))
        ]
        if len(values) == 1:
            arguments[key] = values[0]
        else:  # none: the argument must be left out
            any_of[key] = tuple(values)
    return ExpectedCall(name, arguments, any_of, frozenset(optional))


def _tool_name(name: str) -> str:
    return name.replace(".", "_")  # tool names take no dots


def _case(row: Mapping[str, Any], answer: Mapping[str, Any], category: str) -> Case:
    turns = row["question"]
    if len(turns) != 1:
        raise DatasetError(
            "a multi-turn question; only single-turn sets are read", field="question"
        )
    messages = tuple(Message(role=m["role"], content=m["content"]) for m in turns[0])
    functions = {_tool_name(f["name"]): f for f in row["function"]}
    if len(functions) != len(row["function"]):
        raise DatasetError("two functions have the same tool name", field="function")
    calls = []
    for call in answer["ground_truth"]:
        ((name, arguments),) = call.items()
        function = functions.get(_tool_name(name))
        if function is None:
            raise DatasetError(
                f"the answer calls {name!r}, not a function of the question", field="ground_truth"
            )
        calls.append(_expected_call(_tool_name(name), arguments, function))
    schemas = [
        {
            "name": tool,
            "description": function.get("description") or tool,
            "parameters": json_schema(
                function.get("parameters") or {"type": "dict", "properties": {}}
            ),
        }
        for tool, function in functions.items()
    ]
    only_user = len(messages) == 1 and messages[0].role == "user"
    return Case(
        name=row["id"],
        input=messages[0].content if only_user else messages,
        expected_tool_calls=tuple(calls),
        tool_order=BFCL_CATEGORIES[category],
        tags=(category,),
        metadata={
            "functions": schemas,
            "bfcl_id": row["id"],
            "bfcl_names": {t: f["name"] for t, f in functions.items()},
        },
    )


def load_bfcl(
    category: str = "simple_python",
    *,
    data: str | os.PathLike[str] | None = None,
    count: int | None = None,
) -> Dataset:
    """A BFCL set as a dataset: each question a case that expects BFCL's possible answers.

    The data comes from the installed ``bfcl-eval`` package, or from `data`: its wheel, a
    folder holding the wheel, or its unpacked data folder (``pip download bfcl-eval
    --no-deps -d DIR``). The newest version of the set found is read. Each case is named
    by BFCL's id and tagged with the category; its input is the question (the user's
    message, or the system and user messages), its `expected_tool_calls` are BFCL's
    acceptable arguments (``""`` among them: the argument may be left out), and
    ``metadata["functions"]`` holds the functions offered, as JSON Schemas (names with
    ``.`` get ``_``, as tool names take no dots). An integer in an answer for a ``float``
    parameter is made a float.

    Args:
        category: One of `BFCL_CATEGORIES`: ``simple_python``, ``multiple`` (one call among
            several functions), ``parallel`` and ``parallel_multiple`` (several calls, in any
            order), and their ``live_`` versions.
        data: A bfcl-eval wheel or data folder (`None`: the installed package).
        count: How many cases, spread evenly over the set (`None`: all).

    Raises:
        ConfigurationError: When bfcl-eval is not installed and no `data` is given, or
            `data` is neither a wheel nor a folder.
        DatasetError: When the set is not found or cannot be read.
        UserError: On an unknown category or a `count` below 1.
    """
    if category not in BFCL_CATEGORIES:
        known = ", ".join(BFCL_CATEGORIES)
        raise UserError(f"Unknown BFCL category {category!r} (known: {known}).")
    if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 1):
        raise UserError(f"`count` must be a positive integer or None, got {count!r}.")
    root = _data_root(data)
    file_name = _set_name(root, category)
    questions = _read_rows(root / file_name)
    answers = {row.get("id"): row for row in _read_rows(root / "possible_answer" / file_name)}
    if count is not None:
        questions = questions[:: max(len(questions) // count, 1)][:count]
    cases = []
    for row in questions:
        where = f"{root / file_name}, {row.get('id')}"
        answer = answers.get(row.get("id"))
        if answer is None:
            raise DatasetError(f"{where}: no possible answer for it.", where=where)
        try:
            cases.append(_case(row, answer, category))
        except (KeyError, TypeError, ValueError) as exc:
            problem = f"{type(exc).__name__}: {exc}"
            raise DatasetError(f"{where}: not in BFCL's format ({problem}).", where=where) from None
        except DatasetError as exc:
            raise DatasetError(f"{where}: {exc}", where=where, field=exc.field) from None
    return Dataset(f"bfcl-{category}", cases)


def _ok(**_: Any) -> str:
    return "ok"


def bfcl_agent(
    client: BaseLLMClient, case: Case, *, settings: ModelSettings | None = None
) -> Agent[Any, Any]:
    """An agent offered the functions of a BFCL case (``metadata["functions"]``).

    Each function is a tool (`Tool.from_schema`) that answers ``"ok"``. The agent makes at
    most three model calls and stops repeated calls (``stop_repeats``), so a model that
    calls the tools once and then answers is measured on its calls.

    Args:
        client: The model backend.
        case: A case from `load_bfcl` (or any case with ``metadata["functions"]``: a list
            of ``{name, description, parameters}``).
        settings: Generation settings for the agent (`None`: the client's defaults).

    Raises:
        UserError: When the case has no ``metadata["functions"]`` or one is not a valid tool.
    """
    from glassagent._agent.agent import Agent
    from glassagent._tools.tool import Tool

    functions = case.metadata.get("functions")
    if not isinstance(functions, list | tuple) or not functions:
        raise UserError(f"Case {case.name!r} has no metadata['functions'] to offer as tools.")
    tools = []
    for function in functions:
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            raise UserError(f"Case {case.name!r}: each function needs a name, got {function!r}.")
        name = function["name"]
        description = function.get("description") or name
        parameters = function.get("parameters") or {"type": "object", "properties": {}}
        tools.append(Tool.from_schema(name, description, parameters, _ok))
    return Agent(client, tools, max_iterations=3, settings=settings, stop_repeats=True)
