"""`ChatStore`: the one interface of a store of chats, for the server, the CLI and applications."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from glassagent._core.attachments import AttachmentPolicy
    from glassagent._history.tree import History


@runtime_checkable
class ChatStore(Protocol):
    """Where chats are kept: the one interface the invoke server and ``glassagent serve`` accept.

    `glassagent.server.create_app`, `glassagent.server.invoke` and ``glassagent serve --store``
    take any chat store. `HistoryStore` (a JSON file per chat in one directory) and
    `SQLHistoryStore` (SQLite or PostgreSQL) both satisfy it, so code written against it runs
    on either. Every method is a coroutine, named with an ``a`` as `glassagent.server.aserve`
    is: a database is reached over the network, and the file store works in a worker thread.

    Saves are checked: a history remembers the revision it was loaded from, and `asave` over
    a chat that another writer changed since raises `HistoryConflictError` instead of losing
    that writer's turn. Reload, re-apply, and save again; or, when adding messages is all
    the change, save with ``merge=True`` to add them to the chat as it is now.

    Example:
        ```python
        async def add_turn(store: ChatStore, chat_id: str, agent: Agent, text: str) -> None:
            history = await store.aload(chat_id, thread=True) or History()
            await agent.run(text, history=history, append_to_history=True)
            await store.asave(chat_id, history)  # HistoryConflictError: reload and retry
        ```
    """

    async def aload(self, chat_id: str, *, thread: bool = False) -> History | None:
        """Load and validate a chat; `None` when there is none.

        Args:
            chat_id: The chat (see `HistoryStore` for valid ids).
            thread: Load at least the thread at the chat's current node, which is all a run
                needs; a store may then read only those messages (`SQLHistoryStore` does,
                `HistoryStore` reads the whole file). The history can be extended and saved
                as usual; the messages it lacks stay stored.

        Raises:
            UserError: For an invalid chat id.
            HistoryValidationError: When the stored chat is not a valid history.
        """
        ...

    async def asave(self, chat_id: str, history: History, *, merge: bool = False) -> str:
        """Save a chat, refusing to overwrite changes made since `history` was loaded.

        A history that was never stored (``revision`` `None`) may only create a new chat.

        With `merge`, a chat that changed since is not a conflict: the messages of `history`
        it does not hold are added to it, each below its own parent, its current node becomes
        `history`'s and its metadata (title, model, tools) `history`'s. What others saved
        meanwhile stays: two turns appended below one message become sibling branches. The
        store does it as one step (under its lock, in one transaction), so concurrent merges
        never lose a message. `history` itself does not gain what others saved: its
        ``revision`` is left as it was.

        Args:
            chat_id: The chat to write.
            history: The conversation.
            merge: Add the new messages to a chat that changed, rather than refuse.

        Returns:
            The new revision (also set on ``history.revision``, unless it was merged).

        Raises:
            HistoryConflictError: When the stored chat is not the revision `history` came
                from; with `merge`, only when the chat lacks a message the new ones follow
                (it was deleted or replaced).
            UserError: For an invalid chat id, or a history that cannot be written as JSON.
        """
        ...

    async def alist(self) -> list[str]:
        """The ids of every stored chat, sorted."""
        ...

    async def adelete(self, chat_id: str) -> None:
        """Delete a chat; deleting a chat that does not exist does nothing.

        Raises:
            UserError: For an invalid chat id.
        """
        ...

    def for_user(
        self, user: str, *, attachment_policy: AttachmentPolicy | None = None
    ) -> ChatStore:
        """The store of `user`'s chats: only theirs, listed, loaded, saved and deleted.

        Call it on the store that holds every user's chats; the server calls it with each
        request's user. The result has this store's kind, place and limits.

        Args:
            user: Any user id (e.g. a `glassagent.server.load_tokens` value).
            attachment_policy: Given to every history loaded; this store's when not given.
        """
        ...
