"""The owned connection pool keeps enough connections alive for many concurrent calls."""

import asyncio

from glassagent.llm import Message, OpenAICompatibleClient
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
