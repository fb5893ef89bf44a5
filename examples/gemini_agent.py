"""A tool-using agent on Google Gemini.

Needs `pip install "glassagent[gemini]"` and a key in GEMINI_API_KEY
(https://aistudio.google.com/apikey). Without a key it explains itself and exits.
"""

from __future__ import annotations

import asyncio
import datetime
import os

from glassagent import Agent, ModelSettings, tool
from glassagent.llm import create_llm_client


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first addend.
        b: The second addend.
    """
    return a + b


@tool
def today() -> str:
    """Return today's date (ISO 8601)."""
    return datetime.date.today().isoformat()


async def main() -> None:
    client = create_llm_client("gemini", model=os.environ.get("GEMINI_MODEL", "gemini-2.5-flash"))
    agent = Agent(client, [add, today], settings=ModelSettings(thinking_budget=512))
    async with client:
        run = agent.run("What is 1234 + 4321, and what is the date today?")
        async for event in run:
            if event.type == "thinking_chunk":
                print(f"(thinking) {event.text}", end="", flush=True)
            elif event.type == "text_chunk":
                print(event.text, end="", flush=True)
            elif event.type == "function_call_start":
                print(f"\n-> {event.function_name}({event.args})")
            elif event.type == "function_execution_complete":
                print(f"<- {event.execution.result}")
            elif event.type in ("complete", "error", "aborted"):
                print(f"\n[{event.type}] {event.to_dict()}")


if __name__ == "__main__":
    if not os.environ.get("GEMINI_API_KEY"):
        print("Set GEMINI_API_KEY to run this example against Gemini; skipping.")
    else:
        asyncio.run(main())
