"""Stored chats: each user's own store, loading, and saving a turn despite concurrent writers."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
from collections.abc import Sequence
from pathlib import Path

from glassagent._core.attachments import AttachmentPolicy
from glassagent._core.errors import (
    GlassAgentError,
    HistoryConflictError,
    HistoryValidationError,
    UserError,
)
from glassagent._core.messages import Message
from glassagent._history.model import DEFAULT_LIMITS, HistoryLimits
from glassagent._history.store import HistoryStore
from glassagent._history.tree import History

logger = logging.getLogger("glassagent.server")

ANONYMOUS_USER = "anonymous"
"""The user id of every request to a server without tokens."""


def user_directory(root: str | os.PathLike[str], user: str) -> Path:
    """Where `user`'s chats live under a server's store directory.

    ``<root>/users/<the first 32 hex digits of the SHA-256 of the user id>``: any user id
    makes a safe directory name, and a user's chats are found only under their own id.
    """
    digest = hashlib.sha256(user.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return Path(root) / "users" / digest


class UserStores:
    """One `HistoryStore` per user under a root directory, created when first needed.

    Chats are read with `AttachmentPolicy.safe`: users wrote them.
    """

    def __init__(self, root: str | os.PathLike[str], limits: HistoryLimits | None = None) -> None:
        self.root = Path(root)
        self.limits = limits or DEFAULT_LIMITS
        self._stores: dict[str, HistoryStore] = {}
        self._policy = AttachmentPolicy.safe()

    def get(self, user: str) -> HistoryStore:
        """The store of `user`'s chats."""
        store = self._stores.get(user)
        if store is None:
            directory = user_directory(self.root, user)
            store = HistoryStore(directory, limits=self.limits, attachment_policy=self._policy)
            self._stores[user] = store
        return store


def _load_now(store: HistoryStore, chat_id: str) -> History | None:
    if not store.path(chat_id).is_file():
        return None
    return store.load(chat_id)


async def load(store: HistoryStore, chat_id: str) -> History | None:
    """The stored chat `chat_id`, or `None` when there is none (read in a worker thread).

    Raises:
        GlassAgentError: When the stored file is not a valid history (a server fault, not
            the request's: the cause is logged, the message names only the chat).
    """
    try:
        return await asyncio.to_thread(_load_now, store, chat_id)
    except HistoryValidationError as exc:
        logger.error("stored chat %r in %s is invalid: %s", chat_id, store.directory, exc)
        raise GlassAgentError(f"The stored chat {chat_id!r} cannot be read.") from None


def append_turn(history: History, messages: Sequence[Message], *, below: str | None) -> list[str]:
    """Append a turn's messages in order below `below` (`None`: as the first messages).

    Returns:
        The new messages' ids; the last is the history's current node.
    """
    ids: list[str] = []
    parent = below
    for message in messages:
        parent = history.append(message, parent=parent)
        ids.append(parent)
    return ids


async def save(
    store: HistoryStore,
    chat_id: str,
    history: History,
    ids: Sequence[str],
    *,
    below: str | None,
    attempts: int,
) -> History:
    """Save `history`; when another writer got there first, re-apply the turn and try again.

    The turn is the messages `ids` of `history`, appended below `below`. On a conflict the
    chat is loaded again and the same messages (ids and timestamps kept) are appended below
    the same node of the fresh copy, so both writers' turns are kept: two turns from one
    node become sibling branches. Returns the history that was saved.

    Raises:
        HistoryConflictError: After `attempts` conflicts, or when the fresh copy lacks the
            node the turn continues (the chat was deleted or replaced).
    """
    for attempt in range(attempts):
        try:
            await asyncio.to_thread(store.save, chat_id, history)
            return history
        except HistoryConflictError:
            if attempt + 1 == attempts:
                raise
        history = await asyncio.to_thread(_reapply, store, chat_id, history, ids, below)
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises


def _reapply(
    store: HistoryStore, chat_id: str, turn: History, ids: Sequence[str], below: str | None
) -> History:
    fresh = _load_now(store, chat_id)
    if fresh is None:
        fresh = History(conversation_id=turn.conversation_id, model=turn.model)
    if (below is None and len(fresh)) or (below is not None and below not in fresh):
        raise HistoryConflictError(
            f"Chat {chat_id!r} was replaced while this turn ran: the message it continues "
            "is gone, so the turn was not saved.",
            chat_id=chat_id,
            expected_revision=turn.revision,
            actual_revision=fresh.revision,
        )
    parent = below
    try:
        for message_id in ids:
            parent = fresh.append(turn[message_id], parent=parent)
    except UserError as exc:  # pragma: no cover - ids are fresh UUIDs; tool runs are intact
        raise HistoryConflictError(
            f"Chat {chat_id!r} changed and the turn could not be re-applied: {exc}",
            chat_id=chat_id,
            expected_revision=turn.revision,
            actual_revision=fresh.revision,
        ) from None
    return fresh
