"""`SQLHistoryStore`: rows per message, thread reads, its schema, URLs and errors."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import func, select, update

from glassagent.errors import ConfigurationError, HistoryValidationError, UserError
from glassagent.history import History, SQLHistoryStore
from glassagent.llm import Message
from tests.support.store import Place, Statements, chat, contents

MESSAGES = "glassagent_messages"
CHATS = "glassagent_chats"


async def count_messages(store: SQLHistoryStore) -> int:
    from glassagent._history.sqldb import messages

    async with store._db.engine.connect() as conn:
        return int((await conn.execute(select(func.count()).select_from(messages))).scalar_one())


def long_chat(turns: int) -> History:
    history = History(title="long")
    for turn in range(turns):
        history.append(Message(role="user", content=f"q{turn}"))
        history.append(Message(role="assistant", content=f"a{turn}"))
    return history


async def test_appending_a_turn_writes_only_its_messages(sql_place: Place) -> None:
    store = await sql_place.open_sql()
    await store.asave("c", long_chat(10))
    statements = Statements(store)
    history = await store.aload("c", thread=True)
    assert history is not None
    history.append(Message(role="user", content="q10"))
    history.append(Message(role="assistant", content="a10"))
    statements.clear()
    await store.asave("c", history)
    assert statements.writes() == [("UPDATE", CHATS, 1), ("INSERT", MESSAGES, 2)]
    assert await count_messages(store) == 22
    statements.clear()
    history.append(Message(role="user", content="q11"))
    await store.asave("c", history)  # saved again: only the newest message
    assert statements.writes() == [("UPDATE", CHATS, 1), ("INSERT", MESSAGES, 1)]
    statements.clear()
    history.title = "renamed"
    await store.asave("c", history)  # nothing new: the chat's row only
    assert statements.writes() == [("UPDATE", CHATS, 1)]
    statements.close()
    loaded = await store.aload("c")
    assert loaded is not None
    assert (len(loaded), loaded.title) == (23, "renamed")


async def test_loading_a_thread_reads_only_its_messages(sql_place: Place) -> None:
    store = await sql_place.open_sql()
    history = chat("root")
    root = history.current_node
    assert root is not None
    for n in range(40):  # a long abandoned branch
        history.append(Message(role="user", content=f"old {n}"))
    history.branch(root)
    history.append(Message(role="user", content="new"))
    await store.asave("c", history)
    statements = Statements(store)
    thread = await store.aload("c", thread=True)
    statements.close()
    assert thread is not None
    assert len(thread) == 2  # built from exactly the rows read
    assert contents(thread) == ["root", "new"]
    selects = [text for text, _ in statements.seen if "glassagent_messages" in text]
    assert len(selects) == 1
    assert selects[0].startswith("WITH RECURSIVE")
    whole = await store.aload("c")
    assert whole is not None
    assert len(whole) == 42


async def test_a_history_this_store_did_not_load_saves_only_what_is_missing(
    sql_place: Place,
) -> None:
    first = await sql_place.open_sql()
    await first.asave("c", long_chat(3))
    history = await first.aload("c")
    assert history is not None
    history.append(Message(role="user", content="more"))
    other = await sql_place.open_sql()  # another process, which never saw this history
    statements = Statements(other)
    await other.asave("c", history)
    statements.close()
    inserts = [w for w in statements.writes() if w[0] == "INSERT"]
    assert inserts == [("INSERT", MESSAGES, 1)]
    assert await count_messages(other) == 7
    loaded = await other.aload("c")
    assert loaded is not None
    assert contents(loaded)[-1] == "more"


async def test_deleting_a_chat_deletes_its_messages(sql_place: Place) -> None:
    store = await sql_place.open_sql()
    await store.asave("gone", long_chat(2))
    await store.asave("kept", long_chat(1))
    await store.adelete("gone")
    assert await count_messages(store) == 2
    assert await store.alist() == ["kept"]


async def test_text_a_database_might_mangle_round_trips(sql_place: Place) -> None:
    store = await sql_place.open_sql()
    text = 'NUL \x00, quote \' " \\, emoji 🦜, RTL \u202e, json {"a": [1]}'
    history = chat(text, title=text)
    history.extra["meta"] = {"nested": [text, None, 1.5]}
    await store.asave("c", history)
    loaded = await store.aload("c", thread=True)
    assert loaded is not None
    assert contents(loaded) == [text]
    assert (loaded.title, loaded.extra) == (text, {"meta": {"nested": [text, None, 1.5]}})


async def test_what_cannot_be_written_as_json_is_refused_before_anything_is_written(
    sql_place: Place,
) -> None:
    store = await sql_place.open_sql()
    lone = chat("half a surrogate \ud800")
    odd = chat("fine")
    odd.extra["when"] = object()
    for history in (lone, odd):
        with pytest.raises(UserError, match="cannot be written as JSON"):
            await store.asave("c", history)
    assert await store.alist() == []


async def test_damaged_rows_are_a_validation_error(sql_place: Place) -> None:
    from glassagent._history.sqldb import messages

    store = await sql_place.open_sql()
    await store.asave("c", chat("one", "two"))
    async with store._db.writer.begin() as conn:
        await conn.execute(update(messages).values(body=b'{"role": "wizard"'))
    for thread in (False, True):
        with pytest.raises(HistoryValidationError):
            await store.aload("c", thread=thread)


# ---- the schema ------------------------------------------------------------------------


async def test_a_store_without_tables_says_how_to_create_them(sql_place: Place) -> None:
    store = SQLHistoryStore(sql_place.where)
    sql_place.opened.append(store)
    for call in (store.alist(), store.aload("c"), store.asave("c", chat("x"))):
        with pytest.raises(ConfigurationError, match=r"create_schema\(\)"):
            await call
    await store.create_schema()
    await store.create_schema()  # again: nothing to do
    assert await store.alist() == []


async def test_several_processes_may_create_the_schema_at_once(sql_place: Place) -> None:
    # SQLite refuses a switch to WAL while another connection opens the new file, busy
    # timeout or not: each try below raced four stores onto one new file
    for attempt in range(10):
        where = sql_place.where.replace("chats.db", f"chats{attempt}.db")
        stores = [SQLHistoryStore(where) for _ in range(4)]
        sql_place.opened.extend(stores)
        await asyncio.gather(*(store.create_schema() for store in stores))
        await stores[0].asave("c", chat("x"))
        assert await stores[3].alist() == ["c"]
        if sql_place.kind != "sqlite":
            break
        async with stores[1]._db.engine.connect() as conn:
            mode = (await conn.exec_driver_sql("PRAGMA journal_mode")).scalar_one()
        assert mode == "wal"


async def test_tables_of_a_newer_schema_are_refused(sql_place: Place) -> None:
    from glassagent._history.sqldb import SCHEMA_VERSION, schema

    store = await sql_place.open_sql()
    async with store._db.writer.begin() as conn:
        await conn.execute(update(schema).values(version=SCHEMA_VERSION + 1))
    later = SQLHistoryStore(sql_place.where)
    sql_place.opened.append(later)
    with pytest.raises(ConfigurationError, match="newer than this glassagent"):
        await later.create_schema()
    with pytest.raises(ConfigurationError, match="upgrade glassagent"):
        await later.alist()


# ---- URLs, drivers and errors ----------------------------------------------------------


def test_urls_choose_the_async_drivers_and_hide_the_password(tmp_path: Path) -> None:
    store = SQLHistoryStore("postgresql://app:s3cret-pw@db.example:5432/chats", user="alice")
    assert store.url == "postgresql+asyncpg://app:***@db.example:5432/chats"
    assert "s3cret" not in repr(store)
    assert repr(store) == (
        "SQLHistoryStore('postgresql+asyncpg://app:***@db.example:5432/chats', user='alice')"
    )
    assert SQLHistoryStore("postgres://h/db").url == "postgresql+asyncpg://h/db"
    assert SQLHistoryStore(f"sqlite:///{tmp_path}/a.db").url.startswith("sqlite+aiosqlite:///")


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("not a url at all s3cret", "not a database URL"),
        ("mysql+aiomysql://u:s3cret@h/db", "not mysql+aiomysql"),
        ("sqlite+pysqlite:///x.db", "not sqlite+pysqlite"),
    ],
)
def test_other_urls_are_refused_without_showing_them(url: str, expected: str) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(expected)) as info:
        SQLHistoryStore(url)
    assert "s3cret" not in str(info.value)
    assert info.value.__cause__ is None


def test_a_missing_driver_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "asyncpg", None)
    with pytest.raises(ConfigurationError, match=r"asyncpg: pip install 'glassagent\[sql\]'"):
        SQLHistoryStore("postgresql+asyncpg://u@127.0.0.1/db")


async def test_an_unreachable_database_is_a_configuration_error_without_the_password() -> None:
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    async with SQLHistoryStore(f"postgresql+asyncpg://app:s3cret-pw@127.0.0.1:{port}/db") as store:
        with pytest.raises(ConfigurationError, match="Cannot use the database") as info:
            await store.create_schema()
    error: BaseException | None = info.value
    while error is not None:
        assert "s3cret" not in str(error)
        error = error.__cause__ or error.__context__
    assert "postgresql+asyncpg://app:***@127.0.0.1" in str(info.value)


def test_importing_glassagent_does_not_import_sqlalchemy() -> None:
    code = (
        "import sys, glassagent, glassagent.history, glassagent.server\n"
        "print([m for m in ('sqlalchemy', 'aiosqlite', 'asyncpg') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


async def test_a_merge_writes_only_the_messages_the_chat_lacks(sql_place: Place) -> None:
    store = await sql_place.open_sql()
    await store.asave("c", long_chat(5))
    first, second = await store.aload("c"), await store.aload("c", thread=True)
    assert first is not None
    assert second is not None
    first.append(Message(role="user", content="first"))
    await store.asave("c", first)
    second.append(Message(role="user", content="second"))
    second.append(Message(role="assistant", content="answer"))
    statements = Statements(store)
    await store.asave("c", second, merge=True)
    statements.close()
    assert statements.writes() == [("UPDATE", CHATS, 1), ("INSERT", MESSAGES, 2)]
    locked = [text for text, _ in statements.seen if text.startswith("SELECT")]
    if sql_place.kind == "postgresql":
        assert locked[0].endswith("FOR UPDATE")
    assert await count_messages(store) == 13


def test_without_postgresql_the_tests_skip_but_fail_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support.postgres import missing_postgres

    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="apt-get install postgresql"):
        missing_postgres()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="in CI, PostgreSQL is not installed"):
        missing_postgres()
