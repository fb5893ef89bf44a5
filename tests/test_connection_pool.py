"""The owned connection pool keeps enough connections alive for many concurrent calls."""

import asyncio
from typing import Any

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
from loopback_server import read_request

ANSWER = b'{"choices": [{"index": 0, "message": {"content": "hi"}, "finish_reason": "stop"}]}'
AT_ONCE = 40  # above httpx's default of 20 kept-alive connections


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
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                    + str(len(ANSWER)).encode() + b"\r\n\r\n" + ANSWER
                )  # fmt: skip
                await writer.drain()
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
