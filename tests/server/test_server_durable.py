"""Durable turns through the app on SQLite: a turn is a durable run, kept once in its chat,
followed again by its ``run_id`` without running again, and an approval waits durably for a
second request to answer it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from glassagent import LLMResponse, ToolCall, tool
from glassagent.history import History, HistoryStore
from glassagent.server import ANONYMOUS_USER, create_app, user_directory
from glassagent.testing import ScriptedClient
from tests.support.cli import ScriptedModel, cli_env, say
from tests.support.server import INVOKE, http, served_with_token, sse_events

pytestmark = pytest.mark.durable
pytest.importorskip("dbos")

DELETE = LLMResponse(
    "Checking first.",
    tool_calls=(
        ToolCall("c0", "size", {"path": "notes.txt"}),
        ToolCall("c1", "delete", {"path": "notes.txt"}),
    ),
)
WAITING = [{"id": "c1", "name": "delete", "arguments": {"path": "notes.txt"}}]
deleted: list[str] = []


@tool(requires_approval=True)
def delete(path: str) -> str:
    """Delete a file."""
    deleted.append(path)
    return f"deleted {path}"


@tool
def size(path: str) -> str:
    """The size of a file."""
    return f"{path}: 3 kB"


@pytest.fixture(autouse=True)
def nothing_deleted() -> None:
    deleted.clear()


def stored(directory: Path, chat_id: str) -> History:
    return HistoryStore(user_directory(directory, ANONYMOUS_USER)).load(chat_id)


@asynccontextmanager
async def served(app: Any) -> AsyncIterator[httpx.AsyncClient]:
    """The app with its lifespan entered (the durable agent runs), and a client of it."""
    async with app.router.lifespan_context(app), http(app) as api:
        yield api


async def test_a_durable_turn_is_kept_once_and_a_retry_runs_nothing(tmp_path: Path) -> None:
    model = ScriptedClient(["Hello there."])
    chats, url = tmp_path / "chats", f"sqlite:///{tmp_path / 'turns.sqlite'}"
    app = create_app(model=model, store=chats, durable=url, worker_id="w1")
    turn = {"message": "Hi", "chat_id": "c", "append_to_history": True, "run_id": "turn-1"}
    async with served(app) as api:
        first = await api.post(INVOKE, json=turn)
        again = await api.post(INVOKE, json=turn)
        elsewhere = await api.post(INVOKE, json={**turn, "message": "Another"})
        fresh = await api.post(INVOKE, json={"message": "Hi"})
    assert first.status_code == 200, first.text
    body = first.json()
    assert (body["status"], body["text"], body["run_id"], body["chat_id"]) == (
        "completed",
        "Hello there.",
        "turn-1",
        "c",
    )
    assert again.json() == body  # the same outcome, read back
    assert elsewhere.json()["text"] == "Hello there."  # the id names the turn: nothing new
    assert len(model.requests) == 2  # turn-1 once, and the fresh turn
    assert fresh.json()["run_id"] not in ("", "turn-1")
    chat = stored(chats, "c")
    assert [(m.role, m.content) for m in chat.thread()] == [
        ("user", "Hi"),
        ("assistant", "Hello there."),
    ]


async def test_an_approval_waits_durably_and_a_second_request_answers_it(tmp_path: Path) -> None:
    model = ScriptedClient([DELETE, "Deleted notes.txt."])
    chats, url = tmp_path / "chats", f"sqlite:///{tmp_path / 'turns.sqlite'}"
    app = create_app(model=model, tools=[delete, size], store=chats, durable=url, worker_id="w1")
    start = {"message": "Delete notes.txt", "chat_id": "c", "append_to_history": True}
    async with served(app) as api:
        waiting = await api.post(INVOKE, json={**start, "run_id": "del-1"})
        assert deleted == []
        unknown = await api.post(INVOKE, json={"run_id": "del-1", "approvals": {"c9": True}})
        still = await api.post(INVOKE, json={**start, "run_id": "del-1"})
        answered = await api.post(INVOKE, json={"run_id": "del-1", "approvals": {"c1": True}})
        late = await api.post(INVOKE, json={"run_id": "del-1", "approvals": {"c1": True}})
        never = await api.post(INVOKE, json={"run_id": "nope", "approvals": {"c1": True}})
    body = waiting.json()
    assert waiting.status_code == 200, waiting.text
    assert (body["status"], body["approvals"], body["run_id"]) == (
        "awaiting_approval",
        WAITING,
        "del-1",
    )
    assert (unknown.status_code, unknown.json()["error"]["code"]) == (422, "invalid_approvals")
    assert (still.json()["status"], still.json()["approvals"]) == ("awaiting_approval", WAITING)
    assert answered.status_code == 200, answered.text
    done = answered.json()
    assert (done["status"], done["text"], done["run_id"]) == (
        "completed",
        "Deleted notes.txt.",
        "del-1",
    )
    assert deleted == ["notes.txt"]
    assert (late.status_code, late.json()["error"]["code"]) == (409, "nothing_to_resume")
    assert (never.status_code, never.json()["error"]["code"]) == (409, "nothing_to_resume")
    chat = stored(chats, "c")
    assert [m.role for m in chat.thread()] == ["user", "assistant", "tool", "tool", "assistant"]


async def test_a_durable_turn_streams_its_events_and_returns_a_posted_history(
    tmp_path: Path,
) -> None:
    model = ScriptedClient(["Streamed."])
    url = f"sqlite:///{tmp_path / 'turns.sqlite'}"
    app = create_app(model=model, durable=url, worker_id="w1")
    turn = {"message": "Hi", "stream": True, "run_id": "s-1", "append_to_history": True}
    async with served(app) as api:
        streamed = await api.post(INVOKE, json={**turn, "history": History().to_dict()})
    events = sse_events(streamed.text)
    assert [e["type"] for e in events] == ["llm_request", "text_chunk", "llm_response", "complete"]
    last = events[-1]
    assert (last["type"], last["status"], last["run_id"]) == ("complete", "completed", "s-1")
    assert [m["content"] for m in last["history"]["messages"]] == ["Hi", "Streamed."]


async def test_another_user_cannot_follow_a_turn(tmp_path: Path) -> None:
    model = ScriptedClient(["Mine."])
    url = f"sqlite:///{tmp_path / 'turns.sqlite'}"
    tokens = {"token-alice-0123456789": "alice", "token-bob-0123456789": "bob"}
    app = create_app(model=model, tokens=tokens, durable=url, worker_id="w1")
    async with app.router.lifespan_context(app):
        async with http(app, "token-alice-0123456789") as alice:
            mine = await alice.post(INVOKE, json={"message": "Hi", "run_id": "a-1"})
        async with http(app, "token-bob-0123456789") as bob:
            theirs = await bob.post(INVOKE, json={"message": "Hi", "run_id": "a-1"})
    assert mine.json()["text"] == "Mine."
    assert (theirs.status_code, theirs.json()["error"]["code"]) == (404, "not_found")


def test_glassagent_serve_durable_keeps_a_turn_and_follows_it_again(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'turns.sqlite'}"
    turn = {"message": "Hi", "run_id": "cli-1"}
    with ScriptedModel(say("Hello from the CLI.")) as model:
        arguments = [*model.args(), "--port", "0", "--durable", url, "--worker-id", "cli"]
        with served_with_token(arguments, tmp_path, cli_env()) as (address, token, _):
            auth = {"Authorization": f"Bearer {token}"}
            first = httpx.post(f"{address}{INVOKE}", json=turn, headers=auth, timeout=30)
            again = httpx.post(f"{address}{INVOKE}", json=turn, headers=auth, timeout=30)
        sent = len(model.bodies)
    assert first.status_code == 200, first.text
    assert (first.json()["text"], first.json()["run_id"]) == ("Hello from the CLI.", "cli-1")
    assert again.json() == first.json()
    assert sent == 1
