"""`llm_request` events show the tool protocol a call uses, also when the client says ``auto``."""

import json

import httpx
import pytest

from glassagent import Agent, tool
from glassagent.events import LLMRequestEvent
from glassagent.llm import ModelSettings, OllamaClient, RetryPolicy

FAST_RETRY = ModelSettings(retry=RetryPolicy(initial_delay=0, max_delay=0, jitter=False))


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: First addend.
        b: Second addend.
    """
    return a + b


class FakeOllama:
    """An Ollama server behind ``httpx.MockTransport``: adds 1 + 2 with `add`, then answers."""

    def __init__(self, capabilities: list[str], show_failures: int = 0) -> None:
        self.capabilities = capabilities
        self.show_failures = show_failures
        self.paths: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        body = json.loads(request.content)
        if request.url.path == "/api/show":
            if self.show_failures:
                self.show_failures -= 1
                return httpx.Response(503, json={"error": "loading"})
            return httpx.Response(200, json={"capabilities": self.capabilities})
        answered = any(m["role"] == "assistant" for m in body["messages"])
        if answered:
            message = {"role": "assistant", "content": "3"}
        elif "tools" in body:
            call = {"function": {"name": "add", "arguments": {"a": 1, "b": 2}}}
            message = {"role": "assistant", "content": "", "tool_calls": [call]}
        else:  # the JSON tool protocol
            reply = {"tool_call": {"name": "add", "input": {"a": 1, "b": 2}}}
            message = {"role": "assistant", "content": json.dumps(reply)}
        return httpx.Response(200, json={"model": body["model"], "message": message, "done": True})


def requests_of(events) -> list[str]:
    return [e.tool_protocol for e in events if isinstance(e, LLMRequestEvent)]


@pytest.mark.parametrize(
    ("capabilities", "protocol"), [(["completion", "tools"], "native"), (["completion"], "json")]
)
async def test_auto_is_resolved_before_the_first_request_event(capabilities, protocol) -> None:
    server = FakeOllama(capabilities)
    async with httpx.AsyncClient(transport=httpx.MockTransport(server)) as http:
        client = OllamaClient("qwen2.5:7b", base_url="http://ollama.test", http_client=http)
        result = await Agent(client, [add]).run("1 + 2?")
    assert result.text == "3"
    assert requests_of(result.events) == [protocol, protocol]
    assert server.paths.count("/api/show") == 1


async def test_without_tools_nothing_is_resolved() -> None:
    server = FakeOllama(["completion", "tools"])
    async with httpx.AsyncClient(transport=httpx.MockTransport(server)) as http:
        client = OllamaClient("qwen2.5:7b", base_url="http://ollama.test", http_client=http)
        result = await Agent(client).run("1 + 2?")
    assert requests_of(result.events) == ["auto"]
    assert server.paths == ["/api/chat"]


async def test_a_server_that_cannot_tell_yet_leaves_it_to_the_call_and_its_retries() -> None:
    server = FakeOllama(["completion", "tools"], show_failures=2)
    async with httpx.AsyncClient(transport=httpx.MockTransport(server)) as http:
        client = OllamaClient("qwen2.5:7b", base_url="http://ollama.test", http_client=http)
        result = await Agent(client, [add], settings=FAST_RETRY).run("1 + 2?")
    assert result.text == "3"
    assert requests_of(result.events) == ["auto", "native"]  # the call decided, after a retry
    assert [e.type for e in result.events].count("llm_retry") == 1
