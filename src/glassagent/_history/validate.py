"""Reading a history document (version 1 or 2.0) without trusting it.

Every check collects a `HistoryProblem` instead of raising, so one `HistoryValidationError`
reports everything at once. Nothing here recurses: JSON values are walked with an explicit
stack and the tree with a queue, so a 100,000-message chain or a cyclic document is harmless.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from glassagent._history.checks import (
    Entry,
    Problems,
    key_loc,
    kind,
    measure,
    measure_fields,
    show,
)
from glassagent._history.model import (
    HistoryAttachment,
    HistoryLimits,
    HistoryMessage,
    HistoryToolCall,
    Version,
    parse_arguments,
)
from glassagent._history.structure import check_mapping, check_pointers, check_tree

ROLES = frozenset({"system", "user", "assistant", "tool"})
_ROLE_NAMES = "'system', 'user', 'assistant' or 'tool'"
_STATUSES = frozenset({"completed", "aborted", "unreadable"})
_ATTACHMENT_TYPES = frozenset({"image", "video", "audio", "file"})
_TIMESTAMP = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?(Z|[+-][0-9]{2}:[0-9]{2})"
)

# Message fields each version knows; the other version's names are refused so they cannot
# collide with known fields when a document is converted.
_COMMON = ("role", "content", "parent_id", "attachments", "tool_calls", "tool_call_id", "status")
_EXTENSIONS = (
    "name",
    "is_error",
    "thinking",
    "provider_metadata",
    "protocol",
    "summary_of",
    "pinned",
)
_LEGACY_ARGUMENTS_ERROR = "arguments_error"
"""The `provider_metadata` key older versions wrote for unparsable arguments; dropped on read
(the call's error result, stored with the history, already holds the reason)."""
_TOOL_CALL_FIELDS = frozenset({"tool_call_id", "function_name", "arguments", "provider_metadata"})
_ATTACHMENT_FIELDS = frozenset({"type", "mime_type", "url", "name"})
TOP_FIELDS: dict[Version, frozenset[str]] = {
    "1": frozenset(
        {"conversation_id", "title", "created_at", "updated_at", "model", "platform"}
        | {"messages", "root_id", "current_node", "active_tools", "active_supporters"}
    ),
    "2.0": frozenset(
        {"conversation_id", "title", "schema_version", "created_at", "updated_at", "model"}
        | {"platform", "messages", "mapping", "current_node", "active_tools", "active_supporters"}
    ),
}


def is_timestamp(value: str) -> bool:
    """Whether `value` is an ISO 8601 date and time with a zone (``Z`` or an offset)."""
    return _TIMESTAMP.fullmatch(value) is not None


@dataclass(frozen=True)
class _Names:
    version: Version
    id: str
    children: str
    time: str
    known: frozenset[str]
    foreign: frozenset[str]


_V1 = _Names(
    "1",
    "id",
    "children_ids",
    "created_at",
    frozenset({"id", "children_ids", "created_at", *_COMMON, *_EXTENSIONS}),
    frozenset({"message_id", "children", "timestamp"}),
)
_V2 = _Names(
    "2.0",
    "message_id",
    "children",
    "timestamp",
    frozenset({"message_id", "children", "timestamp", *_COMMON, *_EXTENSIONS}),
    frozenset({"id", "children_ids", "created_at"}),
)


@dataclass
class Parsed:
    """A validated document, ready to become a `History`."""

    version: Version
    meta: dict[str, Any]
    extra: dict[str, Any]
    messages: dict[str, HistoryMessage]
    children: dict[str, list[str]]
    depths: dict[str, int]
    current_node: str | None
    mapping_extra: dict[str, dict[str, Any]] = field(default_factory=dict)


def detect_version(data: dict[str, Any], problems: Problems) -> Version | None:
    """Which format `data` is in: ``2.0`` by its ``schema_version``, ``1`` by its shape."""
    if "schema_version" in data:
        version = data["schema_version"]
        if version == "2.0":
            return "2.0"
        problems.add("schema_version", f"unknown schema version {show(version)}; expected '2.0'")
        return None
    if isinstance(data.get("messages"), dict):
        return "1"
    problems.add(
        "$",
        "missing 'schema_version' (a version 1 document, which has none, keeps its "
        "'messages' in an object)",
    )
    return None


def parse(data: Any, limits: HistoryLimits) -> Parsed:
    """Validate a document of either version and build its messages.

    Raises:
        HistoryValidationError: Listing every problem found.
    """
    problems = Problems()
    if not isinstance(data, dict):
        problems.add("$", f"a history must be a JSON object, not {kind(data)}")
        problems.raise_if_any()
    version = detect_version(data, problems)
    problems.raise_if_any()
    assert version is not None
    names = _V1 if version == "1" else _V2
    raw_messages = data.get("messages")
    expected = "an object" if version == "1" else "an array"
    if not isinstance(raw_messages, dict if version == "1" else list):
        problems.add("messages", f"must be {expected}, not {kind(raw_messages)}")
        problems.raise_if_any()
    assert isinstance(raw_messages, (dict, list))
    if len(raw_messages) > limits.max_messages:
        problems.add(
            "messages", f"{len(raw_messages)} messages exceed max_messages={limits.max_messages}"
        )
        problems.raise_if_any()
    meta, extra, total = _top_level(data, version, limits, problems)
    entries, messages, total = _messages(raw_messages, names, limits, problems, total)
    if total > limits.max_total_bytes:
        problems.add("$", f"the document exceeds max_total_bytes={limits.max_total_bytes}")
    children, depths = check_tree(entries, limits, problems)
    mapping_extra = {}
    if version == "2.0":
        mapping_extra = check_mapping(data.get("mapping"), entries, limits, problems)
    current = check_pointers(data, version, entries, children, problems)
    problems.raise_if_any()
    return Parsed(version, meta, extra, messages, children, depths, current, mapping_extra)


def _top_level(
    data: dict[str, Any], version: Version, limits: HistoryLimits, problems: Problems
) -> tuple[dict[str, Any], dict[str, Any], int]:
    meta: dict[str, Any] = {}
    required = ["conversation_id", "current_node"] + (["root_id"] if version == "1" else [])
    for name in required + (["mapping"] if version == "2.0" else []):
        if name not in data:
            problems.add("$", f"missing required field {name!r}")
    conversation_id = data.get("conversation_id")
    if "conversation_id" in data and not isinstance(conversation_id, str):
        problems.add("conversation_id", f"must be a string, not {kind(conversation_id)}")
    meta["conversation_id"] = conversation_id
    for name in ("title", "model", "platform", "created_at", "updated_at"):
        value = data.get(name)
        if value is not None and not isinstance(value, str):
            problems.add(name, f"must be a string or null, not {kind(value)}")
        elif name.endswith("_at") and value is not None and not _TIMESTAMP.fullmatch(value):
            problems.add(name, f"{show(value)} is not an ISO 8601 timestamp")
        meta[name] = value
    for name in ("active_tools", "active_supporters"):
        value = data.get(name, [])
        if not isinstance(value, list):
            problems.add(name, f"must be an array, not {kind(value)}")
            value = []
        meta[name] = list(value)  # a copy: the history may change it
    other: Version = "2.0" if version == "1" else "1"
    extra: dict[str, Any] = {}
    total = 0
    for key, value in data.items():
        if not isinstance(key, str):
            problems.add("$", f"has a key that is a {kind(key)}, not a string")
            continue
        if key == "messages" or (key == "mapping" and version == "2.0"):
            continue
        total += measure(value, key_loc("", key), limits, problems, limits.max_total_bytes)
        if key in TOP_FIELDS[version]:
            continue
        if key in TOP_FIELDS[other]:
            problems.add(key_loc("", key), f"is a version {other} field, not allowed in {version}")
        extra[key] = value
    return meta, extra, total


def _messages(
    raw: dict[Any, Any] | list[Any],
    names: _Names,
    limits: HistoryLimits,
    problems: Problems,
    total: int,
) -> tuple[list[Entry], dict[str, HistoryMessage], int]:
    entries: list[Entry] = []
    messages: dict[str, HistoryMessage] = {}
    seen: set[str] = set()
    pairs = raw.items() if isinstance(raw, dict) else enumerate(raw)
    for key, item in pairs:
        loc = key_loc("messages", key)
        total += 2 * len(key) if isinstance(key, str) else 0
        if not isinstance(item, dict):
            problems.add(loc, f"a message must be an object, not {kind(item)}")
            continue
        size = measure_fields(item, loc, limits, problems, limits.max_message_bytes)
        if size > limits.max_message_bytes:
            limit = limits.max_message_bytes
            problems.add(loc, f"the message exceeds max_message_bytes={limit}")
        total += size
        count = len(problems.items)
        entry = _entry(item, loc, names, problems)
        if entry is None:
            continue
        if isinstance(raw, dict) and key != entry.id:
            problems.add(
                key_loc(loc, names.id), f"{show(entry.id)} differs from its key {show(key)}"
            )
        if entry.id in seen:
            problems.add(key_loc(loc, names.id), f"duplicate message id {show(entry.id)}")
            continue
        seen.add(entry.id)
        entries.append(entry)
        message = _message(item, entry, names, problems)
        if message is not None and len(problems.items) == count:
            messages[entry.id] = message
    return entries, messages, total


def _entry(item: dict[str, Any], loc: str, names: _Names, problems: Problems) -> Entry | None:
    for name in (names.id, "role", "content", "parent_id", names.children, names.time):
        if name not in item:
            problems.add(loc, f"missing required field {name!r}")
    for name in sorted(names.foreign & item.keys()):
        other = "2.0" if names.version == "1" else "1"
        problems.add(
            key_loc(loc, name), f"is a version {other} field, not allowed in {names.version}"
        )
    message_id = item.get(names.id)
    if not isinstance(message_id, str) or not message_id:
        if names.id in item:
            problems.add(
                key_loc(loc, names.id), f"must be a non-empty string, not {show(message_id)}"
            )
        return None
    parent = item.get("parent_id")
    parent_ok = parent is None or isinstance(parent, str)
    if not parent_ok:
        problems.add(key_loc(loc, "parent_id"), f"must be a string or null, not {kind(parent)}")
    children = item.get(names.children)
    if not isinstance(children, list) or not all(isinstance(c, str) for c in children):
        if names.children in item:
            problems.add(key_loc(loc, names.children), "must be an array of message ids")
        children = None
    role = item.get("role")
    if not isinstance(role, str) or role not in ROLES:
        if "role" in item:
            problems.add(key_loc(loc, "role"), f"invalid role {show(role)}; expected {_ROLE_NAMES}")
        role = None
    calls = item.get("tool_calls")
    call_ids = frozenset(
        c["tool_call_id"]
        for c in (calls if isinstance(calls, list) else ())
        if isinstance(c, dict) and isinstance(c.get("tool_call_id"), str)
    )
    answers = item.get("tool_call_id")
    return Entry(
        loc,
        message_id,
        parent if isinstance(parent, str) else None,
        parent_ok,
        children,
        role,
        call_ids,
        answers if isinstance(answers, str) else None,
    )


def _optional(
    item: dict[str, Any], name: str, types: type | tuple[type, ...], loc: str, problems: Problems
) -> Any:
    value = item.get(name)
    if value is not None and not isinstance(value, types):
        problems.add(key_loc(loc, name), f"must be {_type_names(types)} or null, not {kind(value)}")
        return None
    return value


def _type_names(types: type | tuple[type, ...]) -> str:
    as_tuple = types if isinstance(types, tuple) else (types,)
    return " or ".join(kind(t()) for t in as_tuple)


def _message(
    item: dict[str, Any], entry: Entry, names: _Names, problems: Problems
) -> HistoryMessage | None:
    loc = entry.loc
    content = _optional(item, "content", str, loc, problems) or ""
    created_at = item.get(names.time)
    if not isinstance(created_at, str) or not _TIMESTAMP.fullmatch(created_at):
        if names.time in item:
            problems.add(
                key_loc(loc, names.time), f"{show(created_at)} is not an ISO 8601 timestamp"
            )
        created_at = None
    status = item.get("status", "completed")
    if not isinstance(status, str) or status not in _STATUSES:
        expected = "expected 'completed', 'aborted' or 'unreadable'"
        problems.add(key_loc(loc, "status"), f"invalid status {show(status)}; {expected}")
    answers = _optional(item, "tool_call_id", str, loc, problems)
    name = _optional(item, "name", str, loc, problems)
    thinking = _optional(item, "thinking", str, loc, problems)
    is_error, protocol = item.get("is_error", False), item.get("protocol", False)
    pinned = item.get("pinned", False)
    for flag, value in (("is_error", is_error), ("protocol", protocol), ("pinned", pinned)):
        if not isinstance(value, bool):
            problems.add(key_loc(loc, flag), f"must be a boolean, not {kind(value)}")
    summary_of = _summary_of(item, loc, problems)
    metadata = _optional(item, "provider_metadata", dict, loc, problems) or {}
    attachments = _list_of(item, "attachments", loc, problems, _attachment)
    tool_calls = _list_of(item, "tool_calls", loc, problems, _tool_call)
    if created_at is None or entry.role is None or not entry.parent_ok or entry.children is None:
        return None
    return HistoryMessage(
        id=entry.id,
        role=entry.role,  # type: ignore[arg-type]
        content=content,
        parent_id=entry.parent,
        created_at=created_at,
        status=status,
        attachments=attachments,
        tool_calls=tool_calls,
        tool_call_id=answers,
        name=name,
        is_error=is_error is True,
        protocol=protocol is True,
        summary_of=summary_of,
        pinned=pinned is True,
        thinking=thinking,
        provider_metadata=metadata,
        extra={k: v for k, v in item.items() if k not in names.known},
    )


def _summary_of(item: dict[str, Any], loc: str, problems: Problems) -> int | None:
    """A summary's ``summary_of``: a whole number of at least 0, or null."""
    value = item.get("summary_of")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        problems.add(key_loc(loc, "summary_of"), f"must be a whole number >= 0, not {show(value)}")
        return None
    return value


def _list_of(
    item: dict[str, Any], name: str, loc: str, problems: Problems, read: Any
) -> tuple[Any, ...]:
    value = item.get(name)
    if value is None:
        return ()
    if not isinstance(value, list):
        problems.add(key_loc(loc, name), f"must be an array, not {kind(value)}")
        return ()
    parsed = []
    for index, element in enumerate(value):
        element_loc = f"{key_loc(loc, name)}[{index}]"
        if not isinstance(element, dict):
            problems.add(element_loc, f"must be an object, not {kind(element)}")
            continue
        result = read(element, element_loc, problems)
        if result is not None:
            parsed.append(result)
    return tuple(parsed)


def _attachment(item: dict[str, Any], loc: str, problems: Problems) -> HistoryAttachment | None:
    kind_ = item.get("type")
    url = item.get("url")
    ok = True
    if not isinstance(kind_, str) or kind_ not in _ATTACHMENT_TYPES:
        problems.add(key_loc(loc, "type"), f"invalid attachment type {show(kind_)}")
        ok = False
    if not isinstance(url, str):
        problems.add(key_loc(loc, "url"), f"must be a string, not {kind(url)}")
        ok = False
    mime = _optional(item, "mime_type", str, loc, problems)
    name = _optional(item, "name", str, loc, problems)
    if not ok or not isinstance(url, str):
        return None
    return HistoryAttachment(
        type=kind_,  # type: ignore[arg-type]  # checked against _ATTACHMENT_TYPES above
        url=url,
        mime_type=mime,
        name=name,
        extra={k: v for k, v in item.items() if k not in _ATTACHMENT_FIELDS},
    )


def _tool_call(item: dict[str, Any], loc: str, problems: Problems) -> HistoryToolCall | None:
    call_id = item.get("tool_call_id")
    function = item.get("function_name")
    arguments = item.get("arguments", {})
    ok = True
    if not isinstance(call_id, str) or not call_id:
        problems.add(
            key_loc(loc, "tool_call_id"), f"must be a non-empty string, not {show(call_id)}"
        )
        ok = False
    if not isinstance(function, str):
        problems.add(key_loc(loc, "function_name"), f"must be a string, not {kind(function)}")
        ok = False
    if isinstance(arguments, str) and parse_arguments(arguments) is None:
        problems.add(key_loc(loc, "arguments"), "is a string that does not hold a JSON object")
        ok = False
    elif not isinstance(arguments, (str, dict)):
        problems.add(key_loc(loc, "arguments"), f"must be an object, not {kind(arguments)}")
        ok = False
    metadata = _optional(item, "provider_metadata", dict, loc, problems) or {}
    if not ok or not isinstance(call_id, str) or not isinstance(function, str):
        return None
    return HistoryToolCall(
        tool_call_id=call_id,
        function_name=function,
        arguments=arguments,
        provider_metadata={k: v for k, v in metadata.items() if k != _LEGACY_ARGUMENTS_ERROR},
        extra={k: v for k, v in item.items() if k not in _TOOL_CALL_FIELDS},
    )
