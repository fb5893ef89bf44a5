"""Slow clients against a real ``glassagent serve``: cut within 20 s, a normal client served.

Before, 50 connections sending one byte of a body every 2 s were all still open after 20 s
(no time limit on reading a body), and so were connections that sent their headers, or
nothing, as slowly (uvicorn has no time limit on headers). Now a body must arrive within
`ServerLimits.body_timeout` (15 s) with pauses under ``body_idle_timeout`` (5 s), and
headers within ``header_timeout`` (10 s), while requests beyond ``max_concurrent_requests``
get 503. Each attack runs about 20 s: ``pytest -m attack``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.support.cli import ScriptedModel, cli_env, say
from tests.support.server import INVOKE, served_with_token

pytestmark = pytest.mark.attack

ATTACKERS = 50
BYTE_EVERY = 2.0  # seconds
CUT_WITHIN = 20.0  # seconds


@dataclass
class Outcome:
    """How one slow connection ended: the first line of its answer, and after how long."""

    status_line: bytes
    seconds: float | None  # None: still open when the test gave up


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """``glassagent serve`` with its launch token; a model that answers every turn."""
    model = ScriptedModel(*[say("Hello.") for _ in range(50)])
    with model, served_with_token([*model.args(), "--port", "0"], tmp_path, cli_env()) as served:
        address, token, _ = served
        yield address, token


async def slow_client(port: int, head: bytes, trickle: bytes, give_up: float) -> Outcome:
    """Send `head` at once, then `trickle` one byte every 2 s until the server hangs up."""
    started = time.monotonic()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    answer = bytearray()

    async def read() -> None:
        while chunk := await reader.read(4096):
            answer.extend(chunk)

    reading = asyncio.create_task(read())
    try:
        writer.write(head)
        for byte in trickle * 100:
            done, _ = await asyncio.wait({reading}, timeout=BYTE_EVERY)
            if done or time.monotonic() - started > give_up:
                break
            writer.write(bytes([byte]))
            try:
                await writer.drain()
            except ConnectionError:
                break
        try:
            await asyncio.wait_for(reading, max(0.1, give_up - (time.monotonic() - started)))
            ended: float | None = time.monotonic() - started
        except (TimeoutError, asyncio.TimeoutError):
            ended = None
        except ConnectionError:
            ended = time.monotonic() - started
    finally:
        reading.cancel()
        writer.close()
    return Outcome(bytes(answer).partition(b"\r\n")[0], ended)


async def normal_client(address: str, token: str, until: float) -> list[tuple[int, float]]:
    """A turn each second on a new connection, as a user would: statuses and latencies."""
    answers = []
    auth = {"Authorization": f"Bearer {token}"}
    while time.monotonic() < until:
        started = time.monotonic()
        async with httpx.AsyncClient(base_url=address, timeout=10, headers=auth) as client:
            response = await client.post(INVOKE, json={"message": "Hi"})
        answers.append((response.status_code, time.monotonic() - started))
        await asyncio.sleep(1.0)
    return answers


def body_head(port: int, token: str | None) -> bytes:
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    return (
        f"POST /api/ai/invoke HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{auth}"
        "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
    ).encode()


def test_fifty_slow_bodies_are_cut_within_20_s_while_a_normal_client_is_served(
    server: tuple[str, str],
) -> None:
    """40 with the token (408 once the body is late), 10 without (401 at once, then cut)."""
    address, token = server
    port = int(address.rsplit(":", 1)[1])

    async def attack() -> tuple[list[Outcome], list[tuple[int, float]]]:
        clients = [
            slow_client(port, body_head(port, token if n < 40 else None), b"x", CUT_WITHIN + 5)
            for n in range(ATTACKERS)
        ]
        normal = normal_client(address, token, time.monotonic() + CUT_WITHIN)
        *slow, served = await asyncio.gather(*clients, normal)
        return slow, served

    slow, served = asyncio.run(attack())
    cut = [o.seconds for o in slow]
    print(f"slow bodies cut after {min(cut or [0]):.1f} to {max(c or 99 for c in cut):.1f} s")
    assert all(c is not None and c <= CUT_WITHIN for c in cut), cut
    assert {o.status_line for o in slow[:40]} == {b"HTTP/1.1 408 Request Timeout"}
    assert {o.status_line for o in slow[40:]} == {b"HTTP/1.1 401 Unauthorized"}
    assert len(served) >= 10
    assert {status for status, _ in served} == {200}, served
    print(f"normal client: {len(served)} turns, slowest {max(s for _, s in served):.2f} s")
    assert max(seconds for _, seconds in served) < 2.0


def test_fifty_slow_headers_and_idle_connections_are_cut_within_20_s(
    server: tuple[str, str],
) -> None:
    """50 that send their headers one byte every 2 s, 10 that send nothing at all."""
    address, token = server
    port = int(address.rsplit(":", 1)[1])
    head = body_head(port, token)

    async def attack() -> tuple[list[Outcome], list[tuple[int, float]]]:
        clients = [slow_client(port, b"", head, CUT_WITHIN + 5) for _ in range(ATTACKERS)]
        idle = [slow_client(port, b"", b"", CUT_WITHIN + 5) for _ in range(10)]
        normal = normal_client(address, token, time.monotonic() + CUT_WITHIN)
        *slow, served = await asyncio.gather(*clients, *idle, normal)
        return slow, served

    slow, served = asyncio.run(attack())
    cut = [o.seconds for o in slow]
    print(
        f"slow headers cut after {min(c or 0 for c in cut):.1f} to {max(c or 99 for c in cut):.1f}"
    )
    assert all(c is not None and c <= CUT_WITHIN for c in cut), cut
    assert {o.status_line for o in slow} == {b""}  # closed without an answer
    assert {status for status, _ in served} == {200}, served
    assert max(seconds for _, seconds in served) < 2.0
