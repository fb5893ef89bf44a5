"""The database side of `SQLHistoryStore`: tables, the engine, the schema and each statement.

Imported only when a store is made: it needs SQLAlchemy (``glassagent[sql]``).

A chat is a row of ``glassagent_chats`` (owner, chat id, revision, current node, metadata)
and its messages rows of ``glassagent_messages`` (message id, parent id, JSON), so appending a
turn inserts only its messages and updates one chat row, and a thread is read by a recursive
query up the parent ids. Every save is one transaction that first updates the chat row on
the condition that its revision is still the one the history was loaded from (``UPDATE ...
WHERE revision = :loaded``): of two writers, the database lets the second update only after
the first committed, finds the revision changed, and the second is told of the conflict.

SQLite runs with foreign keys on, WAL journal (set by ``create_schema``) and a 30 s busy
timeout, and with transactions SQLAlchemy begins itself (``BEGIN``; ``BEGIN IMMEDIATE`` for
writes, so a writer waits for the lock up front rather than failing when it upgrades a read).
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    ForeignKey,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    bindparam,
    delete,
    event,
    insert,
    inspect,
    literal,
    select,
    text,
    update,
)
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.sql import Select

from glassagent._core.errors import ConfigurationError
from glassagent._history.model import HistoryLimits
from glassagent._history.rows import MessageRow

SCHEMA_VERSION = 1
"""The version of the tables this glassagent reads and writes."""

_ID = BigInteger().with_variant(Integer(), "sqlite")  # SQLite: the rowid, autoincremented
_LOCK = 0x6C617373_61676E74  # PostgreSQL advisory lock held while the schema is created
_WRITE = {"glassagent_write": True}
_BUSY_SECONDS = 30  # how long SQLite waits for another writer
_IN_CHUNK = 500  # ids per IN (...) list

metadata = MetaData()
schema = Table("glassagent_schema", metadata, Column("version", Integer, nullable=False))
chats = Table(
    "glassagent_chats",
    metadata,
    Column("id", _ID, primary_key=True, autoincrement=True),
    Column("owner", Text, nullable=False),
    Column("chat_id", String(128), nullable=False),
    Column("revision", String(32), nullable=False),
    Column("current_node", Text),
    Column("meta", LargeBinary, nullable=False),
    UniqueConstraint("owner", "chat_id", name="glassagent_chats_owner_chat_id"),
)
messages = Table(
    "glassagent_messages",
    metadata,
    Column("seq", _ID, primary_key=True, autoincrement=True),  # the order messages came in
    Column("chat", _ID, ForeignKey(chats.c.id, ondelete="CASCADE"), nullable=False),
    Column("message_id", Text, nullable=False),
    Column("parent_id", Text),
    Column("body", LargeBinary, nullable=False),
    Column("mapping_extra", LargeBinary),
    UniqueConstraint("chat", "message_id", name="glassagent_messages_chat_message_id"),
)


@dataclass(frozen=True)
class ChatRow:
    """A chat's row: its key in the messages table, revision, current node and metadata."""

    key: int
    revision: str
    current_node: str | None
    meta: bytes


@dataclass(frozen=True)
class Write:
    """What a save writes: the chat row's new values and the rows of the new messages.

    `rows` are the messages known to be new; `maybe_new` (for a history this store did not
    load) are checked against the chat's stored messages inside the transaction.
    """

    owner: str
    chat_id: str
    revision: str
    current_node: str | None
    meta: bytes
    rows: Sequence[MessageRow] = ()
    maybe_new: Sequence[MessageRow] = ()


