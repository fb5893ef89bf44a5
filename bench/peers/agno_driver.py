"""Peer driver: agno (OpenAILike model on the chat-completions wire), non-streamed.

One agent serves every run, as agno advises (create agents once, not per run); telemetry off.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from measure import PROMPT, Run, counter, main


def driver(base_url: str, model: str) -> Run:
    os.environ["AGNO_TELEMETRY"] = "false"
    from agno.agent import Agent
    from agno.models.openai.like import OpenAILike

    llm = OpenAILike(id=model, base_url=f"{base_url}/v1", api_key="bench-key-not-secret")
    agent = Agent(model=llm, tools=[counter], telemetry=False)

    async def run() -> str:
        result = await agent.arun(PROMPT)
        return str(result.content)

    return run


if __name__ == "__main__":
    main({"agno": driver}, __doc__)
