"""Gemini prompt caching: explicit cached contents through google-genai, against respx.

The bodies are those the Gemini API documents: ``POST cachedContents`` with ``model``,
``systemInstruction``, ``tools``, ``toolConfig``, ``ttl`` and (with ``"turns"``)
``contents``, answered with the cache's ``name``, ``expireTime`` and ``usageMetadata``; then
``generateContent`` naming ``cachedContent`` with only the rest of the conversation;
``usageMetadata.cachedContentTokenCount`` read back, and the creation's
``totalTokenCount`` counted as written by the first call answered with the cache.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import replace
from decimal import Decimal
from typing import Any

import httpx
import pytest
import respx

from glassagent import Agent, GlassAgentError, ModelSettings, tool
from glassagent._core.request import ModelRequest
from glassagent._providers import gemini_cache, gemini_wire
from glassagent.history import History
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
from glassagent.profiles import cost_of, get_profile

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
async def test_by_default_the_system_and_tools_are_cached_and_the_turns_sent(client) -> None:
    caches = respx.post(url__regex=CACHES).respond(json=cached_content())
    generate = respx.post(url__regex=GENERATE).respond(json=answer())
    first = await client.chat(CONVERSATION, [ADD], LONG)
    assert sent(caches) == {
        "model": "models/gemini-2.5-flash",
        "ttl": "300s",
        "systemInstruction": {"parts": [{"text": LONG}], "role": "user"},
        "tools": DECLARATIONS,
    }
    request = sent(generate)
    assert request["cachedContent"] == CACHE_NAME
    assert len(request["contents"]) == 5  # the whole conversation: it is not cached
    assert not {"systemInstruction", "tools", "toolConfig"} & request.keys()
    # the call that made the cache counts its 1300 tokens as written (billed at the input
    # price), on top of the 1400 of its prompt, 1300 of them read from the cache
    assert first.usage == Usage(1400 + 1300, 4, cache_read_tokens=1300, cache_write_tokens=1300)
    second = await client.chat(CONVERSATION, [ADD], LONG)
    assert second.usage == Usage(1400, 4, cache_read_tokens=1300)
    assert caches.call_count == 1
    assert KEY not in caches.calls[0].request.content.decode()


@respx.mock
async def test_one_cache_serves_every_turn_of_a_growing_conversation(client) -> None:
    caches = respx.post(url__regex=CACHES).respond(json=cached_content())
    generate = streamed()
    agent = Agent(client, [add], system=LONG)
    history = History()
    results = [
        await agent.run(question, history=history, append_to_history=True)
        for question in ("High tide at Husum?", "At Büsum?", "At Sylt?", "At Föhr?")
    ]
    assert caches.call_count == 1
    assert "contents" not in sent(caches)
    assert [sent(generate, i)["cachedContent"] for i in range(4)] == [CACHE_NAME] * 4
    assert [len(sent(generate, i)["contents"]) for i in range(4)] == [1, 3, 5, 7]
    # gemini-2.5-flash's profile: $0.30 per million input, $0.03 cached, $2.50 output; the
    # cache's 1300 tokens cost the input price once more when it is made
    reading = 100 * Decimal("0.3") + 1300 * Decimal("0.03") + 4 * Decimal("2.5")
    making = 1300 * Decimal("0.3")
    assert [r.usage.cache_write_tokens for r in results] == [1300, 0, 0, 0]
    assert [r.cost.amount for r in results] == [
        (reading + making) / 1_000_000,
        *[reading / 1_000_000] * 3,
    ]
    made = next(e for e in results[0].events if e.type == "llm_response")
    assert made.usage.cache_write_tokens == 1300
    assert made.cost.amount == (reading + making) / 1_000_000
    assert results[1].cache_hit_rate == pytest.approx(1300 / 1400)


def test_creation_tokens_cost_the_input_price_by_every_price_source() -> None:
    usage = Usage(1400 + 1300, 4, cache_read_tokens=1300, cache_write_tokens=1300)
    made = 100 * Decimal("0.3") + 1300 * (Decimal("0.03") + Decimal("0.3")) + 4 * Decimal("2.5")
    profile = get_profile("gemini-2.5-flash")
    assert profile is not None
    assert profile.pricing is not None
    assert profile.pricing.cache_write_per_1m_tokens is None  # Gemini has no write price
    assert cost_of(usage, profile).amount == made / 1_000_000
    priced = cost_of(usage, None, model="gemini-2.5-flash", provider="gemini")
    assert priced.source == "genai-prices"
    assert priced.amount == made / 1_000_000


@respx.mock
async def test_an_unreported_creation_count_is_the_cached_tokens_read(client) -> None:
    unreported = {k: v for k, v in cached_content().items() if k != "usageMetadata"}
    respx.post(url__regex=CACHES).respond(json=unreported)
    respx.post(url__regex=GENERATE).respond(json=answer(cached=1250))
    first = await client.chat(CONVERSATION, [ADD], LONG)
    second = await client.chat(CONVERSATION, [ADD], LONG)
    assert first.usage == Usage(1400 + 1250, 4, cache_read_tokens=1250, cache_write_tokens=1250)
    assert second.usage == Usage(1400, 4, cache_read_tokens=1250)


@respx.mock
async def test_a_failed_call_leaves_the_creation_to_the_next_answer(client) -> None:
    respx.post(url__regex=CACHES).respond(json=cached_content())
    generate = respx.post(url__regex=GENERATE)
    generate.side_effect = [
        httpx.Response(400, json={"error": {"code": 400, "message": "bad"}}),
        httpx.Response(200, json=answer()),
    ]
    with pytest.raises(GlassAgentError):
        await client.chat(CONVERSATION, [ADD], LONG)
    later = await client.chat(CONVERSATION, [ADD], LONG)
    assert later.usage.cache_write_tokens == 1300
    assert sent(generate)["cachedContent"] == CACHE_NAME


@respx.mock
async def test_turns_are_cached_when_asked(client) -> None:
    caches = respx.post(url__regex=CACHES).respond(json=cached_content())
    generate = respx.post(url__regex=GENERATE).respond(json=answer())
    turns = ModelSettings(prompt_cache=PromptCache(breakpoints=("system", "tools", "turns")))
    await client.chat(CONVERSATION, [ADD], LONG, settings=turns)
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
    # the same conversation, even as other message objects, reads the same cache ...
    await client.chat([replace(m) for m in CONVERSATION], [ADD], LONG, settings=turns)
    assert caches.call_count == 1
    # ... one with another message before its last user turn has a cache of its own ...
    other = [*CONVERSATION[:3], Message(role="assistant", content="Five."), CONVERSATION[4]]
    await client.chat(other, [ADD], LONG, settings=turns)
    assert caches.call_count == 2
    assert sent(caches)["contents"][-1] == {"parts": [{"text": "Five."}], "role": "model"}
    # ... and so has one that went on
    longer = [*CONVERSATION, Message(role="assistant", content="At noon."), CONVERSATION[0]]
    await client.chat(longer, [ADD], LONG, settings=turns)
    assert caches.call_count == 3
    assert len(sent(caches)["contents"]) == 6


def test_a_live_cache_is_planned_without_building_or_hashing_the_conversation_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    conversation = [*CONVERSATION[:4]] * 100 + [CONVERSATION[4]]
    turns = ModelSettings(prompt_cache=PromptCache(breakpoints=("system", "tools", "turns")))
    request = ModelRequest.build(conversation, [ADD], LONG, turns)
    config = gemini_wire.to_config(request, [])
    contents = gemini_wire.RestContents()
    first = gemini_cache.plan("gemini-2.5-flash", request, conversation, config, contents)
    assert first is not None
    assert len(first.prefix) == 400
    assert len(first.cache_config()["contents"]) == 400

    def refuse(*args: Any) -> Any:
        raise AssertionError("converted again")

    monkeypatch.setattr(gemini_wire, "to_contents", refuse)
    monkeypatch.setattr(gemini_wire, "rest_content", refuse)
    again = gemini_cache.plan("gemini-2.5-flash", request, conversation, config, contents)
    assert again is not None
    assert again.key == first.key
    default = ModelRequest.build(conversation, [ADD], LONG)
    planned = gemini_cache.plan("gemini-2.5-flash", default, conversation, config, contents)
    assert planned is not None
    assert planned.prefix == ()
    assert planned.rest == conversation
    assert "contents" not in planned.cache_config()


@respx.mock
async def test_the_tool_config_goes_into_the_cache_unless_it_is_the_default(client) -> None:
    caches = respx.post(url__regex=CACHES)
    caches.side_effect = [
        httpx.Response(200, json={**cached_content(), "name": f"cachedContents/c{n}"})
        for n in range(3)
    ]
    generate = respx.post(url__regex=GENERATE).respond(json=answer())
    for choice in (None, "auto", "required", "auto", "required"):
        await client.chat(CONVERSATION, [ADD], LONG, settings=ModelSettings(tool_choice=choice))
    assert caches.call_count == 2  # "auto" is Gemini's default: it shares the cache
    assert "toolConfig" not in sent(caches, 0)
    assert sent(caches, 1)["toolConfig"] == {"functionCallingConfig": {"mode": "ANY"}}
    names = [sent(generate, i)["cachedContent"].removeprefix("cachedContents/") for i in range(5)]
    assert names == ["c0", "c0", "c1", "c0", "c1"]
    assert not any("toolConfig" in sent(generate, i) for i in range(5))


@respx.mock
async def test_an_expired_cache_is_made_again(client) -> None:
    caches = respx.post(url__regex=CACHES)
    caches.side_effect = [
        httpx.Response(200, json={**cached_content("2020-01-01T00:00:00Z"), "name": "c/old"}),
        httpx.Response(200, json={**cached_content(), "name": "c/new"}),
    ]
    generate = respx.post(url__regex=GENERATE).respond(json=answer())
    usages = [(await client.chat(CONVERSATION, [ADD], LONG)).usage for _ in range(3)]
    assert caches.call_count == 2
    assert [sent(generate, i)["cachedContent"] for i in range(3)] == ["c/old", "c/new", "c/new"]
    assert [u.cache_write_tokens for u in usages] == [1300, 1300, 0]


@respx.mock
async def test_no_cache_under_the_minimum_or_when_turned_off(client) -> None:
    caches = respx.post(url__regex=CACHES).respond(json=cached_content())
    generate = respx.post(url__regex=GENERATE).respond(json=answer(cached=None))
    short = await client.chat(CONVERSATION, [ADD], "Be brief.")
    off = ModelSettings(prompt_cache=False)
    await client.chat(CONVERSATION, [ADD], LONG, settings=off)
    nothing = ModelSettings(prompt_cache=PromptCache(breakpoints=()))
    await client.chat(CONVERSATION, [ADD], LONG, settings=nothing)
    assert caches.call_count == 0
    assert short.usage == Usage(1400, 4)
    for index in (0, 1, 2):
        request = sent(generate, index)
        assert "cachedContent" not in request
        assert len(request["contents"]) == 5
        assert request["tools"] == DECLARATIONS
    # gemini-2.5-pro caches 4096 tokens or more: LONG (about 1200) is not cached there
    pro = GeminiClient("gemini-2.5-pro", retry=RetryPolicy(max_retries=0))
    respx.post(url__regex=r".*gemini-2\.5-pro:generateContent$").respond(json=answer())
    await pro.chat(CONVERSATION, [ADD], LONG)
    assert caches.call_count == 0
    # the conversation does not count towards the minimum unless it is cached: "turns"
    many = CONVERSATION * 200
    await client.chat(many, [ADD], "Be brief.")
    assert caches.call_count == 0
    turns = ModelSettings(prompt_cache=PromptCache(breakpoints=("turns",)))
    await client.chat(many, [ADD], "Be brief.", settings=turns)
    assert caches.call_count == 1
    # True caches whatever the size, the system instruction and tools only
    await client.chat(CONVERSATION, [ADD], "Be brief.", settings=ModelSettings(prompt_cache=True))
    assert caches.call_count == 2
    assert sent(caches)["systemInstruction"] == {"parts": [{"text": "Be brief."}], "role": "user"}
    assert "contents" not in sent(caches)


@respx.mock
async def test_the_run_settings_override_the_agents(client) -> None:
    caches = respx.post(url__regex=CACHES).respond(json=cached_content())
    generate = streamed()
    agent = Agent(client, [add], system=LONG, settings=ModelSettings(prompt_cache=False))
    await agent.run("Husum?", messages=CONVERSATION[:4])
    assert caches.call_count == 0
    hour = PromptCache(ttl=3600)
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
    assert parts[-1].usage == Usage(2700, 4, cache_read_tokens=1300, cache_write_tokens=1300)
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
