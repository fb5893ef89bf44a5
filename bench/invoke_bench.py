"""Benchmark of the direct invoke API: what the HTTP layer adds to an agent turn.

Run with ``python bench/invoke_bench.py [--requests 5000] [--concurrency 50]``. The model is
an in-process fake that answers at once (or after ``--model-ms``), so every figure is the cost
of the layers around it:

- ``agent.run``: ``await agent.run(message)``, the floor;
- ``invoke()``: the plain function (request checks, model and tool look-up, the run);
- ``ASGI app``: the Starlette app called directly with an in-memory request (routing, body
  reading, JSON parsing and encoding, disconnect watching), no sockets;
- ``uvicorn alone``: uvicorn serving an ASGI app that answers a fixed body, no agent: the
  floor of the HTTP server itself;
- ``HTTP (uvicorn)``: the app served by uvicorn in its own process (as `serve` runs it),
  driven by minimal asyncio HTTP/1.1 clients over keep-alive connections on 127.0.0.1 (the
  server and the clients pinned to different cores when ``taskset`` exists).

For the last two, the CPU column is the server process's CPU per request, and the clients'
is reported apart. uvicorn parses HTTP with h11 (pure Python), or with httptools and runs on
uvloop when they are installed (the ``server`` extra brings both); the report says which.

Each mode runs at concurrency 1 (per-request latency) and at ``--concurrency`` (throughput
and latency under load); each figure is the median of ``--rounds`` rounds (the machine may
be shared). The report ends with what HTTP adds over ``invoke()``: p50 and p99 latency at
both concurrencies, and the server's CPU per request over ``invoke()``'s. With an instant
model, ``--concurrency`` clients keep the server saturated: each request waits for the others
to be served, so its latency is about the concurrency times the server's CPU per request,
and the report gives that bound. ``--model-ms`` makes the model answer after that many
milliseconds instead, as a real model does (the server is then mostly idle, waiting).
Timings are machine-dependent and asserted nowhere.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from glassagent import Agent, BaseLLMClient, LLMResponse, Message, ModelSettings, Usage
from glassagent.llm import ToolDefinition
from glassagent.server import InvokeRequest, create_app, invoke, serve

HERE = Path(__file__).resolve()
BODY = json.dumps({"message": "Say done."}).encode()
_LISTENING = re.compile(r"Uvicorn running on (http://127\.0\.0\.1:\d+)")
Call = Callable[[], Awaitable[str]]
HTTP = "HTTP (uvicorn)"
BARE = "uvicorn alone"


class FakeModel(BaseLLMClient):
    """Answers ``done`` after `delay` seconds (at once by default), without I/O."""

    provider_name = "fake"
    model = "fake"

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay

    async def chat(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        system: str | None = None,
        *,
        settings: ModelSettings | None = None,
    ) -> LLMResponse:
        if self.delay:
            await asyncio.sleep(self.delay)
        return LLMResponse("done", usage=Usage(input_tokens=10, output_tokens=1))


# ---- the four ways to make one turn ---------------------------------------------------


def agent_call(model: FakeModel) -> Call:
    agent = Agent(model)

    async def call() -> str:
        return (await agent.run("Say done.")).text

    return call


def invoke_call(model: FakeModel) -> Call:
    async def call() -> str:
        request = InvokeRequest.from_json(BODY)
        return (await invoke(request, clients=model)).text

    return call


def asgi_call(model: FakeModel) -> Call:
    app = create_app(model=model)
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/api/ai/invoke",
        "raw_path": b"/api/ai/invoke",
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(BODY)).encode()),
        ],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }

    async def call() -> str:
        sent: list[bytes] = []
        request_read = False
        done = asyncio.Event()

        async def receive() -> dict[str, Any]:
            nonlocal request_read
            if not request_read:
                request_read = True
                return {"type": "http.request", "body": BODY, "more_body": False}
            await done.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.body":
                sent.append(message.get("body", b""))
                if not message.get("more_body"):
                    done.set()

        await app(dict(scope), receive, send)
        text: str = json.loads(b"".join(sent))["text"]
        return text

    return call


# ---- measuring -------------------------------------------------------------------------


async def run_calls(call: Call, count: int, concurrency: int) -> list[float]:
    """Make `count` calls with `concurrency` workers; the latency of each."""
    latencies: list[float] = []
    remaining = count

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            started = time.perf_counter()
            text = await call()
            latencies.append(time.perf_counter() - started)
            assert text == "done", text

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies


async def measure(call: Call, requests: int, concurrency: int) -> dict[str, float]:
    """Run `requests` calls with `concurrency` workers; latency percentiles and rate."""
    await run_calls(call, 50, concurrency)  # warm up
    cpu = time.process_time()
    started = time.perf_counter()
    latencies = await run_calls(call, requests, concurrency)
    elapsed = time.perf_counter() - started
    cpu_ms = (time.process_time() - cpu) * 1000 / requests
    return summary(latencies, elapsed, cpu_ms)


def summary(latencies: list[float], elapsed: float, cpu_ms: float) -> dict[str, float]:
    ordered = sorted(latencies)
    return {
        "requests_per_s": len(ordered) / elapsed,
        "p50_ms": statistics.median(ordered) * 1000,
        "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000,
        "cpu_ms_per_request": cpu_ms,
    }


async def median_of(rounds: int, run: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
    """Each figure's median over `rounds` rounds (the machine may be shared)."""
    results = [await run() for _ in range(rounds)]
    return {key: statistics.median(r[key] for r in results) for key in results[0]}


