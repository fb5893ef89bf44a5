"""The tree checks: parents, children, mapping, one root, no cycles, depth, tool results.

They walk with a queue and explicit paths, never recursion, so a 100,000-message chain or a
cyclic document costs linear time and constant stack.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from glassagent._history.checks import Entry, Problems, key_loc, kind, measure, show, show_ids
from glassagent._history.model import HistoryLimits, Version


def check_tree(
    entries: list[Entry], limits: HistoryLimits, problems: Problems
) -> tuple[dict[str, list[str]], dict[str, int]]:
    """Parents exist, children agree, one root, no cycles, bounded depth, tool results match."""
    by_id = {e.id: e for e in entries}
    actual: dict[str, list[str]] = {}
    roots: list[str] = []
    for e in entries:
        if e.parent is None:
            if e.parent_ok:
                roots.append(e.id)
        elif e.parent not in by_id:
            problems.add(key_loc(e.loc, "parent_id"), f"parent {show(e.parent)} does not exist")
        else:
            actual.setdefault(e.parent, []).append(e.id)
    for e in entries:
        _check_children(e, actual.get(e.id, []), by_id, problems)
    if entries and not roots:
        problems.add("messages", "no root message (parent_id null): the parent links form a cycle")
    if len(roots) > 1:
        problems.add("messages", f"several root messages: {show_ids(roots)}; a history has one")
    depths = _walk(roots, actual, limits, problems)
    if len(depths) < len(by_id):
        _report_cycles(entries, by_id, set(depths), problems)
    _check_tool_results(list(depths), by_id, problems)
    return {e.id: list(e.children or ()) for e in entries}, depths


def _check_children(
    e: Entry, actual: list[str], by_id: dict[str, Entry], problems: Problems
) -> None:
    if e.children is None or e.children == actual:
        return
    loc = key_loc(e.loc, "children")
    declared = set(e.children)
    if len(declared) != len(e.children):
        problems.add(loc, "lists a child more than once")
    for child in e.children:
        if child not in by_id:
            problems.add(loc, f"child {show(child)} does not exist")
        elif by_id[child].parent != e.id:
            problems.add(loc, f"child {show(child)} has parent_id {show(by_id[child].parent)}")
    missing = [c for c in actual if c not in declared]
    if missing:
        problems.add(loc, f"does not list {show_ids(missing)}, whose parent_id names this message")


def _walk(
    roots: list[str], actual: dict[str, list[str]], limits: HistoryLimits, problems: Problems
) -> dict[str, int]:
    """The depth (root: 0) of every message reachable from the roots, breadth first."""
    depths: dict[str, int] = {}
    queue = deque((root, 0) for root in roots)
    too_deep = False
    while queue:
        node, depth = queue.popleft()
        depths[node] = depth
        if depth >= limits.max_depth and not too_deep:
            problems.add("messages", f"the tree is deeper than max_depth={limits.max_depth}")
            too_deep = True
        queue.extend((child, depth + 1) for child in actual.get(node, ()))
    return depths


def _report_cycles(
    entries: list[Entry], by_id: dict[str, Entry], reached: set[str], problems: Problems
) -> None:
    """Report each cycle once; messages hanging below a cycle or a missing parent are not."""
    done = set(reached)
    for e in entries:
        path: list[str] = []
        on_path: dict[str, int] = {}
        node: str | None = e.id
        while node is not None and node in by_id and node not in done and node not in on_path:
            on_path[node] = len(path)
            path.append(node)
            node = by_id[node].parent
        if node is not None and node in on_path:
            cycle = path[on_path[node] :]
            problems.add(by_id[node].loc, f"parent links form a cycle: {show_ids(cycle)}")
        done.update(path)


def _check_tool_results(order: list[str], by_id: dict[str, Entry], problems: Problems) -> None:
    """Each tool message answers a call of the assistant message its tool run follows."""
    owner: dict[str, str | None] = {}
    for node in order:
        e = by_id[node]
        if e.role != "tool":
            continue
        parent = by_id[e.parent] if e.parent is not None else None
        if parent is None:
            owner[node] = None
        else:
            owner[node] = owner.get(parent.id) if parent.role == "tool" else parent.id
        call_owner = by_id.get(owner[node] or "")
        if e.answers is None:
            problems.add(key_loc(e.loc, "tool_call_id"), "a tool message needs a tool_call_id")
        elif (
            call_owner is None
            or call_owner.role != "assistant"
            or e.answers not in call_owner.call_ids
        ):
            problems.add(
                key_loc(e.loc, "tool_call_id"),
                f"no matching tool call {show(e.answers)} in the assistant message it follows",
            )


def check_mapping(
    mapping: Any, entries: list[Entry], limits: HistoryLimits, problems: Problems
) -> dict[str, dict[str, Any]]:
    """In 2.0, ``mapping`` repeats every message's parent and children; they must agree."""
    if not isinstance(mapping, dict):
        if mapping is not None:
            problems.add("mapping", f"must be an object, not {kind(mapping)}")
        return {}
    by_id = {e.id: e for e in entries}
    extras: dict[str, dict[str, Any]] = {}
    for key, node in mapping.items():
        loc = key_loc("mapping", key)
        entry = by_id.get(key) if isinstance(key, str) else None
        if entry is None:
            problems.add(loc, "no message has this id")
            continue
        if not isinstance(node, dict):
            problems.add(loc, f"must be an object, not {kind(node)}")
            continue
        if node.get("id") != key:
            problems.add(
                key_loc(loc, "id"), f"{show(node.get('id'))} differs from its key {show(key)}"
            )
        if node.get("parent") != entry.parent:
            problems.add(key_loc(loc, "parent"), "disagrees with the message's parent_id")
        if entry.children is not None and node.get("children") != entry.children:
            problems.add(key_loc(loc, "children"), "disagrees with the message's children")
        extra = {k: v for k, v in node.items() if k not in ("id", "parent", "children")}
        if extra:
            measure(extra, loc, limits, problems, limits.max_message_bytes)
            extras[key] = extra
    for e in entries:
        if e.id not in mapping:
            problems.add("mapping", f"has no entry for message {show(e.id)}")
    return extras


def check_pointers(
    data: dict[str, Any],
    version: Version,
    entries: list[Entry],
    children: dict[str, list[str]],
    problems: Problems,
) -> str | None:
    """``current_node`` (and in version 1 ``root_id``) name existing messages."""
    current = data.get("current_node")
    names = [("current_node", current)]
    if version == "1":
        names.append(("root_id", data.get("root_id")))
    for name, value in names:
        if value is None:
            if entries:
                problems.add(name, "is null but the history has messages")
        elif not isinstance(value, str):
            problems.add(name, f"must be a string or null, not {kind(value)}")
        elif value not in children:
            problems.add(name, f"message {show(value)} does not exist")
    root = data.get("root_id")
    if version == "1" and isinstance(root, str) and root in children:
        root_entry = next(e for e in entries if e.id == root)
        if root_entry.parent is not None:
            problems.add("root_id", f"message {show(root)} has a parent, so it is not the root")
    return current if isinstance(current, str) else None
