"""The direct invoke API's contract, through httpx.ASGITransport with the testing clients."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from glassagent import BaseLLMClient, LLMResponse, Message, ModelSettings, ToolCall, tool
from glassagent.errors import MaxIterationsExceeded, ProviderUnavailableError, ToolCallFormatError
from glassagent.history import History, HistoryStore
from glassagent.llm import StreamPart, TextDelta
from glassagent.server import (
    ANONYMOUS_USER,
    InvokeRequest,
    ServerLimits,
    create_app,
    invoke,
    user_directory,
)
from glassagent.testing import FunctionClient, ScriptedClient
from tests.support.server import INVOKE, document, echo_client, http, sse_events, texts


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


def adding_client() -> ScriptedClient:
    return ScriptedClient(
        [LLMResponse(tool_calls=[ToolCall("c1", "add", {"a": 17, "b": 25})]), "It is 42."]
    )


def stored(directory: Path, chat_id: str, user: str = ANONYMOUS_USER) -> History:
    return HistoryStore(user_directory(directory, user)).load(chat_id)


# ---- one turn ---------------------------------------------------------------------------


async def test_a_plain_invoke_answers_one_turn_and_keeps_nothing(tmp_path: Path) -> None:
    client = echo_client()
    async with http(create_app(model=client, store=tmp_path)) as api:
        response = await api.post(INVOKE, json={"message": "Hello"})
    assert response.status_code == 200
    body = response.json()
    assert body == {
        "text": "seen: Hello",
        "status": "completed",
        "stop_reason": "end_turn",
        "usage": body["usage"],
        "cost": None,  # the model has no prices
        "iterations": 1,
    }
    assert set(body["usage"]) >= {"input_tokens", "output_tokens"}
    assert texts(client.requests[0].messages) == ["Hello"]
    assert not (tmp_path / "users").exists() or not any((tmp_path / "users").rglob("*.json"))


async def test_system_prompt_params_and_the_servers_defaults_reach_the_model() -> None:
    client = echo_client()
    app = create_app(
        model=client, system="Server rules.", settings=ModelSettings(max_tokens=50, temperature=1)
    )
    async with http(app) as api:
        await api.post(INVOKE, json={"message": "a"})
        await api.post(
            INVOKE,
            json={
                "message": "b",
                "system_prompt": "Be brief.",
                "params": {"temperature": 0.2, "thinking_budget": 0, "stop_sequences": ["END"]},
            },
        )
    first, second = client.requests
    assert first.system == "Server rules."
    assert first.settings == ModelSettings(max_tokens=50, temperature=1)
    assert second.system == "Be brief."
    assert second.settings == ModelSettings(
        max_tokens=50, temperature=0.2, thinking_budget=0, stop_sequences=("END",)
    )


async def test_the_react_loop_runs_the_tools_inside_one_invoke() -> None:
    client = adding_client()
    async with http(create_app(model=client, tools=[add])) as api:
        body = (await api.post(INVOKE, json={"message": "17 + 25?"})).json()
    assert body["text"] == "It is 42."
    assert body["iterations"] == 2
    assert client.requests[1].messages[-1].content == "42"


async def test_model_id_picks_a_client_and_the_first_is_the_default() -> None:
    fast, slow = echo_client(), FunctionClient(lambda *_: "slow answer", model="slow")
    async with http(create_app(model={"fast": fast, "slow": slow})) as api:
        default = (await api.post(INVOKE, json={"message": "x"})).json()
        chosen = (await api.post(INVOKE, json={"message": "x", "model_id": "slow"})).json()
    assert default["text"] == "seen: x"
    assert chosen["text"] == "slow answer"


async def test_active_tools_choose_among_the_servers_tools() -> None:
    client = echo_client()
    async with http(create_app(model=client, tools=[add, shout])) as api:
        await api.post(INVOKE, json={"message": "x"})
        await api.post(INVOKE, json={"message": "x", "tools_config": {"active_tools": ["shout"]}})
        await api.post(INVOKE, json={"message": "x", "tools_config": {"active_tools": []}})
        await api.post(INVOKE, json={"message": "x", "tools_config": {"active_tools": None}})
    offered = [[t.name for t in r.tools] for r in client.requests]
    assert offered == [["add", "shout"], ["shout"], [], ["add", "shout"]]


async def test_params_tool_choice_reaches_the_model_or_names_the_missing_tool() -> None:
    client = echo_client()
    async with http(create_app(model=client, tools=[add, shout])) as api:
        ok = await api.post(INVOKE, json={"message": "x", "params": {"tool_choice": "none"}})
        missing = await api.post(
            INVOKE,
            json={
                "message": "x",
                "tools_config": {"active_tools": ["shout"]},
                "params": {"tool_choice": "add"},
            },
        )
        required = await api.post(
            INVOKE,
            json={
                "message": "x",
                "tools_config": {"active_tools": []},
                "params": {"tool_choice": "required"},
            },
        )
        typed = await api.post(INVOKE, json={"message": "x", "params": {"tool_choice": 3}})
    assert ok.status_code == 200
    assert [r.settings.tool_choice for r in client.requests if r.settings] == ["none"]
    assert (missing.status_code, missing.json()["error"]["code"]) == (400, "unknown_tool")
    assert "'add'" in missing.json()["error"]["message"]
    assert "shout" in missing.json()["error"]["message"]
    assert (required.status_code, required.json()["error"]["code"]) == (400, "unknown_tool")
    assert typed.status_code == 422
    assert len(client.requests) == 1  # refused turns never reached the model


async def test_params_tool_choice_overrides_the_servers_own() -> None:
    client = echo_client()
    app = create_app(model=client, tools=[add, shout], settings=ModelSettings(tool_choice="add"))
    async with http(app) as api:
        only_shout = {"message": "x", "tools_config": {"active_tools": ["shout"]}}
        refused = await api.post(INVOKE, json=only_shout)
        chosen = await api.post(INVOKE, json={**only_shout, "params": {"tool_choice": "auto"}})
    assert (refused.status_code, refused.json()["error"]["code"]) == (400, "unknown_tool")
    assert chosen.status_code == 200
    assert [r.settings.tool_choice for r in client.requests if r.settings] == ["auto"]


async def test_unknown_request_fields_are_ignored() -> None:
    async with http(create_app(model=echo_client())) as api:
        response = await api.post(INVOKE, json={"message": "x", "api_tier": "standard"})
    assert response.status_code == 200


async def test_health_answers_probes() -> None:
    async with http(create_app(model=echo_client(), tokens={"t0ken": "alice"})) as api:
        response = await api.get("/api/ai/health")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


# ---- a posted history ------------------------------------------------------------------


async def test_a_posted_history_is_the_context_and_comes_back_with_the_turn() -> None:
    client = echo_client()
    posted = document(("user", "Hi"), ("assistant", "Hello!"))
    async with http(create_app(model=client)) as api:
        body = (
            await api.post(
                INVOKE, json={"message": "And now?", "history": posted, "append_to_history": True}
            )
        ).json()
    assert texts(client.requests[0].messages) == ["Hi", "Hello!", "And now?"]
    returned = History.from_dict(body["history"])
    assert body["history"]["schema_version"] == "2.0"
    assert body["history"]["conversation_id"] == posted["conversation_id"]
    assert [m.content for m in returned.thread()] == ["Hi", "Hello!", "And now?", body["text"]]
    assert "chat_id" not in body


async def test_without_append_the_posted_history_is_not_returned() -> None:
    client = echo_client()
    async with http(create_app(model=client)) as api:
        body = (
            await api.post(INVOKE, json={"message": "x", "history": document(("user", "a"))})
        ).json()
    assert "history" not in body
    assert texts(client.requests[0].messages) == ["a", "x"]


async def test_a_version_1_history_comes_back_in_version_1() -> None:
    posted = document(("user", "Hi"), ("assistant", "Hello!"), version="1")
    async with http(create_app(model=echo_client())) as api:
        body = (
            await api.post(
                INVOKE, json={"message": "x", "history": posted, "append_to_history": True}
            )
        ).json()
    assert "schema_version" not in body["history"]
    assert isinstance(body["history"]["messages"], dict)
    assert len(History.from_dict(body["history"])) == 4


async def test_the_thread_at_current_node_is_the_context() -> None:
    history = History()
    question = history.append(Message(role="user", content="Q"))
    history.append(Message(role="assistant", content="old answer"))
    history.branch(question)
    history.append(Message(role="assistant", content="new answer"))
    history.switch(history.children(question)[0])  # back on the old branch
    client = echo_client()
    async with http(create_app(model=client)) as api:
        await api.post(INVOKE, json={"message": "next", "history": history.to_dict()})
    assert texts(client.requests[0].messages) == ["Q", "old answer", "next"]


async def test_tool_calls_and_results_are_recorded_in_the_standard_format() -> None:
    async with http(create_app(model=adding_client(), tools=[add])) as api:
        body = (
            await api.post(
                INVOKE,
                json={"message": "17 + 25?", "history": document(), "append_to_history": True},
            )
        ).json()
    messages = body["history"]["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    call = messages[1]["tool_calls"][0]
    assert call == {"tool_call_id": "c1", "function_name": "add", "arguments": {"a": 17, "b": 25}}
    assert messages[2]["tool_call_id"] == "c1"
    assert messages[2]["content"] == "42"
    assert body["history"]["current_node"] == messages[3]["message_id"]
    assert all(m["status"] == "completed" for m in messages)


async def test_two_invokes_from_one_node_become_sibling_branches() -> None:
    posted = document(("user", "Q"), ("assistant", "A"))
    start = posted["current_node"]
    client = FunctionClient(lambda messages, *_: f"answer to {messages[-1].content}")
    async with http(create_app(model=client)) as api:
        first = (
            await api.post(
                INVOKE, json={"message": "one", "history": posted, "append_to_history": True}
            )
        ).json()["history"]
        first["current_node"] = start  # continue from the same node again
        second = (
            await api.post(
                INVOKE, json={"message": "two", "history": first, "append_to_history": True}
            )
        ).json()["history"]
    history = History.from_dict(second)
    branches = history.children(start)
    assert [history[b].content for b in branches] == ["one", "two"]
    assert history[history.current_node].content == "answer to two"
    assert texts(client.requests[1].messages) == ["Q", "A", "two"]


async def test_append_without_history_or_store_returns_a_new_history() -> None:
    async with http(create_app(model=echo_client())) as api:
        body = (await api.post(INVOKE, json={"message": "Hi", "append_to_history": True})).json()
    history = History.from_dict(body["history"])
    assert [m.content for m in history.thread()] == ["Hi", "seen: Hi"]
    assert history.model == "echo"


# ---- stored chats ----------------------------------------------------------------------


async def test_chat_id_with_append_creates_then_continues_a_stored_chat(tmp_path: Path) -> None:
    client = echo_client()
    async with http(create_app(model=client, store=tmp_path)) as api:
        one = (
            await api.post(
                INVOKE, json={"message": "one", "chat_id": "c-1", "append_to_history": True}
            )
        ).json()
        two = (
            await api.post(
                INVOKE, json={"message": "two", "chat_id": "c-1", "append_to_history": True}
            )
        ).json()
        fetched = await api.get("/api/ai/chats/c-1")
    assert one["chat_id"] == two["chat_id"] == "c-1"
    assert "history" not in two
    assert texts(client.requests[1].messages) == ["one", "seen: one", "two"]
    chat = stored(tmp_path, "c-1")
    assert [m.content for m in chat.thread()] == ["one", "seen: one", "two", two["text"]]
    assert fetched.status_code == 200
    assert fetched.json() == chat.to_dict()


async def test_append_without_a_chat_id_stores_a_new_chat_under_a_fresh_id(
    tmp_path: Path,
) -> None:
    async with http(create_app(model=echo_client(), store=tmp_path)) as api:
        body = (await api.post(INVOKE, json={"message": "Hi", "append_to_history": True})).json()
    assert "history" not in body
    assert len(stored(tmp_path, body["chat_id"])) == 2


async def test_a_stored_chat_without_append_is_context_only(tmp_path: Path) -> None:
    client = echo_client()
    async with http(create_app(model=client, store=tmp_path)) as api:
        await api.post(INVOKE, json={"message": "one", "chat_id": "c", "append_to_history": True})
        before = stored(tmp_path, "c").to_dict()
        body = (await api.post(INVOKE, json={"message": "two", "chat_id": "c"})).json()
    assert body["chat_id"] == "c"
    assert texts(client.requests[1].messages) == ["one", "seen: one", "two"]
    assert stored(tmp_path, "c").to_dict() == before


async def test_a_posted_history_wins_over_chat_id_and_leaves_the_chat_alone(
    tmp_path: Path,
) -> None:
    client = echo_client()
    async with http(create_app(model=client, store=tmp_path)) as api:
        await api.post(INVOKE, json={"message": "one", "chat_id": "c", "append_to_history": True})
        before = stored(tmp_path, "c").to_dict()
        body = (
            await api.post(
                INVOKE,
                json={
                    "message": "x",
                    "chat_id": "c",
                    "history": document(("user", "posted")),
                    "append_to_history": True,
                },
            )
        ).json()
    assert texts(client.requests[1].messages) == ["posted", "x"]
    assert "chat_id" not in body
    assert len(body["history"]["messages"]) == 3
    assert stored(tmp_path, "c").to_dict() == before


class Gate:
    """Holds every model call until `count` calls are waiting, so their runs overlap."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.waiting = 0
        self.open = asyncio.Event()

    async def answer(self, messages: tuple[Message, ...], *_: Any) -> str:
        self.waiting += 1
        if self.waiting >= self.count:
            self.open.set()
        await asyncio.wait_for(self.open.wait(), 10)
        return f"answer to {messages[-1].content}"


