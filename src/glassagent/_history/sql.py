"""`SQLHistoryStore`: chats in SQLite or PostgreSQL, a row per message, saved with conflict checks.

SQLAlchemy (``glassagent[sql]``) is imported when a store is made, never by ``import
glassagent``.
"""

from __future__ import annotations

import uuid
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from glassagent._core.attachments import DEFAULT_POLICY, AttachmentPolicy
from glassagent._core.errors import (
    ConfigurationError,
    HistoryConflictError,
    HistoryProblem,
    HistoryValidationError,
)
from glassagent._history import rows
from glassagent._history.merging import unmergeable
from glassagent._history.model import DEFAULT_LIMITS, HistoryLimits, HistoryMessage
from glassagent._history.store import (
    _short,
    check_chat_id,
    check_store_options,
    check_user_id,
    conversation_thread,
)
from glassagent._history.tree import History

if TYPE_CHECKING:
    from glassagent._history.rows import MessageRow
    from glassagent._history.sqldb import ChatRow, Database, Write

_INSTALL = "pip install 'glassagent[sql]'"
_DRIVERS = {
    "sqlite": "sqlite+aiosqlite",
    "sqlite+aiosqlite": "sqlite+aiosqlite",
    "postgres": "postgresql+asyncpg",
    "postgresql": "postgresql+asyncpg",
    "postgresql+asyncpg": "postgresql+asyncpg",
}
_LOAD_ATTEMPTS = 3  # a chat deleted between reading its row and its messages is read again


@dataclass(frozen=True)
class _Stored:
    """What a store knows of a history it loaded or saved: where, which revision, how much."""

    owner: str
    chat_id: str
    key: int
    revision: str | None
    count: int  # its first `count` messages are stored; a history only ever grows


