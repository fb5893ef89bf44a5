"""The measuring loop every driver shares; standard library only.

A driver is a factory ``(base_url, model) -> run``, where ``run()`` does one whole agent run
(K tool calls of ``counter``, then the final answer) and returns the answer's text. The same
loop and the same JSON shape serve bench/driver.py (raw httpx, glassagent) and the peer
drivers in bench/peers/, which run in their own virtual environments without glassagent.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import resource
import statistics
import sys
import time
import urllib.request
from collections.abc import Awaitable, Callable
from typing import Any

PROMPT = "Count with the counter tool, then say done."
POOL = 256
"""Connections the raw-httpx floor keeps alive: glassagent's default pool size."""
Run = Callable[[], Awaitable[str]]
Factory = Callable[[str, str], Run]


def driver_options(base_url: str, args: Any) -> list[str]:
    """The command-line options every driver script takes, from bench/run.py's arguments."""
    return [
        "--base-url", base_url, "--k", str(args.k), "--n", str(args.n),
        "--concurrency", str(args.concurrency), "--rounds", str(args.rounds),
    ]  # fmt: skip


def server_cpu(base_url: str) -> float:
    """The CPU seconds the fake server has used so far."""
    with urllib.request.urlopen(f"{base_url}/_stats", timeout=10) as reply:
        seconds: float = json.load(reply)["cpu_s"]
    return seconds


def counter(n: int) -> int:
    """Return n + 1.

    Args:
        n: The number to count from.
    """
    return n + 1


def k_of(model: str) -> int:
    """The K a model name such as ``bench-k10`` carries (tool calls per run)."""
    match = re.search(r"k(\d+)", model)
    return int(match.group(1)) if match else 1


async def measure(
    name: str, factory: Factory, base_url: str, k: int, n: int, concurrency: int, rounds: int
) -> dict[str, Any]:
    run = factory(base_url, f"bench-k{k}")
    expected = f"done {k}"
    for _ in range(2):  # warm up connections and caches
        text = await run()
        assert text == expected, text
    latencies = []
    cpu_start = time.process_time()
    for _ in range(n):
        started = time.perf_counter()
        text = await run()
        latencies.append(time.perf_counter() - started)
        assert text == expected, text
    cpu_ms = (time.process_time() - cpu_start) * 1000 / n
    rates = []
    server_started, wall = server_cpu(base_url), 0.0
    for _ in range(rounds):
        started = time.perf_counter()
        texts = await asyncio.gather(*(run() for _ in range(concurrency)))
        wall += time.perf_counter() - started
        rates.append(concurrency / (time.perf_counter() - started))
        assert all(t == expected for t in texts), texts
    server_busy = (server_cpu(base_url) - server_started) / wall
    return {
        "driver": name,
        "latency_ms": statistics.median(latencies) * 1000,
        "cpu_ms_per_run": cpu_ms,
        "runs_per_s": statistics.median(rates),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "server_busy": server_busy,
    }


def main(drivers: dict[str, Factory], description: str | None = None) -> None:
    """Parse the driver command line, measure the chosen driver, print its JSON."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("driver", choices=sorted(drivers))
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    result = asyncio.run(
        measure(
            args.driver,
            drivers[args.driver],
            args.base_url,
            args.k,
            args.n,
            args.concurrency,
            args.rounds,
        )
    )
    json.dump(result, sys.stdout)
