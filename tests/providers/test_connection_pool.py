"""The owned connection pool keeps enough connections alive for many concurrent calls."""

import asyncio
from typing import Any

import httpcore
import httpx
import pytest

from glassagent.errors import ConfigurationError
from glassagent.llm import (
    AnthropicClient,
    GeminiClient,
    LlamaClient,
    Message,
    OllamaClient,
    OpenAICompatibleClient,
)
from tests.support.loopback_server import read_request

ANSWER = b'{"choices": [{"index": 0, "message": {"content": "hi"}, "finish_reason": "stop"}]}'
AT_ONCE = 40  # above httpx's default of 20 kept-alive connections

REPLY = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
    + str(len(ANSWER)).encode() + b"\r\n\r\n" + ANSWER
)  # fmt: skip


async def answer(writer: asyncio.StreamWriter) -> None:
    """Send the chat-completions `ANSWER` on a kept-alive connection."""
    writer.write(REPLY)
    await writer.drain()


async def gathering_server(at_once: int):
    """Answers requests only once `at_once` are waiting, so each round needs that many
    connections open together; records every connection it accepts."""
    connections: list[asyncio.StreamWriter] = []
    waiting: list[asyncio.Event] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer)
        try:
            while True:
                await read_request(reader)
                go = asyncio.Event()
                waiting.append(go)
                if len(waiting) == at_once:
                    for event in waiting:
                        event.set()
                    waiting.clear()
                await asyncio.wait_for(go.wait(), 10)
                await answer(writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, connections


async def test_concurrent_calls_reuse_their_connections_in_the_next_round() -> None:
    server, connections = await gathering_server(AT_ONCE)
    port = server.sockets[0].getsockname()[1]
    client = OpenAICompatibleClient("m", base_url=f"http://127.0.0.1:{port}/v1", api_key="")
    hello = [Message(role="user", content="hello")]
    async with server, client:
        for _ in range(3):
            answers = await asyncio.gather(*(client.chat(hello) for _ in range(AT_ONCE)))
            assert {a.text for a in answers} == {"hi"}
        assert len(connections) == AT_ONCE  # all kept alive after the first round


async def test_max_connections_bounds_the_connections_open_at_once() -> None:
    server, connections = await gathering_server(1)  # answers each request at once
    port = server.sockets[0].getsockname()[1]
    client = OpenAICompatibleClient(
        "m", base_url=f"http://127.0.0.1:{port}/v1", api_key="", max_connections=3
    )
    hello = [Message(role="user", content="hello")]
    async with server, client:
        for _ in range(2):
            answers = await asyncio.gather(*(client.chat(hello) for _ in range(AT_ONCE)))
            assert {a.text for a in answers} == {"hi"}
        assert 1 <= len(connections) <= 3


def _clients() -> dict[str, Any]:
    return {
        "openai": lambda **kw: OpenAICompatibleClient("m", base_url="http://h/v1", **kw),
        "ollama": lambda **kw: OllamaClient("m", tool_protocol="native", **kw),
        "llama": lambda **kw: LlamaClient(**kw),
        "anthropic": lambda **kw: AnthropicClient("m", api_key="k", **kw),
        "gemini": lambda **kw: GeminiClient(api_key="k", **kw),
    }


@pytest.mark.parametrize("name", sorted(_clients()))
@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "8"])
def test_max_connections_must_be_a_positive_integer(name: str, bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="max_connections"):
        _clients()[name](max_connections=bad)


@pytest.mark.parametrize("name", sorted(_clients()))
async def test_max_connections_is_refused_with_a_supplied_http_client(name: str) -> None:
    async with httpx.AsyncClient() as http:
        with pytest.raises(ConfigurationError, match="max_connections or http_client"):
            _clients()[name](max_connections=8, http_client=http)
        client = _clients()[name](max_connections=8)  # alone it is fine
        await client.aclose()


async def test_the_default_pool_keeps_every_connection_alive() -> None:
    client = OpenAICompatibleClient("m", base_url="http://127.0.0.1:9/v1", api_key="")
    http = await client._transport._client()
    pool = http._transport._pool  # httpx's own pool: the limits it was given
    assert pool._max_connections == pool._max_keepalive_connections >= 100
    await client.aclose()


# ---- the built-in clients' pools hand out connections without rescanning them all ------


def answering_server(close_after: float | None = None, close_on: bytes | None = None):
    """Answers every request at once; with `close_after`, closes each connection that long
    after its first answer (as servers drop idle kept-alive connections); with `close_on`,
    after answering a request with that body."""
    connections: list[asyncio.StreamWriter] = []
    closed_by_client: list[asyncio.StreamWriter] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer)
        try:
            while True:
                body = await read_request(reader)
                await answer(writer)
                if close_on is not None and body == close_on:
                    return
                if close_after is not None:
                    await asyncio.sleep(close_after)
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            closed_by_client.append(writer)
        finally:
            writer.close()

    return handle, connections, closed_by_client


async def serve(handle: Any) -> tuple[asyncio.Server, str]:
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/"


def owned_client(**limits: Any) -> httpx.AsyncClient:
    from glassagent._providers.connection_pool import speed_up

    return speed_up(httpx.AsyncClient(limits=httpx.Limits(**limits)))


