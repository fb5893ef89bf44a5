"""Merging a history into the stored chat that changed under it: ``asave(..., merge=True)``."""

from __future__ import annotations

from glassagent._core.errors import HistoryConflictError, UserError
from glassagent._history.tree import History


def unmergeable(chat_id: str, expected: str | None, actual: str | None) -> HistoryConflictError:
    """The conflict of a merge whose messages follow one the chat does not hold."""
    return HistoryConflictError(
        f"Chat {chat_id!r} was deleted or replaced since this history was loaded: the message "
        "its new messages follow is gone, so they were not saved.",
        chat_id=chat_id,
        expected_revision=expected,
        actual_revision=actual,
    )


def merge_into(stored: History, history: History, chat_id: str) -> None:
    """Add to `stored` the messages of `history` it lacks, each below its own parent.

    Then `stored` continues from `history`'s current node and takes its metadata (title,
    model, tools, unknown fields). Appends made by others stay: two turns from one node
    become sibling branches.

    Raises:
        HistoryConflictError: When a new message follows one `stored` does not hold, or is
            a first message while `stored` has one.
    """
    for message_id, message in history.messages.items():
        if message_id in stored:
            continue
        parent = message.parent_id
        if (parent is None and len(stored)) or (parent is not None and parent not in stored):
            raise unmergeable(chat_id, history.revision, stored.revision)
        try:
            stored.append(message, parent=parent)
        except UserError:  # pragma: no cover - the same parents as in a valid history
            raise unmergeable(chat_id, history.revision, stored.revision) from None
    if history.current_node is not None:
        stored.switch(history.current_node)
    for name in ("title", "model", "platform", "updated_at"):
        setattr(stored, name, getattr(history, name))
    stored.active_tools = list(history.active_tools)
    stored.active_supporters = list(history.active_supporters)
    stored.extra = dict(history.extra)
