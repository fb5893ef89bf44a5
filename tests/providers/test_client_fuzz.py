"""Fuzzing the clients at the network edge: malformed bodies give typed errors, never crashes.

Each test starts from a valid body (or stream) of one wire, changes one to three positions in
it to arbitrary JSON values (or deletes them), may corrupt the bytes on top (truncation,
invalid UTF-8, absurd nesting), and serves it through ``httpx.MockTransport`` to the client's
own ``chat()`` or ``stream()``. Either the client returns a well-formed answer, or it raises
a `GlassAgentError`; anything else is a bug.
"""

import copy
import functools
import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from glassagent.errors import GlassAgentError, ProviderError, ResponseParseError
from glassagent.llm import (
    GeminiClient,
    LLMResponse,
    Message,
    OllamaClient,
    OpenAICompatibleClient,
    RetryPolicy,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    ToolDefinition,
)

# how many examples: the hypothesis profile (tests/conftest.py), 500 in CI's deep run
FUZZ = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
KEY = "sk-fuzz-0123456789abcdefXYZ"
GEMINI_KEY = "AIzaSyFuzzKey000000000000000000x9Qk"
HI = [Message(role="user", content="What is 2 + 3?")]
ADD = ToolDefinition(
    "add",
    "Add two integers.",
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
)
EMBED = "@@json"
"""A dict ``{EMBED: value}`` is sent as the string ``json.dumps(value)`` (mutations reach in)."""
RAW = "@@raw:"
"""A string ``RAW + token`` is sent as the bare token, e.g. ``1e400`` (not valid JSON)."""
DEEP = "[" * 100_000 + "]" * 100_000

# ---- values ----------------------------------------------------------------------------

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.sampled_from([0, -1, 1, 2**31, 2**63, 10**30, -(10**30)]),
    st.floats(),
    st.text(max_size=8),
    st.sampled_from(
        [
            "",
            "add",
            "stop",
            "tool_calls",
            "length",
            "STOP",
            "MAX_TOKENS",
            "SAFETY",
            "MALFORMED_FUNCTION_CALL",
            "[DONE]",
            "{}",
            '{"a": 2, "b": 3}',
            "[1, 2]",
            "{",
            "\ud800",
            RAW + "1e400",
            RAW + "-1e400",
            RAW + "NaN",
            RAW + "Infinity",
            RAW + "1" + "0" * 5000,
            RAW + DEEP,
        ]
    ),
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)
"""Any JSON value, plus a few tokens that are not quite JSON."""

Path = tuple[str | int, ...]


def _paths(value: Any, prefix: Path = ()) -> Iterator[Path]:
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*prefix, index))


def _mutate(doc: Any, path: Path, how: str, value: Any, key: str) -> Any:
    """`doc` with the value at `path` replaced, deleted, wrapped in a list or given `key`."""
    if not path:
        return value if how == "replace" else [doc] if how == "wrap" else doc
    parent = doc
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    if how == "replace":
        parent[last] = value
    elif how == "wrap":
        parent[last] = [parent[last]]
    elif how == "delete":
        del parent[last]
    elif isinstance(parent[last], dict):  # "add": a key that was not there
        parent[last][key] = value
    return doc


@st.composite
def mutated(draw: st.DrawFn, template: Any) -> Any:
    """`template` with one to three positions changed to arbitrary values."""
    doc = copy.deepcopy(template)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(list(_paths(doc))))
        how = draw(st.sampled_from(["replace", "replace", "replace", "wrap", "delete", "add"]))
        key = draw(st.sampled_from(["error", "message", "usage", "index", "x"]))
        doc = _mutate(doc, path, how, draw(values), key)
    return doc


