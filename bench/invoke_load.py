"""Load test: several ``glassagent serve`` processes sharing one PostgreSQL, many clients.

Run with ``python bench/invoke_load.py [--workers 4] [--clients 200] [--chats 50]
[--duration 60] [--database URL]``. It starts:

- a throwaway PostgreSQL cluster (initdb and pg_ctl from Debian's ``postgresql`` package, with
  fsync on, as in production), unless ``--database`` names one (its tables are created);
- the scripted OpenAI-compatible fake model (``bench/fake_server.py``, model ``bench-k0``:
  it answers ``done 0`` at once, so every figure is the framework's time, not a model's);
- ``--workers`` ``glassagent serve --store postgresql+asyncpg://...`` processes, each on a
  port of its own: stateless servers, as behind a load balancer;

then drives them with ``--clients`` concurrent keep-alive HTTP clients (requests spread
round-robin over the servers, as a load balancer would) posting turns into ``--chats``
shared chats (``chat_id``, ``append_to_history``) for ``--duration`` seconds, after a
``--calibrate`` second phase with one client per server (the latency of an unqueued
request). It reports requests/s, p50/p90/p99 latency and the conflicts (409) of each phase,
then verifies the database: every chat loads and validates, every acknowledged turn (200) is
in its chat once with its answer, and no turn that was refused (409) is.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.support.postgres: the tests' throwaway cluster

from glassagent.history import History, SQLHistoryStore  # noqa: E402
from glassagent.server import ANONYMOUS_USER  # noqa: E402

START_SECONDS = 60
_LISTENING = re.compile(r"Uvicorn running on http://127\.0\.0\.1:(\d+)")
ANSWER = "done 0"


# ---- the processes ---------------------------------------------------------------------


@contextmanager
def database(url: str | None) -> Iterator[tuple[str, int | None]]:
    """The database URL, and its server's process id when it is a throwaway cluster here."""
    if url is not None:
        yield url, None
        return
    from tests.support.postgres import cluster, find_bindir

    bindir = find_bindir()
    if bindir is None:
        raise SystemExit(
            "PostgreSQL is not installed (apt-get install postgresql), or give --database"
        )
    with cluster(bindir, durable=True) as running:
        yield running.create_database("load"), running.server_pid()


