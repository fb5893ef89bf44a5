"""Peer driver: openai-agents (OpenAIChatCompletionsModel), non-streamed, tracing off."""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from measure import PROMPT, Run, counter, k_of, main


def driver(base_url: str, model: str) -> Run:
    os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"
    from agents import (
        Agent,
        OpenAIChatCompletionsModel,
        Runner,
        function_tool,
        set_tracing_disabled,
    )
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=f"{base_url}/v1", api_key="bench-key-not-secret")
    agent = Agent(
        name="bench",
        model=OpenAIChatCompletionsModel(model=model, openai_client=client),
        tools=[function_tool(counter)],
    )
    max_turns = k_of(model) + 5

    async def run() -> str:
        result = await Runner.run(agent, PROMPT, max_turns=max_turns)
        return str(result.final_output)

    return run


if __name__ == "__main__":
    main({"openai_agents": driver}, __doc__)