async def test_concurrent_appends_to_one_chat_lose_no_turn(tmp_path: Path) -> None:
    store = HistoryStore(user_directory(tmp_path, ANONYMOUS_USER))
    seed = History()
    seed.append(Message(role="user", content="Q"))
    start = seed.append(Message(role="assistant", content="A"))
    store.save("shared", seed)
    gate = Gate(5)
    async with http(create_app(model=FunctionClient(gate.answer), store=tmp_path)) as api:
        responses = await asyncio.gather(
            *(
                api.post(
                    INVOKE,
                    json={"message": f"m{i}", "chat_id": "shared", "append_to_history": True},
                )
                for i in range(5)
            )
        )
    assert [r.status_code for r in responses] == [200] * 5
    chat = stored(tmp_path, "shared")
    assert len(chat) == 2 + 2 * 5
    questions = sorted(chat[b].content for b in chat.children(start))
    assert questions == [f"m{i}" for i in range(5)]
    for branch in chat.children(start):
        (answer,) = chat.children(branch)
        assert chat[answer].content == f"answer to {chat[branch].content}"
    assert chat.current_node in {chat.children(b)[0] for b in chat.children(start)}
    newest = chat.children(chat.children(start)[-1])[0]
    assert chat.current_node == newest


async def test_each_user_has_their_own_chats(tmp_path: Path) -> None:
    tokens = {"alice-token": "alice", "bob-token": "bob"}
    app = create_app(model=echo_client(), store=tmp_path, tokens=tokens)
    async with http(app, "alice-token") as alice, http(app, "bob-token") as bob:
        await alice.post(
            INVOKE, json={"message": "secret plan", "chat_id": "c", "append_to_history": True}
        )
        body = (
            await bob.post(
                INVOKE, json={"message": "hi", "chat_id": "c", "append_to_history": True}
            )
        ).json()
        alices = (await alice.get("/api/ai/chats/c")).json()
    assert "secret plan" not in body["text"]
    assert [m["content"] for m in alices["messages"]][:1] == ["secret plan"]
    assert len(alices["messages"]) == 2
    assert len(stored(tmp_path, "c", "bob")) == 2