def pinned(core: int) -> list[str]:
    if shutil.which("taskset") and (os.cpu_count() or 1) > 1:
        return ["taskset", "-c", str(core)]
    return []


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process, from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Connection:
    """One keep-alive HTTP/1.1 connection, sending the same request again and again.

    A minimal client (asyncio streams, Content-Length bodies only), so that the client's own
    cost does not hide the server's.
    """

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.request = (
            f"POST /api/ai/invoke HTTP/1.1\r\nHost: {host}:{port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(BODY)}\r\n\r\n"
        ).encode() + BODY
        self.streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def call(self) -> str:
        if self.streams is None:
            self.streams = await asyncio.open_connection(self.host, self.port)
        reader, writer = self.streams
        writer.write(self.request)
        head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), head
        length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))  # type: ignore[union-attr]
        text: str = json.loads(await reader.readexactly(length))["text"]
        return text

    def close(self) -> None:
        if self.streams is not None:
            self.streams[1].close()


async def measure_http(address: str, pid: int, requests: int, concurrency: int) -> dict[str, Any]:
    host, port = address.removeprefix("http://").split(":")
    connections = [Connection(host, int(port)) for _ in range(concurrency)]
    free = list(connections)

    async def call() -> str:  # each worker takes a connection of its own
        connection = free.pop()
        try:
            return await connection.call()
        finally:
            free.append(connection)

    try:
        before = process_cpu_s(pid)
        result = await measure(call, requests, concurrency)
        server_cpu = (process_cpu_s(pid) - before) * 1000 / (requests + 50)
    finally:
        for connection in connections:
            connection.close()
    result["client_cpu_ms_per_request"] = result["cpu_ms_per_request"]
    result["cpu_ms_per_request"] = server_cpu
    return result


def start_server(*args: str) -> tuple[subprocess.Popen[str], str]:
    server = subprocess.Popen(
        [*pinned(0), sys.executable, str(HERE), *args],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    assert server.stderr is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = server.stderr.readline()
        match = _LISTENING.search(line)
        if match:
            return server, match.group(1)
        if not line:
            break
    server.kill()
    raise SystemExit("the benchmark server did not start")


def serve_forever(model_ms: float) -> None:
    """The server process: the app on 127.0.0.1, a free port, no access log."""
    app = create_app(model=FakeModel(model_ms / 1000))
    serve(app, host="127.0.0.1", port=0, log_level="info", access_log=False)


def serve_bare() -> None:
    """The HTTP server alone: an ASGI app that reads the body and answers a fixed one."""
    import uvicorn

    answer = json.dumps({"text": "done"}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(answer))]

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": answer})

    uvicorn.run(app, host="127.0.0.1", port=0, log_level="info", access_log=False, lifespan="off")


# ---- the report ------------------------------------------------------------------------

