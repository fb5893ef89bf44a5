"""Quickstart: a tool-using agent whose every step is printed as it happens.

Runs offline with no API key: the "model" here is a small rule-based stand-in built with
`glassagent.testing.FunctionClient`. Swap in a real client and nothing else changes.
"""

from __future__ import annotations

import asyncio
import re

from glassagent import Agent, LLMResponse, Message, ToolCall, ToolContext, tool
from glassagent.testing import FunctionClient


@tool
async def add(a: int, b: int, ctx: ToolContext) -> int:
    """Add two integers.

    Args:
        a: The first addend.
        b: The second addend.
    """
    await ctx.progress(f"adding {a} and {b}")
    return a + b


def stand_in_model(messages: tuple[Message, ...], *_: object) -> LLMResponse:
    """Call `add` for "x + y" questions, then answer with the tool's result."""
    last = messages[-1]
    if last.role == "tool":
        return LLMResponse(f"The answer is {last.content}.", thinking="The tool has answered.")
    numbers = re.findall(r"-?\d+", last.content)
    if len(numbers) >= 2:
        a, b = (int(n) for n in numbers[:2])
        return LLMResponse(
            "Let me add those.",
            [ToolCall("call-1", "add", {"a": a, "b": b})],
            thinking="This needs the add tool.",
        )
    return LLMResponse("Ask me to add two numbers.")


async def main() -> None:
    agent = Agent(FunctionClient(stand_in_model, model="stand-in"), [add])
    run = agent.run("What is 17 + 25?")
    async for event in run:
        match event.type:
            case "thinking_chunk":
                print(f"  (thinking) {event.text}")
            case "text_chunk":
                print(f"  (text) {event.text}")
            case "function_call_start":
                print(f"  -> {event.function_name}({event.args})")
            case "tool_progress":
                print(f"     ... {event.message}")
            case "function_execution_complete":
                print(f"  <- {event.execution.result} in {event.execution.duration_ms:.2f} ms")
            case "complete":
                print(f"done after {event.iterations} model calls: {event.text}")
            case _:
                print(f"[{event.type}]")
    assert run.result is not None
    assert run.result.text == "The answer is 42."


if __name__ == "__main__":
    asyncio.run(main())
