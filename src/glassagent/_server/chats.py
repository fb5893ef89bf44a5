"""Stored chats: each user's own store, loading, and saving a turn despite concurrent writers."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

from glassagent._core.attachments import AttachmentPolicy
from glassagent._core.errors import (
    GlassAgentError,
    HistoryConflictError,
    HistoryValidationError,
)
from glassagent._core.messages import Message
from glassagent._history.model import DEFAULT_LIMITS, HistoryLimits
from glassagent._history.protocol import ChatStore
from glassagent._history.store import HistoryStore, user_directory
from glassagent._history.tree import History

logger = logging.getLogger("glassagent.server")

ANONYMOUS_USER = "anonymous"
"""The user id of every request to a server without tokens."""


class UserStores:
    """Each user's own store of chats, made from the server's store when first needed.

    A directory gives one `HistoryStore` per user under it (`user_directory`), created
    lazily; a `ChatStore` gives its `ChatStore.for_user`. Chats are read with
    `AttachmentPolicy.safe`: users wrote them.
    """

    def __init__(
        self, root: str | os.PathLike[str] | ChatStore, limits: HistoryLimits | None = None
    ) -> None:
        self.root = root if isinstance(root, ChatStore) else Path(root)
        self.limits = limits or DEFAULT_LIMITS
        self._stores: dict[str, ChatStore] = {}
        self._policy = AttachmentPolicy.safe()

    def get(self, user: str) -> ChatStore:
        """The store of `user`'s chats."""
        store = self._stores.get(user)
        if store is None:
            if isinstance(self.root, Path):
                directory = user_directory(self.root, user)
                store = HistoryStore(directory, limits=self.limits, attachment_policy=self._policy)
            else:
                store = self.root.for_user(user, attachment_policy=self._policy)
            self._stores[user] = store
        return store


async def load(store: ChatStore, chat_id: str, *, thread: bool = False) -> History | None:
    """The stored chat `chat_id` (with `thread`, at least its current thread), or `None`.

    Raises:
        GlassAgentError: When the stored chat is not a valid history (a server fault, not
            the request's: the cause is logged, the message names only the chat).
    """
    try:
        return await store.aload(chat_id, thread=thread)
    except HistoryValidationError as exc:
        logger.error("stored chat %r in %r is invalid: %s", chat_id, store, exc)
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


async def save(store: ChatStore, chat_id: str, history: History, *, attempts: int) -> None:
    """Save `history`; when another writer got there first, merge the turn into the chat.

    The first save is checked (`ChatStore.asave`); on a conflict, the turn's messages (ids
    and timestamps kept) are merged into the chat as it is now, below the same node, so both
    writers' turns are kept: two turns from one node become sibling branches. The store
    merges under its lock (files) or with the chat's row locked (SQL), so merges of
    concurrent turns queue rather than conflict again.

    Raises:
        HistoryConflictError: When `attempts` is 1, or when the chat no longer holds the node
            the turn continues (it was deleted or replaced).
        GlassAgentError: When the stored chat, read to merge, is not a valid history.
    """
    for attempt in range(attempts):
        try:
            await store.asave(chat_id, history, merge=attempt > 0)
            return
        except HistoryConflictError:
            if attempt + 1 == attempts:
                raise
        except HistoryValidationError as exc:
            logger.error("stored chat %r in %r is invalid: %s", chat_id, store, exc)
            raise GlassAgentError(f"The stored chat {chat_id!r} cannot be read.") from None
