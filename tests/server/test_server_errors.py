"""The invoke API's security and bad-input cases, each one, through httpx.ASGITransport."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from glassagent import LLMResponse, Message, ToolCall, tool
from glassagent.errors import (
    AuthenticationError,
    ConfigurationError,
    ContentBlockedError,
    GlassAgentError,
    ProviderError,
    ProviderTimeoutError,
    ProviderUnavailableError,
    RateLimitError,
    ResponseParseError,
)
from glassagent.history import (
    History,
    HistoryAttachment,
    HistoryLimits,
    HistoryMessage,
    HistoryStore,
)
from glassagent.llm import OpenAICompatibleClient, RetryPolicy
from glassagent.server import (
    ServerLimits,
    check_host,
    create_app,
    load_tokens,
    serve,
)
from glassagent.testing import FunctionClient
from tests.support.loopback_server import LoopbackServer, Reply, Request
from tests.support.server import INVOKE, document, echo_client, http, sse_events

TOKENS = {"alice-secret-token": "alice", "bob-secret-token": "bob"}
JSON = {"Content-Type": "application/json"}  # what the app requires of a POST


def error_of(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    assert set(body) == {"error"}
    error: dict[str, Any] = body["error"]
    return error


def stored_files(directory: Path) -> list[Path]:
    return list(directory.rglob("*.json"))


def locations(response: httpx.Response) -> list[str]:
    return [p["location"] for p in error_of(response)["problems"]]


# ---- authentication and ownership ------------------------------------------------------


@pytest.mark.parametrize(
    "header",
    [None, "Bearer wrong-token", "Basic alice-secret-token", "Bearer ", "alice-secret-token"],
)
async def test_a_missing_or_wrong_bearer_token_gets_401(header: str | None) -> None:
    client = echo_client()
    app = create_app(model=client, tokens=TOKENS)
    headers = {"Authorization": header} if header is not None else {}
    async with http(app) as api:
        invoked = await api.post(INVOKE, json={"message": "x"}, headers=headers)
        fetched = await api.get("/api/ai/chats/c", headers=headers)
    for response in (invoked, fetched):
        assert response.status_code == 401
        assert response.headers["WWW-Authenticate"] == "Bearer"
        assert error_of(response)["code"] == "unauthorized"
    assert client.requests == []


async def test_a_right_token_is_let_in() -> None:
    async with http(create_app(model=echo_client(), tokens=TOKENS), "bob-secret-token") as api:
        response = await api.post(INVOKE, json={"message": "x"})
    assert response.status_code == 200


async def test_a_chat_of_another_user_is_404_like_one_that_does_not_exist(tmp_path: Path) -> None:
    client = echo_client()
    app = create_app(model=client, store=tmp_path, tokens=TOKENS)
    async with http(app, "alice-secret-token") as alice, http(app, "bob-secret-token") as bob:
        await alice.post(INVOKE, json={"message": "x", "chat_id": "c1", "append_to_history": True})
        theirs = await bob.get("/api/ai/chats/c1")
        missing = await bob.get("/api/ai/chats/c2")
        invoked = await bob.post(INVOKE, json={"message": "x", "chat_id": "c1"})
        invoked_missing = await bob.post(INVOKE, json={"message": "x", "chat_id": "c2"})
    assert theirs.status_code == missing.status_code == 404
    assert invoked.status_code == invoked_missing.status_code == 404
    assert theirs.text == missing.text.replace("c2", "c1")
    assert invoked.text == invoked_missing.text.replace("c2", "c1")
    assert len(client.requests) == 1  # bob's requests never reached the model


# ---- bodies ----------------------------------------------------------------------------


async def test_a_body_over_the_limit_gets_413_before_it_is_parsed() -> None:
    client = echo_client()
    app = create_app(model=client, limits=ServerLimits(max_body_bytes=1000))
    async with http(app) as api:
        declared = await api.post(INVOKE, content=b"{" * 5000, headers=JSON)  # never parsed
        fitting = await api.post(INVOKE, json={"message": "x" * 900})

        async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted as it comes
            for _ in range(50):
                yield b"[" * 100

        streamed = await api.post(INVOKE, content=chunks(), headers=JSON)
    assert declared.status_code == streamed.status_code == 413
    assert error_of(declared)["code"] == error_of(streamed)["code"] == "too_large"
    assert fitting.status_code == 200
    assert len(client.requests) == 1


async def test_the_default_body_limit_is_one_mebibyte() -> None:
    async with http(create_app(model=echo_client())) as api:
        response = await api.post(INVOKE, json={"message": "x" * (1024 * 1024)})
    assert response.status_code == 413


@pytest.mark.parametrize(
    ("body", "location"),
    [
        (b"{not json", "$"),
        (b"\xff\xfe", "$"),
        (b"[1, 2]", "$"),
        (b"[" * 100_000 + b"]" * 100_000, "$"),
        (b'{"message": 1' + b"0" * 5000 + b"}", "$"),
    ],
)
async def test_invalid_json_gets_422(body: bytes, location: str) -> None:
    limits = ServerLimits(max_body_bytes=1_000_000)
    async with http(create_app(model=echo_client(), limits=limits)) as api:
        response = await api.post(INVOKE, content=body, headers=JSON)
    assert response.status_code == 422
    assert locations(response) == [location]


async def test_every_field_of_the_wrong_type_is_listed_in_one_422() -> None:
    client = echo_client()
    body = {
        "message": ["not", "a", "string"],
        "model_id": 3,
        "chat_id": {"id": 1},
        "append_to_history": "yes",
        "system_prompt": False,
        "tools_config": {"active_tools": "add"},
        "params": {"temperature": "hot", "max_tokens": 1.5, "top_q": 1},
        "max_iterations": "ten",
        "stream": 1,
    }
    async with http(create_app(model=client)) as api:
        response = await api.post(INVOKE, json=body)
    assert response.status_code == 422
    error = error_of(response)
    assert error["code"] == "invalid_request"
    assert sorted(locations(response)) == sorted(
        [
            "message",
            "model_id",
            "chat_id",
            "append_to_history",
            "system_prompt",
            "tools_config.active_tools",
            "params.temperature",
            "params.max_tokens",
            "params.top_q",
            "max_iterations",
            "stream",
        ]
    )
    assert client.requests == []


@pytest.mark.parametrize(
    ("body", "location"),
    [
        ({}, "message"),
        ({"message": ""}, "message"),
        ({"message": "x", "params": {"temperature": 5}}, "params"),
        ({"message": "x", "params": []}, "params"),
        ({"message": "x", "tools_config": ["add"]}, "tools_config"),
        ({"message": "x", "max_iterations": 0}, "max_iterations"),
        ({"message": "x", "max_iterations": True}, "max_iterations"),
        ({"message": "x", "params": {"temperature": float("inf")}}, "$"),
    ],
)
async def test_bad_values_get_422(body: dict[str, Any], location: str) -> None:
    async with http(create_app(model=echo_client())) as api:
        if location == "$":  # Infinity is not JSON; Python's json module writes it anyway
            response = await api.post(INVOKE, content=json.dumps(body).encode(), headers=JSON)
            assert response.status_code == 422
            assert locations(response) == ["params.temperature"]
            return
        response = await api.post(INVOKE, json=body)
    assert response.status_code == 422
    assert locations(response) == [location]


# ---- posted histories ------------------------------------------------------------------


async def test_an_invalid_history_gets_422_with_the_validators_problems() -> None:
    posted = document(("user", "a"), ("assistant", "b"))
    posted["current_node"] = "nowhere"
    posted["messages"][0]["role"] = "wizard"
    async with http(create_app(model=echo_client())) as api:
        response = await api.post(INVOKE, json={"message": "x", "history": posted})
        not_object = await api.post(INVOKE, json={"message": "x", "history": [1]})
    assert response.status_code == not_object.status_code == 422
    where = locations(response)
    assert "history.current_node" in where
    assert any(w.startswith("history.messages[0]") for w in where)
    assert locations(not_object) == ["history"]


async def test_history_limits_bound_a_posted_history_and_the_message() -> None:
    limits = ServerLimits(history=HistoryLimits(max_messages=3, max_message_bytes=100))
    app = create_app(model=echo_client(), limits=limits)
    long_chat = document(*[("user", "q"), ("assistant", "a")] * 2)
    big_message = document(("user", "x" * 500))
    async with http(app) as api:
        too_many = await api.post(INVOKE, json={"message": "x", "history": long_chat})
        too_big = await api.post(INVOKE, json={"message": "x", "history": big_message})
        long_prompt = await api.post(INVOKE, json={"message": "y" * 101})
    for response in (too_many, too_big, long_prompt):
        assert response.status_code == 422
    assert "max_messages=3" in json.dumps(error_of(too_many)["problems"])
    assert "max_message_bytes=100" in json.dumps(error_of(too_big)["problems"])
    assert locations(long_prompt) == ["message"]


def with_attachment(url: str, mime_type: str = "text/plain") -> dict[str, Any]:
    history = History()
    attachment = HistoryAttachment(type="file", url=url, mime_type=mime_type, name="a")
    history.append(HistoryMessage(id="m1", role="user", content="see", attachments=(attachment,)))
    history.append(Message(role="assistant", content="seen"))
    return history.to_dict()


@pytest.mark.parametrize("form", ["path", "file_url"])
async def test_a_posted_history_never_reads_the_servers_files(tmp_path: Path, form: str) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the server's secret")
    url = str(secret) if form == "path" else secret.as_uri()
    client = echo_client()
    async with http(create_app(model=client)) as api:
        response = await api.post(INVOKE, json={"message": "x", "history": with_attachment(url)})
    assert response.status_code == 422
    assert error_of(response)["code"] == "invalid_history"
    assert "the server's secret" not in response.text
    assert client.requests == []


async def test_a_posted_history_may_carry_data_urls_and_remote_urls() -> None:
    data_url = "data:text/plain;base64," + base64.b64encode(b"inline bytes").decode()
    client = echo_client()
    async with http(create_app(model=client)) as api:
        inline = await api.post(INVOKE, json={"message": "x", "history": with_attachment(data_url)})
        remote = await api.post(
            INVOKE, json={"message": "x", "history": with_attachment("https://example.com/a.png")}
        )
    assert inline.status_code == remote.status_code == 200
    (sent_inline,) = client.requests[0].messages[0].attachments
    assert sent_inline.data == b"inline bytes"
    (sent_remote,) = client.requests[1].messages[0].attachments
    assert (sent_remote.url, sent_remote.data, sent_remote.path) == (
        "https://example.com/a.png",
        None,
        None,
    )


async def test_a_malformed_data_url_gets_422() -> None:
    async with http(create_app(model=echo_client())) as api:
        response = await api.post(
            INVOKE, json={"message": "x", "history": with_attachment("data:text/plain;base64,@@")}
        )
    assert response.status_code == 422


@pytest.mark.parametrize("chat_id", ["../escape", "a/b", "", ".hidden", "x" * 129, "a..b"])
async def test_an_invalid_chat_id_gets_422(tmp_path: Path, chat_id: str) -> None:
    async with http(create_app(model=echo_client(), store=tmp_path)) as api:
        response = await api.post(
            INVOKE, json={"message": "x", "chat_id": chat_id, "append_to_history": True}
        )
    assert response.status_code == 422
    assert locations(response) == ["chat_id"]
    assert stored_files(tmp_path) == []


@pytest.mark.parametrize("path", ["%2E%2E", "..%2Fsecret", ".hidden", "a..b", "x" * 129])
async def test_fetching_an_invalid_chat_id_gets_422(tmp_path: Path, path: str) -> None:
    async with http(create_app(model=echo_client(), store=tmp_path)) as api:
        response = await api.get(f"/api/ai/chats/{path}")
    assert response.status_code in (404, 422)
    if response.status_code == 404:  # the router found no route: a '/' in the id
        assert "/" in path.replace("%2F", "/")
    else:
        assert error_of(response)["code"] == "invalid_request"


async def test_chat_id_without_a_store_gets_400_and_fetching_gets_404() -> None:
    async with http(create_app(model=echo_client())) as api:
        invoked = await api.post(INVOKE, json={"message": "x", "chat_id": "c"})
        fetched = await api.get("/api/ai/chats/c")
    assert invoked.status_code == 400
    assert error_of(invoked)["code"] == "no_store"
    assert fetched.status_code == 404


# ---- what the request asks of the server -----------------------------------------------


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


async def test_max_iterations_is_capped_by_the_servers_maximum() -> None:
    looping = FunctionClient(
        lambda *_: LLMResponse(tool_calls=[ToolCall("c", "add", {"a": 1, "b": 1})])
    )
    app = create_app(model=looping, tools=[add], limits=ServerLimits(max_iterations=3))
    async with http(app) as api:
        response = await api.post(INVOKE, json={"message": "x", "max_iterations": 1000})
    assert response.status_code == 502
    assert error_of(response)["code"] == "max_iterations"
    assert len(looping.requests) == 3


async def test_an_unknown_model_id_gets_400_naming_it() -> None:
    async with http(create_app(model={"a": echo_client()})) as api:
        response = await api.post(INVOKE, json={"message": "x", "model_id": "gpt-9"})
    assert response.status_code == 400
    assert error_of(response)["code"] == "unknown_model"
    assert "'gpt-9'" in error_of(response)["message"]


async def test_an_unknown_tool_gets_400_naming_it() -> None:
    client = echo_client()
    async with http(create_app(model=client, tools=[add])) as api:
        response = await api.post(
            INVOKE, json={"message": "x", "tools_config": {"active_tools": ["add", "rm_rf"]}}
        )
    assert response.status_code == 400
    assert error_of(response)["code"] == "unknown_tool"
    assert "'rm_rf'" in error_of(response)["message"]
    assert client.requests == []


# ---- provider failures -----------------------------------------------------------------


def failing(error: BaseException) -> FunctionClient:
    def fail(*_: Any) -> str:
        raise error

    return FunctionClient(fail)


@pytest.mark.parametrize(
    ("error", "status", "retry_after"),
    [
        (RateLimitError("slow down", retry_after=7.2, body="secret-body"), 429, "8"),
        (RateLimitError("slow down"), 429, None),
        (ProviderUnavailableError("down", status=503, retry_after=3), 503, "3"),
        (ProviderTimeoutError("late", kind="deadline", seconds=5, provider="x"), 504, None),
        (AuthenticationError("bad key", status=401, body="secret-body"), 502, None),
        (ResponseParseError("garbled"), 502, None),
        (ContentBlockedError("blocked", reason="SAFETY"), 502, None),
        (ProviderError("odd", status=418), 502, None),
    ],
)
async def test_provider_failures_map_to_gateway_statuses(
    error: ProviderError, status: int, retry_after: str | None
) -> None:
    async with http(create_app(model=failing(error))) as api:
        response = await api.post(INVOKE, json={"message": "x"})
    assert response.status_code == status
    assert response.headers.get("Retry-After") == retry_after
    body = error_of(response)
    assert body["type"] == type(error).__name__
    assert body["message"] == error.message
    assert "secret-body" not in response.text
    assert "Traceback" not in response.text


async def test_an_unexpected_error_is_a_bare_500(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken_save(*_: Any, **__: Any) -> str:
        raise OSError("disk full under /srv/secret-volume")

    monkeypatch.setattr(HistoryStore, "save", broken_save)
    app = create_app(model=echo_client(), store=tmp_path)
    with caplog.at_level(logging.ERROR, logger="glassagent.server"):
        async with http(app) as api:
            response = await api.post(
                INVOKE, json={"message": "x", "chat_id": "c", "append_to_history": True}
            )
    assert response.status_code == 500
    assert error_of(response) == {
        "code": "internal_error",
        "type": "InternalError",
        "message": "The server failed to handle the request.",
    }
    assert "secret-volume" in caplog.text  # the operator sees it; the client does not


async def test_a_key_never_reaches_the_response() -> None:
    key = "sk-test-very-secret-key-1234567890"

    def reject(request: Request) -> Reply:
        echoed = json.dumps({"error": {"message": f"bad key {request.headers['authorization']}"}})
        return Reply.body(echoed.encode(), status=401, Content_Type="application/json")

    with LoopbackServer(reject) as server:
        client = OpenAICompatibleClient("m", base_url=server.url + "/v1", api_key=key)
        async with client, http(create_app(model=client)) as api:
            plain = await api.post(INVOKE, json={"message": "x"})
            streamed = await api.post(INVOKE, json={"message": "x", "stream": True})
    assert plain.status_code == 502
    assert error_of(plain)["type"] == "AuthenticationError"
    for response in (plain, streamed):
        assert key not in response.text
        assert "Traceback" not in response.text
    assert '"type":"error"' in streamed.text


async def test_a_providers_retry_after_is_passed_through() -> None:
    def limited(request: Request) -> Reply:
        body = b'{"error": {"message": "rate limited"}}'
        return Reply.body(body, status=429, Content_Type="application/json", Retry_After="3")

    with LoopbackServer(limited) as server:
        client = OpenAICompatibleClient(
            "m", base_url=server.url + "/v1", api_key="k", retry=RetryPolicy(max_retries=0)
        )
        async with client, http(create_app(model=client)) as api:
            response = await api.post(INVOKE, json={"message": "x"})
    assert response.status_code == 429
    assert response.headers["Retry-After"] == "3"
    assert error_of(response)["retry_after"] == 3


# ---- concurrency -----------------------------------------------------------------------


class HeldModel:
    """A model answering ``answer to <text>`` that holds the message ``slow`` until released."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()

    async def __call__(self, messages: tuple[Message, ...], *_: Any) -> str:
        if messages[-1].content == "slow":
            self.started.set()
            await asyncio.wait_for(self.release.wait(), 10)
        return f"answer to {messages[-1].content}"