@contextmanager
def process(command: list[str], log: Path, ready: re.Pattern[str]) -> Iterator[tuple[str, int]]:
    """A process logging (stdout and stderr) to `log`; yields the first match of `ready` and
    its process id."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    with log.open("w") as out:
        child = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    try:
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            match = ready.search(log.read_text(errors="replace"))
            if match:
                break
            if child.poll() is not None:
                raise SystemExit(f"{command[:4]} ended: {log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.1)
        else:
            raise SystemExit(f"{command[:4]} did not start: see {log}")
        yield match.group(1), child.pid
    finally:
        child.terminate()
        try:
            child.wait(20)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(10)


def start_servers(stack: ExitStack, url: str, workers: int, logs: Path) -> dict[str, list[int]]:
    """The fake model, then `workers` ``glassagent serve`` processes: their ports and pids."""
    fake = [sys.executable, str(ROOT / "bench" / "fake_server.py"), "--port", "0"]
    model_port, model_pid = stack.enter_context(
        process(fake, logs / "model.log", re.compile(r"PORT (\d+)"))
    )
    serve = [sys.executable, "-m", "glassagent", "serve", "--provider", "openai_compatible",
             "--base-url", f"http://127.0.0.1:{model_port}/v1", "--model", "bench-k0",
             "--port", "0", "--store", url, "--no-token"]  # fmt: skip
    started = [
        stack.enter_context(process(serve, logs / f"server-{n}.log", _LISTENING))
        for n in range(workers)
    ]
    return {
        "ports": [int(port) for port, _ in started],
        "servers": [pid for _, pid in started],
        "model": [model_pid],
    }


def cpu_seconds(pids: list[int], *, reaped: bool = False) -> float:
    """User and system CPU seconds of processes; with `reaped`, also of their children that
    ended (PostgreSQL's backends of closed connections)."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        spent = fields[11:15] if reaped else fields[11:13]
        total += sum(int(f) for f in spent) / tick
    return total


def children(pid: int | None) -> list[int]:
    """A process and its children (PostgreSQL's backends)."""
    if pid is None:
        return []
    found = [pid]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


# ---- the clients -----------------------------------------------------------------------


class Connection:
    """One keep-alive HTTP/1.1 connection (asyncio streams, Content-Length bodies only)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def post(self, body: bytes) -> tuple[int, bytes]:
        if self.streams is None:
            self.streams = await asyncio.open_connection("127.0.0.1", self.port)
        reader, writer = self.streams
        writer.write(
            f"POST /api/ai/invoke HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        head = await reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))  # type: ignore[union-attr]
        answer = await reader.readexactly(length)
        if b"connection: close" in head.lower():
            self.close()
        return status, answer

    def close(self) -> None:
        if self.streams is not None:
            self.streams[1].close()
            self.streams = None


@dataclass
class Phase:
    """What one phase's clients saw."""

    name: str
    clients: int
    latencies: list[float] = field(default_factory=list)
    finished: list[float] = field(default_factory=list)  # when each answer came
    statuses: collections.Counter[int] = field(default_factory=collections.Counter)
    failures: int = 0  # no answer (connection lost, timeout): the turn's fate is unknown
    elapsed: float = 0.0
    cpu: dict[str, float] = field(default_factory=dict)  # CPU ms per request, by process


@dataclass
class Ledger:
    """Every turn sent: acknowledged (200), refused (409) or unknown, by chat."""

    acknowledged: dict[str, list[str]] = field(
        default_factory=lambda: collections.defaultdict(list)
    )
    refused: dict[str, list[str]] = field(default_factory=lambda: collections.defaultdict(list))
    unknown: dict[str, list[str]] = field(default_factory=lambda: collections.defaultdict(list))


async def client(
    number: int, port: int, chats: list[str], phase: Phase, ledger: Ledger, until: float
) -> None:
    """Post turns into random chats until `until`; every turn's message is unique."""
    connection = Connection(port)
    rng = random.Random(number)
    sent = 0
    try:
        while time.perf_counter() < until:
            chat_id, message = rng.choice(chats), f"{phase.name}-c{number}-t{sent}"
            sent += 1
            body = {"message": message, "chat_id": chat_id, "append_to_history": True}
            started = time.perf_counter()
            try:
                status, _ = await asyncio.wait_for(connection.post(json.dumps(body).encode()), 60)
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError):
                phase.failures += 1
                ledger.unknown[chat_id].append(message)
                connection.close()
                continue
            phase.latencies.append(time.perf_counter() - started)
            phase.finished.append(time.perf_counter())
            phase.statuses[status] += 1
            kept = {200: ledger.acknowledged, 409: ledger.refused}.get(status, ledger.unknown)
            kept[chat_id].append(message)
    finally:
        connection.close()


async def run_phase(
    name: str, clients: int, pids: dict[str, list[int]], chats: list[str], ledger: Ledger,
    seconds: float,
) -> Phase:  # fmt: skip
    """`clients` clients for `seconds`; the CPU each kind of process spent per request."""
    phase, ports = Phase(name, clients), pids["ports"]
    kinds = {kind: list(ids) for kind, ids in pids.items() if kind != "ports"}
    kinds["clients"] = [os.getpid()]
    before = {kind: _spent(kind, ids) for kind, ids in kinds.items()}
    started = time.perf_counter()
    until = started + seconds
    await asyncio.gather(
        *(client(n, ports[n % len(ports)], chats, phase, ledger, until) for n in range(clients))
    )
    phase.elapsed = time.perf_counter() - started
    done = max(1, sum(phase.statuses.values()))
    phase.cpu = {
        kind: (_spent(kind, ids) - before[kind]) * 1000 / done for kind, ids in kinds.items()
    }
    return phase


def _spent(kind: str, pids: list[int]) -> float:
    if kind != "database" or not pids:
        return cpu_seconds(pids)
    postmaster = pids[0]  # with the backends that ended, and those running now
    return cpu_seconds([postmaster], reaped=True) + cpu_seconds(children(postmaster)[1:])


# ---- checking and reporting ------------------------------------------------------------


async def verify(url: str, chats: list[str], ledger: Ledger) -> dict[str, int]:
    """Load every chat (validated) and check each turn against what the clients were told."""
    found = collections.Counter[str]()
    unanswered = 0
    async with SQLHistoryStore(url) as root:
        store = root.for_user(ANONYMOUS_USER)
        for chat_id in chats:
            history = await store.aload(chat_id)
            if history is None:
                continue
            found.update(turns(history))
            unanswered += sum(1 for m in history.messages.values() if m.role == "user" and not any(
                history[c].content == ANSWER for c in history.children(m.id)
            ))  # fmt: skip
    acknowledged = [m for ms in ledger.acknowledged.values() for m in ms]
    refused = [m for ms in ledger.refused.values() for m in ms]
    return {
        "acknowledged turns": len(acknowledged),
        "turns stored": sum(found.values()),
        "acknowledged but missing (lost)": sum(1 for m in acknowledged if found[m] == 0),
        "stored more than once (duplicated)": sum(1 for count in found.values() if count > 1),
        "refused (409) but stored": sum(1 for m in refused if found[m] > 0),
        "questions without their answer": unanswered,
        "unknown fate (no answer), stored": sum(
            1 for ms in ledger.unknown.values() for m in ms if found[m] > 0
        ),
    }