class Database:
    """One engine and the statements of the store; shared by a store and its `for_user`s."""

    def __init__(self, url: URL, options: Mapping[str, Any]) -> None:
        self.url = url
        self.engine: AsyncEngine = create_async_engine(url, **options)
        self.writer = self.engine.execution_options(**_WRITE)
        self.sqlite = url.get_backend_name() == "sqlite"
        # PostgreSQL reads outside a transaction: no BEGIN and ROLLBACK round trips
        self.reader = (
            self.engine
            if self.sqlite
            else self.engine.execution_options(isolation_level="AUTOCOMMIT")
        )
        if self.sqlite:
            event.listen(self.engine.sync_engine, "connect", _sqlite_connect)
            event.listen(self.engine.sync_engine, "begin", _sqlite_begin)
        self.checked = False

    async def create_schema(self) -> int:
        """Create the tables if missing, or migrate them; the version found before."""
        if self.sqlite:
            await self._use_wal()
        async with self.writer.begin() as conn:
            if not self.sqlite:
                await conn.execute(text(f"SELECT pg_advisory_xact_lock({_LOCK})"))
            found = await conn.run_sync(_create_or_migrate)
        self.checked = True
        return found

    async def _use_wal(self) -> None:
        """Switch a SQLite database to the WAL journal; the file keeps the mode.

        SQLite refuses the switch at once, busy timeout or not, while another connection is
        opening the same new file, so the switch is retried for up to 30 s.
        """
        deadline = time.monotonic() + _BUSY_SECONDS
        while True:
            async with self.engine.connect() as conn:
                raw = (await conn.get_raw_connection()).driver_connection
                assert raw is not None  # an open connection has its driver's
                try:
                    await raw.execute("PRAGMA journal_mode=WAL")
                    return
                except sqlite3.OperationalError as exc:
                    if "locked" not in str(exc) or time.monotonic() > deadline:
                        raise
            await asyncio.sleep(0.02)

    async def check_schema(self) -> None:
        """Check once that the tables exist in this glassagent's version.

        Raises:
            ConfigurationError: When they do not.
        """
        if self.checked:
            return
        async with self.engine.connect() as conn:
            version = await conn.run_sync(_version)
        if version != SCHEMA_VERSION:
            raise schema_error(version)
        self.checked = True

    async def read(
        self, owner: str, chat_id: str, *, thread: bool, limits: HistoryLimits
    ) -> tuple[ChatRow, list[MessageRow]] | None:
        """A chat's row and its messages' rows; `None` when there is no such chat.

        With `thread`, the rows of the current thread, root first; else all, in the order
        they were saved. One connection, outside a transaction on PostgreSQL (one round trip
        per query). Messages never change, so the thread of the row's current node is the
        thread of the row's revision; a chat deleted between the two queries reads as one
        without messages.
        """
        async with self.reader.connect() as conn:
            row = (await conn.execute(CHAT_QUERY, {"owner": owner, "chat_id": chat_id})).first()
            if row is None:
                return None
            chat = ChatRow(row[0], row[1], row[2], bytes(row[3]))
            if chat.current_node is None:
                return chat, []
            if thread:
                query = THREAD_QUERY
                values = {"key": chat.key, "node": chat.current_node, "max_depth": limits.max_depth}
            else:
                query, values = MESSAGES_QUERY, {"key": chat.key, "most": limits.max_messages + 1}
            return chat, _message_rows(await conn.execute(query, values))

    async def chat_ids(self, owner: str) -> list[str]:
        """The ids of `owner`'s chats."""
        query = select(chats.c.chat_id).where(chats.c.owner == owner)
        async with self.reader.connect() as conn:
            return list((await conn.execute(query)).scalars())

    async def revision(self, owner: str, chat_id: str) -> str | None:
        """The stored revision of a chat, `None` when there is none."""
        async with self.reader.connect() as conn:
            row = (await conn.execute(CHAT_QUERY, {"owner": owner, "chat_id": chat_id})).first()
        return None if row is None else str(row[1])

    async def delete(self, owner: str, chat_id: str) -> None:
        """Delete a chat and (cascading) its messages."""
        async with self.writer.begin() as conn:
            await conn.execute(
                delete(chats).where(chats.c.owner == owner, chats.c.chat_id == chat_id)
            )

    async def create(self, write: Write) -> int | None:
        """Insert a new chat and its messages; its key, or `None` when the chat exists."""
        from sqlalchemy.exc import IntegrityError

        try:
            async with self.writer.begin() as conn:
                key = await _insert_chat(conn, write)
                await _insert(conn, key, write.rows)
        except IntegrityError:  # the same (owner, chat_id): another writer created it first
            return None
        return key

    async def update(self, write: Write, key: int | None, loaded: str) -> int | None:
        """Update a chat of revision `loaded` and add the new messages; its key, or `None`.

        `None` when the chat is not at revision `loaded` (changed, deleted or never stored).
        """
        c = chats.c
        where = [c.owner == write.owner, c.chat_id == write.chat_id, c.revision == loaded]
        if key is not None:
            where.append(c.id == key)
        async with self.writer.begin() as conn:
            updated = await conn.execute(update(chats).where(*where).values(**_chat_values(write)))
            if updated.rowcount != 1:
                return None
            if key is None:
                found = select(c.id).where(c.owner == write.owner, c.chat_id == write.chat_id)
                key = int((await conn.execute(found)).scalar_one())
            rows = [*write.rows, *await _unstored(conn, key, write.maybe_new)]
            await _insert(conn, key, rows)
        return key

    async def merge(self, write: Write, loaded: str | None) -> tuple[int, bool]:
        """Add the messages the chat lacks to it as it is now, the chat locked meanwhile.

        Returns its key, and whether it had changed since revision `loaded`.

        Raises:
            Unmergeable: When a new message follows one the chat does not hold.
        """
        from sqlalchemy.exc import IntegrityError

        c = chats.c
        query = select(c.id, c.revision, c.current_node).where(
            c.owner == write.owner, c.chat_id == write.chat_id
        )
        if not self.sqlite:  # SQLite: BEGIN IMMEDIATE has locked the database
            query = query.with_for_update()
        try:
            async with self.writer.begin() as conn:
                row = (await conn.execute(query)).first()
                if row is None:
                    if loaded is not None:  # deleted meanwhile
                        raise Unmergeable
                    key = await _insert_chat(conn, write)
                    await _insert(conn, key, [*write.rows, *write.maybe_new])
                    return key, False
                key, changed = int(row[0]), row[1] != loaded
                if changed:
                    rows = await _unstored(conn, key, [*write.rows, *write.maybe_new])
                    if not await _follow_stored(conn, key, rows, has_messages=bool(row[2])):
                        raise Unmergeable
                else:
                    rows = [*write.rows, *await _unstored(conn, key, write.maybe_new)]
                await conn.execute(update(chats).where(c.id == key).values(**_chat_values(write)))
                await _insert(conn, key, rows)
        except IntegrityError:  # created by another writer meanwhile, with a first message
            raise Unmergeable from None
        return key, changed


