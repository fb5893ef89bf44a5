"""Peer driver: strands-agents (OpenAIModel with ``stream=False``), non-streamed.

A strands agent holds its conversation, so each run gets a new agent around one shared
model and OpenAI client; no callback handler (the default one prints), OpenTelemetry off.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from measure import PROMPT, Run, counter, main


def driver(base_url: str, model: str) -> Run:
    os.environ["OTEL_SDK_DISABLED"] = "true"
    from openai import AsyncOpenAI
    from strands import Agent, tool
    from strands.models.openai import OpenAIModel

    client = AsyncOpenAI(base_url=f"{base_url}/v1", api_key="bench-key-not-secret")
    llm = OpenAIModel(client=client, model_id=model, stream=False)
    counter_tool = tool(counter)

    async def run() -> str:
        agent = Agent(model=llm, tools=[counter_tool], callback_handler=None)
        result = await agent.invoke_async(PROMPT)
        return str(result).strip()

    return run


if __name__ == "__main__":
    main({"strands": driver}, __doc__)