class SQLHistoryStore:
    """Chats in a SQL database: SQLite (a file, no server) or PostgreSQL (many processes).

    ``SQLHistoryStore("sqlite+aiosqlite:///chats.db")`` keeps chats in one SQLite file;
    ``SQLHistoryStore("postgresql+asyncpg://user:password@host/db")`` in PostgreSQL, which
    several servers on several machines can share. It needs ``glassagent[sql]``
    (SQLAlchemy 2 with aiosqlite and asyncpg). Create the tables once with `create_schema`.

    It is a `ChatStore`, with `HistoryStore`'s checks: a history remembers the revision it was
    loaded from, and saving it over a chat another writer changed since raises
    `HistoryConflictError`. A chat is stored a row per message, so that saving a turn inserts
    only the turn's messages (and updates the chat's row), and ``aload(chat_id,
    thread=True)`` reads only the messages of the current thread. Two writers saving the
    same chat at once are serialised by the database: the chat's row is updated only if its
    revision is still the loaded one, and of two such updates the second waits for the
    first, then finds the revision changed.

    Each chat belongs to a user (`user`; ``""`` unless given): `for_user` gives the store of
    another user's chats, sharing this one's connections.

    All methods are coroutines on one SQLAlchemy async engine, whose connections belong to
    the event loop that opened them: use a store in one loop, and `aclose` it there.

    Example:
        ```python
        async with SQLHistoryStore("sqlite+aiosqlite:///chats.db") as store:
            await store.create_schema()
            history = await store.aload("team-standup", thread=True) or History()
            await agent.run("Summarise", history=history, append_to_history=True)
            await store.asave("team-standup", history)
        ```
    """

    def __init__(
        self,
        url: str,
        *,
        user: str = "",
        limits: HistoryLimits | None = None,
        attachment_policy: AttachmentPolicy | None = None,
        engine_options: Mapping[str, Any] | None = None,
    ) -> None:
        """Open a store on a database URL (no connection is made until it is used).

        Args:
            url: ``sqlite+aiosqlite:///path/chats.db`` or
                ``postgresql+asyncpg://user:password@host:5432/db``; ``sqlite:///``,
                ``postgresql://`` and ``postgres://`` mean the same drivers.
            user: The user whose chats this store holds (no control characters).
            limits: Bounds applied when loading; `HistoryLimits()` when not given.
            attachment_policy: Given to every history loaded; `AttachmentPolicy()` when not
                given. Pass `AttachmentPolicy.safe()` when others can write the chats.
            engine_options: Passed to SQLAlchemy's ``create_async_engine``. For PostgreSQL
                the pool keeps ``pool_size=10`` connections open (up to 20 at once,
                ``max_overflow=10``) unless they say otherwise.

        Raises:
            ConfigurationError: For a URL that is not a SQLite or PostgreSQL one, or when
                SQLAlchemy or the driver is not installed.
            UserError: For a user id with control characters (`check_user_id`), or `limits`
                or `attachment_policy` of the wrong type.
        """
        check_user_id(user)
        check_store_options(limits, attachment_policy)
        self._db = _open(url, dict(engine_options or {}))
        self._stored: weakref.WeakKeyDictionary[History, _Stored] = weakref.WeakKeyDictionary()
        self.user = user
        """The user whose chats this store holds."""
        self.limits = limits or DEFAULT_LIMITS
        """Bounds applied when loading."""
        self.attachment_policy = attachment_policy or DEFAULT_POLICY
        """The attachment policy given to every history loaded."""

    @property
    def url(self) -> str:
        """The database URL, its password hidden."""
        return self._db.url.render_as_string(hide_password=True)

    async def create_schema(self) -> None:
        """Create the store's tables when the database has none (safe to call every start).

        The tables carry a schema version: a later glassagent migrates older tables here,
        and tables of a newer one are refused. Several processes may call it at once.

        Raises:
            ConfigurationError: When the database cannot be reached, or holds tables of a
                newer glassagent.
        """
        folder = self._sqlite_folder()
        if folder is not None and not folder.is_dir():  # checked first: a failed connect races
            raise ConfigurationError(  # aiosqlite's thread against the loop's end
                f"Cannot use the database {self.url}: its folder {str(folder)!r} does not exist."
            )
        try:
            await self._db.create_schema()
        except ConfigurationError:
            raise
        except Exception as exc:
            raise ConfigurationError(
                f"Cannot use the database {self.url}: {_reason(self, exc)}"
            ) from None

    def _sqlite_folder(self) -> Path | None:
        """The folder of a SQLite database file; `None` for another database."""
        url = self._db.url
        name = url.database
        if url.get_backend_name() != "sqlite" or not name or name.startswith((":", "file:")):
            return None
        return Path(name).absolute().parent

    async def aclose(self) -> None:
        """Close the database connections (of `for_user` stores too); using it reopens them."""
        await self._db.engine.dispose()

    async def __aenter__(self) -> SQLHistoryStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    def for_user(
        self, user: str, *, attachment_policy: AttachmentPolicy | None = None
    ) -> SQLHistoryStore:
        """The store of `user`'s chats, on the same database and connections.

        Args:
            user: Any user id without control characters.
            attachment_policy: Given to every history loaded; this store's when not given.

        Raises:
            UserError: For a user id with control characters (`check_user_id`), which a
                database cannot hold (PostgreSQL refuses NUL).
        """
        check_user_id(user)
        check_store_options(None, attachment_policy)
        view = SQLHistoryStore.__new__(SQLHistoryStore)
        view._db = self._db
        view._stored = self._stored
        view.user = user
        view.limits = self.limits
        view.attachment_policy = attachment_policy or self.attachment_policy
        return view

    def get_conversation_thread(
        self, history: History | Mapping[str, Any], node: str | None = None
    ) -> list[HistoryMessage]:
        """The messages from the root to `node` (default: the current node) of `history`.

        The design documents' ``chat_manager.get_conversation_thread(history)``, as
        `HistoryStore.get_conversation_thread`; no database is read.

        Args:
            history: A `History`, or a standard history dict (version 1 or 2.0), which is
                validated within this store's limits first.
            node: The last message of the thread.

        Raises:
            HistoryValidationError: For a dict that is not a valid history.
            UserError: For anything else than a `History` or a dict, or an unknown `node`.
        """
        return conversation_thread(history, node, self.limits, self.attachment_policy)

    async def alist(self) -> list[str]:
        """The ids of every chat of this store's user, sorted."""
        await self._db.check_schema()
        return sorted(await self._db.chat_ids(self.user))

    async def adelete(self, chat_id: str) -> None:
        """Delete a chat and its messages; deleting a chat that does not exist does nothing.

        Raises:
            UserError: For an invalid chat id.
        """
        check_chat_id(chat_id)
        await self._db.check_schema()
        await self._db.delete(self.user, chat_id)

    async def aload(self, chat_id: str, *, thread: bool = False) -> History | None:
        """Load and validate a chat; `None` when there is none.

        Args:
            chat_id: The chat to load.
            thread: Read only the messages of the thread at the chat's current node (a
                walk up their parent ids), not the whole tree.

        Raises:
            UserError: For an invalid chat id.
            HistoryValidationError: When the stored rows are not a valid history.
            ConfigurationError: When the database has no tables (see `create_schema`).
        """
        check_chat_id(chat_id)
        await self._db.check_schema()
        found = await self._read(chat_id, thread)
        if found is None:
            return None
        chat, messages = found
        if len(messages) > self.limits.max_depth:  # the walk up stopped before the root
            raise HistoryValidationError(
                [
                    HistoryProblem(
                        "messages", f"the thread is deeper than max_depth={self.limits.max_depth}"
                    )
                ]
            )
        history = rows.history_of(
            chat.meta,
            chat.current_node,
            messages,
            limits=self.limits,
            attachment_policy=self.attachment_policy,
        )
        history.revision = chat.revision
        self._stored[history] = _Stored(self.user, chat_id, chat.key, chat.revision, len(messages))
        return history

    async def _read(self, chat_id: str, thread: bool) -> tuple[ChatRow, list[MessageRow]] | None:
        """A chat's row and its messages' (or its thread's) rows; `None` when there is none."""
        for attempt in range(1, _LOAD_ATTEMPTS + 1):
            found = await self._db.read(self.user, chat_id, thread=thread, limits=self.limits)
            if found is None:
                return None
            chat, messages = found
            if messages or chat.current_node is None or attempt == _LOAD_ATTEMPTS:
                return found  # (none, again: they will not validate)
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns

    async def asave(self, chat_id: str, history: History, *, merge: bool = False) -> str:
        """Save a chat: insert its new messages and update its row, if no one changed it since.

        The messages new since `history` was loaded or saved by this store are inserted;
        for any other history, those the chat does not hold yet. A history that was never
        stored (``revision`` `None`) may only create a new chat. With `merge`, the chat's
        row is locked (``SELECT ... FOR UPDATE``; SQLite locks the database) and the new
        messages are added to the chat as it is, changed or not (see `ChatStore.asave`).

        Args:
            chat_id: The chat to write.
            history: The conversation.
            merge: Add the new messages to a chat that changed, rather than refuse.

        Returns:
            The new revision (also set on ``history.revision``, unless it was merged).

        Raises:
            HistoryConflictError: When the stored chat is not the revision `history` came from
                (with `merge`: when it lacks the message the new ones follow).
            UserError: For an invalid chat id, or a history holding values that are not JSON.
            ConfigurationError: When the database has no tables (see `create_schema`).
        """
        check_chat_id(chat_id)
        await self._db.check_schema()
        write, key = self._write(chat_id, history), None
        stored = self._stored.get(history)
        loaded, changed = history.revision, False
        if merge:
            from glassagent._history.sqldb import Unmergeable

            try:
                key, changed = await self._db.merge(write, loaded)
            except Unmergeable:
                actual = await self._db.revision(self.user, chat_id)
                raise unmergeable(chat_id, loaded, actual) from None
        elif loaded is None:
            key = await self._db.create(write)
        else:
            key = await self._db.update(write, stored.key if stored else None, loaded)
        if key is None:
            raise await self._conflict(chat_id, loaded)
        revision = loaded if changed else write.revision
        history.revision = revision
        self._stored[history] = _Stored(self.user, chat_id, key, revision, len(history))
        return write.revision

    def _write(self, chat_id: str, history: History) -> Write:
        """What saving `history` writes: the chat's row and its new (or maybe new) messages."""
        from glassagent._history.sqldb import Write

        stored = self._stored.get(history)
        if stored is not None and (stored.owner, stored.chat_id, stored.revision) != (
            self.user,
            chat_id,
            history.revision,
        ):
            stored = None
        new, maybe_new = _new_messages(history, stored)
        return Write(
            owner=self.user,
            chat_id=chat_id,
            revision=uuid.uuid4().hex,
            current_node=history.current_node,
            meta=rows.meta_of(history),
            rows=rows.rows_of(history, new),
            maybe_new=rows.rows_of(history, maybe_new),
        )

    async def _conflict(self, chat_id: str, expected: str | None) -> HistoryConflictError:
        actual = await self._db.revision(self.user, chat_id)
        return HistoryConflictError(
            f"Chat {chat_id!r} changed since this history was loaded (expected revision "
            f"{_short(expected)}, found {_short(actual)}); reload it and apply the change again.",
            chat_id=chat_id,
            expected_revision=expected,
            actual_revision=actual,
        )

    def __repr__(self) -> str:
        user = f", user={self.user!r}" if self.user else ""
        return f"SQLHistoryStore({self.url!r}{user})"


