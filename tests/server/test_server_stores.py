"""The invoke server and ``glassagent serve`` on every store: files, SQLite, PostgreSQL."""

from __future__ import annotations

import asyncio
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

import glassagent.cli
from glassagent.history import History, SQLHistoryStore
from glassagent.llm import Message
from glassagent.server import ANONYMOUS_USER, InvokeRequest, create_app, invoke
from glassagent.testing import FunctionClient
from tests.support.cli import ScriptedModel, cli_env, say
from tests.support.server import INVOKE, echo_client, http, launch_token
from tests.support.store import Place, contents

STARTUP_SECONDS = 60
_LISTENING = re.compile(r"Uvicorn running on (http://127\.0\.0\.1:\d+)")


class Gate:
    """Answers once `count` requests are waiting, so that they all save at about once."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.waiting = 0
        self.open = asyncio.Event()

    async def answer(self, messages: tuple[Message, ...], *_: Any) -> str:
        self.waiting += 1
        if self.waiting >= self.count:
            self.open.set()
        await asyncio.wait_for(self.open.wait(), 30)
        return f"answer to {messages[-1].content}"


def turn(message: str, chat_id: str = "c") -> dict[str, Any]:
    return {"message": message, "chat_id": chat_id, "append_to_history": True}


async def test_concurrent_turns_on_one_chat_are_all_kept(place: Place) -> None:
    store = await place.open()
    anonymous = store.for_user(ANONYMOUS_USER)
    seed = History()
    seed.append(Message(role="user", content="Q"))
    start = seed.append(Message(role="assistant", content="A"))
    await anonymous.asave("shared", seed)
    gate = Gate(5)
    async with http(create_app(model=FunctionClient(gate.answer), store=store)) as api:
        responses = await asyncio.gather(
            *(api.post(INVOKE, json=turn(f"m{i}", "shared")) for i in range(5))
        )
    assert [r.status_code for r in responses] == [200] * 5
    chat = await anonymous.aload("shared")
    assert chat is not None
    assert len(chat) == 2 + 2 * 5
    questions = sorted(chat[b].content for b in chat.children(start))
    assert questions == [f"m{i}" for i in range(5)]  # each a branch of its own, none lost
    for branch in chat.children(start):
        (answer,) = chat.children(branch)
        assert chat[answer].content == f"answer to {chat[branch].content}"


async def test_a_stored_chat_continues_its_thread_and_is_returned_whole(place: Place) -> None:
    store = await place.open()
    anonymous = store.for_user(ANONYMOUS_USER)
    async with http(create_app(model=echo_client(), store=store)) as api:
        await api.post(INVOKE, json=turn("one"))
        chat = await anonymous.aload("c")
        assert chat is not None
        question, answer = (m.id for m in chat.thread())
        chat.branch(question)
        chat.append(Message(role="assistant", content="aside"))  # another branch
        chat.switch(answer)
        await anonymous.asave("c", chat)
        reply = await api.post(INVOKE, json=turn("two"))
        whole = (await api.get("/api/ai/chats/c")).json()
    assert reply.json()["text"] == "seen: one|seen: one|two"
    assert sorted(m["content"] for m in whole["messages"]) == sorted(
        ["one", "seen: one", "aside", "two", "seen: one|seen: one|two"]
    )


async def test_each_user_sees_only_their_chats(place: Place) -> None:
    store = await place.open()
    tokens = {"alice-token": "alice", "bob-token": "bob"}
    app = create_app(model=echo_client(), store=store, tokens=tokens)
    async with http(app, "alice-token") as alice, http(app, "bob-token") as bob:
        await alice.post(INVOKE, json=turn("secret plan"))
        assert (await bob.get("/api/ai/chats/c")).status_code == 404
        body = (await bob.post(INVOKE, json=turn("hi"))).json()
        alices = (await alice.get("/api/ai/chats/c")).json()
    assert "secret plan" not in body["text"]
    assert [m["content"] for m in alices["messages"]] == ["secret plan", "seen: secret plan"]
    assert await store.for_user("bob").alist() == ["c"]


async def test_a_chat_deleted_while_a_turn_runs_gets_409(place: Place) -> None:
    started, release = asyncio.Event(), asyncio.Event()

    async def slow(messages: tuple[Message, ...], *_: Any) -> str:
        if messages[-1].content == "slow":
            started.set()
            await asyncio.wait_for(release.wait(), 30)
        return "ok"

    store = await place.open()
    async with http(create_app(model=FunctionClient(slow), store=store)) as api:
        await api.post(INVOKE, json=turn("seed"))
        pending = asyncio.create_task(api.post(INVOKE, json=turn("slow")))
        await asyncio.wait_for(started.wait(), 30)
        await store.for_user(ANONYMOUS_USER).adelete("c")
        release.set()
        response = await pending
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "conflict"


async def test_invoke_keeps_a_turn_in_any_store(place: Place) -> None:
    store = await place.open()
    request = InvokeRequest(message="Hello", chat_id="plain", append_to_history=True)
    result = await invoke(request, clients=echo_client(), store=store)
    assert result.text == "seen: Hello"
    chat = await store.aload("plain")
    assert chat is not None
    assert contents(chat) == ["Hello", "seen: Hello"]


def test_create_app_refuses_a_store_of_another_kind() -> None:
    from glassagent.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="directory or a ChatStore"):
        create_app(model=echo_client(), store=42)  # type: ignore[arg-type]


# ---- glassagent serve --store URL -------------------------------------------------------


def _wait_for_address(process: subprocess.Popen[str]) -> str:
    assert process.stderr is not None
    deadline = time.monotonic() + STARTUP_SECONDS
    seen = []
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if not line:
            break
        seen.append(line)
        match = _LISTENING.search(line)
        if match:
            return match.group(1)
    raise AssertionError(f"the server did not start: {''.join(seen)}")


def test_serve_keeps_chats_in_a_database(sql_place: Place, tmp_path: Path) -> None:
    with ScriptedModel(say("Hello from the model.")) as model:
        command = [sys.executable, "-m", "glassagent", "serve", *model.args(), "--port", "0",
                   "--store", sql_place.where]  # fmt: skip
        process = subprocess.Popen(
            command, cwd=tmp_path, env=cli_env(), stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True, encoding="utf-8",
        )  # fmt: skip
        try:
            address = _wait_for_address(process)
            auth = {"Authorization": f"Bearer {launch_token(process)}"}
            with httpx.Client(base_url=address, timeout=60, headers=auth) as client:
                answer = client.post(INVOKE, json=turn("Hi", "work"))
        finally:
            process.terminate()
            code = process.wait(15)
            assert process.stderr is not None
            log = process.stderr.read()
            process.stderr.close()
    assert answer.status_code == 200, answer.text
    assert code == 0
    assert "Traceback" not in log

    async def stored() -> History | None:
        async with SQLHistoryStore(sql_place.where) as store:
            return await store.for_user(ANONYMOUS_USER).aload("work")

    chat = asyncio.run(stored())
    assert chat is not None
    assert contents(chat) == ["Hi", "Hello from the model."]


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize(
    ("store", "expected"),
    [
        ("mysql+aiomysql://app:pw-s3cret@h/db", "not mysql+aiomysql"),
        ("postgresql+asyncpg://app:pw-s3cret@127.0.0.1:{port}/db", "Cannot use the database"),
        ("sqlite+aiosqlite:///{tmp}/no/such/folder/chats.db", "Cannot use the database"),
    ],
)
def test_a_database_that_cannot_work_is_bad_input(
    store: str, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = store.format(port=_closed_port(), tmp=tmp_path)
    args = ["serve", "--provider", "openai_compatible", "--base-url", "http://127.0.0.1:9/v1",
            "--model", "m", "--port", "0", "--store", store]  # fmt: skip
    assert glassagent.cli.main(args) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert expected in err
    assert "s3cret" not in err


async def test_a_chat_damaged_while_a_turn_runs_is_a_500_naming_only_the_chat(
    tmp_path: Path,
) -> None:
    from glassagent.history import HistoryStore

    started, release = asyncio.Event(), asyncio.Event()

    async def slow(messages: tuple[Message, ...], *_: Any) -> str:
        if messages[-1].content == "slow":
            started.set()
            await asyncio.wait_for(release.wait(), 30)
        return "ok"

    store = HistoryStore(tmp_path)
    async with http(create_app(model=FunctionClient(slow), store=store)) as api:
        await api.post(INVOKE, json=turn("seed"))
        pending = asyncio.create_task(api.post(INVOKE, json=turn("slow")))
        await asyncio.wait_for(started.wait(), 30)
        path = store.for_user(ANONYMOUS_USER).path("c")
        path.write_text('{"conversation_id": "x", "secret-field": ')  # changed, and invalid
        release.set()
        response = await pending
    assert response.status_code == 500
    assert response.json()["error"]["message"] == "The stored chat 'c' cannot be read."
    assert "secret-field" not in response.text
