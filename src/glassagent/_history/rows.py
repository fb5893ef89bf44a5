"""A history as database rows: one per message, plus the chat's metadata; and back.

A message row holds the message in the stored shape of version 2.0 (`formats.message_dict`,
without its children, which the rows' parent ids give) and the extra fields of its
``mapping`` entry, each as compact UTF-8 JSON. The chat's own fields (title, model,
timestamps, tools, unknown top-level fields) are one JSON object. Rows are read back through
`History.from_dict`, so whatever a database holds is validated like a file.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from glassagent._core.attachments import AttachmentPolicy
from glassagent._history import formats
from glassagent._history.model import HistoryLimits
from glassagent._history.tree import History


@dataclass(frozen=True)
class MessageRow:
    """One stored message: its id, its parent's, and its JSON (message and mapping extras)."""

    message_id: str
    parent_id: str | None
    body: bytes
    mapping_extra: bytes | None = None


def meta_of(history: History) -> bytes:
    """The chat's own fields as JSON: what the document holds besides messages and pointers.

    Raises:
        UserError: When a field holds a value that is not JSON.
    """
    meta: dict[str, Any] = {
        "conversation_id": history.conversation_id,
        "title": history.title,
        "created_at": history.created_at,
        "updated_at": history.updated_at,
        "model": history.model,
        "platform": history.platform,
        "active_tools": history.active_tools,
        "active_supporters": history.active_supporters,
    }
    meta.update(history.extra)
    return formats.encode(meta)


def rows_of(history: History, ids: Iterable[str]) -> list[MessageRow]:
    """The rows of the messages `ids` of `history`, in the order given.

    Raises:
        UserError: When a message holds a value that is not JSON.
    """
    found = []
    mapping_extra = history._mapping_extra
    for message_id in ids:
        message = history[message_id]
        body = formats.message_dict(message, [], "2.0")
        del body["children"]
        extra = mapping_extra.get(message_id)
        found.append(
            MessageRow(
                message_id,
                message.parent_id,
                formats.encode(body),
                formats.encode(dict(extra)) if extra else None,
            )
        )
    return found


def history_of(
    meta: bytes,
    current_node: str | None,
    rows: Sequence[MessageRow],
    *,
    limits: HistoryLimits,
    attachment_policy: AttachmentPolicy,
) -> History:
    """Build and validate a history from a chat's metadata and message rows (parents first).

    The rows may be the whole chat or one thread of it; the children of each message are
    those among the rows, in their order.

    Raises:
        HistoryValidationError: When the rows are not a valid history, or exceed `limits`.
    """
    size = len(meta) + sum(len(r.body) + len(r.mapping_extra or b"") for r in rows)
    if size > limits.max_total_bytes:
        raise formats.too_big(size, limits)
    document = formats.decode(meta, limits)
    if not isinstance(document, dict):
        document = {"$meta": document}  # refused by the validation below, with the others
    children: dict[str, list[str]] = {row.message_id: [] for row in rows}
    for row in rows:
        if row.parent_id in children:
            children[row.parent_id].append(row.message_id)
    messages, mapping = [], {}
    for row in rows:
        body = formats.decode(row.body, limits)
        if isinstance(body, dict):
            body["children"] = children[row.message_id]
        messages.append(body)
        entry = formats.decode(row.mapping_extra, limits) if row.mapping_extra else {}
        if not isinstance(entry, dict):
            entry = {"extra": entry}
        entry.update(
            id=row.message_id, parent=row.parent_id, children=list(children[row.message_id])
        )
        mapping[row.message_id] = entry
    document.update(
        schema_version="2.0", messages=messages, mapping=mapping, current_node=current_node
    )
    return History.from_dict(document, limits=limits, attachment_policy=attachment_policy)