def turns(history: History) -> list[str]:
    return [m.content for m in history.messages.values() if m.role == "user"]


def row(phase: Phase) -> str:
    ordered = sorted(phase.latencies) or [0.0]

    def pick(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(len(ordered) * q))] * 1000

    answered = sum(phase.statuses.values())
    other = answered - phase.statuses[200] - phase.statuses[409]
    return (
        f"| {phase.name} | {phase.clients} | {answered:,} | {answered / phase.elapsed:,.0f} | "
        f"{statistics.median(ordered) * 1000:.1f} | {pick(0.90):.1f} | {pick(0.99):.1f} | "
        f"{phase.statuses[409]} | {other + phase.failures} |"
    )


def report(args: argparse.Namespace, phases: list[Phase], checks: dict[str, int]) -> None:
    load = os.getloadavg()
    print(
        f"Python {sys.version.split()[0]}, {os.cpu_count()} cores, load average "
        f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f} (after the run); {args.workers} servers, "
        f"{args.chats} chats, one PostgreSQL"
    )
    print()
    print("| phase | clients | requests | requests/s | p50 ms | p90 ms | p99 ms | 409 | errors |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for phase in phases:
        print(row(phase))
    print()
    for phase in phases:
        spent = ", ".join(f"{kind} {ms:.1f}" for kind, ms in phase.cpu.items())
        print(f"- CPU ms per request, {phase.name}: {spent} (total {sum(phase.cpu.values()):.1f})")
    load = phases[-1]
    if load.finished:
        start, windows = load.finished[0] - load.latencies[0], collections.Counter[int]()
        windows.update(int((t - start) // 10) for t in load.finished)
        rates = ", ".join(f"{windows[w] / 10:.0f}" for w in sorted(windows))
        print(f"- requests/s of the load phase, 10 s at a time: {rates}")
    for name, value in checks.items():
        print(f"- {name}: {value:,}")


async def drive(args: argparse.Namespace, url: str, pids: dict[str, list[int]]) -> None:
    chats = [f"chat-{n:03d}" for n in range(args.chats)]
    ledger = Ledger()
    servers = len(pids["ports"])
    await run_phase("warm-up", servers, pids, chats, ledger, args.warmup)  # first requests
    load_before = os.getloadavg()[0]
    phases = [
        await run_phase("calibration", servers, pids, chats, ledger, args.calibrate),
        await run_phase("load", args.clients, pids, chats, ledger, args.duration),
    ]
    checks = await verify(url, chats, ledger)
    print(f"load average before the run: {load_before:.1f}")
    report(args, phases, checks)
    failed = [name for name, value in checks.items() if value and name not in (
        "acknowledged turns", "turns stored", "unknown fate (no answer), stored")]  # fmt: skip
    if failed:
        raise SystemExit(f"verification failed: {', '.join(failed)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=4, help="glassagent serve processes")
    parser.add_argument("--clients", type=int, default=200, help="concurrent clients")
    parser.add_argument("--chats", type=int, default=50, help="chats the clients share")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of load")
    parser.add_argument("--calibrate", type=float, default=10.0, help="seconds, 1 client/server")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds, not reported")
    parser.add_argument("--database", help="a PostgreSQL URL (default: a throwaway cluster)")
    parser.add_argument("--logs", type=Path, help="keep the processes' logs in this folder")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="invoke-load-") as temp, ExitStack() as stack:
        logs = args.logs or Path(temp)
        logs.mkdir(parents=True, exist_ok=True)
        url, database_pid = stack.enter_context(database(args.database))
        asyncio.run(_create_schema(url))
        pids = start_servers(stack, url, args.workers, logs)
        pids["database"] = [database_pid] if database_pid else []
        asyncio.run(drive(args, url, pids))


async def _create_schema(url: str) -> None:
    async with SQLHistoryStore(url) as store:
        await store.create_schema()


if __name__ == "__main__":
    main()