def _materialize(value: Any) -> Any:
    if isinstance(value, dict):
        if list(value) == [EMBED]:
            return json.dumps(_materialize(value[EMBED]))
        return {key: _materialize(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_materialize(item) for item in value]
    return value


def encode(value: Any) -> bytes:
    """`value` as JSON text, with embedded documents as strings and raw tokens unquoted."""
    text = json.dumps(_materialize(value))
    while (start := text.find('"' + RAW)) != -1:
        end = text.index('"', start + 1)
        text = text[:start] + text[start + 1 + len(RAW) : end] + text[end + 1 :]
    return text.encode("utf-8", "surrogatepass")


@st.composite
def corrupted(draw: st.DrawFn, payload: bytes) -> bytes:
    """`payload`, mostly intact; else truncated, with invalid UTF-8, or replaced."""
    how = draw(st.sampled_from(["keep"] * 6 + ["truncate", "bad utf-8", "replace"]))
    if how == "keep" or not payload:
        return payload
    at = draw(st.integers(0, len(payload) - 1))
    if how == "truncate":
        return payload[:at]
    if how == "bad utf-8":
        return (
            payload[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80"])) + payload[at:]
        )
    return draw(st.sampled_from([b"", b"null", b"[]", b"<html>", DEEP.encode(), b"\xff\xfe"]))


statuses = st.sampled_from([200] * 12 + [400, 404, 429, 500])


# ---- checks ----------------------------------------------------------------------------


def check_response(response: Any) -> None:
    """A well-formed answer: every field has the type the contract promises."""
    assert isinstance(response, LLMResponse)
    assert isinstance(response.text, str)
    assert response.thinking is None or isinstance(response.thinking, str)
    # An unknown finish reason (any text a fuzzed body carries) reads "other".
    assert response.stop_reason in ("end_turn", "tool_use", "max_tokens", "other")
    assert response.model is None or isinstance(response.model, str)
    for call in response.tool_calls:
        assert isinstance(call, ToolCall)
        assert isinstance(call.id, str)
        assert isinstance(call.name, str)
        assert isinstance(call.input, dict)
    usage = response.usage
    for count in (usage.input_tokens, usage.output_tokens, usage.thinking_tokens):
        assert type(count) is int
        assert count >= 0
    for duration in response.timings.values():
        assert type(duration) is float
        assert math.isfinite(duration)


def check_error(exc: GlassAgentError, status: int) -> None:
    """A typed error with a message, its provider named, a short body and no key in it.

    An error status stays a status error, whatever the body; a successful one that cannot be
    read is a parse error, not a failure of the client itself.
    """
    message = str(exc)
    assert message
    assert KEY not in message
    assert GEMINI_KEY not in message
    assert "google-genai raised" not in message
    if isinstance(exc, ProviderError):
        assert isinstance(exc.provider, str)
        assert exc.body is None or len(exc.body) <= 2000
        assert KEY not in (exc.body or "")
    if status >= 400:
        assert isinstance(exc, ProviderError)
        assert not isinstance(exc, ResponseParseError)
        assert exc.status == status


def check_parts(parts: list[Any]) -> None:
    """Deltas with text, then exactly one answer, last."""
    assert parts
    *deltas, final = parts
    for delta in deltas:
        assert isinstance(delta, TextDelta | ThinkingDelta)
        assert isinstance(delta.text, str)
        assert delta.text
    check_response(final)


def http(status: int, payload: bytes, content_type: str) -> httpx.AsyncClient:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, content=payload, headers={"content-type": content_type})

    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


async def outcome(call: Callable[[], Any], streamed: bool, status: int) -> None:
    """Run one client call and check what came back (or what was raised)."""
    try:
        if streamed:
            check_parts([part async for part in call()])
        else:
            check_response(await call())
    except GlassAgentError as exc:
        check_error(exc, status)


def sse(chunks: Any, lines: list[str], done: bool, newline: str = "\n") -> bytes:
    """An SSE body: one ``data:`` event per chunk, extra raw lines, maybe ``[DONE]``."""
    events = [b"data: " + encode(chunk) for chunk in (chunks if isinstance(chunks, list) else [])]
    events += [line.encode("utf-8", "surrogatepass") for line in lines]
    if done:
        events.append(b"data: [DONE]")
    sep = (newline * 2).encode()
    return sep.join(events) + sep


odd_lines = st.lists(
    st.sampled_from(
        [
            "data: {",
            "data: 42",
            "data: " + DEEP,
            'data: {"error": {"message": "boom"}}',
            'error: {"message": "boom"}',
            "event: error",
            ": keep-alive",
            "data: [DONE]",
            "retry: 10",
            "data: \ud800",
        ]
    ),
    max_size=2,
)


# ---- OpenAI-compatible -----------------------------------------------------------------

PROTOCOL_REPLY = {EMBED: {"thought": "Adding.", "tool_call": {"name": "add", "input": {"a": 2}}}}
ARGUMENTS = {EMBED: {"a": 2, "b": 3}}


def openai_body(json_mode: bool) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": PROTOCOL_REPLY if json_mode else "Let me add.",
        "reasoning_content": "2 + 3.",
        "refusal": None,
    }
    if not json_mode:
        message["tool_calls"] = [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "add", "arguments": ARGUMENTS},
            }
        ]
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
        "usage": {
            "prompt_tokens": 12,
            "completion_tokens": 7,
            "completion_tokens_details": {"reasoning_tokens": 2},
        },
        "timings": {"prompt_ms": 1.5, "predicted_ms": 20},
    }


