"""Chat stores for the tests: the same place opened as a file store, SQLite or PostgreSQL."""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from glassagent.history import ChatStore, History, HistoryStore, SQLHistoryStore
from glassagent.llm import Message
from tests.support.history import fixture


@dataclass
class Place:
    """Where chats are kept: a directory or a database URL; stores opened on it."""

    kind: str  # "files", "sqlite" or "postgresql"
    where: str
    opened: list[SQLHistoryStore] = field(default_factory=list)

    @classmethod
    @asynccontextmanager
    async def of(
        cls, kind: str, request: pytest.FixtureRequest, tmp_path: Path
    ) -> AsyncIterator[Place]:
        if kind == "files":
            where = str(tmp_path / "chats")
        elif kind == "sqlite":
            where = f"sqlite+aiosqlite:///{tmp_path / 'chats.db'}"
        else:
            where = request.getfixturevalue("postgres_url")
        place = cls(kind, where)
        try:
            yield place
        finally:
            for store in place.opened:
                await store.aclose()

    @property
    def sql(self) -> bool:
        return self.kind != "files"

    async def open(self, **options: Any) -> ChatStore:
        """A new store on this place (for a database: its own engine, as another process)."""
        if not self.sql:
            return HistoryStore(self.where, **options)
        store = SQLHistoryStore(self.where, **options)
        self.opened.append(store)
        await store.create_schema()
        return store

    async def open_sql(self, **options: Any) -> SQLHistoryStore:
        store = await self.open(**options)
        assert isinstance(store, SQLHistoryStore)
        return store


class Statements:
    """The statements a store's engine executes, with the rows each writes."""

    def __init__(self, store: SQLHistoryStore) -> None:
        self.seen: list[tuple[str, int]] = []
        self._engine = store._db.engine.sync_engine
        event.listen(self._engine, "before_execute", self._record)

    def _record(self, conn: Any, clause: Any, multiparams: Any, params: Any, options: Any) -> None:
        text = str(clause).split()
        rows = len(multiparams) if multiparams else 1
        self.seen.append((" ".join(text), rows))

    def writes(self) -> list[tuple[str, str, int]]:
        """(verb, table, rows) of each INSERT, UPDATE and DELETE."""
        found = []
        for text, rows in self.seen:
            words = text.split()
            verb = words[0].upper()
            if verb in ("INSERT", "UPDATE", "DELETE"):
                table = words[2] if verb in ("INSERT", "DELETE") else words[1]
                found.append((verb, table, rows))
        return found

    def clear(self) -> None:
        self.seen.clear()

    def close(self) -> None:
        event.remove(self._engine, "before_execute", self._record)


def rich_history() -> History:
    """The version 2.0 fixture (branches, a tool run, attachments, unknown fields) plus a
    mapping entry with a field of its own."""
    document = copy.deepcopy(fixture("2.0"))
    document["mapping"]["a1"]["pinned"] = True
    return History.from_dict(document)


def chat(*contents: str, title: str = "chat") -> History:
    history = History(title=title)
    for content in contents:
        history.append(Message(role="user", content=content))
    return history


def contents(history: History) -> list[str]:
    return [m.content for m in history.thread()]


def as_json(history: History) -> Any:
    return json.loads(history.to_json())
