import dataclasses
from collections.abc import Sequence

import pytest

from glassagent import BaseLLMClient, LLMResponse, Message, ModelSettings, ToolCall, Usage
from glassagent.errors import UserError
from glassagent.llm import Attachment, TextDelta, ThinkingDelta, ToolDefinition
from glassagent.tools import ToolResult


def test_tool_call_is_frozen_and_keeps_provider_metadata() -> None:
    call = ToolCall("c1", "add", {"a": 1}, {"thought_signature": "c2ln"})
    assert call.provider_metadata == {"thought_signature": "c2ln"}
    assert ToolCall("c1", "add", {"a": 1}).provider_metadata == {}
    with pytest.raises(dataclasses.FrozenInstanceError):
        call.name = "other"  # type: ignore[misc]


def test_usage_adds_and_totals() -> None:
    total = Usage(10, 5, 2) + Usage(input_tokens=1, output_tokens=1)
    assert total == Usage(11, 6, 2)
    assert total.total_tokens == 19
    assert Usage().total_tokens == 0


def test_response_with_tool_calls_always_stops_for_tool_use() -> None:
    call = ToolCall("c1", "add", {})
    response = LLMResponse("", [call], "end_turn")
    assert response.stop_reason == "tool_use"
    assert response.tool_calls == (call,)
    assert LLMResponse("hi").stop_reason == "end_turn"
    assert LLMResponse("hi", stop_reason="max_tokens").stop_reason == "max_tokens"


def test_settings_merge_run_over_agent() -> None:
    agent = ModelSettings(temperature=0.2, max_tokens=100)
    run = ModelSettings(max_tokens=50, stop_sequences=("END",))
    merged = agent.merge(run)
    assert merged == ModelSettings(temperature=0.2, max_tokens=50, stop_sequences=("END",))
    assert agent.merge(None) is agent
    assert agent.merge(ModelSettings()) == agent


def test_attachment_from_path_guesses_mime_type(tmp_path) -> None:
    image = tmp_path / "cat.png"
    image.write_bytes(b"\x89PNG")
    attachment = Attachment.from_path(image)
    assert attachment.mime_type == "image/png"
    assert attachment.name == "cat.png"
    assert attachment.read_bytes() == b"\x89PNG"
    assert Attachment(data=b"%PDF", mime_type="application/pdf").read_bytes() == b"%PDF"


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"path": "a.png", "data": b"x"}, {"data": b"x"}],
    ids=["nothing", "both", "bytes-without-mime"],
)
def test_attachment_rejects_ambiguous_input(kwargs) -> None:
    with pytest.raises(UserError):
        Attachment(**kwargs)


class EchoClient(BaseLLMClient):
    provider_name = "echo"
    model = "echo-1"

    def __init__(self) -> None:
        self.closed = False

    async def chat(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        system: str | None = None,
        *,
        settings: ModelSettings | None = None,
    ) -> LLMResponse:
        return LLMResponse(f"echo: {messages[-1].content}", thinking="hmm")

    async def aclose(self) -> None:
        self.closed = True


async def test_default_stream_yields_chat_as_deltas_then_the_response() -> None:
    client = EchoClient()
    parts = [p async for p in client.stream([Message(role="user", content="hi")])]
    assert parts[:2] == [ThinkingDelta("hmm"), TextDelta("echo: hi")]
    assert parts[2] == LLMResponse("echo: hi", thinking="hmm")
    assert len(parts) == 3


async def test_client_is_an_async_context_manager_that_closes() -> None:
    async with EchoClient() as client:
        assert not client.closed
    assert client.closed
    assert repr(client) == "EchoClient(provider='echo', model='echo-1')"


def test_default_message_formatting() -> None:
    client = EchoClient()
    call = ToolCall("c1", "add", {"a": 1})
    response = LLMResponse("thinking aloud", [call], thinking="t")
    assistant = client.format_assistant_message(response)
    assert assistant == Message(
        role="assistant", content="thinking aloud", tool_calls=(call,), thinking="t"
    )
    result = ToolResult("c1", "add", "boom", True, 1.0)
    tool_message = client.format_tool_result(call, result)
    assert tool_message == Message(
        role="tool", content="boom", tool_call_id="c1", name="add", is_error=True
    )


def test_base_client_needs_chat() -> None:
    class Incomplete(BaseLLMClient):
        pass

    with pytest.raises(TypeError):
        Incomplete()  # type: ignore[abstract]


def test_usage_adds_cache_counts_and_shows_them_only_when_reported() -> None:
    plain = Usage(10, 2, 1)
    assert repr(plain) == "Usage(input_tokens=10, output_tokens=2, thinking_tokens=1)"
    cached = Usage(100, 5, cache_read_tokens=80, cache_write_tokens=20)
    total = plain + cached
    assert (total.cache_read_tokens, total.cache_write_tokens) == (80, 20)
    assert total.total_tokens == 118
    assert "cache_read_tokens=80" in repr(total)
    assert "cache_write_tokens=20" in repr(total)