def _new_messages(history: History, stored: _Stored | None) -> tuple[list[str], list[str]]:
    """The ids of the messages known to be new, and of those that may be (the rest)."""
    if history.revision is None:
        return list(history.messages), []
    if stored is None:
        return [], list(history.messages)
    new = list(islice(reversed(history._messages), len(history) - stored.count))
    new.reverse()
    return new, []


def _open(url: str, options: dict[str, Any]) -> Database:
    """The database of `url`, its driver chosen; nothing is connected yet.

    Raises:
        ConfigurationError: For another URL, or a missing package. The URL is never shown:
            it may hold a password.
    """
    try:
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError

        from glassagent._history.sqldb import Database
    except ImportError as exc:
        raise ConfigurationError(f"SQLHistoryStore needs SQLAlchemy: {_INSTALL}") from exc
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError, TypeError):
        raise ConfigurationError(
            "The store URL is not a database URL such as sqlite+aiosqlite:///chats.db or "
            "postgresql+asyncpg://user:password@host/db."
        ) from None
    driver = _DRIVERS.get(parsed.drivername)
    if driver is None:
        raise ConfigurationError(
            f"SQLHistoryStore keeps chats in SQLite (sqlite+aiosqlite://) or PostgreSQL "
            f"(postgresql+asyncpg://), not {parsed.drivername}."
        )
    if driver == "postgresql+asyncpg":  # a busy server reopens fewer connections
        options = {"pool_size": 10, "max_overflow": 10, **options}
    try:
        return Database(parsed.set(drivername=driver), options)
    except ImportError as exc:
        raise ConfigurationError(f"{driver} needs its driver, {exc.name}: {_INSTALL}") from None


def _reason(store: SQLHistoryStore, exc: Exception) -> str:
    """The driver's one-line reason for a failure, without the password."""
    reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    text = reason[0] if reason else type(exc).__name__
    password = store._db.url.password
    return text.replace(str(password), "***") if password else text