# ---- streaming -------------------------------------------------------------------------


async def test_stream_sends_every_event_and_ends_with_one_complete(tmp_path: Path) -> None:
    app = create_app(model=adding_client(), tools=[add], store=tmp_path)
    async with http(app) as api:
        response = await api.post(
            INVOKE,
            json={"message": "17 + 25?", "stream": True, "chat_id": "s", "append_to_history": True},
        )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = sse_events(response.text)
    kinds = [e["type"] for e in events]
    assert kinds[0] == "llm_request"
    assert "function_call_start" in kinds
    assert "function_execution_complete" in kinds
    assert "text_chunk" in kinds
    assert kinds[-1] == "complete"
    assert sum(k in ("complete", "aborted", "error") for k in kinds) == 1
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert events[-1]["text"] == "It is 42."
    assert events[-1]["chat_id"] == "s"
    assert len(stored(tmp_path, "s")) == 4


async def test_a_streamed_turn_on_a_posted_history_ends_with_the_history() -> None:
    async with http(create_app(model=echo_client())) as api:
        response = await api.post(
            INVOKE,
            json={
                "message": "x",
                "stream": True,
                "history": document(("user", "a")),
                "append_to_history": True,
            },
        )
    last = sse_events(response.text)[-1]
    assert last["type"] == "complete"
    assert len(last["history"]["messages"]) == 3


