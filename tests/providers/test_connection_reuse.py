"""Streamed answers are read to the end, so their connection goes back to the pool."""

import asyncio
import json

import pytest

from glassagent.llm import (
    Message,
    ModelSettings,
    OllamaClient,
    OpenAICompatibleClient,
    RetryPolicy,
)
from tests.support.loopback_server import read_request

OPENAI_SSE = (
    b'data: {"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": null}]}\n\n'
    b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\n\n'
    b"data: [DONE]\n\n"
)
OLLAMA_NDJSON = (
    json.dumps({"message": {"role": "assistant", "content": "hi"}, "done": False}).encode()
    + b"\n"
    + json.dumps({"message": {"role": "assistant", "content": ""}, "done": True}).encode()
    + b"\n"
)


async def keep_alive_server(body: bytes, content_type: str):
    """A loopback HTTP/1.1 server that answers every request with `body`; counts connections."""
    connections = []
    finished = asyncio.Event()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer)
        try:
            while True:
                await read_request(reader)
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: " + content_type.encode()
                    + b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
                )  # fmt: skip
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
            await writer.wait_closed()
            finished.set()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, connections, finished


@pytest.mark.parametrize("wire", ["openai", "ollama"])
async def test_streamed_answers_reuse_one_connection(wire: str) -> None:
    if wire == "openai":
        server, connections, finished = await keep_alive_server(OPENAI_SSE, "text/event-stream")
        port = server.sockets[0].getsockname()[1]
        client = OpenAICompatibleClient("m", base_url=f"http://127.0.0.1:{port}/v1", api_key="")
    else:
        server, connections, finished = await keep_alive_server(
            OLLAMA_NDJSON, "application/x-ndjson"
        )
        port = server.sockets[0].getsockname()[1]
        client = OllamaClient("m", base_url=f"http://127.0.0.1:{port}", tool_protocol="native")
    try:
        for _ in range(3):
            parts = [p async for p in client.stream([Message(role="user", content="hello")])]
            assert parts[-1].text == "hi"
        assert len(connections) == 1
    finally:
        await client.aclose()
        await asyncio.wait_for(finished.wait(), 5)
        server.close()
        await server.wait_closed()


async def dropping_server(answer_per_connection: int):
    """Answers the first `answer_per_connection` requests of each connection, then drops it."""
    connections = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer)
        try:
            for served in range(answer_per_connection + 1):
                await read_request(reader)
                if served == answer_per_connection:
                    break  # drop the kept-alive connection without an answer
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: "
                    + str(len(OPENAI_SSE)).encode() + b"\r\n\r\n" + OPENAI_SSE
                )  # fmt: skip
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
            await writer.wait_closed()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = OpenAICompatibleClient("m", base_url=f"http://127.0.0.1:{port}/v1", api_key="")
    return server, connections, client


async def test_a_dropped_kept_alive_connection_is_retried_once() -> None:
    server, connections, client = await dropping_server(answer_per_connection=1)
    async with server, client:
        for _ in range(3):
            parts = [p async for p in client.stream([Message(role="user", content="hello")])]
            assert parts[-1].text == "hi"
        assert len(connections) == 3  # each drop was retried on a new connection


async def test_a_server_that_never_answers_is_not_retried_forever() -> None:
    from glassagent.errors import ProviderUnavailableError

    server, connections, client = await dropping_server(answer_per_connection=0)
    async with server, client:
        no_retries = ModelSettings(retry=RetryPolicy(max_retries=0))
        with pytest.raises(ProviderUnavailableError, match="without sending a response"):
            _ = [
                p
                async for p in client.stream(
                    [Message(role="user", content="hello")], settings=no_retries
                )
            ]
        assert len(connections) == 2  # the dropped kept-alive connection, once more anew
        fast = ModelSettings(retry=RetryPolicy(max_retries=2, initial_delay=0.01))
        with pytest.raises(ProviderUnavailableError, match="without sending a response"):
            _ = [
                p
                async for p in client.stream([Message(role="user", content="hello")], settings=fast)
            ]
        assert len(connections) == 2 + 3 * 2  # then the policy: three attempts in all
