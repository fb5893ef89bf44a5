"""Comparing recorded and replayed runs as JSON, and showing how they differ."""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from glassagent._core.events import BaseEvent, to_jsonable
from glassagent._core.record.timeline import depth_of

if TYPE_CHECKING:
    from glassagent._core.events import Event
    from glassagent._core.messages import Message, ModelSettings, ToolDefinition

IGNORED = frozenset({"run_id", "parent_run_id", "seq", "timestamp", "latency_ms", "duration_ms"})
"""Keys that differ from run to run however faithful the replay: ids and timings."""

_BATCH_END = frozenset(
    {"sending_function_response", "llm_request", "complete", "aborted", "error", "budget_exceeded"}
)


def normal(value: Any) -> Any:
    """`value` as plain JSON would give it back (tuples become lists, keys strings)."""
    return json.loads(json.dumps(to_jsonable(value), ensure_ascii=False, default=repr))


def request_json(
    messages: Sequence[Message],
    tools: Sequence[ToolDefinition],
    system: str | None,
    settings: ModelSettings | None,
) -> dict[str, Any]:
    """The neutral request as an ``llm_request`` event's dict holds it."""
    request = {"messages": tuple(messages), "tools": tuple(tools), "system": system}
    data: dict[str, Any] = normal({**request, "settings": settings})
    return data


def differing(expected: Mapping[str, Any], actual: Mapping[str, Any]) -> str:
    """The keys in which two requests differ, e.g. ``messages[2], system``."""
    names: list[str] = []
    for key in dict.fromkeys([*expected, *actual]):
        mine, theirs = expected.get(key), actual.get(key)
        if mine == theirs:
            continue
        if isinstance(mine, list) and isinstance(theirs, list):
            pairs = enumerate(zip(mine, theirs, strict=False))
            first = next((i for i, (a, b) in pairs if a != b), min(len(mine), len(theirs)))
            names.append(f"{key}[{first}]")
        else:
            names.append(key)
    return ", ".join(names) or "nothing"


def diff(expected: Any, actual: Any, what: str) -> str:
    """A unified diff of two JSON values, one field per line (``-`` recorded, ``+`` actual)."""
    lines = difflib.unified_diff(
        lines_of(expected), lines_of(actual), f"recorded {what}", f"actual {what}", lineterm=""
    )
    return "\n".join(lines)


def lines_of(value: Any, indent: str = "") -> list[str]:
    """A readable, diffable rendering: one field per line, multi-line strings as blocks."""
    if isinstance(value, dict):
        out: list[str] = []
        for key, item in value.items():
            out += _field(str(key), item, indent)
        return out or [f"{indent}{{}}"]
    if isinstance(value, list):
        out = []
        for index, item in enumerate(value):
            out += _field(f"[{index}]", item, indent)
        return out or [f"{indent}[]"]
    return [indent + json.dumps(value, ensure_ascii=False)]


def _field(name: str, value: Any, indent: str) -> list[str]:
    if isinstance(value, (dict, list)) and value:
        return [f"{indent}{name}:", *lines_of(value, indent + "  ")]
    if isinstance(value, str) and "\n" in value:
        return [f"{indent}{name}: |", *(f"{indent}  {line}" for line in value.split("\n"))]
    return [f"{indent}{name}: {json.dumps(value, ensure_ascii=False)}"]


def events(items: Iterable[Event | Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Events as comparable dicts: without ids and timings, each tool batch in call order.

    The calls of one answer run concurrently and finish in any order; their events are put in
    the order of the calls (each call's own events keep theirs). The events of a sub-agent's
    run (``depth`` above 0) go with the call that ran it, ordered the same way.
    """
    dicts = [normal(item.to_dict() if isinstance(item, BaseEvent) else item) for item in items]
    return [_structured(_strip(event)) for event in _ordered(dicts, 0, _links(dicts))]


@dataclass
class _Group:
    """The events of the sub-agents' runs inside one call, in the order they came."""

    call_id: Any
    events: list[dict[str, Any]] = field(default_factory=list)


_Item = dict[str, Any] | _Group
_Links = dict[Any, tuple[Any, Any, int]]  # run id -> (parent run id, parent call id, depth)


def _links(dicts: list[dict[str, Any]]) -> _Links:
    return {
        event.get("run_id"): (event.get("parent_run_id"), event.get("parent_call_id"), depth)
        for event in dicts
        if (depth := depth_of(event))
    }


def _call_at(event: Mapping[str, Any], depth: int, links: _Links) -> Any:
    """The id of the call of a run at `depth` that the (deeper) event's run is inside."""
    parent, call, below = event.get("parent_run_id"), event.get("parent_call_id"), depth_of(event)
    while below > depth + 1 and parent in links:
        parent, call, below = links[parent]
    return call


def _ordered(dicts: list[dict[str, Any]], depth: int, links: _Links) -> list[dict[str, Any]]:
    """The events of runs at `depth`, each call's sub-agent runs' events after its start."""
    items: list[_Item] = []
    groups: dict[Any, _Group] = {}
    for event in dicts:
        if depth_of(event) <= depth:
            items.append(event)
            continue
        call = _call_at(event, depth, links)
        if call not in groups:
            items.append(groups.setdefault(call, _Group(call)))
        groups[call].events.append(event)
    out: list[dict[str, Any]] = []
    for item in _batched(items):
        out += _ordered(item.events, depth + 1, links) if isinstance(item, _Group) else [item]
    return out


def _batched(items: list[_Item]) -> list[_Item]:
    """`items` with the events of each tool batch in the order of the calls."""
    out: list[_Item] = []
    batch: list[_Item] | None = None
    order: dict[Any, int] = {}
    for item in items:
        kind = item.get("type") if isinstance(item, dict) else None
        if batch is not None and kind in _BATCH_END:
            out += sorted(batch, key=lambda e: order.get(_call_id(e), len(order)))
            batch = None
        if kind == "llm_response":
            order = {}
        if kind == "function_call_start":
            assert isinstance(item, dict)
            order.setdefault(item.get("call_id"), len(order))
        if batch is not None:
            batch.append(item)
            continue
        out.append(item)
        if kind == "function_execution_start":
            batch = []
    if batch is not None:
        out += sorted(batch, key=lambda e: order.get(_call_id(e), len(order)))
    return out


def _call_id(event: _Item) -> Any:
    if isinstance(event, _Group):
        return event.call_id
    execution = event.get("execution")
    if isinstance(execution, Mapping):
        return execution.get("call_id")
    return event.get("call_id")


def _structured(event: dict[str, Any]) -> dict[str, Any]:
    """A tool result as JSON text (as recordings before structured results hold it) read back.

    So a run recorded when ``execution.result`` was always text compares equal to its replay.
    """
    execution = event.get("execution")
    result = execution.get("result") if isinstance(execution, dict) else None
    if isinstance(result, str) and result[:1] in ("{", "["):
        try:
            value = json.loads(result)
        except ValueError:
            return event
        if isinstance(value, (dict, list)):
            assert isinstance(execution, dict)
            event["execution"] = {**execution, "result": value}
    return event


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in IGNORED}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value