async def _insert_chat(conn: AsyncConnection, write: Write) -> int:
    inserted = await conn.execute(
        insert(chats).values(owner=write.owner, chat_id=write.chat_id, **_chat_values(write))
    )
    primary_key = inserted.inserted_primary_key
    assert primary_key is not None
    return int(primary_key[0])


async def _follow_stored(
    conn: AsyncConnection, key: int, rows: Sequence[MessageRow], *, has_messages: bool
) -> bool:
    """Whether each row follows another row or a message the chat holds.

    A first message (no parent) follows nothing: only a chat without messages takes one.
    """
    new = {row.message_id for row in rows}
    needed = {row.parent_id for row in rows if row.parent_id not in new}
    if None in needed and has_messages:
        return False
    wanted = sorted(parent for parent in needed if parent is not None)
    if not wanted:
        return True
    m = messages.c
    query = select(m.message_id).where(m.chat == key, m.message_id.in_(wanted))
    return len(set((await conn.execute(query)).scalars())) == len(wanted)


def _chat_query() -> Select[Any]:
    c = chats.c
    return select(c.id, c.revision, c.current_node, c.meta).where(
        c.owner == bindparam("owner", type_=Text), c.chat_id == bindparam("chat_id", type_=Text)
    )


def _thread_query() -> Select[Any]:
    """The messages from the root down to ``node``, root first: a walk up the parent ids."""
    m = messages.c
    key = bindparam("key", type_=_ID)
    node, max_depth = bindparam("node", type_=Text), bindparam("max_depth", type_=Integer)
    start = select(m.message_id, m.parent_id, m.body, m.mapping_extra, literal(0).label("hops"))
    walk = start.where(m.chat == key, m.message_id == node).cte("thread", recursive=True)
    up = messages.alias("up").c
    walk = walk.union_all(
        select(up.message_id, up.parent_id, up.body, up.mapping_extra, walk.c.hops + 1).where(
            up.chat == key, up.message_id == walk.c.parent_id, walk.c.hops < max_depth
        )
    )
    t = walk.c
    return select(t.message_id, t.parent_id, t.body, t.mapping_extra).order_by(t.hops.desc())


