"""Durable runs: a run whose process is killed mid-run resumes in another process.

A worker process starts an order run: pack, then ship, then notify. The ship tool kills its
own process (SIGKILL, as a crashed node or an OOM kill would) the first time it runs. Then
this process opens the same database and resumes the run: the model calls and the tool
call that had finished are read back, not made again (their events are marked replayed);
the ship call that was in flight runs again, with the same idempotency key; the run ends as
an uninterrupted one would. Needs the durable extra: ``pip install -e ".[durable]"``.

The model here is a stand-in that answers by the conversation (call the next tool, then
answer), so that both processes and every run of the example see the same answers; any
client works the same way.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from glassagent import Agent, LLMResponse, Message, ToolCall, ToolContext, tool
from glassagent.durable import DurableAgent
from glassagent.testing import FunctionClient

STEPS = ("pack", "ship", "notify")
RUN_ID = "order-42"


def model(messages: Sequence[Message], *_: Any) -> LLMResponse | str:
    """Ask for the next step's tool; answer once every step is done."""
    done = sum(1 for message in messages if message.role == "tool")
    if done < len(STEPS):
        call = ToolCall(f"call_{STEPS[done]}", STEPS[done], {"order": 42})
        return LLMResponse(tool_calls=[call])
    return "Order 42 is packed, shipped and the customer is notified."


def make_agent(folder: Path) -> DurableAgent[str]:
    log = folder / "effects.jsonl"

    def effect(ctx: ToolContext) -> None:  # what the outside world saw
        line = {"tool": ctx.tool_name, "pid": os.getpid(), "key": ctx.idempotency_key}
        with log.open("a", encoding="utf-8") as out:
            out.write(json.dumps(line) + "\n")

    @tool
    def pack(order: int, ctx: ToolContext) -> str:
        """Pack an order."""
        effect(ctx)
        return f"order {order} packed"

    @tool
    def ship(order: int, ctx: ToolContext) -> str:
        """Ship an order (a carrier would take ctx.idempotency_key)."""
        effect(ctx)
        crashed = folder / "crashed"
        if not crashed.exists():
            crashed.touch()
            os.kill(os.getpid(), signal.SIGKILL)  # the process dies in the middle of the run
        return f"order {order} shipped"

    @tool
    def notify(order: int, ctx: ToolContext) -> str:
        """Tell the customer."""
        effect(ctx)
        return f"customer of order {order} notified"

    agent = Agent(FunctionClient(model), [pack, ship, notify])
    database = f"sqlite:///{folder / 'runs.sqlite'}"
    return DurableAgent(agent, name="orders", database_url=database)


async def worker(folder: Path) -> None:
    async with make_agent(folder) as durable:
        await durable.run("Process order 42.", run_id=RUN_ID)


async def resume(folder: Path) -> None:
    async with make_agent(folder) as durable:  # resumes the run the crash left pending
        run = durable.follow(RUN_ID)
        async for event in run:
            mark = "replayed" if event.replayed else "live    "
            print(f"  {mark} {event.type}")
        result = await run
    print(f"answer: {result.text}")
    print(f"model calls: {result.iterations}, messages: {len(result.all_messages)}")


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        asyncio.run(worker(Path(sys.argv[2])))
        return
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        worker_process = subprocess.run(
            [sys.executable, __file__, "--worker", str(folder)], check=False, timeout=120
        )
        print(f"worker: killed by signal {-worker_process.returncode} in the middle of the run")
        print("a new process resumes it:")
        asyncio.run(resume(folder))
        print("what the tools did (the ship call was in flight at the crash, so it ran twice):")
        for line in (folder / "effects.jsonl").read_text(encoding="utf-8").splitlines():
            effect = json.loads(line)
            print(f"  {effect['tool']:<7} pid {effect['pid']:<8} key {effect['key']}")


if __name__ == "__main__":
    main()
