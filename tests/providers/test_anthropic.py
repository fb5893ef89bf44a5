"""`AnthropicClient` against respx, with bodies shaped as Anthropic documents them."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import respx

from glassagent import Agent, ModelSettings, tool
from glassagent.errors import (
    AttachmentError,
    AuthenticationError,
    ConfigurationError,
    ContentBlockedError,
    GlassAgentError,
    ProviderError,
    ProviderUnavailableError,
    RateLimitError,
    ResponseParseError,
)
from glassagent.llm import (
    AnthropicClient,
    Attachment,
    AttachmentPolicy,
    LLMResponse,
    Message,
    OpenAIOptions,
    RetryPolicy,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    ToolDefinition,
    Usage,
    create_llm_client,
)
from tests.providers.test_key_leaks import everything_about
from tests.support.loopback_server import LoopbackServer, Reply, Request

BASE = "https://api.anthropic.com"
URL = f"{BASE}/v1/messages"
KEY = "sk-ant-api03-test0123456789abcdefXYZ"
NO_RETRY = RetryPolicy(max_retries=0)
HI = (Message(role="user", content="Hello, Claude"),)
WEATHER = ToolDefinition(
    "get_weather",
    "Get the current weather in a given location",
    {
        "type": "object",
        "properties": {"location": {"type": "string"}, "unit": {"type": "string"}},
        "required": ["location"],
    },
)
SIGNATURE = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds9L/ZtTKY4yDeiMT3A0pgYV1F6A="
REDACTED = (
    "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YfWXGmKDxH4mPnZ5sQ7vB5URj"
)


def message(content: list[dict[str, Any]], stop: str = "end_turn", **usage: int) -> dict:
    """A Messages API ``message`` body."""
    return {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": 6, **usage},
    }


def sse(*events: dict[str, Any]) -> httpx.Response:
    """A ``text/event-stream`` body: each event with its ``event:`` name, as Anthropic sends."""
    body = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    return httpx.Response(200, text=body, headers={"content-type": "text/event-stream"})


def message_start(input_tokens: int = 25, **usage: int) -> dict[str, Any]:
    return {
        "type": "message_start",
        "message": {
            "id": "msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY",
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": "claude-sonnet-4-5-20250929",
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": 1, **usage},
        },
    }


def block_start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def delta(index: int, **d: Any) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": d}


def block_stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def message_delta(stop: str, output_tokens: int) -> dict[str, Any]:
    return {
        "type": "message_delta",
        "delta": {"stop_reason": stop, "stop_sequence": None},
        "usage": {"output_tokens": output_tokens},
    }


PING = {"type": "ping"}
STOP = {"type": "message_stop"}


def text_stream(*pieces: str) -> list[dict[str, Any]]:
    return [
        message_start(),
        block_start(0, {"type": "text", "text": ""}),
        PING,
        *(delta(0, type="text_delta", text=p) for p in pieces),
        block_stop(0),
        message_delta("end_turn", 15),
        STOP,
    ]


def thinking_then_tool_stream() -> list[dict[str, Any]]:
    """Extended thinking, then one tool call whose input arrives as input_json_delta."""
    return [
        message_start(),
        block_start(0, {"type": "thinking", "thinking": ""}),
        delta(0, type="thinking_delta", thinking="I need the weather "),
        delta(0, type="thinking_delta", thinking="in Paris."),
        delta(0, type="signature_delta", signature=SIGNATURE),
        block_stop(0),
        block_start(
            1,
            {"type": "tool_use", "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "name": "get_weather"}
            | {"input": {}},
        ),
        delta(1, type="input_json_delta", partial_json=""),
        delta(1, type="input_json_delta", partial_json='{"location":'),
        delta(1, type="input_json_delta", partial_json=' "Par'),
        delta(1, type="input_json_delta", partial_json='is"}'),
        block_stop(1),
        message_delta("tool_use", 89),
        STOP,
    ]


def body_of(route: respx.Route, n: int = 0) -> dict[str, Any]:
    return json.loads(route.calls[n].request.content)


async def collect(client: AnthropicClient, *args: Any, **kwargs: Any) -> list[Any]:
    return [part async for part in client.stream(*args, **kwargs)]


@pytest.fixture
async def client():
    async with AnthropicClient("claude-sonnet-4-5", api_key=KEY, retry=NO_RETRY) as c:
        yield c


# ---- chat ------------------------------------------------------------------------------


@respx.mock
async def test_chat_sends_the_messages_shape_and_headers_and_reads_the_answer(client) -> None:
    route = respx.post(URL).mock(
        return_value=httpx.Response(200, json=message([{"type": "text", "text": "Hi!"}]))
    )
    settings = ModelSettings(temperature=0.2, stop_sequences=("END",))
    response = await client.chat(HI, [WEATHER], system="Be brief.", settings=settings)
    request = route.calls[0].request
    assert request.headers["x-api-key"] == KEY
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in request.headers
    assert body_of(route) == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hello, Claude"}]}],
        "system": "Be brief.",
        "tools": [
            {
                "name": "get_weather",
                "description": "Get the current weather in a given location",
                "input_schema": WEATHER.parameters,
            }
        ],
        "temperature": 0.2,
        "stop_sequences": ["END"],
    }
    assert response.text == "Hi!"
    assert response.stop_reason == "end_turn"
    assert response.raw_stop_reason == "end_turn"
    assert response.model == "claude-sonnet-4-5-20250929"
    assert response.usage == Usage(12, 6)
    assert response.raw_request == body_of(route)


@respx.mock
async def test_chat_reads_thinking_and_a_tool_call_and_keeps_the_signed_blocks(client) -> None:
    thinking = {"type": "thinking", "thinking": "Weather, then.", "signature": SIGNATURE}
    redacted = {"type": "redacted_thinking", "data": REDACTED}
    use = {
        "type": "tool_use",
        "id": "toolu_01A",
        "name": "get_weather",
        "input": {"location": "SF"},
    }
    respx.post(URL).mock(
        return_value=httpx.Response(200, json=message([thinking, redacted, use], "tool_use"))
    )
    response = await client.chat(HI, [WEATHER], settings=ModelSettings(thinking_budget=2048))
    assert response.thinking == "Weather, then."
    assert response.tool_calls == (ToolCall("toolu_01A", "get_weather", {"location": "SF"}),)
    assert response.stop_reason == "tool_use"
    assert response.provider_metadata["anthropic_thinking"] == [thinking, redacted]


@respx.mock
async def test_thinking_budget_is_sent_and_max_tokens_leaves_room_for_it(client) -> None:
    route = respx.post(URL).mock(return_value=httpx.Response(200, json=message([])))
    await client.chat(HI, settings=ModelSettings(thinking_budget=10000))
    await client.chat(HI, settings=ModelSettings(thinking_budget=1024, max_tokens=3000))
    assert body_of(route, 0)["thinking"] == {"type": "enabled", "budget_tokens": 10000}
    assert body_of(route, 0)["max_tokens"] == 14096
    assert body_of(route, 1)["max_tokens"] == 3000


@respx.mock
async def test_cache_tokens_count_as_input_and_are_kept_apart(client) -> None:
    body = message(
        [{"type": "text", "text": "ok"}],
        cache_creation_input_tokens=100,
        cache_read_input_tokens=2000,
    )
    respx.post(URL).mock(return_value=httpx.Response(200, json=body))
    response = await client.chat(HI)
    assert response.usage == Usage(2112, 6, cache_read_tokens=2000, cache_write_tokens=100)
    assert not response.provider_metadata


@pytest.mark.parametrize(
    ("raw", "neutral"),
    [
        ("stop_sequence", "end_turn"),
        ("model_context_window_exceeded", "max_tokens"),
        ("pause_turn", "other"),
        ("something_new", "other"),
    ],
)
@respx.mock
async def test_stop_reasons_are_read_honestly(client, raw: str, neutral: str) -> None:
    respx.post(URL).mock(
        return_value=httpx.Response(200, json=message([{"type": "text", "text": "x"}], raw))
    )
    response = await client.chat(HI)
    assert (response.stop_reason, response.raw_stop_reason) == (neutral, raw)


@respx.mock
async def test_a_refusal_keeps_partial_text_and_an_empty_one_is_blocked(client) -> None:
    respx.post(URL).mock(
        side_effect=[
            httpx.Response(200, json=message([{"type": "text", "text": "I can"}], "refusal")),
            httpx.Response(200, json=message([], "refusal")),
        ]
    )
    partial = await client.chat(HI)
    assert (partial.text, partial.stop_reason) == ("I can", "content_filter")
    with pytest.raises(ContentBlockedError, match="refusal"):
        await client.chat(HI)


# ---- request shapes --------------------------------------------------------------------


@respx.mock
async def test_history_becomes_alternating_turns_with_tool_results_in_one_user_turn(client):
    route = respx.post(URL).mock(return_value=httpx.Response(200, json=message([])))
    thinking = {"type": "thinking", "thinking": "Two cities.", "signature": SIGNATURE}
    calls = (
        ToolCall("toolu_1", "get_weather", {"location": "Paris"}),
        ToolCall("toolu_2", "get_weather", {"location": "Rome"}),
    )
    history = [
        Message(role="system", content="Use metric units."),
        Message(role="user", content="Weather in Paris and Rome?"),
        Message(
            role="assistant",
            content="Checking.",
            tool_calls=calls,
            thinking="Two cities.",
            provider_metadata={"anthropic_thinking": [thinking]},
        ),
        Message(role="tool", tool_call_id="toolu_1", name="get_weather", content="18C"),
        Message(role="tool", tool_call_id="toolu_2", content="boom", is_error=True),
        Message(role="assistant", content="", status="aborted"),
        Message(role="user", content="And Oslo?"),
    ]
    await client.chat(history, [WEATHER], system="Be brief.")
    body = body_of(route)
    assert body["system"] == "Be brief.\n\nUse metric units."
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Weather in Paris and Rome?"}]},
        {
            "role": "assistant",
            "content": [
                thinking,
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather"}
                | {"input": {"location": "Paris"}},
                {"type": "tool_use", "id": "toolu_2", "name": "get_weather"}
                | {"input": {"location": "Rome"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C"},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": "boom"}
                | {"is_error": True},
                {"type": "text", "text": "And Oslo?"},
            ],
        },
    ]


@respx.mock
async def test_attachments_become_image_and_document_blocks(tmp_path) -> None:
    route = respx.post(URL).mock(return_value=httpx.Response(200, json=message([])))
    (tmp_path / "notes.txt").write_text("hello")
    policy = AttachmentPolicy(local_roots=[tmp_path])
    attachments = (
        Attachment(data=b"\x89PNG", mime_type="image/png"),
        Attachment(data=b"%PDF-1.7", mime_type="application/pdf"),
        Attachment.from_url("https://example.com/cat.jpg"),
        Attachment.from_url("https://example.com/paper.pdf"),
        Attachment.from_path(tmp_path / "notes.txt"),
    )
    async with AnthropicClient("c", api_key=KEY, attachment_policy=policy) as client:
        await client.chat([Message(role="user", content="Look", attachments=attachments)])
    blocks = body_of(route)["messages"][0]["content"]
    assert blocks == [
        {"type": "text", "text": "Look"},
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png"} | {"data": "iVBORw=="},
        },
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf"}
            | {"data": "JVBERi0xLjc="},
        },
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
        {"type": "document", "source": {"type": "url", "url": "https://example.com/paper.pdf"}},
        {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": "hello"},
            "title": "notes.txt",
        },
    ]


async def test_an_attachment_anthropic_cannot_take_is_an_attachment_error(client) -> None:
    zipped = Attachment(data=b"PK", mime_type="application/zip", name="a.zip")
    with pytest.raises(AttachmentError, match="images, PDFs and text"):
        await client.chat([Message(role="user", content="x", attachments=(zipped,))])


# ---- stream ----------------------------------------------------------------------------


@respx.mock
async def test_stream_yields_text_deltas_then_the_response(client) -> None:
    route = respx.post(URL).mock(return_value=sse(*text_stream("Hello", "!")))
    parts = await collect(client, HI)
    assert parts[:2] == [TextDelta("Hello"), TextDelta("!")]
    final = parts[-1]
    assert isinstance(final, LLMResponse)
    assert final.text == "Hello!"
    assert final.usage == Usage(25, 15)
    assert final.stop_reason == "end_turn"
    assert body_of(route)["stream"] is True
    assert len(final.raw_response) == 8  # every event, the ping too


@respx.mock
async def test_stream_thinking_signature_and_input_json_delta(client) -> None:
    respx.post(URL).mock(return_value=sse(*thinking_then_tool_stream()))
    parts = await collect(client, HI, [WEATHER], settings=ModelSettings(thinking_budget=1024))
    assert parts[:2] == [ThinkingDelta("I need the weather "), ThinkingDelta("in Paris.")]
    final = parts[-1]
    assert final.thinking == "I need the weather in Paris."
    assert final.tool_calls == (
        ToolCall("toolu_01T1x1fJ34qAmk2tNTrN7Up6", "get_weather", {"location": "Paris"}),
    )
    assert final.stop_reason == "tool_use"
    assert final.usage == Usage(25, 89)
    assert final.provider_metadata["anthropic_thinking"] == [
        {"type": "thinking", "thinking": "I need the weather in Paris.", "signature": SIGNATURE}
    ]


@respx.mock
async def test_stream_two_parallel_tool_calls_after_text(client) -> None:
    events = [
        message_start(),
        block_start(0, {"type": "text", "text": ""}),
        delta(0, type="text_delta", text="Checking both."),
        block_stop(0),
        block_start(1, {"type": "tool_use", "id": "toolu_A", "name": "get_weather", "input": {}}),
        delta(1, type="input_json_delta", partial_json='{"location": "Pa'),
        block_start(2, {"type": "tool_use", "id": "toolu_B", "name": "get_weather", "input": {}}),
        delta(2, type="input_json_delta", partial_json='{"location": "Ro'),
        delta(1, type="input_json_delta", partial_json='ris"}'),
        delta(2, type="input_json_delta", partial_json='me"}'),
        block_stop(1),
        block_stop(2),
        message_delta("tool_use", 120),
        STOP,
    ]
    respx.post(URL).mock(return_value=sse(*events))
    final = (await collect(client, HI, [WEATHER]))[-1]
    assert final.text == "Checking both."
    assert [(c.id, c.input) for c in final.tool_calls] == [
        ("toolu_A", {"location": "Paris"}),
        ("toolu_B", {"location": "Rome"}),
    ]


@respx.mock
async def test_stream_cache_usage_from_message_start(client) -> None:
    events = text_stream("ok")
    events[0] = message_start(3, cache_read_input_tokens=500)
    respx.post(URL).mock(return_value=sse(*events))
    final = (await collect(client, HI))[-1]
    assert final.usage == Usage(503, 15, cache_read_tokens=500)


@respx.mock
async def test_a_delta_for_a_block_that_never_started_is_a_parse_error(client) -> None:
    respx.post(URL).mock(return_value=sse(message_start(), delta(3, type="text_delta", text="x")))
    with pytest.raises(ResponseParseError, match="never started"):
        await collect(client, HI)


# ---- errors ----------------------------------------------------------------------------


def error_body(kind: str, text: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": text}, "request_id": "req_011"}


@pytest.mark.parametrize(
    ("status", "kind", "error"),
    [
        (403, "permission_error", AuthenticationError),
        (429, "rate_limit_error", RateLimitError),
        (529, "overloaded_error", ProviderUnavailableError),
        (500, "api_error", ProviderUnavailableError),
        (400, "invalid_request_error", ProviderError),
    ],
)
@respx.mock
async def test_error_statuses_map_to_typed_errors_without_the_key(status, kind, error) -> None:
    respx.post(URL).mock(
        return_value=httpx.Response(
            status,
            json=error_body(kind, f"invalid x-api-key {KEY}"),
            headers={"retry-after": "7"},
        )
    )
    client = AnthropicClient("c", api_key=KEY, retry=NO_RETRY)
    for call in (client.chat(HI), collect(client, HI)):
        with pytest.raises(error) as info:
            await call
        assert type(info.value) is error
        assert info.value.status == status
        assert "invalid x-api-key" in str(info.value)
        assert KEY not in str(info.value)
        assert KEY not in (info.value.body or "")
        if status in (429, 529):
            assert info.value.retry_after == 7.0
    await client.aclose()


@respx.mock
async def test_a_529_is_retried_then_succeeds() -> None:
    route = respx.post(URL).mock(
        side_effect=[
            httpx.Response(529, json=error_body("overloaded_error", "Overloaded")),
            httpx.Response(200, json=message([{"type": "text", "text": "ok"}])),
        ]
    )
    retry = RetryPolicy(max_retries=1, initial_delay=0.001, max_delay=0.001)
    async with AnthropicClient("c", api_key=KEY, retry=retry) as client:
        assert (await client.chat(HI)).text == "ok"
    assert route.call_count == 2


@respx.mock
async def test_a_mid_stream_error_event_is_a_typed_error(client) -> None:
    events = [*text_stream("Hel")[:4], error_body("overloaded_error", "Overloaded")]
    respx.post(URL).mock(return_value=sse(*events))
    parts: list[Any] = []

    async def read() -> None:
        async for part in client.stream(HI):
            parts.append(part)

    with pytest.raises(ProviderUnavailableError, match="overloaded_error mid-stream: Overloaded"):
        await read()
    assert parts == [TextDelta("Hel")]  # passed on already: not retried


@respx.mock
async def test_a_mid_stream_error_of_another_type_is_a_provider_error(client) -> None:
    respx.post(URL).mock(return_value=sse(message_start(), error_body("api_error", "oops")))
    with pytest.raises(ProviderError, match="api_error") as info:
        await collect(client, HI)
    assert type(info.value) is ProviderError


# ---- configuration ---------------------------------------------------------------------


def test_anthropic_itself_needs_a_key() -> None:
    with pytest.raises(ConfigurationError, match="ANTHROPIC_API_KEY"):
        AnthropicClient("c")


def test_the_key_stays_out_of_reprs() -> None:
    client = AnthropicClient("c", api_key=KEY)
    assert KEY not in repr(client)
    assert client.get_masked_api_key() == "sk-a...fXYZ"


@respx.mock
async def test_create_llm_client_reads_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_API_BASE", "https://gateway.example.com/anthropic/")
    route = respx.post("https://gateway.example.com/anthropic/v1/messages").mock(
        return_value=httpx.Response(200, json=message([{"type": "text", "text": "ok"}]))
    )
    client = create_llm_client("Anthropic")
    assert isinstance(client, AnthropicClient)
    assert client.model == "claude-sonnet-4-5"
    async with client:
        assert (await client.chat(HI)).text == "ok"
    assert route.calls[0].request.headers["x-api-key"] == KEY


def test_an_environment_key_never_goes_to_an_address_passed_in_code(monkeypatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    client = AnthropicClient("c", base_url="http://127.0.0.1:9/")
    assert client.get_masked_api_key() == "<none>"


# ---- an agent run ----------------------------------------------------------------------


@tool
def get_weather(location: str) -> str:
    """Get the current weather in a given location.

    Args:
        location: The city.
    """
    return f"18C in {location}"


@respx.mock
async def test_agent_round_trip_sends_the_signed_thinking_and_the_tool_result_back() -> None:
    route = respx.post(URL).mock(
        side_effect=[sse(*thinking_then_tool_stream()), sse(*text_stream("It is 18C."))]
    )
    settings = ModelSettings(thinking_budget=1024)
    async with AnthropicClient("claude-sonnet-4-5", api_key=KEY) as client:
        agent = Agent(client, [get_weather], system="Be brief.", settings=settings)
        result = await agent.run("Weather in Paris?")
    assert result.text == "It is 18C."
    second = body_of(route, 1)
    assert second["system"] == "Be brief."
    assert second["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert second["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "thinking",
                    "thinking": "I need the weather in Paris.",
                    "signature": SIGNATURE,
                },
                {
                    "type": "tool_use",
                    "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
                    "name": "get_weather",
                    "input": {"location": "Paris"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
                    "content": "18C in Paris",
                }
            ],
        },
    ]


# ---- keys echoed by a real server ------------------------------------------------------


def echoing_server(request: Request) -> Reply:
    """An Anthropic-like server that echoes the key: mid-stream, or in a broken body."""
    if request.json().get("stream"):
        error = error_body("authentication_error", f"bad key {KEY}")
        events = f"event: error\ndata: {json.dumps(error)}\n\n"
        events += f"event: message_start\ndata: {{broken {KEY}\n\n"
        return Reply.body(events.encode(), Content_Type="text/event-stream")
    return Reply.body(f"<html>bad key {KEY}</html>".encode(), Content_Type="text/html")


@pytest.mark.parametrize("streamed", [True, False])
async def test_a_key_a_server_echoes_is_masked_everywhere(streamed: bool) -> None:
    with LoopbackServer(echoing_server) as server:
        async with AnthropicClient("c", api_key=KEY, base_url=server.url, retry=NO_RETRY) as c:
            with pytest.raises(GlassAgentError) as direct:
                await (collect(c, HI) if streamed else c.chat(HI))
            with pytest.raises(GlassAgentError) as via_agent:
                await Agent(c, settings=ModelSettings()).run("hi")
    for error in (direct.value, via_agent.value):
        assert "bad key" in str(error)
        assert KEY not in everything_about(error)
        assert KEY not in (getattr(error, "body", None) or "")
    assert via_agent.value.result is not None
    assert KEY not in json.dumps([e.to_dict() for e in via_agent.value.result.events])


@respx.mock
async def test_signed_thinking_survives_a_history_saved_as_json(client) -> None:
    from glassagent.history import History

    thinking = {"type": "thinking", "thinking": "Hmm.", "signature": SIGNATURE}
    redacted = {"type": "redacted_thinking", "data": REDACTED}
    use = {"type": "tool_use", "id": "toolu_9", "name": "get_weather", "input": {"location": "X"}}
    respx.post(URL).mock(
        return_value=httpx.Response(200, json=message([thinking, redacted, use], "tool_use"))
    )
    response = await client.chat(HI, [WEATHER])
    history = History()
    for m in [*HI, client.format_assistant_message(response)]:
        history.append(m)
    loaded = History.from_json(history.to_json())
    route = respx.post(URL).mock(return_value=httpx.Response(200, json=message([])))
    await client.chat(loaded.to_messages(), [WEATHER])
    assert body_of(route, -1)["messages"][1]["content"] == [thinking, redacted, use]


@pytest.mark.parametrize(
    "settings",
    [
        ModelSettings(provider_options=OpenAIOptions(seed=1)),
        ModelSettings(thinking_budget=-1),
    ],
    ids=["provider-options", "automatic-thinking"],
)
async def test_settings_anthropic_cannot_honour_are_refused(client, settings) -> None:
    with pytest.raises(ConfigurationError, match="anthropic cannot honour"):
        await client.chat([Message(role="user", content="hi")], settings=settings)