async def test_a_failing_stream_ends_with_one_error_and_appends_nothing(tmp_path: Path) -> None:
    def fail(*_: Any) -> str:
        raise ProviderUnavailableError("the model is down", status=503, provider="function")

    client = FunctionClient(fail)
    app = create_app(model={"ok": echo_client(), "down": client}, store=tmp_path)
    async with http(app) as api:
        await api.post(INVOKE, json={"message": "one", "chat_id": "c", "append_to_history": True})
        before = stored(tmp_path, "c").to_dict()
        response = await api.post(
            INVOKE,
            json={
                "message": "two",
                "model_id": "down",
                "stream": True,
                "chat_id": "c",
                "append_to_history": True,
            },
        )
    events = sse_events(response.text)
    assert events[-1]["type"] == "error"
    assert events[-1]["error_type"] == "ProviderUnavailableError"
    assert sum(e["type"] in ("complete", "aborted", "error") for e in events) == 1
    assert stored(tmp_path, "c").to_dict() == before


async def test_errors_append_nothing_to_a_posted_history(tmp_path: Path) -> None:
    client = ScriptedClient([])  # runs out at once: the run fails
    async with http(create_app(model=client)) as api:
        response = await api.post(
            INVOKE, json={"message": "x", "history": document(), "append_to_history": True}
        )
    assert response.status_code >= 400
    assert "history" not in response.json()


