"""CPU instructions per model call, counted by valgrind's callgrind: a noise-free figure.

Usage: ``python bench/instructions.py [--modes raw,chat,stream,agent] [--calls 200]``

Wall-clock figures swing on a shared machine; instruction counts do not. For each mode the
client process runs under ``valgrind --tool=callgrind`` twice, with a few and with many calls
against bench/fake_server.py (which runs outside valgrind), and the difference divided by the
extra calls is the count per call, free of start-up and import costs. Modes:

- ``raw`` / ``raw_stream``: one chat-completions request with raw httpx, read whole or
  streamed line by line (the floors);
- ``chat`` / ``stream``: one `OpenAICompatibleClient.chat` / ``stream`` call;
- ``agent``: an agent run with K=10 tool calls, counted per model call (divided by K+1).

Needs ``valgrind`` on the PATH; without it the script says so and exits.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
K = 10
MODES = ("raw", "raw_stream", "chat", "stream", "agent")
_WARM_UP = 5


async def _raw(base_url: str, count: int, stream: bool) -> None:
    import httpx
    from driver import COUNTER_TOOL, _raw_call
    from measure import POOL, PROMPT

    limits = httpx.Limits(max_connections=POOL, max_keepalive_connections=POOL)
    body = {
        "model": f"bench-k{K}",
        "messages": [{"role": "user", "content": PROMPT}],
        "tools": [COUNTER_TOOL],
    }
    async with httpx.AsyncClient(timeout=60, limits=limits) as http:
        for _ in range(count):
            await _raw_call(http, f"{base_url}/v1/chat/completions", body, stream)


async def _client(mode: str, base_url: str, count: int) -> None:
    from measure import PROMPT, counter

    from glassagent import Agent, Message, tool
    from glassagent.llm import OpenAICompatibleClient

    client = OpenAICompatibleClient(f"bench-k{K}", base_url=f"{base_url}/v1", api_key="")
    counter_tool = tool(counter)
    tools = [counter_tool.definition]
    messages = [Message(role="user", content=PROMPT)]
    async with client:
        for _ in range(count):
            if mode == "chat":
                await client.chat(messages, tools)
            elif mode == "stream":
                async for _part in client.stream(messages, tools):
                    pass
            else:
                result = await Agent(client, [counter_tool], max_iterations=K + 5).run(PROMPT)
                assert result.text == f"done {K}", result.text


def inner(mode: str, base_url: str, count: int) -> None:
    """The measured process: warm up, then `count` calls (or runs) of `mode`."""
    sys.path.insert(0, str(HERE))

    async def main() -> None:
        if mode.startswith("raw"):
            work: Any = lambda u, n: _raw(u, n, mode == "raw_stream")  # noqa: E731
        else:
            work = lambda u, n: _client(mode, u, n)  # noqa: E731
        await work(base_url, _WARM_UP)
        await work(base_url, count)

    asyncio.run(main())


def instructions(mode: str, base_url: str, count: int) -> int:
    """Instructions of a whole process that makes `count` calls of `mode`."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
        command += [sys.executable, __file__, "--inner", mode, base_url, str(count)]
        subprocess.run(command, check=True, capture_output=True, env=os.environ.copy())
        for line in out.read_text().splitlines():
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise SystemExit(f"callgrind wrote no totals for {mode}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--calls", type=int, default=200, help="model calls of the long run")
    parser.add_argument("--inner", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        mode, base_url, count = args.inner
        inner(mode, base_url, int(count))
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed: apt-get install valgrind")
    sys.path.insert(0, str(HERE))
    from run import start_server

    server, base_url = start_server()
    try:
        print("| mode | instructions per model call |\n|---|---|")
        for mode in args.modes.split(","):
            per_run = K + 1 if mode == "agent" else 1
            few, many = 1, max(2, args.calls // per_run)
            extra = instructions(mode, base_url, many) - instructions(mode, base_url, few)
            per_call = extra / ((many - few) * per_run)
            print(f"| {mode} | {per_call / 1e6:.3f} M |", flush=True)
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
