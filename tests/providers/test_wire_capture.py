"""``record_wire=True``: every built-in client's wire bodies in ``llm_response`` events (respx)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

from glassagent import Agent
from glassagent.events import LLMResponseEvent, Redactor, load_events, parse_event
from glassagent.llm import (
    AnthropicClient,
    BaseLLMClient,
    GeminiClient,
    GeminiOptions,
    LlamaClient,
    LLMResponse,
    Message,
    ModelSettings,
    OllamaClient,
    OpenAICompatibleClient,
    RetryPolicy,
    WireRecord,
    create_llm_client,
)
from glassagent.testing import ReplayClient

HI = [Message(role="user", content="hi")]
NO_RETRY = RetryPolicy(max_retries=0)
OPENAI_KEY = "sk-proj-wire0123456789abcdefghijklmnopq"
ANTHROPIC_KEY = "sk-ant-wire0123456789abcdefghijklmnopq"
OLLAMA_KEY = "ollama-wire0123456789abcdefghijklmnopq"
GEMINI_KEY = "AIzaSyD-wire0123456789abcdefghijklmnop"


@dataclass(frozen=True)
class Wire:
    """One provider's fake server: how to make its client and what it answers."""

    name: str
    key: str
    url: str
    make: Callable[..., BaseLLMClient]
    body: Callable[[str], dict[str, Any]]
    """The complete body answering with a text (and the key echoed in it)."""
    chunks: Callable[[str], list[dict[str, Any]]]
    """The streamed payloads answering with a text."""
    encode: Callable[[list[dict[str, Any]]], bytes]
    stream_url: str | None = None


def sse(chunks: list[dict[str, Any]], done: bool = False) -> bytes:
    text = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks)
    return (text + ("data: [DONE]\n\n" if done else "")).encode()


def anthropic_sse(chunks: list[dict[str, Any]]) -> bytes:
    return "".join(f"event: {c['type']}\ndata: {json.dumps(c)}\n\n" for c in chunks).encode()


def ndjson(chunks: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(c) + "\n" for c in chunks).encode()


def openai_body(text: str) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{OPENAI_KEY}",  # a server echoing the key
        "object": "chat.completion",
        "model": "gpt-4o-mini",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }


def openai_chunks(text: str) -> list[dict[str, Any]]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return {"id": f"chatcmpl-{OPENAI_KEY}", "object": "chat.completion.chunk",
                "model": "gpt-4o-mini", "choices": [choice]}  # fmt: skip

    return [chunk({"role": "assistant", "content": text[:2]}), chunk({"content": text[2:]}),
            chunk({}, "stop")]  # fmt: skip


def anthropic_body(text: str) -> dict[str, Any]:
    return {
        "id": f"msg_{ANTHROPIC_KEY}",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 3, "output_tokens": 2},
    }


def anthropic_chunks(text: str) -> list[dict[str, Any]]:
    start = anthropic_body("")
    start["content"], start["stop_reason"] = [], None
    return [
        {"type": "message_start", "message": start},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "ping"},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
         "usage": {"output_tokens": 2}},
        {"type": "message_stop"},
    ]  # fmt: skip


def ollama_body(text: str) -> dict[str, Any]:
    return {
        "model": "qwen2.5:7b",
        "message": {"role": "assistant", "content": text},
        "done": True,
        "done_reason": "stop",
        "echo": OLLAMA_KEY,
        "prompt_eval_count": 3,
        "eval_count": 2,
    }


def ollama_chunks(text: str) -> list[dict[str, Any]]:
    first = {"model": "qwen2.5:7b", "message": {"role": "assistant", "content": text},
             "done": False, "echo": OLLAMA_KEY}  # fmt: skip
    return [first, ollama_body("")]


def gemini_body(text: str) -> dict[str, Any]:
    return {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}
        ],
        "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 2},
        "modelVersion": "gemini-2.5-flash",
        "responseId": f"resp-{GEMINI_KEY}",
    }