def turn(message: str, **options: Any) -> dict[str, Any]:
    """An invoke body adding `message` to the stored chat ``c``."""
    return {"message": message, "chat_id": "c", "append_to_history": True, **options}


@asynccontextmanager
async def held(
    api: httpx.AsyncClient, model: HeldModel, body: dict[str, Any]
) -> AsyncIterator[asyncio.Task[httpx.Response]]:
    """Post `body` (whose message is ``slow``); the block runs while the model holds it."""
    pending = asyncio.create_task(api.post(INVOKE, json=body))
    await asyncio.wait_for(model.started.wait(), 10)
    try:
        yield pending
    finally:
        model.release.set()


async def test_a_chat_that_keeps_changing_gets_409_and_nothing_is_lost(tmp_path: Path) -> None:
    model = HeldModel()
    app = create_app(
        model=FunctionClient(model), store=tmp_path, limits=ServerLimits(save_attempts=1)
    )
    async with http(app) as api:
        await api.post(INVOKE, json=turn("seed"))
        async with held(api, model, turn("slow")) as pending:
            fast = await api.post(INVOKE, json=turn("fast"))
        conflicted = await pending
        chat = (await api.get("/api/ai/chats/c")).json()
    assert fast.status_code == 200
    assert conflicted.status_code == 409
    assert error_of(conflicted)["code"] == "conflict"
    contents = [m["content"] for m in chat["messages"]]
    assert contents == ["seed", "answer to seed", "fast", "answer to fast"]


