"""Shared pieces of validation: the problem collector, locations and the JSON walker."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from glassagent._core.errors import HistoryProblem, HistoryValidationError
from glassagent._history.model import HistoryLimits

_INT_BOUND = 2**64
_SHOWN_IDS = 5
_SHOWN_CHARS = 60


@dataclass
class Entry:
    """What the tree checks need of one message, read defensively."""

    loc: str
    id: str
    parent: str | None
    parent_ok: bool
    children: list[str] | None
    role: str | None
    call_ids: frozenset[str]
    answers: str | None


class Problems:
    def __init__(self) -> None:
        self.items: list[HistoryProblem] = []

    def add(self, location: str, message: str) -> None:
        self.items.append(HistoryProblem(location, message))

    def raise_if_any(self) -> None:
        if self.items:
            raise HistoryValidationError(self.items)


def kind(value: object) -> str:
    """The JSON name of a value's type (``object``, ``array``...) or its Python type name."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    names: dict[type, str] = {str: "string", dict: "object", list: "array"}
    return names.get(type(value), type(value).__name__)


def show(value: object) -> str:
    """A short rendering of an untrusted value for a problem message; never fails."""
    if isinstance(value, str):
        return repr(value[:_SHOWN_CHARS]) + ("..." if len(value) > _SHOWN_CHARS else "")
    if value is None or isinstance(value, (bool, float)):
        return repr(value)
    if isinstance(value, int):
        return repr(value) if -_INT_BOUND < value < _INT_BOUND else "a very large number"
    return f"an {kind(value)}" if kind(value)[0] in "aeiou" else f"a {kind(value)}"


def key_loc(base: str, key: object) -> str:
    """The location of `key` inside `base`: ``base.name``, ``base[3]`` or ``base['a b']``."""
    if type(key) is int and -_INT_BOUND < key < _INT_BOUND:
        return f"{base}[{key}]"
    if isinstance(key, str) and key.isidentifier():
        return f"{base}.{key}" if base else key
    return f"{base}[{show(key)}]"


def show_ids(ids: Iterable[str]) -> str:
    shown = list(ids)
    text = ", ".join(show(i) for i in shown[:_SHOWN_IDS])
    return text + (f" and {len(shown) - _SHOWN_IDS} more" if len(shown) > _SHOWN_IDS else "")


def measure_fields(
    obj: dict[Any, Any], loc: str, limits: HistoryLimits, problems: Problems, budget: int
) -> int:
    """`measure` for each field of an object, with a fast path for plain text and scalars."""
    size = 0
    for key, value in obj.items():
        if type(key) is not str:
            problems.add(loc, f"has a key that is a {kind(key)}, not a string")
            return size
        if not key.isascii():
            size += measure(key, loc, limits, problems, budget - size)
        size += len(key)
        if type(value) is str and value.isascii():
            size += len(value)
        elif value is None or type(value) is bool:
            size += 4
        elif type(value) is list and all(type(v) is str and v.isascii() for v in value):
            size += sum(map(len, value)) + 2 * len(value) + 2
        else:
            size += measure(value, key_loc(loc, key), limits, problems, budget - size)
        if size > budget:
            break
    return size


def measure(value: Any, loc: str, limits: HistoryLimits, problems: Problems, budget: int) -> int:
    """UTF-8 bytes of the text in a JSON value (walked iteratively); reports non-JSON content.

    Stops early (returning more than `budget`) once the value is known to be too big.
    """
    size = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            try:
                size += len(item.encode("utf-8"))
            except UnicodeEncodeError:
                problems.add(loc, "contains text that is not valid Unicode (a lone surrogate)")
                return size
        elif isinstance(item, (dict, list)):
            if depth >= limits.max_nesting:
                problems.add(loc, f"nests deeper than max_nesting={limits.max_nesting}")
                return size
            if isinstance(item, dict):
                for k, v in item.items():
                    if not isinstance(k, str):
                        problems.add(loc, f"has an object key that is a {kind(k)}, not a string")
                        return size
                    stack.append((k, depth + 1))
                    stack.append((v, depth + 1))
            else:
                stack.extend((v, depth + 1) for v in item)
            size += 2
        elif item is None or isinstance(item, bool):
            size += 4
        elif isinstance(item, int):
            if not -_INT_BOUND < item < _INT_BOUND:
                problems.add(loc, "contains an integer too large for JSON interchange")
                return size
            size += 8
        elif isinstance(item, float):
            if not math.isfinite(item):
                problems.add(loc, "contains a number that is not finite (NaN or infinity)")
                return size
            size += 8
        else:
            problems.add(loc, f"contains a {kind(item)}, which is not a JSON value")
            return size
        if size > budget:
            return size
    return size
