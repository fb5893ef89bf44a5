"""The design's two context tools at work, with a scripted model: no key, no server.

Run it from the repository: ``python examples/context_tools/main.py``. For each message it
shows the analysis, how each tool scored, what the selected ones gave (with their suggested
role and debug notes) and the request the model received; then the model calls
`search_information` itself, with arguments of its own; then the tools' definitions, as
OpenAI and Anthropic want them.
"""

from __future__ import annotations

import asyncio
import json

from seed_tools import GetUserTasksTool, SearchInformationTool, Services, sample_services

from glassagent import Agent, LLMResponse, ToolCall
from glassagent.testing import ScriptedClient
from glassagent.tools import to_anthropic_tools, to_openai_tools

MESSAGES = ["What should I do next?", "Tell me about the travel policy.", "Hello!"]


def quoted(text: str) -> str:
    """`text` indented, each line after a ``|``."""
    return "\n".join(f"    | {line}".rstrip() for line in text.split("\n"))


async def show_turn(agent: Agent[Services], message: str, services: Services) -> None:
    """Run one message and print what the context tools did with it."""
    print(f"> {message}")
    run = agent.run(message, deps=services, host={"user_id": "alice"})
    async for event in run:
        if event.type == "context_selection":
            analysis = event.analysis
            assert analysis is not None
            print(
                f"  analysis: information {analysis.information_seeking_score}, guidance "
                f"{analysis.guidance_seeking_score}, topic {analysis.information_topic!r}"
            )
            for score in event.scores:
                print(f"  {score.tool_name}: {score.score} -> {score.status}")
        elif event.type == "context_tool_complete":
            print(
                f"  {event.tool_name} gave {len(event.output)} characters "
                f"(role {event.suggested_role!r}, debug {event.debug_info!r})"
            )
        elif event.type == "llm_request" and event.iteration == 1:
            print("  the model received:")
            print(quoted(event.messages[-1].content))


async def main() -> None:
    """Three messages, one call by the model, the definitions."""
    services = sample_services()
    tools = [GetUserTasksTool(), SearchInformationTool()]
    client = ScriptedClient(["Start with the Q3 report.", "Book through the portal.", "Hi!"])
    agent: Agent[Services] = Agent(client, context_tools=tools)
    for message in MESSAGES:
        await show_turn(agent, message, services)

    # The model may call a context tool too, with the arguments its definition declares.
    call = ToolCall("call_1", "search_information", {"query": "expense receipts", "limit": 1})
    client = ScriptedClient([LLMResponse(tool_calls=(call,)), "Within 30 days."])
    agent = Agent(client, tools, context_tools=tools)
    result = await agent.run("Hi again", deps=services, host={"user_id": "alice"})
    print(f"> the model called search_information({json.dumps(call.input)}):")
    print(quoted(result.new_messages[2].content))

    print("> definitions for function calling:")
    for definition in to_openai_tools(tools):
        function = definition["function"]
        print(f"  openai {function['name']}: {json.dumps(function['parameters'])}")
    print(f"  anthropic: {[tool['name'] for tool in to_anthropic_tools(tools)]}")


if __name__ == "__main__":
    asyncio.run(main())
