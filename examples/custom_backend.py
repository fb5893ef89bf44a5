"""A complete custom backend: implement `chat` and the agent can use it, streaming included."""

from collections.abc import Sequence

from glassagent import Agent, BaseLLMClient, LLMResponse, Message, ModelSettings
from glassagent.llm import ToolDefinition


class ShoutingClient(BaseLLMClient):
    """A "model" that repeats the last user message in capitals."""

    provider_name = "shout"
    model = "shout-1"

    async def chat(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        system: str | None = None,
        *,
        settings: ModelSettings | None = None,
    ) -> LLMResponse:
        return LLMResponse(messages[-1].content.upper())


if __name__ == "__main__":
    result = Agent(ShoutingClient()).run_sync("hello, glass box")
    print(result.text)
    assert result.text == "HELLO, GLASS BOX"
