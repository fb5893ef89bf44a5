"""Gemini prompt caching: explicit cached contents through google-genai, against respx.

The bodies are those the Gemini API documents: ``POST cachedContents`` with ``model``,
``contents``, ``systemInstruction``, ``tools`` and ``ttl``, answered with the cache's
``name`` and ``expireTime``; then ``generateContent`` naming ``cachedContent`` with only the
rest of the conversation; ``usageMetadata.cachedContentTokenCount`` read back.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from decimal import Decimal
from typing import Any

import httpx
import pytest
import respx

from glassagent import Agent, ModelSettings, tool
from glassagent.llm import (
    GeminiClient,
    GeminiOptions,
    Message,
    PromptCache,
    RetryPolicy,
    ToolCall,
    ToolDefinition,
    Usage,
)

KEY = "AIzaSyD3adB33fTestKey0000000000x9Qk"
GENERATE = r".*/models/gemini-2\.5-flash:generateContent$"
STREAM = r".*/models/gemini-2\.5-flash:streamGenerateContent\?alt=sse$"
CACHES = r".*/cachedContents$"
LONG = "You answer questions about the tide tables of the North Sea ports. " * 70  # ~1200 tokens
CACHE_NAME = "cachedContents/4ec1ch3x1t7y"
ADD = ToolDefinition(
    "add",
    "Add two integers.",
    {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
)
DECLARATIONS = [
    {
        "functionDeclarations": [
            {
                "description": "Add two integers.",
                "name": "add",
                "parameters_json_schema": ADD.parameters,
            }
        ]
    }
]
CONVERSATION = [
    Message(role="user", content="What is 2 + 3?"),
    Message(role="assistant", tool_calls=(ToolCall("c1", "add", {"a": 2, "b": 3}),)),
    Message(role="tool", content="5", tool_call_id="c1", name="add"),
    Message(role="assistant", content="It is 5."),
    Message(role="user", content="And the high tide at Husum?"),
]


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: First addend.
        b: Second addend.
    """
    return a + b


def answer(text: str = "Noon.", prompt: int = 1400, cached: int | None = 1300) -> dict[str, Any]:
    """A ``generateContent`` body; the prompt count includes the cached tokens."""
    usage: dict[str, Any] = {"promptTokenCount": prompt, "candidatesTokenCount": 4}
    if cached is not None:
        usage["cachedContentTokenCount"] = cached
    return {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}
        ],
        "usageMetadata": {**usage, "totalTokenCount": prompt + 4},
        "modelVersion": "gemini-2.5-flash",
    }


def cached_content(expire: str = "2099-01-01T00:00:00.000000Z") -> dict[str, Any]:
    """A ``CachedContent`` resource as ``cachedContents.create`` answers."""
    return {
        "name": CACHE_NAME,
        "model": "models/gemini-2.5-flash",
        "createTime": "2026-01-01T00:00:00.000000Z",
        "updateTime": "2026-01-01T00:00:00.000000Z",
        "expireTime": expire,
        "usageMetadata": {"totalTokenCount": 1300},
    }


def streamed(**reply: Any) -> respx.Route:
    """Mock ``streamGenerateContent`` (as `Agent.run` calls it): one chunk, the answer."""
    chunk = b"data: " + json.dumps(answer(**reply)).encode() + b"\r\n\r\n"
    return respx.post(url__regex=STREAM).respond(
        content=chunk, headers={"content-type": "text/event-stream"}
    )


def sent(route: respx.Route, index: int = -1) -> dict[str, Any]:
    return json.loads(route.calls[index].request.content)


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> GeminiClient:
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    return GeminiClient(retry=RetryPolicy(max_retries=0))