async def test_the_built_in_clients_own_pools_assign_without_a_scan() -> None:
    from glassagent._providers.transport import new_http_client

    async with new_http_client() as owned, httpx.AsyncClient() as yours:
        assert type(owned._transport._pool).__name__ == "SweepingConnectionPool"
        assert type(yours._transport._pool) is httpcore.AsyncConnectionPool
    client = OpenAICompatibleClient("m", base_url="http://127.0.0.1:9/v1", api_key="")
    http = await client._transport._client()
    assert type(http._transport._pool).__name__ == "SweepingConnectionPool"
    await client.aclose()


async def test_a_connection_the_server_closed_is_not_reused() -> None:
    handle, connections, _ = answering_server(close_after=0.0)
    server, url = await serve(handle)
    async with server, owned_client() as http:
        for _ in range(3):
            response = await http.post(url, content=b"{}")  # stock retries nothing
            assert response.status_code == 200
            await asyncio.sleep(0.1)  # the server has closed that connection by now
        assert len(connections) == 3


async def test_an_idle_connection_past_its_keep_alive_expiry_is_closed() -> None:
    handle, connections, closed_by_client = answering_server()
    server, url = await serve(handle)
    async with server, owned_client(keepalive_expiry=0.05) as http:
        await http.post(url, content=b"{}")
        await http.post(url, content=b"{}")  # at once: the same connection
        assert len(connections) == 1
        await asyncio.sleep(1.2)  # past the expiry, and past the next sweep
        await http.post(url, content=b"{}")
        assert len(connections) == 2
        await asyncio.sleep(0.05)
        assert closed_by_client == connections[:1]


async def test_idle_connections_beyond_the_keep_alive_limit_are_closed() -> None:
    server, connections = await gathering_server(6)  # six requests open six connections
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/"
    async with server, owned_client(max_connections=10, max_keepalive_connections=2) as http:
        replies = await asyncio.gather(*(http.post(url, content=b"{}") for _ in range(6)))
        assert [r.status_code for r in replies] == [200] * 6
        assert len(connections) == 6
        assert len(http._transport._pool._connections) <= 2


async def test_requests_beyond_max_connections_wait_and_all_complete() -> None:
    handle, connections, _ = answering_server()
    server, url = await serve(handle)
    async with server, owned_client(max_connections=3) as http:
        replies = await asyncio.gather(*(http.post(url, content=b"{}") for _ in range(30)))
        assert [r.status_code for r in replies] == [200] * 30
        assert 1 <= len(connections) <= 3


async def test_an_expired_idle_connection_no_request_reaches_is_closed_by_the_sweep() -> None:
    handle, connections, closed_by_client = answering_server()
    server, url = await serve(handle)
    async with server, owned_client(keepalive_expiry=0.4) as http:
        await asyncio.gather(*(http.post(url, content=b"{}") for _ in range(2)))
        assert len(connections) == 2
        for _ in range(8):  # the first connection stays in use, so stays fresh
            await asyncio.sleep(0.2)
            await http.post(url, content=b"{}")
        await asyncio.sleep(0.05)
        assert len(connections) == 2
        assert closed_by_client == connections[1:]  # the second expired, unused


def test_another_httpcore_keeps_its_own_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    from glassagent._providers import connection_pool

    connection_pool._pool_class.cache_clear()
    try:
        for version in ("2.0.0", "1.1.0"):  # written for httpcore 1.0's pool
            monkeypatch.setattr(httpcore, "__version__", version)
            client = owned_client()
            assert type(client._transport._pool) is httpcore.AsyncConnectionPool
            connection_pool._pool_class.cache_clear()
    finally:
        monkeypatch.undo()
        connection_pool._pool_class.cache_clear()
    assert type(owned_client()._transport._pool).__name__ == "SweepingConnectionPool"


async def test_a_full_pool_frees_a_dead_connection_before_closing_a_healthy_one() -> None:
    handle, connections, _ = answering_server(close_on=b"close")
    server, url = await serve(handle)
    other, other_url = await serve(answering_server()[0])
    async with server, other, owned_client(max_connections=2) as http:
        opened = [http.post(url, content=b"{}"), http.post(url, content=b"close")]
        assert [r.status_code for r in await asyncio.gather(*opened)] == [200, 200]
        assert len(connections) == 2  # the pool is full; the server closed the second
        await asyncio.sleep(0.1)  # no sweep has run since
        replies = await asyncio.gather(http.post(url, content=b"{}"), http.post(other_url))
        assert [r.status_code for r in replies] == [200, 200]
        assert len(connections) == 2  # the healthy one served; the dead one made the room


async def test_with_keep_alive_off_each_connection_is_closed_once_its_answer_is_read() -> None:
    handle, connections, closed_by_client = answering_server()
    server, url = await serve(handle)
    async with server, owned_client(keepalive_expiry=0) as http:
        for _ in range(2):  # the second within a second of the first: no sweep is due
            assert (await http.post(url, content=b"{}")).status_code == 200
            assert http._transport._pool._connections == []  # closed, as httpcore does
        await asyncio.sleep(0.05)
        assert len(connections) == 2
        assert closed_by_client == connections
