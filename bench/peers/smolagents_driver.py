"""Peer driver: smolagents (ToolCallingAgent on OpenAIServerModel), non-streamed.

smolagents runs synchronously: each run goes to a worker thread (one thread per concurrent
run, so the concurrent runs are not capped by the default executor's few workers).
"""

from __future__ import annotations

import asyncio
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from measure import PROMPT, Run, counter, k_of, main


def driver(base_url: str, model: str) -> Run:
    from smolagents import LogLevel, OpenAIServerModel, ToolCallingAgent, tool

    server_model = OpenAIServerModel(
        model, api_base=f"{base_url}/v1", api_key="bench-key-not-secret"
    )
    counter_tool = tool(counter)
    max_steps = k_of(model) + 5
    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=1024))

    def run_sync() -> str:
        agent = ToolCallingAgent(
            tools=[counter_tool],
            model=server_model,
            max_steps=max_steps,
            verbosity_level=LogLevel.OFF,
        )
        return str(agent.run(PROMPT))

    async def run() -> str:
        return await asyncio.to_thread(run_sync)

    return run


if __name__ == "__main__":
    main({"smolagents": driver}, __doc__)