def gemini_chunks(text: str) -> list[dict[str, Any]]:
    first = gemini_body(text[:2])
    del first["candidates"][0]["finishReason"]
    return [first, gemini_body(text[2:])]


GEMINI_BASE = "https://generativelanguage.googleapis.com/v1/models/gemini-2.5-flash"
WIRES = [
    Wire(
        "openai", OPENAI_KEY, "https://api.openai.com/v1/chat/completions",
        lambda **o: OpenAICompatibleClient("gpt-4o-mini", api_key=OPENAI_KEY, **o),
        openai_body, openai_chunks, lambda c: sse(c, done=True),
    ),
    Wire(
        "anthropic", ANTHROPIC_KEY, "https://api.anthropic.com/v1/messages",
        lambda **o: AnthropicClient("claude-sonnet-4-5", api_key=ANTHROPIC_KEY, **o),
        anthropic_body, anthropic_chunks, anthropic_sse,
    ),
    Wire(
        "ollama", OLLAMA_KEY, "http://ollama.test:11434/api/chat",
        lambda **o: OllamaClient("qwen2.5:7b", base_url="http://ollama.test:11434",
                                 api_key=OLLAMA_KEY, tool_protocol="native", **o),
        ollama_body, ollama_chunks, ndjson,
    ),
    Wire(
        "gemini", GEMINI_KEY, GEMINI_BASE + ":generateContent",
        lambda **o: GeminiClient(api_key=GEMINI_KEY, **o),
        gemini_body, gemini_chunks, lambda c: sse(c),
        stream_url=GEMINI_BASE + ":streamGenerateContent?alt=sse",
    ),
]  # fmt: skip
IDS = [w.name for w in WIRES]


def masked(key: str) -> str:
    return f"{key[:4]}...{key[-4:]}"


def mock(wire: Wire, streamed: bool, text: str = "Hello!") -> tuple[respx.Route, Any]:
    """Route the provider's endpoint; return the route and the response body as JSON."""
    headers = {"x-echo": wire.key}
    if not streamed:
        body = wire.body(text)
        response = httpx.Response(200, json=body, headers=headers)
        return respx.post(wire.url).mock(return_value=response), body
    chunks = wire.chunks(text)
    url = wire.stream_url or wire.url
    response = httpx.Response(200, content=wire.encode(chunks), headers=headers)
    return respx.post(url).mock(return_value=response), chunks


def expected(value: Any, key: str) -> Any:
    """`value` as recorded: the key masked."""
    return json.loads(json.dumps(value).replace(key, masked(key)))


def sent(route: respx.Route, index: int = -1) -> Any:
    return json.loads(route.calls[index].request.content)


@pytest.mark.parametrize("wire", WIRES, ids=IDS)
@respx.mock
async def test_a_streamed_run_records_the_exact_bodies(wire: Wire, tmp_path: Path) -> None:
    route, chunks = mock(wire, streamed=True)
    client = wire.make(record_wire=True, retry=NO_RETRY)
    async with client:
        run = Agent(client).run("hi").save_events(tmp_path / "run.jsonl")
        result = await run
    assert result.text == "Hello!"
    event = next(e for e in result.events if isinstance(e, LLMResponseEvent))
    assert event.wire == WireRecord(
        request=sent(route), response=expected(chunks, wire.key), streamed=True
    )
    data = event.to_dict()
    assert data["wire"]["response"] == expected(chunks, wire.key)
    assert parse_event(json.loads(json.dumps(data))) == event
    assert parse_event(json.loads(json.dumps(data))).wire == event.wire
    saved = next(e for e in load_events(tmp_path / "run.jsonl") if e.type == "llm_response")
    assert saved.wire == event.wire  # recordings keep the bodies


