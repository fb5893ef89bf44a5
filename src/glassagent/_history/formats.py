"""Writing the two document versions, and the JSON bytes on disk.

Version 2.0 is the default. Both versions carry the same information: fields one version
lacks are written as extension fields of the other (e.g. ``active_tools`` in version 1,
``thinking`` and ``provider_metadata`` on messages in both), so converting loses nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from glassagent._core.errors import HistoryProblem, HistoryValidationError, UserError
from glassagent._history.model import (
    HistoryAttachment,
    HistoryLimits,
    HistoryMessage,
    HistoryToolCall,
    Version,
)


def attachment_dict(attachment: HistoryAttachment) -> dict[str, Any]:
    """The stored shape of an attachment (the same in both versions)."""
    return {
        "type": attachment.type,
        "mime_type": attachment.mime_type,
        "url": attachment.url,
        "name": attachment.name,
        **attachment.extra,
    }


def tool_call_dict(call: HistoryToolCall) -> dict[str, Any]:
    """The stored shape of a tool call (the same in both versions)."""
    data: dict[str, Any] = {
        "tool_call_id": call.tool_call_id,
        "function_name": call.function_name,
        "arguments": call.arguments if isinstance(call.arguments, str) else dict(call.arguments),
    }
    if call.provider_metadata:
        data["provider_metadata"] = dict(call.provider_metadata)
    data.update(call.extra)
    return data


def message_dict(message: HistoryMessage, children: list[str], version: Version) -> dict[str, Any]:
    """The stored shape of a message in `version`."""
    v1 = version == "1"
    data: dict[str, Any] = {
        "id" if v1 else "message_id": message.id,
        "role": message.role,
        "content": message.content,
        "parent_id": message.parent_id,
        "children_ids" if v1 else "children": list(children),
        "created_at" if v1 else "timestamp": message.created_at,
        "status": message.status,
        "attachments": [attachment_dict(a) for a in message.attachments],
        "tool_calls": [tool_call_dict(c) for c in message.tool_calls],
        "tool_call_id": message.tool_call_id,
    }
    if message.name is not None:
        data["name"] = message.name
    if message.is_error:
        data["is_error"] = True
    if message.protocol:
        data["protocol"] = True
    if message.summary_of is not None:
        data["summary_of"] = message.summary_of
    if message.pinned:
        data["pinned"] = True
    if message.thinking is not None:
        data["thinking"] = message.thinking
    if message.provider_metadata:
        data["provider_metadata"] = dict(message.provider_metadata)
    data.update(message.extra)
    return data


def document(
    version: Version,
    *,
    meta: Mapping[str, Any],
    messages: Mapping[str, HistoryMessage],
    children: Mapping[str, list[str]],
    current_node: str | None,
    root_id: str | None,
    mapping_extra: Mapping[str, Mapping[str, Any]],
    extra: Mapping[str, Any],
) -> dict[str, Any]:
    """A whole document in `version` (``"1"`` or ``"2.0"``)."""
    if version not in ("1", "2.0"):
        raise UserError(f"Unknown history version {version!r}; write '1' or '2.0'.")
    head = {"conversation_id": meta["conversation_id"], "title": meta["title"]}
    if version == "2.0":
        head["schema_version"] = "2.0"
    for name in ("created_at", "updated_at", "model", "platform"):
        head[name] = meta[name]
    bodies = [message_dict(m, children[i], version) for i, m in messages.items()]
    if version == "1":
        head["messages"] = {body["id"]: body for body in bodies}
        head["root_id"] = root_id
        head["current_node"] = current_node
        for name in ("active_tools", "active_supporters"):
            if meta[name]:
                head[name] = list(meta[name])
    else:
        head["messages"] = bodies
        head["mapping"] = {
            i: {"id": i, "parent": m.parent_id, "children": list(children[i])}
            | dict(mapping_extra.get(i, {}))
            for i, m in messages.items()
        }
        head["current_node"] = current_node
        head["active_tools"] = list(meta["active_tools"])
        head["active_supporters"] = list(meta["active_supporters"])
    head.update(extra)
    return head


def encode(data: dict[str, Any]) -> bytes:
    """A document as compact UTF-8 JSON.

    Raises:
        UserError: When the history holds values that are not JSON (e.g. in metadata).
    """
    try:
        text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        return text.encode("utf-8")
    except (TypeError, ValueError, RecursionError) as exc:
        raise UserError(f"The history cannot be written as JSON: {exc}") from None


def decode(raw: bytes, limits: HistoryLimits) -> Any:
    """Parse document bytes, refusing oversized or malformed input with a validation error."""
    if len(raw) > limits.max_total_bytes:
        raise too_big(len(raw), limits)
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise _invalid(f"the file is not UTF-8: {exc}") from None
    except RecursionError:
        raise _invalid("the JSON nests too deeply to parse") from None
    except ValueError as exc:  # JSONDecodeError, and over-long integers
        raise _invalid(f"the file is not valid JSON: {exc}") from None


def _invalid(message: str) -> HistoryValidationError:
    return HistoryValidationError([HistoryProblem("$", message)])


def too_big(size: int, limits: HistoryLimits) -> HistoryValidationError:
    """The error for a document of `size` bytes over ``max_total_bytes``."""
    return _invalid(f"{size} bytes exceed max_total_bytes={limits.max_total_bytes}")
