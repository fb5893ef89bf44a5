"""Peer driver: pydantic-ai (OpenAIChatModel on the chat-completions wire), non-streamed."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from measure import PROMPT, Run, counter, k_of, main


def driver(base_url: str, model: str) -> Run:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider
    from pydantic_ai.usage import UsageLimits

    provider = OpenAIProvider(base_url=f"{base_url}/v1", api_key="bench-key-not-secret")
    agent = Agent(OpenAIChatModel(model, provider=provider), tools=[counter])
    limits = UsageLimits(request_limit=k_of(model) + 5)

    async def run() -> str:
        result = await agent.run(PROMPT, usage_limits=limits)
        return str(result.output)

    return run


if __name__ == "__main__":
    main({"pydantic_ai": driver}, __doc__)