Rows = dict[tuple[str, int], dict[str, Any]]


def levels(args: argparse.Namespace) -> tuple[tuple[int, int], tuple[int, int]]:
    """(concurrency, requests) for one client, then for ``--concurrency`` clients."""
    return (1, args.single_requests), (args.concurrency, args.requests)


async def in_process(args: argparse.Namespace) -> Rows:
    rows: Rows = {}
    model = FakeModel(args.model_ms / 1000)
    for name, make in (
        ("agent.run", agent_call),
        ("invoke()", invoke_call),
        ("ASGI app", asgi_call),
    ):
        for level, requests in levels(args):
            call = make(model)
            rows[name, level] = await median_of(
                args.rounds, partial(measure, call, requests, level)
            )
    return rows


async def over_http(args: argparse.Namespace) -> Rows:
    rows: Rows = {}
    for name, server_args in (
        (BARE, ["--serve-bare"]),
        (HTTP, ["--serve", "--model-ms", str(args.model_ms)]),
    ):
        server, address = start_server(*server_args)
        try:
            for level, requests in levels(args):
                rows[name, level] = await median_of(
                    args.rounds, partial(measure_http, address, server.pid, requests, level)
                )
        finally:
            server.terminate()
            server.wait(10)
            if server.stderr is not None:
                server.stderr.close()
    return rows


def report(rows: Rows, concurrency: int) -> None:
    print("| mode | clients | requests/s | p50 ms | p99 ms | CPU ms/request |")
    print("|---|---:|---:|---:|---:|---:|")
    for (name, level), r in rows.items():
        print(
            f"| {name} | {level} | {r['requests_per_s']:,.0f} | {r['p50_ms']:.3f} "
            f"| {r['p99_ms']:.3f} | {r['cpu_ms_per_request']:.3f} |"
        )
    print()
    print("What HTTP adds over invoke():")
    print()
    print("| clients | p50 ms | p99 ms | server CPU ms/request |")
    print("|---:|---:|---:|---:|")
    for level in (1, concurrency):
        http, direct = rows[HTTP, level], rows["invoke()", level]
        print(
            f"| {level} | {http['p50_ms'] - direct['p50_ms']:+.3f} "
            f"| {http['p99_ms'] - direct['p99_ms']:+.3f} "
            f"| {http['cpu_ms_per_request'] - direct['cpu_ms_per_request']:+.3f} |"
        )
    http = rows[HTTP, concurrency]
    print()
    print(
        f"- the server's CPU per request, {http['cpu_ms_per_request']:.3f} ms, times "
        f"{concurrency} clients: {http['cpu_ms_per_request'] * concurrency:.1f} ms, the p50 "
        "of a saturated server"
    )
    bare = rows[BARE, concurrency]
    print(
        f"- uvicorn alone (no app, a fixed answer): {bare['cpu_ms_per_request']:.3f} ms of "
        f"CPU per request, p50 {bare['p50_ms']:.3f} ms at {concurrency} clients"
    )
    print(
        f"- the HTTP clients' CPU per request at {concurrency} clients: "
        f"{http['client_cpu_ms_per_request']:.3f} ms (in their own process)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=5000, help="at --concurrency")
    parser.add_argument("--single-requests", type=int, default=2000, help="at one client")
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3, help="median of this many rounds")
    parser.add_argument("--model-ms", type=float, default=0.0, help="the model's latency")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--serve-bare", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve_forever(args.model_ms)
        return
    if args.serve_bare:
        serve_bare()
        return
    if pinned(1):
        os.sched_setaffinity(0, {1})
    rows = asyncio.run(in_process(args))
    rows |= asyncio.run(over_http(args))
    fast = [m for m in ("httptools", "uvloop") if importlib.util.find_spec(m) is not None]
    print(
        f"Python {sys.version.split()[0]}, {os.cpu_count()} cores, load average "
        f"{os.getloadavg()[0]:.1f}; uvicorn with {' and '.join(fast) or 'h11 and asyncio'}; "
        f"the model answers after {args.model_ms:g} ms; medians of {args.rounds} rounds"
    )
    print()
    report(rows, args.concurrency)


if __name__ == "__main__":
    main()