def openai_chunks(json_mode: bool) -> list[dict[str, Any]]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return {"id": "chatcmpl-1", "model": "gpt-4o-mini", "choices": [choice]}

    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "add"}}
    chunks = [
        chunk({"role": "assistant", "reasoning_content": "2 + 3."}),
        chunk({"content": PROTOCOL_REPLY if json_mode else "Let me add."}),
        chunk({"tool_calls": [{**call, "function": {"name": "add", "arguments": '{"a": 2, '}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"b": 3}'}}]}),
        chunk({}, "tool_calls"),
        {
            "choices": [],
            "usage": {"prompt_tokens": 12, "completion_tokens": 7},
            "timings": {"prompt_ms": 1.5, "predicted_ms": 20.25},
        },
    ]
    return chunks


NO_RETRY = RetryPolicy(max_retries=0)  # a retried fuzz case would only wait


def openai_client(payload: bytes, status: int, json_mode: bool, stream: bool):
    content_type = "text/event-stream" if stream else "application/json"
    return OpenAICompatibleClient(
        "gpt-4o-mini",
        base_url="http://127.0.0.1:8080/v1",
        api_key=KEY,
        http_client=http(status, payload, content_type),
        tool_protocol="json" if json_mode else "native",
        retry=NO_RETRY,
    )


@FUZZ
@given(st.booleans(), statuses, st.data())
async def test_openai_chat_never_raises_untyped(json_mode: bool, status: int, data) -> None:
    body = data.draw(mutated(openai_body(json_mode)))
    payload = data.draw(corrupted(encode(body)))
    client = openai_client(payload, status, json_mode, stream=False)
    await outcome(lambda: client.chat(HI, [ADD]), streamed=False, status=status)


@FUZZ
@given(st.booleans(), statuses, st.data())
async def test_openai_stream_never_raises_untyped(json_mode: bool, status: int, data) -> None:
    chunks = data.draw(mutated(openai_chunks(json_mode)))
    lines, done = data.draw(odd_lines), data.draw(st.booleans())
    payload = data.draw(corrupted(sse(chunks, lines, done)))
    client = openai_client(payload, status, json_mode, stream=True)
    await outcome(lambda: client.stream(HI, [ADD]), streamed=True, status=status)


# ---- Ollama ----------------------------------------------------------------------------


def ollama_message(json_mode: bool) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": PROTOCOL_REPLY if json_mode else "Let me add.",
        "thinking": "2 + 3.",
    }
    if not json_mode:
        message["tool_calls"] = [{"function": {"name": "add", "arguments": {"a": 2, "b": 3}}}]
    return message


def ollama_done(**extra: Any) -> dict[str, Any]:
    return {
        "model": "qwen2.5:7b",
        "created_at": "2026-01-01T00:00:00Z",
        "done": True,
        "done_reason": "stop",
        "total_duration": 5_000_000,
        "load_duration": 1_000,
        "prompt_eval_count": 12,
        "prompt_eval_duration": 2_000_000,
        "eval_count": 7,
        "eval_duration": 3_000_000,
        **extra,
    }


def ollama_lines(json_mode: bool) -> list[dict[str, Any]]:
    first = {"model": "qwen2.5:7b", "message": {"role": "assistant", "thinking": "2 + 3."}}
    first["done"] = False
    message = ollama_message(json_mode)
    del message["thinking"]
    second = {"model": "qwen2.5:7b", "message": message, "done": False}
    last = ollama_done(message={"role": "assistant", "content": ""})
    return [first, second, last]


def ollama_client(payload: bytes, status: int, json_mode: bool) -> OllamaClient:
    return OllamaClient(
        "qwen2.5:7b",
        base_url="http://127.0.0.1:11434",
        http_client=http(status, payload, "application/json"),
        tool_protocol="json" if json_mode else "native",
        retry=NO_RETRY,
    )


@FUZZ
@given(st.booleans(), statuses, st.data())
async def test_ollama_chat_never_raises_untyped(json_mode: bool, status: int, data) -> None:
    body = data.draw(mutated(ollama_done(message=ollama_message(json_mode))))
    payload = data.draw(corrupted(encode(body)))
    client = ollama_client(payload, status, json_mode)
    await outcome(lambda: client.chat(HI, [ADD]), streamed=False, status=status)


@FUZZ
@given(st.booleans(), statuses, st.data())
async def test_ollama_stream_never_raises_untyped(json_mode: bool, status: int, data) -> None:
    lines = data.draw(mutated(ollama_lines(json_mode)))
    raw = [encode(line) for line in (lines if isinstance(lines, list) else [lines])]
    raw += [extra.encode() for extra in data.draw(st.lists(st.sampled_from(["{", "42", DEEP])))]
    payload = data.draw(corrupted(b"\n".join(raw) + b"\n"))
    client = ollama_client(payload, status, json_mode)
    await outcome(lambda: client.stream(HI, [ADD]), streamed=True, status=status)


# ---- Gemini ----------------------------------------------------------------------------


def gemini_body(finish: str | None = "STOP") -> dict[str, Any]:
    parts = [
        {"text": "2 + 3.", "thought": True},
        {"text": "Let me add.", "thoughtSignature": "c2lnbmF0dXJl"},
        {"functionCall": {"id": "call_1", "name": "add", "args": {"a": 2, "b": 3}}},
    ]
    candidate = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return {
        "candidates": [candidate],
        "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 7},
        "modelVersion": "gemini-2.5-flash",
    }


UNKNOWN_ENUMS = pytest.mark.filterwarnings("ignore:.*is not a valid:UserWarning")
"""google-genai warns about values it does not know (e.g. a new finish reason) and goes on."""


@dataclass
class Served:
    """What the mock Gemini server answers next (one client serves every example)."""

    status: int = 200
    payload: bytes = b""
    content_type: str = "application/json"


SERVED = Served()


@functools.cache
def gemini() -> GeminiClient:
    """One client for all examples: creating a google-genai client takes a tenth of a second."""

    def handler(request: httpx.Request) -> httpx.Response:
        headers = {"content-type": SERVED.content_type}
        return httpx.Response(SERVED.status, content=SERVED.payload, headers=headers)

    transport = httpx.MockTransport(handler)
    http_client = httpx.AsyncClient(transport=transport)
    return GeminiClient(api_key=GEMINI_KEY, http_client=http_client, retry=NO_RETRY)


def gemini_client(payload: bytes, status: int, content_type: str) -> GeminiClient:
    SERVED.status, SERVED.payload, SERVED.content_type = status, payload, content_type
    return gemini()


@UNKNOWN_ENUMS
@FUZZ
@given(statuses, st.data())
async def test_gemini_chat_never_raises_untyped(status: int, data) -> None:
    payload = data.draw(corrupted(encode(data.draw(mutated(gemini_body())))))
    client = gemini_client(payload, status, "application/json")
    await outcome(lambda: client.chat(HI, [ADD]), streamed=False, status=status)


@UNKNOWN_ENUMS
@FUZZ
@given(statuses, st.data())
async def test_gemini_stream_never_raises_untyped(status: int, data) -> None:
    chunks = data.draw(mutated([gemini_body(None), gemini_body("STOP")]))
    lines = data.draw(odd_lines)
    payload = data.draw(corrupted(sse(chunks, lines, done=False, newline="\r\n")))
    client = gemini_client(payload, status, "text/event-stream")
    await outcome(lambda: client.stream(HI, [ADD]), streamed=True, status=status)
