"""`AnthropicClient` made from `AnthropicWire` by the provider toolkit's `WireClient`."""

from __future__ import annotations

import json
from typing import Any

import pytest

from glassagent._core import tool_choice
from glassagent._core.output import OutputSchema
from glassagent._providers import anthropic_wire
from glassagent.llm import (
    AnthropicClient,
    LLMResponse,
    Message,
    ModelRequest,
    ModelSettings,
    RetryPolicy,
    TextDelta,
    ToolDefinition,
)
from glassagent.providers import WireClient
from tests.support.loopback_server import LoopbackServer, Reply, Request

KEY = "sk-ant-api03-wire0123456789abcdefXYZ"
HI = (Message(role="user", content="Hello, Claude"),)
NO_RETRY = RetryPolicy(max_retries=0)
WEATHER = ToolDefinition("get_weather", "The weather.", {"type": "object", "properties": {}})
CLOCK = ToolDefinition("get_time", "The time.", {"type": "object", "properties": {}})
ANSWER = OutputSchema(
    name="answer", schema={"type": "object", "properties": {"city": {"type": "string"}}}
)


def events(*payloads: dict[str, Any]) -> bytes:
    """An Anthropic SSE body: each payload named by its ``type``."""
    return b"".join(f"event: {p['type']}\ndata: {json.dumps(p)}\n\n".encode() for p in payloads)


def output_tool_stream(name: str) -> bytes:
    """A streamed answer given as a forced call of the tool `name`, ending in ``tool_use``."""
    return events(
        {"type": "message_start", "message": {"model": "claude-x", "usage": {"input_tokens": 7}}},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": name, "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '{"city": "Oslo"}'},
        },
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 5},
        },
        {"type": "message_stop"},
    )


def test_the_body_takes_the_choice_the_request_resolved_not_the_settings_again(
    monkeypatch,
) -> None:
    request = ModelRequest(HI, (WEATHER, CLOCK), None, ModelSettings(tool_choice="get_time"))
    auto = ModelRequest.build(HI, (WEATHER,), None, ModelSettings(tool_choice="auto"))

    def again(*args: object) -> None:
        raise AssertionError("the wire resolved the tool choice again")

    monkeypatch.setattr(tool_choice, "resolve", again)
    body = anthropic_wire.AnthropicWire().request_body("claude-x", request, stream=False)
    assert body["tool_choice"] == {"type": "tool", "name": "get_time"}
    assert [t["name"] for t in body["tools"]] == ["get_weather", "get_time"]
    body = anthropic_wire.request_body("claude-x", auto, stream=True)
    assert body["tool_choice"] == {"type": "auto"}
    assert body["stream"] is True


def test_the_wire_reads_a_structured_answer_by_the_requests_output_schema() -> None:
    wire = anthropic_wire.AnthropicWire()
    with_schema = ModelRequest.build(HI, settings=ModelSettings(output_schema=ANSWER))
    assert wire.reader(with_schema, KEY).output_tool == "answer"
    assert wire.reader(ModelRequest.build(HI), KEY).output_tool is None
    assert (wire.path, wire.framing, wire.provider) == ("/v1/messages", "sse", "anthropic")


def test_a_stream_is_complete_only_at_message_stop() -> None:
    reader = anthropic_wire.Reader(secret=KEY)
    reader.event("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"}})
    assert reader.builder.finished
    assert not reader.complete()
    assert not reader.ended
    assert "before message_stop" in str(reader.incomplete())
    reader.event("message_stop", {"type": "message_stop"})
    assert reader.complete()
    assert reader.ended
    assert reader.stopped


@pytest.mark.parametrize("fast_pool", [False, True])
async def test_the_client_is_a_wire_client_and_passes_fast_pool_on(fast_pool: bool) -> None:
    client = AnthropicClient("claude-x", api_key=KEY, fast_pool=fast_pool)
    assert isinstance(client, WireClient)
    assert isinstance(client.wire, anthropic_wire.AnthropicWire)
    http = await client._transport._client()
    pool = http._transport._pool  # type: ignore[attr-defined]
    assert (type(pool).__name__ == "SweepingConnectionPool") is fast_pool
    await client.aclose()
    assert repr(client) == "AnthropicClient(model='claude-x', base_url='https://api.anthropic.com')"


async def test_send_stream_reads_the_forced_output_tool_as_text_and_end_turn() -> None:
    seen: list[Request] = []

    def handle(request: Request) -> Reply:
        seen.append(request)
        if request.json().get("stream"):
            return Reply.body(output_tool_stream("answer"), Content_Type="text/event-stream")
        block = {"type": "tool_use", "id": "toolu_1", "name": "answer", "input": {"city": "Oslo"}}
        message = {"type": "message", "content": [block], "stop_reason": "tool_use"}
        return Reply.body(json.dumps(message).encode(), Content_Type="application/json")

    request = ModelRequest.build(HI, settings=ModelSettings(output_schema=ANSWER))
    with LoopbackServer(handle) as server:
        async with AnthropicClient(
            "claude-x", api_key=KEY, base_url=server.url, retry=NO_RETRY
        ) as client:
            parts = [part async for part in client.send_stream(request)]
            answer = await client.send(request.with_messages(HI))
    deltas = [p.text for p in parts if isinstance(p, TextDelta)]
    assert "".join(deltas) == '{"city": "Oslo"}'
    for final in (parts[-1], answer):  # streamed and not
        assert isinstance(final, LLMResponse)
        assert final.text == '{"city": "Oslo"}'
        assert final.stop_reason == "end_turn"  # the forced output tool's tool_use stop
        assert final.tool_calls == ()
    assert [r.path for r in seen] == ["/v1/messages", "/v1/messages"]
    assert seen[0].headers["x-api-key"] == KEY
    assert seen[0].headers["anthropic-version"] == anthropic_wire.API_VERSION
    assert seen[0].json()["tool_choice"] == {"type": "tool", "name": "answer"}
