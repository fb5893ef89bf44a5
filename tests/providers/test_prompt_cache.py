"""Prompt caching on Anthropic and OpenAI, against the bodies they document (respx).

Anthropic: ``cache_control`` breakpoints on the system prompt, the last tool and the last two
user turns, read back from ``cache_creation_input_tokens`` / ``cache_read_input_tokens``.
OpenAI: ``prompt_cache_key`` to OpenAI's own URL, read back from
``usage.prompt_tokens_details.cached_tokens``. Also the setting itself, its merge, its round
trip through events, and the cached prices. Gemini: test_gemini_cache.py.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Any

import httpx
import pytest
import respx

from glassagent import Agent, ModelSettings, tool
from glassagent.errors import ConfigurationError, UserError
from glassagent.events import parse_event
from glassagent.llm import (
    AnthropicClient,
    AnthropicOptions,
    AzureOpenAIClient,
    Message,
    OpenAICompatibleClient,
    OpenAIOptions,
    PromptCache,
    RetryPolicy,
    ToolCall,
    ToolDefinition,
    Usage,
)
from glassagent.profiles import cost_of, get_profile

ANTHROPIC_URL = "https://api.anthropic.com/v1/messages"
OPENAI_URL = "https://api.openai.com/v1/chat/completions"
LOCAL_URL = "http://127.0.0.1:8080/v1/chat/completions"
AZURE = "https://my-resource.openai.azure.com"
AZURE_URL = f"{AZURE}/openai/deployments/gpt-4o-mini-prod/chat/completions"
KEY = "sk-test-0123456789abcdefXYZ"
NO_RETRY = RetryPolicy(max_retries=0)
LONG = "You answer questions about the tide tables of the North Sea ports. " * 70  # ~1200 tokens
EPHEMERAL = {"type": "ephemeral"}
WEATHER = ToolDefinition(
    "get_weather",
    "Get the current weather in a given location",
    {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]},
)
TIDE = ToolDefinition(
    "get_tide",
    "Get the next high tide of a port",
    {"type": "object", "properties": {"port": {"type": "string"}}, "required": ["port"]},
)
CONVERSATION = (
    Message(role="user", content="Weather in Husum?"),
    Message(role="assistant", tool_calls=(ToolCall("toolu_1", "get_weather", {"location": "H"}),)),
    Message(role="tool", content="Sunny", tool_call_id="toolu_1", name="get_weather"),
    Message(role="assistant", content="It is sunny."),
    Message(role="user", content="And the tide?"),
)


@tool
def get_tide(port: str) -> str:
    """Get the next high tide of a port."""
    return "12:04"


def body_of(route: respx.Route, n: int = -1) -> dict[str, Any]:
    return json.loads(route.calls[n].request.content)


def has_marks(body: dict[str, Any]) -> bool:
    return "cache_control" in json.dumps(body)


# ---- Anthropic --------------------------------------------------------------------------


def message(**usage: int) -> dict[str, Any]:
    """A Messages API ``message`` body."""
    return {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [{"type": "text", "text": "Noon."}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": 6, **usage},
    }


def message_stream(**usage: int) -> httpx.Response:
    """The same answer as the ``text/event-stream`` Anthropic sends for ``stream: true``."""
    start = {**message(**usage), "content": [], "stop_reason": None}
    start["usage"] = {**start["usage"], "output_tokens": 1}
    events = [
        {"type": "message_start", "message": start},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "text_delta", "text": "Noon."}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
         "usage": {"output_tokens": 20}},
        {"type": "message_stop"},
    ]  # fmt: skip
    text = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    return httpx.Response(200, text=text, headers={"content-type": "text/event-stream"})


@pytest.fixture
async def claude():
    async with AnthropicClient("claude-sonnet-4-5", api_key=KEY, retry=NO_RETRY) as client:
        yield client


@respx.mock
async def test_anthropic_breakpoints_on_system_last_tool_and_last_two_user_turns(claude) -> None:
    route = respx.post(ANTHROPIC_URL).respond(json=message())
    await claude.chat(CONVERSATION, [WEATHER, TIDE], LONG)
    assert body_of(route) == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 4096,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Weather in Husum?"}]},
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "get_weather",
                        "input": {"location": "H"},
                    }
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": "Sunny",
                        "cache_control": EPHEMERAL,
                    }
                ],
            },
            {"role": "assistant", "content": [{"type": "text", "text": "It is sunny."}]},
            {
                "role": "user",
                "content": [{"type": "text", "text": "And the tide?", "cache_control": EPHEMERAL}],
            },
        ],
        "system": [{"type": "text", "text": LONG, "cache_control": EPHEMERAL}],
        "tools": [
            {
                "name": "get_weather",
                "description": "Get the current weather in a given location",
                "input_schema": WEATHER.parameters,
            },
            {
                "name": "get_tide",
                "description": "Get the next high tide of a port",
                "input_schema": TIDE.parameters,
                "cache_control": EPHEMERAL,
            },
        ],
    }
    assert json.dumps(body_of(route)).count("cache_control") == 4  # the API's limit


@respx.mock
async def test_anthropic_marks_nothing_under_the_minimum_or_when_off(claude) -> None:
    route = respx.post(ANTHROPIC_URL).respond(json=message())
    await claude.chat(CONVERSATION, [WEATHER, TIDE], "Be brief.")  # far under 1024 tokens
    assert body_of(route)["system"] == "Be brief."
    assert not has_marks(body_of(route))
    await claude.chat(CONVERSATION, [WEATHER], LONG, settings=ModelSettings(prompt_cache=False))
    assert body_of(route)["system"] == LONG
    assert not has_marks(body_of(route))
    # Haiku 4.5 caches 4096 tokens or more: LONG (about 1200) is not marked, unless asked
    async with AnthropicClient("claude-haiku-4-5", api_key=KEY, retry=NO_RETRY) as haiku:
        await haiku.chat(CONVERSATION, [WEATHER], LONG)
        assert not has_marks(body_of(route))
        await haiku.chat(CONVERSATION, [WEATHER], LONG, settings=ModelSettings(prompt_cache=True))
        assert json.dumps(body_of(route)).count("cache_control") == 4
    await claude.chat(CONVERSATION, [], "Short.", settings=ModelSettings(prompt_cache=True))
    assert body_of(route)["system"] == [
        {"type": "text", "text": "Short.", "cache_control": EPHEMERAL}
    ]
    assert "tools" not in body_of(route)


@respx.mock
async def test_anthropic_run_settings_override_the_agents_and_are_read_back() -> None:
    route = respx.post(ANTHROPIC_URL)
    route.side_effect = [
        message_stream(cache_creation_input_tokens=1500, cache_read_input_tokens=0),
        message_stream(cache_creation_input_tokens=0, cache_read_input_tokens=1500),
    ]
    client = AnthropicClient("claude-sonnet-4-5", api_key=KEY, retry=NO_RETRY)
    agent = Agent(client, [get_tide], system=LONG, settings=ModelSettings(prompt_cache=False))
    first = await agent.run("Husum?")
    assert not has_marks(body_of(route, 0))
    hour = PromptCache(breakpoints=("system",), ttl=3600)
    second = await agent.run("Husum?", settings=ModelSettings(prompt_cache=hour))
    sent = body_of(route, 1)
    assert sent["system"] == [
        {"type": "text", "text": LONG, "cache_control": {"type": "ephemeral", "ttl": "1h"}}
    ]
    assert json.dumps(sent).count("cache_control") == 1  # only the breakpoint asked for

    written = next(e for e in first.events if e.type == "llm_response")
    read = next(e for e in second.events if e.type == "llm_response")
    assert written.usage == Usage(1512, 20, cache_write_tokens=1500)
    assert read.usage == Usage(1512, 20, cache_read_tokens=1500)
    # claude-sonnet-4-5's profile: $3 per million input, $0.30 cached, $3.75 written, $15 out
    assert written.cost.amount == (12 * 3 + 1500 * Decimal("3.75") + 20 * 15) / Decimal(10**6)
    assert read.cost.amount == (12 * 3 + 1500 * Decimal("0.3") + 20 * 15) / Decimal(10**6)
    assert second.cost == read.cost
    assert first.cache_hit_rate == 0.0
    assert second.cache_hit_rate == pytest.approx(1500 / 1512)
    await client.aclose()


@respx.mock
async def test_anthropic_ttls_and_hand_placed_breakpoints(claude) -> None:
    route = respx.post(ANTHROPIC_URL).respond(json=message())
    five = ModelSettings(prompt_cache=PromptCache(ttl=300, breakpoints=("tools",)))
    await claude.chat(CONVERSATION, [WEATHER], LONG, settings=five)
    assert body_of(route)["tools"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "5m"}
    assert json.dumps(body_of(route)).count("cache_control") == 1
    with pytest.raises(ConfigurationError, match="300 or 3600"):
        await claude.chat(CONVERSATION, [], LONG, settings=ModelSettings(prompt_cache=True).merge(
            ModelSettings(prompt_cache=PromptCache(ttl=600))
        ))  # fmt: skip
    # AnthropicOptions that place breakpoints by hand turn the automatic ones off ...
    by_hand = ModelSettings(provider_options=AnthropicOptions(cache_tools=True))
    await claude.chat(CONVERSATION, [WEATHER], LONG, settings=by_hand)
    assert body_of(route)["system"] == LONG
    assert json.dumps(body_of(route)).count("cache_control") == 1
    # ... and cannot come with a prompt_cache of their own
    with pytest.raises(UserError, match=r"prompt_cache and AnthropicOptions\.cache_tools"):
        ModelSettings(prompt_cache=True, provider_options=AnthropicOptions(cache_tools=True))


# ---- OpenAI -----------------------------------------------------------------------------


def completion(**usage: Any) -> dict[str, Any]:
    """A ``chat.completion`` body as OpenAI documents it."""
    return {
        "id": "chatcmpl-AWx0gQ3Vx",
        "object": "chat.completion",
        "created": 1732345678,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Noon.", "refusal": None},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 2006, "completion_tokens": 300, "total_tokens": 2306, **usage},
    }


def chunks(**usage: Any) -> httpx.Response:
    """The same answer streamed, its usage in the last chunk (``include_usage``)."""
    head = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "gpt-4o-mini"}
    parts = [
        {**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Noon."}}]},
        {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {**head, "choices": [], "usage": completion(**usage)["usage"]},
    ]
    text = "".join(f"data: {json.dumps(p)}\n\n" for p in parts) + "data: [DONE]\n\n"
    return httpx.Response(200, text=text, headers={"content-type": "text/event-stream"})


@pytest.fixture
async def openai():
    async with OpenAICompatibleClient("gpt-4o-mini", api_key=KEY, retry=NO_RETRY) as client:
        yield client


@respx.mock
async def test_openai_gets_a_stable_prompt_cache_key(openai) -> None:
    route = respx.post(OPENAI_URL).respond(json=completion())
    await openai.chat(CONVERSATION, [WEATHER], LONG)
    await openai.chat(CONVERSATION[:1], [WEATHER], LONG)  # another conversation, same prefix
    await openai.chat(CONVERSATION, [WEATHER, TIDE], LONG)  # other tools
    keys = [body_of(route, n)["prompt_cache_key"] for n in range(3)]
    assert re.fullmatch(r"glassagent-[0-9a-f]{32}", keys[0])
    assert keys[0] == keys[1] != keys[2]
    assert body_of(route, 0) == {
        "model": "gpt-4o-mini",
        "messages": body_of(route, 0)["messages"],
        "tools": body_of(route, 0)["tools"],
        "prompt_cache_key": keys[0],
    }
    assert "tide" not in keys[0]  # a hash, no text of the prompt


@respx.mock
async def test_openai_key_by_size_setting_and_options(openai) -> None:
    route = respx.post(OPENAI_URL).respond(json=completion())
    await openai.chat(CONVERSATION, [WEATHER], "Be brief.")
    assert "prompt_cache_key" not in body_of(route)  # under OpenAI's 1024 tokens
    await openai.chat(CONVERSATION, [], "Be brief.", settings=ModelSettings(prompt_cache=True))
    assert body_of(route)["prompt_cache_key"].startswith("glassagent-")
    await openai.chat(CONVERSATION, [], LONG, settings=ModelSettings(prompt_cache=False))
    assert "prompt_cache_key" not in body_of(route)
    tenant = ModelSettings(prompt_cache=PromptCache(key="tide-tables-v2"))
    await openai.chat(CONVERSATION, [], LONG, settings=tenant)
    assert body_of(route)["prompt_cache_key"] == "tide-tables-v2"
    # a key in extra_body wins over the automatic one, and clashes with one asked for
    own = OpenAIOptions(extra_body={"prompt_cache_key": "mine"})
    await openai.chat(CONVERSATION, [], LONG, settings=ModelSettings(provider_options=own))
    assert body_of(route)["prompt_cache_key"] == "mine"
    both = ModelSettings(prompt_cache=True, provider_options=own)
    with pytest.raises(ConfigurationError, match="prompt_cache_key"):
        await openai.chat(CONVERSATION, [], LONG, settings=both)


@respx.mock
async def test_local_servers_never_get_a_key_and_azure_only_when_asked() -> None:
    local = respx.post(LOCAL_URL).respond(json=completion())
    async with OpenAICompatibleClient("qwen3", base_url="http://127.0.0.1:8080/v1") as client:
        await client.chat(CONVERSATION, [], LONG)
        await client.chat(CONVERSATION, [], LONG, settings=ModelSettings(prompt_cache=True))
    assert not any("prompt_cache_key" in body_of(local, n) for n in range(2))
    azure = respx.post(url__startswith=AZURE_URL).respond(json=completion())
    async with AzureOpenAIClient(
        "gpt-4o-mini-prod", endpoint=AZURE, api_key=KEY, retry=NO_RETRY
    ) as client:
        await client.chat(CONVERSATION, [], LONG)
        assert "prompt_cache_key" not in body_of(azure)
        await client.chat(CONVERSATION, [], LONG, settings=ModelSettings(prompt_cache=True))
        assert body_of(azure)["prompt_cache_key"].startswith("glassagent-")


@respx.mock
async def test_openai_cached_tokens_are_read_and_priced() -> None:
    details = {"prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0}}
    route = respx.post(OPENAI_URL)
    route.side_effect = [httpx.Response(200, json=completion(**details)), chunks(**details)]
    client = OpenAICompatibleClient("gpt-4o-mini", api_key=KEY, retry=NO_RETRY)
    answer = await client.chat([Message(role="user", content="Husum?")], system=LONG)
    assert answer.usage == Usage(2006, 300, cache_read_tokens=1920)
    result = await Agent(client, system=LONG).run("Husum?")  # streamed
    response = next(e for e in result.events if e.type == "llm_response")
    assert response.usage == Usage(2006, 300, cache_read_tokens=1920)
    # gpt-4o-mini's profile: $0.15 per million input, $0.075 cached, $0.60 output
    price = 86 * Decimal("0.15") + 1920 * Decimal("0.075") + 300 * Decimal("0.6")
    assert result.cost.amount == price / 10**6
    assert result.cache_hit_rate == pytest.approx(1920 / 2006)
    await client.aclose()


def test_more_cached_tokens_than_prompt_tokens_are_capped() -> None:
    from glassagent._providers.openai_wire import _usage

    raw = {
        "prompt_tokens": 10,
        "completion_tokens": 1,
        "prompt_tokens_details": {"cached_tokens": 50},
    }
    assert _usage(raw) == Usage(10, 1, cache_read_tokens=10)
    assert _usage({"prompt_tokens": 10, "prompt_tokens_details": None}) == Usage(10)


# ---- the setting ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda: ModelSettings(prompt_cache="yes"), "prompt_cache must be True, False"),
        (lambda: PromptCache(breakpoints=("everything",)), "not 'everything'"),
        (lambda: PromptCache(breakpoints="system"), "must be a tuple"),
        (lambda: PromptCache(ttl=0), "ttl must be an integer of at least 1"),
        (lambda: PromptCache(ttl=True), "ttl must be an integer"),
        (lambda: PromptCache(min_tokens=-1), "min_tokens must be an integer of at least 0"),
        (lambda: PromptCache(key=" "), "key must be a non-empty string"),
    ],
)
def test_settings_that_cannot_be_are_refused(make: Any, words: str) -> None:
    with pytest.raises(UserError, match=re.escape(words)):
        make()


def test_run_settings_replace_the_agents_cache_setting() -> None:
    agent = ModelSettings(prompt_cache=PromptCache(ttl=3600), temperature=0.2)
    assert agent.merge(ModelSettings(prompt_cache=False)).prompt_cache is False
    assert agent.merge(ModelSettings(temperature=0.5)).prompt_cache == PromptCache(ttl=3600)
    assert PromptCache(breakpoints=["turns", "system", "turns"]).breakpoints == ("turns", "system")


async def test_the_setting_survives_the_events_round_trip() -> None:
    from glassagent.testing import ScriptedClient

    cache = PromptCache(breakpoints=("system",), ttl=3600, key="k", min_tokens=0)
    for value in (cache, True, False, None):
        result = await Agent(ScriptedClient(["ok"])).run(
            "hi", settings=ModelSettings(prompt_cache=value)
        )
        start = result.events[0]
        assert start.type == "llm_request"
        again = parse_event(json.loads(json.dumps(start.to_dict())))
        assert again.settings.prompt_cache == value
        assert type(again.settings.prompt_cache) is type(value)


def test_cache_reads_and_writes_are_priced_at_the_cached_rates() -> None:
    usage = Usage(10_000, 1000, cache_read_tokens=6000, cache_write_tokens=2000)
    cost = cost_of(usage, get_profile("claude-sonnet-4-5"))
    assert cost.amount == (
        2000 * 3 + 6000 * Decimal("0.3") + 2000 * Decimal("3.75") + 1000 * 15
    ) / Decimal(10**6)
    pytest.importorskip("genai_prices")
    plain = cost_of(Usage(1_000_000), None, model="gpt-4o", provider="openai")
    cached = cost_of(
        Usage(1_000_000, cache_read_tokens=1_000_000), None, model="gpt-4o", provider="openai"
    )
    assert cached.source == plain.source == "genai-prices"
    assert cached.amount is not None
    assert plain.amount is not None
    assert cached.amount < plain.amount