@respx.mock
async def test_the_stable_prefix_goes_into_a_cache_and_the_rest_names_it(client) -> None:
    caches = respx.post(url__regex=CACHES).respond(json=cached_content())
    generate = respx.post(url__regex=GENERATE).respond(json=answer())
    response = await client.chat(CONVERSATION, [ADD], LONG)
    assert sent(caches) == {
        "model": "models/gemini-2.5-flash",
        "ttl": "300s",
        "contents": [
            {"parts": [{"text": "What is 2 + 3?"}], "role": "user"},
            {"parts": [{"functionCall": {"id": "c1", "args": {"a": 2, "b": 3}, "name": "add"}}],
             "role": "model"},
            {"parts": [{"functionResponse": {"id": "c1", "name": "add",
                                             "response": {"result": "5"}}}],
             "role": "user"},
            {"parts": [{"text": "It is 5."}], "role": "model"},
        ],
        "systemInstruction": {"parts": [{"text": LONG}], "role": "user"},
        "tools": DECLARATIONS,
    }  # fmt: skip
    assert sent(generate) == {
        "contents": [{"parts": [{"text": "And the high tide at Husum?"}], "role": "user"}],
        "cachedContent": CACHE_NAME,
        "generationConfig": {},
    }
    assert response.usage == Usage(1400, 4, cache_read_tokens=1300)
    assert KEY not in caches.calls[0].request.content.decode()


@respx.mock
async def test_a_second_run_reuses_the_cache(client) -> None:
    caches = respx.post(url__regex=CACHES).respond(json=cached_content())
    generate = streamed()
    agent = Agent(client, [add], system=LONG)
    first = await agent.run("High tide at Husum?")
    second = await agent.run("High tide at Büsum?")
    assert caches.call_count == 1
    assert sent(caches)["ttl"] == "300s"
    assert "contents" not in sent(caches)  # a new conversation: nothing before its prompt
    assert [sent(generate, i)["cachedContent"] for i in (0, 1)] == [CACHE_NAME, CACHE_NAME]
    assert "systemInstruction" not in sent(generate, 1)
    assert "tools" not in sent(generate, 1)
    for result in (first, second):
        response = next(e for e in result.events if e.type == "llm_response")
        assert response.usage.cache_read_tokens == 1300
        assert result.cache_hit_rate == pytest.approx(1300 / 1400)
        # gemini-2.5-flash's profile: $0.30 per million input, $0.03 cached, $2.50 output
        cost = 100 * Decimal("0.3") + 1300 * Decimal("0.03") + 4 * Decimal("2.5")
        assert result.cost.amount == cost / 1_000_000


@respx.mock
async def test_an_expired_cache_is_made_again(client) -> None:
    caches = respx.post(url__regex=CACHES)
    caches.side_effect = [
        httpx.Response(200, json={**cached_content("2020-01-01T00:00:00Z"), "name": "c/old"}),
        httpx.Response(200, json={**cached_content(), "name": "c/new"}),
    ]
    generate = respx.post(url__regex=GENERATE).respond(json=answer())
    await client.chat(CONVERSATION, [ADD], LONG)
    await client.chat(CONVERSATION, [ADD], LONG)
    await client.chat(CONVERSATION, [ADD], LONG)
    assert caches.call_count == 2
    assert [sent(generate, i)["cachedContent"] for i in range(3)] == ["c/old", "c/new", "c/new"]


@respx.mock
async def test_no_cache_under_the_minimum_or_when_turned_off(client) -> None:
    caches = respx.post(url__regex=CACHES).respond(json=cached_content())
    generate = respx.post(url__regex=GENERATE).respond(json=answer(cached=None))
    short = await client.chat(CONVERSATION, [ADD], "Be brief.")
    off = ModelSettings(prompt_cache=False)
    await client.chat(CONVERSATION, [ADD], LONG, settings=off)
    assert caches.call_count == 0
    assert short.usage == Usage(1400, 4)
    for index in (0, 1):
        request = sent(generate, index)
        assert "cachedContent" not in request
        assert len(request["contents"]) == 5
        assert request["tools"] == DECLARATIONS
    # gemini-2.5-pro caches 4096 tokens or more: LONG (about 1200) is not cached there
    pro = GeminiClient("gemini-2.5-pro", retry=RetryPolicy(max_retries=0))
    respx.post(url__regex=r".*gemini-2\.5-pro:generateContent$").respond(json=answer())
    await pro.chat(CONVERSATION, [ADD], LONG)
    assert caches.call_count == 0
    # True caches whatever the size
    await client.chat(CONVERSATION, [ADD], "Be brief.", settings=ModelSettings(prompt_cache=True))
    assert caches.call_count == 1
    assert sent(caches)["systemInstruction"] == {"parts": [{"text": "Be brief."}], "role": "user"}


