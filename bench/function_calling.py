"""Function-calling accuracy of the default local model on BFCL's sets, per tool protocol.

A thin caller of `glassagent.evals`: `load_bfcl` reads the Berkeley Function Calling
Leaderboard's set (Apache-2.0) at run time from the ``bfcl-eval`` package (installed, or its
wheel or unpacked ``data`` folder given with ``--data``: ``pip download bfcl-eval --no-deps
-d DIR``; nothing of it is copied here), `bfcl_agent` offers each case's functions as tools
(`Tool.from_schema`), and `evaluate` runs the cases and scores the calls with the
``trajectory`` evaluator (BFCL's checking rules: strings without case, spaces and
``,./-_*^``; an integer passes for a float; acceptable values, optional arguments, no extra
ones). Protocols: ``native`` (llama.cpp's own tool calls), ``json`` (the JSON tool protocol,
prompt only) and ``json-grammar`` (the JSON tool protocol with replies constrained to its
schema). The same measure from the command line: ``glassagent eval bfcl``.

Usage: ``python bench/function_calling.py [--data PATH] [--count 40] [--protocols ...]
[--category simple_python]``. Needs ``glassagent[local]``; fetches the default model on
first use.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

from local_json_protocol import print_table

from glassagent import ModelSettings
from glassagent.errors import GlassAgentError
from glassagent.evals import BFCL_CATEGORIES, Dataset, Report, bfcl_agent, evaluate, load_bfcl
from glassagent.local import LocalServer

SETTINGS = ModelSettings(temperature=0, max_tokens=160)
PROTOCOLS = {
    "native": {"tool_protocol": "native"},
    "json": {"tool_protocol": "json", "json_grammar": False},
    "json-grammar": {"tool_protocol": "json", "json_grammar": True},
}


def _row(protocol: str, report: Report, seconds: float) -> dict[str, Any]:
    attempts = [(case.name, case.attempts[0]) for case in report.cases]
    for name, attempt in attempts:
        if not attempt.passed:
            why = attempt.error or "; ".join(s.reason for s in attempt.scores if not s.passed)
            print(f"  [{protocol}] {name}: {why[:160]}")
    n = len(attempts)
    right = sum(attempt.passed for _, attempt in attempts)
    called = sum(attempt.tool_calls > 0 for _, attempt in attempts)
    return {
        "protocol": protocol,
        "entries": n,
        "called a tool": f"{called}/{n}",
        "accuracy": f"{right}/{n} ({100 * right / max(n, 1):.0f}%)",
        "seconds": f"{seconds:.0f}",
    }


async def measure(server: LocalServer, protocol: str, dataset: Dataset) -> dict[str, Any]:
    started = time.perf_counter()
    async with server.client(**PROTOCOLS[protocol]) as client:
        report = await evaluate(
            lambda case: bfcl_agent(client, case, settings=SETTINGS),
            dataset,
            concurrency=1,
            name=f"{dataset.name} ({protocol})",
            progress=False,
        )
    return _row(protocol, report, time.perf_counter() - started)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="a bfcl-eval wheel or its data folder")
    parser.add_argument("--count", type=int, default=40)
    parser.add_argument("--protocols", default=",".join(PROTOCOLS))
    parser.add_argument("--category", default="simple_python", choices=list(BFCL_CATEGORIES))
    options = parser.parse_args()
    try:
        dataset = load_bfcl(options.category, data=options.data, count=options.count)
    except GlassAgentError as exc:
        sys.exit(str(exc))
    async with LocalServer(context_size=2048) as server:
        rows = [await measure(server, p, dataset) for p in options.protocols.split(",")]
    print_table(rows)


if __name__ == "__main__":
    asyncio.run(main())