# ---- starting a server -----------------------------------------------------------------


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.9.10", "localhost", "::1", "[::1]"])
def test_loopback_hosts_need_no_tokens(host: str) -> None:
    check_host(host, authenticated=False)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.5", "example.com", ""])
def test_other_hosts_need_tokens(host: str) -> None:
    with pytest.raises(ConfigurationError, match="without tokens"):
        check_host(host, authenticated=False)
    check_host(host, authenticated=True)


def test_serve_refuses_a_public_host_without_tokens_before_it_starts() -> None:
    app = create_app(model=echo_client())
    with pytest.raises(ConfigurationError, match="without tokens"):
        serve(app, host="0.0.0.0", port=1)


def test_serve_runs_only_apps_made_by_create_app() -> None:
    from starlette.applications import Starlette

    with pytest.raises(ConfigurationError, match="create_app"):
        serve(Starlette(), host="127.0.0.1", port=1)


def test_load_tokens_reads_a_json_object(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps(TOKENS))
    assert load_tokens(path) == TOKENS


@pytest.mark.parametrize(
    "content",
    [
        "not json",
        "[]",
        "{}",
        '{"alice-secret-token": 3}',
        '{" alice-secret-token": "alice"}',
        '{"": "alice"}',
        '{"alice-secret-token": ""}',
        '{"alice-secret-token": "al\\u0000ice"}',
        '{"alice-secret-token": "al\\nice"}',
    ],
)
def test_load_tokens_refuses_bad_files_without_showing_a_token(
    tmp_path: Path, content: str
) -> None:
    path = tmp_path / "tokens.json"
    path.write_text(content)
    with pytest.raises(ConfigurationError) as info:
        load_tokens(path)
    assert "secret" not in str(info.value)