def _messages_query() -> Select[Any]:
    """Every message of a chat in the order they were saved (at most ``most``)."""
    m = messages.c
    return (
        select(m.message_id, m.parent_id, m.body, m.mapping_extra)
        .where(m.chat == bindparam("key", type_=_ID))
        .order_by(m.seq)
        .limit(bindparam("most", type_=Integer))
    )


# built once: building the recursive query costs more than running it
CHAT_QUERY, THREAD_QUERY, MESSAGES_QUERY = _chat_query(), _thread_query(), _messages_query()


class Unmergeable(Exception):
    """A merge's messages follow one the chat does not hold (deleted or replaced)."""


def _chat_values(write: Write) -> dict[str, Any]:
    return {"revision": write.revision, "current_node": write.current_node, "meta": write.meta}


async def _insert(conn: AsyncConnection, key: int, rows: Sequence[MessageRow]) -> None:
    if rows:
        await conn.execute(
            insert(messages),
            [
                {
                    "chat": key,
                    "message_id": r.message_id,
                    "parent_id": r.parent_id,
                    "body": r.body,
                    "mapping_extra": r.mapping_extra,
                }
                for r in rows
            ],
        )


async def _unstored(
    conn: AsyncConnection, key: int, rows: Sequence[MessageRow]
) -> list[MessageRow]:
    """The rows whose messages the chat does not hold yet."""
    stored: set[str] = set()
    m = messages.c
    for chunk in _chunks(rows):
        ids = [r.message_id for r in chunk]
        query = select(m.message_id).where(m.chat == key, m.message_id.in_(ids))
        stored.update((await conn.execute(query)).scalars())
    return [r for r in rows if r.message_id not in stored]


def _chunks(rows: Sequence[MessageRow]) -> list[Sequence[MessageRow]]:
    return [rows[i : i + _IN_CHUNK] for i in range(0, len(rows), _IN_CHUNK)]


def _message_rows(result: Any) -> list[MessageRow]:
    return [
        MessageRow(row[0], row[1], bytes(row[2]), None if row[3] is None else bytes(row[3]))
        for row in result
    ]


def _version(conn: Connection) -> int | None:
    """The schema version the database holds; `None` without the tables."""
    if not inspect(conn).has_table(schema.name):
        return None
    return conn.execute(select(schema.c.version)).scalar()


def _create_or_migrate(conn: Connection) -> int:
    """Create the tables, or check their version (later: migrate older ones); the version found.

    Raises:
        ConfigurationError: For tables of a newer glassagent.
    """
    found = _version(conn)
    if found is None:
        metadata.create_all(conn)
        conn.execute(insert(schema).values(version=SCHEMA_VERSION))
        return 0
    if found != SCHEMA_VERSION:  # no older version exists yet: migrations go here
        raise schema_error(found)
    return found


def schema_error(version: int | None) -> ConfigurationError:
    """The error for a database whose tables are missing or of another version."""
    if version is None:
        return ConfigurationError(
            "The database has no glassagent chat tables: create them once with "
            "`await store.create_schema()` (glassagent serve does it when it starts)."
        )
    if version > SCHEMA_VERSION:
        return ConfigurationError(
            f"The database's chat tables are of schema version {version}, newer than this "
            f"glassagent's ({SCHEMA_VERSION}): upgrade glassagent."
        )
    return ConfigurationError(
        f"The database's chat tables are of schema version {version}; this glassagent uses "
        f"{SCHEMA_VERSION}: run `await store.create_schema()` to migrate them."
    )


def _sqlite_connect(dbapi_connection: Any, record: Any) -> None:
    """Each new SQLite connection: foreign keys, a busy timeout, our own BEGIN."""
    dbapi_connection.isolation_level = None  # SQLAlchemy's "begin" event emits BEGIN
    cursor = dbapi_connection.cursor()
    for pragma in ("foreign_keys=ON", f"busy_timeout={_BUSY_SECONDS * 1000}"):
        cursor.execute(f"PRAGMA {pragma}")
    cursor.close()


def _sqlite_begin(conn: Connection) -> None:
    """Begin a SQLite transaction: writers take the write lock at once."""
    immediate = conn.get_execution_options().get("glassagent_write", False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")