@respx.mock
async def test_the_run_settings_override_the_agents(client) -> None:
    caches = respx.post(url__regex=CACHES).respond(json=cached_content())
    generate = streamed()
    agent = Agent(client, [add], system=LONG, settings=ModelSettings(prompt_cache=False))
    await agent.run("Husum?", messages=CONVERSATION[:4])
    assert caches.call_count == 0
    hour = PromptCache(breakpoints=("system", "tools"), ttl=3600)
    await agent.run("Husum?", messages=CONVERSATION[:4], settings=ModelSettings(prompt_cache=hour))
    assert caches.call_count == 1
    assert sent(caches) == {
        "model": "models/gemini-2.5-flash",
        "ttl": "3600s",
        "systemInstruction": {"parts": [{"text": LONG}], "role": "user"},
        "tools": [
            {
                "functionDeclarations": [
                    {
                        "description": "Add two integers.",
                        "name": "add",
                        "parameters_json_schema": add.definition.parameters,
                    }
                ]
            }
        ],
    }
    assert len(sent(generate)["contents"]) == 5  # without "turns" the conversation is sent


@respx.mock
async def test_a_refused_cache_falls_back_and_says_so(client, caplog) -> None:
    refusal = {
        "error": {
            "code": 400,
            "message": "Cached content is too small. total_token_count=1006, "
            f"min_total_token_count=1024 (key {KEY})",
            "status": "INVALID_ARGUMENT",
        }
    }
    caches = respx.post(url__regex=CACHES).respond(400, json=refusal)
    generate = respx.post(url__regex=GENERATE).respond(json=answer(cached=None))
    with caplog.at_level(logging.WARNING, logger="glassagent"):
        first = await client.chat(CONVERSATION, [ADD], LONG)
        await client.chat(CONVERSATION, [ADD], LONG)
    assert first.text == "Noon."
    assert caches.call_count == 1  # a refused prefix is not asked again while it would live
    assert "cachedContent" not in sent(generate, 0)
    assert sent(generate, 1)["systemInstruction"] == {"parts": [{"text": LONG}], "role": "user"}
    warnings = [r.getMessage() for r in caplog.records if "prompt cache" in r.getMessage()]
    assert len(warnings) == 1
    assert "Cached content is too small" in warnings[0]
    assert KEY not in caplog.text


@respx.mock
async def test_a_failed_cache_never_fails_the_call(client, caplog) -> None:
    caches = respx.post(url__regex=CACHES).mock(side_effect=httpx.ConnectError("refused"))
    respx.post(url__regex=GENERATE).respond(json=answer(cached=None))
    with caplog.at_level(logging.WARNING, logger="glassagent"):
        response = await client.chat(CONVERSATION, [ADD], LONG)
    assert response.text == "Noon."
    assert caches.call_count == 1
    assert "no prompt cache" in caplog.text


@respx.mock
async def test_streamed_calls_use_the_cache_too(monkeypatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    caches = respx.post(url__regex=CACHES).respond(json=cached_content())
    stream = streamed()
    client = GeminiClient(retry=RetryPolicy(max_retries=0))
    parts = [part async for part in client.stream(CONVERSATION, [ADD], LONG)]
    assert parts[-1].usage == Usage(1400, 4, cache_read_tokens=1300)
    assert caches.call_count == 1
    assert sent(stream)["cachedContent"] == CACHE_NAME


@respx.mock
async def test_a_cache_of_the_callers_own_is_left_alone(client) -> None:
    caches = respx.post(url__regex=CACHES).respond(json=cached_content())
    generate = respx.post(url__regex=GENERATE).respond(json=answer())
    mine = ModelSettings(
        provider_options=GeminiOptions(extra_config={"cached_content": "cachedContents/mine"})
    )
    await client.chat(CONVERSATION[-1:], (), None, settings=mine)
    assert caches.call_count == 0
    assert sent(generate)["cachedContent"] == "cachedContents/mine"


@respx.mock
async def test_a_slow_cache_is_given_up_within_the_calls_timeout(client, caplog) -> None:
    async def hang(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(30)
        return httpx.Response(200, json=cached_content())

    respx.post(url__regex=CACHES).mock(side_effect=hang)
    generate = respx.post(url__regex=GENERATE).respond(json=answer(cached=None))
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="glassagent"):
        response = await client.chat(CONVERSATION, [ADD], LONG, settings=ModelSettings(timeout=0.3))
    assert time.monotonic() - started < 5
    assert response.text == "Noon."
    assert "cachedContent" not in sent(generate)
    assert "TimeoutError" in caplog.text