@pytest.mark.parametrize("wire", WIRES, ids=IDS)
@respx.mock
async def test_a_complete_answer_carries_its_bodies(wire: Wire) -> None:
    route, body = mock(wire, streamed=False)
    options: dict[str, Any] = {"streaming": False} if wire.name == "gemini" else {}
    async with wire.make(record_wire=True, retry=NO_RETRY, **options) as client:
        answer = await client.chat(HI)
        result = await Agent(client).run("hi") if wire.name == "gemini" else None
    assert answer.wire == WireRecord(request=sent(route, 0), response=expected(body, wire.key))
    assert wire.key not in json.dumps(answer.wire.response)
    if result is not None:  # Gemini's `stream` with streaming=False: one generateContent call
        event = next(e for e in result.events if isinstance(e, LLMResponseEvent))
        assert event.wire is not None
        assert answer.wire is not None
        assert event.wire.response == answer.wire.response
        # the agent's call carries the profile's max_completion_tokens as its default
        assert event.wire.request == {
            **answer.wire.request,
            "generationConfig": {"maxOutputTokens": 65536},
        }


@pytest.mark.parametrize("wire", WIRES, ids=IDS)
@respx.mock
async def test_no_key_or_authorization_is_recorded_even_when_echoed(
    wire: Wire, tmp_path: Path
) -> None:
    mock(wire, streamed=True)
    async with wire.make(record_wire=True, retry=NO_RETRY) as client:
        result = await Agent(client).run("hi").save_events(tmp_path / "run.jsonl")
    recorded = (tmp_path / "run.jsonl").read_text() + json.dumps(
        [e.to_dict() for e in result.events]
    )
    assert masked(wire.key) in recorded  # the echo is there, masked
    for secret in (wire.key, "Authorization", "authorization", "Bearer", "x-api-key",
                   "x-goog-api-key", "x-echo"):  # fmt: skip
        assert secret not in recorded


@pytest.mark.parametrize("wire", WIRES, ids=IDS)
@respx.mock
async def test_nothing_is_recorded_by_default(wire: Wire) -> None:
    mock(wire, streamed=True)
    async with wire.make(retry=NO_RETRY) as client:
        assert client.record_wire is False  # type: ignore[attr-defined]
        result = await Agent(client).run("hi")
    event = next(e for e in result.events if isinstance(e, LLMResponseEvent))
    assert event.wire is None
    assert "wire" not in event.to_dict()
    assert parse_event(event.to_dict()).wire is None


@pytest.mark.parametrize("wire", WIRES, ids=IDS)
@respx.mock
async def test_only_the_attempt_that_answered_is_recorded(wire: Wire) -> None:
    chunks = wire.chunks("Hi there")
    url = wire.stream_url or wire.url
    respx.post(url).mock(
        side_effect=[
            httpx.Response(503, json={"error": {"message": "busy"}}),
            httpx.Response(200, content=wire.encode(chunks)),
        ]
    )
    retry = RetryPolicy(max_retries=1, initial_delay=0.0, jitter=False)
    async with wire.make(record_wire=True, retry=retry) as client:
        result = await Agent(client).run("hi")
    event = next(e for e in result.events if isinstance(e, LLMResponseEvent))
    assert event.wire is not None
    assert event.wire.response == expected(chunks, wire.key)


@pytest.mark.parametrize(
    ("provider", "options"),
    [
        ("openai", {"api_key": OPENAI_KEY}),
        ("openai_compatible", {"base_url": "http://127.0.0.1:9/v1", "model": "m"}),
        ("anthropic", {"api_key": ANTHROPIC_KEY}),
        ("ollama", {}),
        ("llama", {}),
        ("gemini", {"api_key": GEMINI_KEY}),
    ],
)
def test_create_llm_client_passes_record_wire(provider: str, options: dict[str, Any]) -> None:
    client = create_llm_client(provider, record_wire=True, **options)
    assert client.record_wire is True  # type: ignore[attr-defined]
    assert create_llm_client(provider, **options).record_wire is False  # type: ignore[attr-defined]


