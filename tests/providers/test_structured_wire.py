"""Structured output on each provider's wire (respx): the schema goes out in the provider's
native constrained mode, or as the final-answer tool in runs with tools."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import respx
from pydantic import BaseModel

from glassagent import Agent, Message, ModelSettings, tool
from glassagent.errors import ConfigurationError
from glassagent.events import CompleteEvent, TextChunkEvent
from glassagent.llm import (
    AnthropicClient,
    GeminiClient,
    GeminiOptions,
    OllamaClient,
    OpenAICompatibleClient,
    OpenAIOptions,
    OutputSchema,
    RetryPolicy,
    ToolDefinition,
)

NO_RETRY = RetryPolicy(max_retries=0)
ANSWER = {"name": "Paris", "population": 2102650}
HI = (Message(role="user", content="Which city?"),)
SCHEMA = OutputSchema(
    name="City",
    schema={
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
        "additionalProperties": False,
    },
)
WEATHER = ToolDefinition("weather", "The weather.", {"type": "object", "properties": {}})


class City(BaseModel):
    """A city and how many live there."""

    name: str
    population: int


CITY_SCHEMA = {
    "type": "object",
    "title": "City",
    "description": "A city and how many live there.",
    "properties": {
        "name": {"title": "Name", "type": "string"},
        "population": {"title": "Population", "type": "integer"},
    },
    "required": ["name", "population"],
    "additionalProperties": False,
}


@tool
def lookup(city: str) -> str:
    """Look a city up.

    Args:
        city: The city's name.
    """
    return f"{city}: 2102650 inhabitants"


def sent(route: respx.Route, index: int = 0) -> dict[str, Any]:
    return json.loads(route.calls[index].request.content)


# ---- OpenAI-compatible (OpenAI, llama.cpp's server) ------------------------------------

OPENAI_BASE = "http://127.0.0.1:8080/v1"


def openai_reply(message: dict[str, Any], finish: str = "stop") -> httpx.Response:
    """One streamed answer: a chunk with the whole message as its delta, then the finish."""
    delta = dict(message)
    for index, call in enumerate(delta.get("tool_calls") or ()):
        call["index"] = index
    chunks = [
        {"model": "qwen", "choices": [{"index": 0, "delta": delta}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
    ]
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    return httpx.Response(200, text=body, headers={"content-type": "text/event-stream"})


def openai_sse(*pieces: str) -> httpx.Response:
    chunks = [{"choices": [{"index": 0, "delta": {"content": p}}]} for p in pieces]
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    return httpx.Response(200, text=body, headers={"content-type": "text/event-stream"})


@respx.mock
async def test_openai_compatible_sends_a_json_schema_response_format() -> None:
    route = respx.post(f"{OPENAI_BASE}/chat/completions").mock(
        return_value=openai_reply({"content": json.dumps(ANSWER)})
    )
    client = OpenAICompatibleClient("qwen", base_url=OPENAI_BASE, retry=NO_RETRY)
    result = await Agent(client, output_type=City).run("Which city?")
    assert result.output == City(name="Paris", population=2102650)
    body = sent(route)
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": "City",
            "schema": CITY_SCHEMA,
            "description": "A city and how many live there.",
            "strict": True,
        },
    }
    assert "tools" not in body
    assert result.all_messages[-1].content == json.dumps(ANSWER)


@respx.mock
async def test_openai_compatible_streams_the_json_and_completes_with_the_object() -> None:
    respx.post(f"{OPENAI_BASE}/chat/completions").mock(
        return_value=openai_sse('{"name": "Par', 'is", "population": ', "2102650}")
    )
    client = OpenAICompatibleClient("qwen", base_url=OPENAI_BASE, retry=NO_RETRY)
    events = [e async for e in Agent(client, output_type=City).run("Which city?")]
    chunks = [e.text for e in events if isinstance(e, TextChunkEvent)]
    assert chunks == ['{"name": "Par', 'is", "population": ', "2102650}"]
    complete = events[-1]
    assert isinstance(complete, CompleteEvent)
    assert complete.output == ANSWER
    assert complete.to_dict()["output"] == ANSWER
    assert complete.text == "".join(chunks)


@respx.mock
async def test_a_run_with_tools_on_a_compatible_server_uses_the_final_answer_tool() -> None:
    route = respx.post(f"{OPENAI_BASE}/chat/completions")
    route.side_effect = [
        openai_reply(tool_message("c1", "lookup", {"city": "Paris"}), "tool_calls"),
        openai_reply(tool_message("c2", "final_result", ANSWER), "tool_calls"),
        openai_reply({"content": json.dumps(ANSWER)}),
    ]
    client = OpenAICompatibleClient("qwen", base_url=OPENAI_BASE, retry=NO_RETRY)
    agent = Agent(client, [lookup], output_type=City)
    result = await agent.run("Which city?")
    assert result.output == City(name="Paris", population=2102650)
    first = sent(route)
    assert "response_format" not in first
    assert [t["function"]["name"] for t in first["tools"]] == ["lookup", "final_result"]
    assert first["tools"][1]["function"]["parameters"] == CITY_SCHEMA
    final = result.all_messages[-1]
    assert (final.role, final.content, final.tool_calls) == ("assistant", json.dumps(ANSWER), ())
    # The history stays valid on the wire: the JSON answer goes back as assistant text.
    await agent.run("And Rome?", messages=result.all_messages)
    third = sent(route, 2)["messages"]
    assert third[-2] == {"role": "assistant", "content": json.dumps(ANSWER)}


def tool_message(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }
    return {"content": None, "tool_calls": [call]}


@respx.mock
async def test_openai_itself_combines_the_schema_with_tools() -> None:
    route = respx.post("https://api.openai.com/v1/chat/completions").mock(
        return_value=openai_reply({"content": json.dumps(ANSWER)})
    )
    client = OpenAICompatibleClient("gpt-4o-mini", api_key="sk-test-0123", retry=NO_RETRY)
    result = await Agent(client, [lookup], output_type=City).run("Which city?")
    assert result.output.population == 2102650
    body = sent(route)
    assert body["response_format"]["type"] == "json_schema"
    assert [t["function"]["name"] for t in body["tools"]] == ["lookup"]


async def test_openai_refuses_a_schema_it_cannot_combine() -> None:
    client = OpenAICompatibleClient("qwen", base_url=OPENAI_BASE, retry=NO_RETRY)
    clash = ModelSettings(
        output_schema=SCHEMA, provider_options=OpenAIOptions(response_format={"type": "text"})
    )
    with pytest.raises(ConfigurationError, match="response_format"):
        await client.chat(HI, settings=clash)
    json_tools = OpenAICompatibleClient("qwen", base_url=OPENAI_BASE, tool_protocol="json")
    with pytest.raises(ConfigurationError, match="output_schema"):
        await json_tools.chat(HI, [WEATHER], settings=ModelSettings(output_schema=SCHEMA))


# ---- Ollama -----------------------------------------------------------------------------

OLLAMA = "http://127.0.0.1:11434"


def ollama_body(content: str) -> dict[str, Any]:
    return {
        "model": "llama3.1:8b",
        "message": {"role": "assistant", "content": content},
        "done": True,
        "done_reason": "stop",
        "prompt_eval_count": 10,
        "eval_count": 5,
    }


@respx.mock
async def test_ollama_sends_the_schema_as_format() -> None:
    route = respx.post(f"{OLLAMA}/api/chat").respond(json=ollama_body(json.dumps(ANSWER)))
    client = OllamaClient(base_url=OLLAMA, tool_protocol="native", retry=NO_RETRY)
    result = await Agent(client, output_type=City).run("Which city?")
    assert result.output == City(**ANSWER)
    assert sent(route)["format"] == CITY_SCHEMA


async def test_ollama_refuses_a_schema_with_the_json_tool_protocol() -> None:
    client = OllamaClient(base_url=OLLAMA, tool_protocol="json", retry=NO_RETRY)
    with pytest.raises(ConfigurationError, match="format"):
        await client.chat(HI, [WEATHER], settings=ModelSettings(output_schema=SCHEMA))


# ---- Gemini (google-genai over httpx) --------------------------------------------------

STREAM = r".*/models/gemini-2\.5-flash:streamGenerateContent\?alt=sse$"


def gemini_sse(body: dict[str, Any]) -> httpx.Response:
    content = b"data: " + json.dumps(body).encode() + b"\r\n\r\n"
    return httpx.Response(200, content=content, headers={"content-type": "text/event-stream"})


def gemini_body(text: str) -> dict[str, Any]:
    return {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}
        ],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5},
        "modelVersion": "gemini-2.5-flash",
    }


@pytest.fixture
def gemini(monkeypatch: pytest.MonkeyPatch) -> GeminiClient:
    monkeypatch.setenv("GEMINI_API_KEY", "AIzaSyD3adB33fTestKey0000000000x9Qk")
    return GeminiClient(retry=NO_RETRY)


@respx.mock
async def test_gemini_sends_response_json_schema(gemini: GeminiClient) -> None:
    route = respx.post(url__regex=STREAM).mock(
        return_value=gemini_sse(gemini_body(json.dumps(ANSWER)))
    )
    result = await Agent(gemini, output_type=City).run("Which city?")
    assert result.output == City(**ANSWER)
    config = sent(route)["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert config["responseJsonSchema"] == CITY_SCHEMA


@respx.mock
async def test_gemini_with_tools_uses_the_final_answer_tool(gemini: GeminiClient) -> None:
    call = {"functionCall": {"name": "final_result", "args": ANSWER}}
    candidate = {"content": {"role": "model", "parts": [call]}, "finishReason": "STOP"}
    reply = gemini_body("") | {"candidates": [candidate]}
    route = respx.post(url__regex=STREAM).mock(return_value=gemini_sse(reply))
    result = await Agent(gemini, [lookup], output_type=City).run("Which city?")
    assert result.output == City(**ANSWER)
    body = sent(route)
    assert "responseJsonSchema" not in body.get("generationConfig", {})
    names = [d["name"] for d in body["tools"][0]["functionDeclarations"]]
    assert names == ["lookup", "final_result"]


async def test_gemini_refuses_a_schema_next_to_its_own_format(gemini: GeminiClient) -> None:
    clash = ModelSettings(
        output_schema=SCHEMA, provider_options=GeminiOptions(response_mime_type="text/plain")
    )
    with pytest.raises(ConfigurationError, match="response_mime_type"):
        await gemini.chat(HI, settings=clash)


# ---- Anthropic (a forced tool) ----------------------------------------------------------

ANTHROPIC = "https://api.anthropic.com/v1/messages"


def anthropic_message(content: list[dict[str, Any]], stop: str) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": content,
        "stop_reason": stop,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


def anthropic_sse(content: list[dict[str, Any]], stop: str) -> httpx.Response:
    """A streamed answer: each block starts whole (its input complete), then the stop."""
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": anthropic_message([], stop) | {"stop_reason": None}}
    ]
    for index, block in enumerate(content):
        events.append({"type": "content_block_start", "index": index, "content_block": block})
        events.append({"type": "content_block_stop", "index": index})
    events.append({"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {}})
    events.append({"type": "message_stop"})
    text = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    return httpx.Response(200, text=text, headers={"content-type": "text/event-stream"})


def anthropic_client() -> AnthropicClient:
    return AnthropicClient("claude-sonnet-4-5", api_key="sk-ant-test-0123", retry=NO_RETRY)


@respx.mock
async def test_anthropic_forces_a_tool_whose_input_is_the_answer() -> None:
    block = {"type": "tool_use", "id": "toolu_1", "name": "City", "input": ANSWER}
    route = respx.post(ANTHROPIC).mock(return_value=anthropic_sse([block], "tool_use"))
    result = await Agent(anthropic_client(), output_type=City).run("Which city?")
    assert result.output == City(**ANSWER)
    assert result.model_stop_reason == "end_turn"
    body = sent(route)
    assert body["tools"] == [
        {
            "name": "City",
            "description": "A city and how many live there.",
            "input_schema": CITY_SCHEMA,
        }
    ]
    assert body["tool_choice"] == {"type": "tool", "name": "City"}
    final = result.all_messages[-1]
    assert (final.content, final.tool_calls) == (json.dumps(ANSWER), ())


@respx.mock
async def test_anthropic_streams_the_forced_tool_input_as_text() -> None:
    events = [
        {"type": "message_start", "message": anthropic_message([], "") | {"stop_reason": None}},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "City", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '{"name": "Paris", '},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '"population": 2102650}'},
        },
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 9},
        },
        {"type": "message_stop"},
    ]
    text = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    respx.post(ANTHROPIC).respond(text=text, headers={"content-type": "text/event-stream"})
    seen = [e async for e in Agent(anthropic_client(), output_type=City).run("Which city?")]
    chunks = [e.text for e in seen if isinstance(e, TextChunkEvent)]
    assert chunks == ['{"name": "Paris", ', '"population": 2102650}']
    assert isinstance(seen[-1], CompleteEvent)
    assert seen[-1].output == ANSWER


@respx.mock
async def test_anthropic_with_tools_offers_the_final_answer_tool() -> None:
    block = {"type": "tool_use", "id": "toolu_2", "name": "final_result", "input": ANSWER}
    route = respx.post(ANTHROPIC).mock(return_value=anthropic_sse([block], "tool_use"))
    result = await Agent(anthropic_client(), [lookup], output_type=City).run("Which city?")
    assert result.output == City(**ANSWER)
    body = sent(route)
    assert "tool_choice" not in body
    assert [t["name"] for t in body["tools"]] == ["lookup", "final_result"]


async def test_anthropic_refuses_a_schema_it_cannot_force() -> None:
    client = anthropic_client()
    with pytest.raises(ConfigurationError, match="with tools"):
        await client.chat(HI, [WEATHER], settings=ModelSettings(output_schema=SCHEMA))
    thinking = ModelSettings(output_schema=SCHEMA, thinking_budget=2048)
    with pytest.raises(ConfigurationError, match="thinking"):
        await client.chat(HI, settings=thinking)