def test_load_tokens_refuses_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="Cannot read"):
        load_tokens(tmp_path / "none.json")


def test_create_app_checks_its_configuration() -> None:
    with pytest.raises(ConfigurationError):
        create_app(model={})
    with pytest.raises(ConfigurationError):
        create_app(model="gpt")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        create_app(model=echo_client(), tools=[add, add])
    with pytest.raises(ConfigurationError):
        create_app(model=echo_client(), tokens={})
    with pytest.raises(GlassAgentError):
        ServerLimits(max_body_bytes=0)


async def test_a_streamed_turn_that_cannot_be_saved_ends_with_an_error(tmp_path: Path) -> None:
    model = HeldModel()
    app = create_app(
        model=FunctionClient(model), store=tmp_path, limits=ServerLimits(save_attempts=1)
    )
    async with http(app) as api:
        await api.post(INVOKE, json=turn("seed"))
        async with held(api, model, turn("slow", stream=True)) as pending:
            await api.post(INVOKE, json=turn("fast"))
        streamed = await pending
        chat = (await api.get("/api/ai/chats/c")).json()
    events = sse_events(streamed.text)
    assert [e["type"] for e in events if e["type"] in ("complete", "aborted", "error")] == ["error"]
    assert events[-1]["error_type"] == "HistoryConflictError"
    assert events[-1]["seq"] == len(events) - 1
    assert "slow" not in [m["content"] for m in chat["messages"]]


async def test_a_chat_deleted_while_a_turn_runs_gets_409(tmp_path: Path) -> None:
    model = HeldModel()
    app = create_app(model=FunctionClient(model), store=tmp_path)
    async with http(app) as api:
        await api.post(INVOKE, json=turn("seed"))
        async with held(api, model, turn("slow")) as pending:
            app.state.glassagent.stores.get("anonymous").delete("c")
        response = await pending
    assert response.status_code == 409
    assert "replaced" in error_of(response)["message"]


async def test_a_damaged_stored_chat_is_a_500_naming_only_the_chat(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    app = create_app(model=echo_client(), store=tmp_path)
    path = app.state.glassagent.stores.get("anonymous").path("broken")
    path.write_text('{"conversation_id": "x", "secret-field": ')
    with caplog.at_level(logging.ERROR, logger="glassagent.server"):
        async with http(app) as api:
            invoked = await api.post(INVOKE, json={"message": "x", "chat_id": "broken"})
            fetched = await api.get("/api/ai/chats/broken")
    for response in (invoked, fetched):
        assert response.status_code == 500
        assert error_of(response)["message"] == "The stored chat 'broken' cannot be read."
        assert "secret-field" not in response.text
    assert "broken" in caplog.text