# ---- a client that goes away -----------------------------------------------------------


class Disconnecting:
    """ASGI receive/send of a client that sends `body`, then leaves when `gone` is set."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = json.dumps(body).encode()
        self.sent: list[dict[str, Any]] = []
        self.gone = asyncio.Event()
        self.request_sent = False

    async def receive(self) -> dict[str, Any]:
        if not self.request_sent:
            self.request_sent = True
            return {"type": "http.request", "body": self.body, "more_body": False}
        await asyncio.wait_for(self.gone.wait(), 10)
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)

    @property
    def scope(self) -> dict[str, Any]:
        return {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": INVOKE,
            "raw_path": INVOKE.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [(b"content-type", b"application/json")],
            "client": ("127.0.0.1", 1234),
            "server": ("127.0.0.1", 80),
        }


class HalfAnswer(BaseLLMClient):
    """Streams the start of an answer, calls `said`, then hangs until it is cancelled."""

    model = "half"

    def __init__(self, said: Callable[[], None]) -> None:
        self.said = said

    async def chat(self, *args: Any, **kwargs: Any) -> LLMResponse:
        raise NotImplementedError

    async def stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[StreamPart]:
        yield TextDelta("The first half")
        self.said()
        await asyncio.sleep(30)
        yield LLMResponse("never")


@pytest.mark.parametrize("stream", [True, False])
async def test_a_client_that_disconnects_aborts_the_run_and_the_partial_turn_is_kept(
    tmp_path: Path, stream: bool
) -> None:
    body = {"message": "talk", "chat_id": "d", "append_to_history": True, "stream": stream}
    peer = Disconnecting(body)
    app = create_app(model=HalfAnswer(peer.gone.set), store=tmp_path)
    await asyncio.wait_for(app(peer.scope, peer.receive, peer.send), 10)
    chat = stored(tmp_path, "d")
    question, answer = chat.thread()
    assert question.content == "talk"
    assert (answer.status, answer.content) == ("aborted", "The first half")
    if stream:
        sent = b"".join(m.get("body", b"") for m in peer.sent if m["type"] == "http.response.body")
        assert b'"type":"text_chunk"' in sent


class StumblingHalfAnswer(HalfAnswer):
    """Twice a reply the server cannot read, then the start of an answer, then nothing."""

    def __init__(self, said: Callable[[], None]) -> None:
        super().__init__(said)
        self.calls = 0

    async def stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[StreamPart]:
        self.calls += 1
        if self.calls <= 2:
            yield TextDelta(f"<tool_call>broken {self.calls}")
            raise ToolCallFormatError("the server could not read the reply", status=500)
        async for part in super().stream(*args, **kwargs):
            yield part


async def test_a_client_that_leaves_mid_turn_stores_only_the_truth(tmp_path: Path) -> None:
    body = {"message": "talk", "chat_id": "d", "append_to_history": True, "stream": True}
    peer = Disconnecting(body)
    app = create_app(model=StumblingHalfAnswer(peer.gone.set), store=tmp_path, tools=[add])
    await asyncio.wait_for(app(peer.scope, peer.receive, peer.send), 10)
    thread = stored(tmp_path, "d").thread()
    typed = [m.content for m in thread if m.role == "user" and not m.protocol]
    assert typed == ["talk"]  # the protocol's corrections are not the user's words
    assert [(m.role, m.status, m.protocol) for m in thread] == [
        ("user", "completed", False),
        ("assistant", "unreadable", False),
        ("user", "completed", True),
        ("assistant", "unreadable", False),
        ("user", "completed", True),
        ("assistant", "aborted", False),
    ]
    assert [m.content for m in thread if m.status == "unreadable"] == [
        "<tool_call>broken 1",
        "<tool_call>broken 2",
    ]
    assert thread[-1].content == "The first half"


# ---- the plain function ----------------------------------------------------------------


async def test_a_history_store_gives_the_app_its_directory_and_limits(tmp_path: Path) -> None:
    app = create_app(model=echo_client(), store=HistoryStore(tmp_path))
    async with http(app) as api:
        await api.post(INVOKE, json={"message": "x", "chat_id": "c", "append_to_history": True})
    assert len(stored(tmp_path, "c")) == 2


async def test_invoke_is_usable_without_http(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    request = InvokeRequest(message="17 + 25?", chat_id="plain", append_to_history=True)
    result = await invoke(request, clients=adding_client(), tools=[add], store=store)
    assert result.text == "It is 42."
    assert result.status == "completed"
    assert result.chat_id == "plain"
    assert result.run is not None
    assert len(store.load("plain")) == 4


async def test_invoke_caps_max_iterations_at_the_servers_limit() -> None:
    request = InvokeRequest.from_dict({"message": "x", "max_iterations": 99}, ServerLimits())
    assert request.max_iterations == ServerLimits().max_iterations
    call = ToolCall("c", "add", {"a": 1, "b": 1})
    looping = FunctionClient(lambda *_: LLMResponse(tool_calls=[call]))
    with pytest.raises(MaxIterationsExceeded):
        await invoke(
            InvokeRequest(message="x", max_iterations=1000),
            clients=looping,
            tools=[add],
            limits=ServerLimits(max_iterations=2),
        )
    assert len(looping.requests) == 2