@respx.mock
async def test_llama_client_records_its_json_protocol_bodies() -> None:
    reply = json.dumps({"thought": "easy", "answer": "Hello!"})
    body = ollama_body(reply)
    route = respx.post("http://ollama.test:11434/api/chat").mock(
        return_value=httpx.Response(200, content=ndjson([body]))
    )
    client = LlamaClient(base_url="http://ollama.test:11434", record_wire=True)
    async with client:
        result = await Agent(client).run("hi")
    event = next(e for e in result.events if isinstance(e, LLMResponseEvent))
    assert event.wire is not None
    assert event.wire.request == sent(route)
    assert event.wire.response == [body]


class _Custom(BaseLLMClient):
    """A custom backend that fills `LLMResponse.wire` itself."""

    async def chat(
        self, messages: Any, tools: Any = (), system: Any = None, *, settings: Any = None
    ) -> LLMResponse:
        wire = WireRecord(request={"q": "hi"}, response={"a": "ok"})
        return LLMResponse("ok", wire=wire)


async def test_a_custom_backend_can_record_its_own_bodies() -> None:
    result = await Agent(_Custom()).run("hi")
    event = next(e for e in result.events if isinstance(e, LLMResponseEvent))
    assert event.to_dict()["wire"] == {
        "request": {"q": "hi"},
        "response": {"a": "ok"},
        "streamed": False,
    }


@respx.mock
async def test_a_recording_with_wire_bodies_replays_to_the_same_events(tmp_path: Path) -> None:
    wire = WIRES[0]
    mock(wire, streamed=True)
    async with wire.make(record_wire=True, retry=NO_RETRY) as client:
        await Agent(client).run("hi").save_events(tmp_path / "run.jsonl")
    replay = ReplayClient.from_events(tmp_path / "run.jsonl")
    result = await Agent(replay).run("hi")
    replay.check(result)
    event = next(e for e in result.events if isinstance(e, LLMResponseEvent))
    assert event.wire is not None


@respx.mock
async def test_redacted_fields_take_the_wire_bodies_with_them(tmp_path: Path) -> None:
    wire = WIRES[0]
    mock(wire, streamed=True)
    async with wire.make(record_wire=True, retry=NO_RETRY) as client:
        by_field = Agent(client, system="Secret rules.", redact=Redactor(fields=["system"]))
        await by_field.run("hi").save_events(tmp_path / "fields.jsonl")
        by_pattern = Agent(client, system="Secret rules.", redact=Redactor([r"Secret"]))
        await by_pattern.run("hi").save_events(tmp_path / "patterns.jsonl")
    fields = (tmp_path / "fields.jsonl").read_text("utf-8")
    assert "Secret" not in fields  # the wire body's system message went with the field
    assert '"wire"' not in fields
    loaded = load_events(tmp_path / "fields.jsonl")  # and the recording still loads
    assert any(isinstance(e, LLMResponseEvent) and e.wire is None for e in loaded)
    patterns = (tmp_path / "patterns.jsonl").read_text("utf-8")
    assert "Secret" not in patterns
    assert '"wire"' in patterns  # patterns reach into the bodies; they stay


@pytest.mark.parametrize("streaming", [True, False])
@respx.mock
async def test_gemini_records_the_bodies_on_google_genais_public_route_too(
    streaming: bool,
) -> None:
    wire = WIRES[-1]
    route, body = mock(wire, streamed=streaming)
    # per-call HTTP options: the call goes through google-genai's public generate_content
    options = GeminiOptions(extra_config={"http_options": {"headers": {"x-glass": "yes"}}})
    client = GeminiClient(api_key=GEMINI_KEY, streaming=streaming, record_wire=True)
    async with client:
        agent = Agent(client, settings=ModelSettings(provider_options=options))
        result = await agent.run("hi")
    assert route.calls[-1].request.headers["x-glass"] == "yes"
    event = next(e for e in result.events if isinstance(e, LLMResponseEvent))
    assert event.wire == WireRecord(
        request=sent(route), response=expected(body, GEMINI_KEY), streamed=streaming
    )
