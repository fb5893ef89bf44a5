"""A key the server echoes never reaches the error a wire's reader raises."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import respx

from glassagent.errors import GlassAgentError, ResponseParseError
from glassagent.llm import (
    AnthropicClient,
    BaseLLMClient,
    Message,
    OllamaClient,
    OpenAICompatibleClient,
    RetryPolicy,
)

KEY = "sk-echoed-0123456789abcdef0123456789"
HI = [Message(role="user", content="Hi")]
NO_RETRY = RetryPolicy(max_retries=0)
LOCAL = "http://127.0.0.1:8089"


def clients() -> dict[str, tuple[BaseLLMClient, str, Any]]:
    bad = {"content": 5, "echo": KEY}  # a field of the wrong type, the key beside it
    return {
        "openai": (
            OpenAICompatibleClient("m", base_url=LOCAL + "/v1", api_key=KEY, retry=NO_RETRY),
            LOCAL + "/v1/chat/completions",
            {"choices": [{"message": bad, "finish_reason": "stop"}]},
        ),
        "anthropic": (
            AnthropicClient("m", base_url=LOCAL, api_key=KEY, retry=NO_RETRY),
            LOCAL + "/v1/messages",
            {"type": "message", "content": [{"type": "text", "text": 5, "echo": KEY}]},
        ),
        "ollama": (
            OllamaClient("m", base_url=LOCAL, api_key=KEY, retry=NO_RETRY, tool_protocol="native"),
            LOCAL + "/api/chat",
            {"message": bad, "done": True},
        ),
    }


STREAMS = {
    "openai": b'data: {"choices": [{"delta": {"content": 5, "echo": "%s"}}]}\n\n' % KEY.encode(),
    "anthropic": (
        b'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 0, '
        b'"delta": {"type": "text_delta", "text": 5, "echo": "%s"}}\n\n' % KEY.encode()
    ),
    "ollama": b'{"message": {"content": 5, "echo": "%s"}, "done": false}\n' % KEY.encode(),
}


async def drain(client: BaseLLMClient) -> None:
    async for _ in client.stream(HI):
        pass


def leaks(exc: BaseException | None) -> bool:
    seen = 0
    while exc is not None and seen < 10:
        text = " ".join(map(str, (exc, exc.args, getattr(exc, "body", ""))))
        if KEY in text:
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


@pytest.mark.parametrize("name", ["openai", "anthropic", "ollama"])
@pytest.mark.parametrize("streamed", [False, True])
@respx.mock
async def test_an_echoed_key_is_masked_in_a_readers_error(name: str, streamed: bool) -> None:
    client, url, answer = clients()[name]
    if streamed:
        reply = httpx.Response(200, content=STREAMS[name])
    else:
        reply = httpx.Response(200, json=answer)
    respx.post(url).mock(return_value=reply)
    with pytest.raises(GlassAgentError) as raised:
        await (drain(client) if streamed else client.chat(HI))
    assert isinstance(raised.value, ResponseParseError), raised.value
    assert not leaks(raised.value), str(raised.value)
    assert "sk-e...6789" in str(raised.value) + str(raised.value.body)  # masked, still shown
    await client.aclose()


def test_the_transport_hook_shows_no_key() -> None:
    client = OpenAICompatibleClient("m", base_url=LOCAL + "/v1", api_key=KEY)
    hook = client._transport._status_hook
    assert KEY not in repr(hook)
