"""GeminiClient against the documented REST wire (respx; nothing reaches Google)."""

import asyncio
import base64
import json
import subprocess
import sys
from typing import Any

import httpx
import pytest
import respx
from pydantic import TypeAdapter

from glassagent import Agent, LLMResponse, Message, ModelSettings, tool
from glassagent.errors import (
    AuthenticationError,
    ConfigurationError,
    ContentBlockedError,
    ProviderError,
    ProviderUnavailableError,
    RateLimitError,
    ResponseParseError,
)
from glassagent.llm import (
    Attachment,
    GeminiClient,
    RetryPolicy,
    TextDelta,
    ThinkingDelta,
    create_llm_client,
)

KEY = "AIzaSyD3adB33fTestKey0000000000x9Qk"
BASE = "https://generativelanguage.googleapis.com/"
GENERATE = r".*/models/gemini-2\.5-flash:generateContent$"
STREAM = r".*/models/gemini-2\.5-flash:streamGenerateContent\?alt=sse$"
SIG_1 = base64.b64encode(b"\x0a\x24\x01\xfb\xff signature one").decode()
SIG_2 = base64.b64encode(b"\x0a\x24\x02\xfe\xef signature two").decode()
USAGE = {"promptTokenCount": 12, "candidatesTokenCount": 7, "thoughtsTokenCount": 5}


def body(parts: list[dict[str, Any]], finish: str = "STOP", **extra: Any) -> dict[str, Any]:
    return {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": finish, "index": 0}
        ],
        "usageMetadata": {**USAGE, "totalTokenCount": 24},
        "modelVersion": "gemini-2.5-flash",
        "responseId": "resp-1",
        **extra,
    }


def call_part(name: str, args: dict[str, Any], signature: str | None = None) -> dict[str, Any]:
    part: dict[str, Any] = {"functionCall": {"name": name, "args": args}}
    if signature:
        part["thoughtSignature"] = signature
    return part


def sse(*chunks: dict[str, Any]) -> bytes:
    return b"".join(b"data: " + json.dumps(c).encode() + b"\r\n\r\n" for c in chunks)


def sent(route: respx.Route, index: int = -1) -> dict[str, Any]:
    return json.loads(route.calls[index].request.content)


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> GeminiClient:
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    return GeminiClient(retry=RetryPolicy(max_retries=0))  # retries: test_retries.py


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: First addend.
        b: Second addend.
    """
    return a + b


# ---- configuration ---------------------------------------------------------------------


def test_missing_key_names_the_variable() -> None:
    with pytest.raises(ConfigurationError, match="GEMINI_API_KEY") as info:
        GeminiClient()
    assert isinstance(info.value, ValueError)


def test_key_is_only_ever_masked(client: GeminiClient) -> None:
    assert client.get_masked_api_key() == "AIza...x9Qk"
    assert KEY not in repr(client)
    assert repr(client) == "GeminiClient(model='gemini-2.5-flash', api_key='AIza...x9Qk')"
    assert GeminiClient(api_key="AIzaOtherKey00000000abcd").get_masked_api_key() == "AIza...abcd"


def test_missing_extra_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "google.genai", None)
    with pytest.raises(ConfigurationError, match=r'pip install "glassagent\[gemini\]"'):
        GeminiClient(api_key=KEY)


@pytest.mark.slow
def test_import_glassagent_does_not_import_google_genai() -> None:
    code = (
        "import sys, glassagent, glassagent.llm\n"
        "assert 'google.genai' not in sys.modules\n"
        "glassagent.llm.GeminiClient(api_key='k' * 20)\n"
        "assert 'google.genai' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_factory_creates_gemini_clients(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    client = create_llm_client("Gemini", model="gemini-2.5-pro")
    assert isinstance(client, GeminiClient)
    assert client.model == "gemini-2.5-pro"
    with pytest.raises(ConfigurationError, match=r"Known providers: .*gemini"):
        create_llm_client("gpt-banana")


# ---- request and response translation --------------------------------------------------


@respx.mock
async def test_plain_text_request_and_response(client: GeminiClient) -> None:
    route = respx.post(url__regex=GENERATE).respond(json=body([{"text": "Hello there!"}]))
    settings = ModelSettings(temperature=0.3, max_tokens=256, stop_sequences=("END",))
    response = await client.chat(
        [Message(role="user", content="Hi")], system="Be kind.", settings=settings
    )
    assert response.text == "Hello there!"
    assert response.stop_reason == "end_turn"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (12, 7)
    assert response.usage.thinking_tokens == 5
    assert response.model == "gemini-2.5-flash"
    request = route.calls[0].request
    assert request.headers["x-goog-api-key"] == KEY
    assert sent(route) == {
        "contents": [{"role": "user", "parts": [{"text": "Hi"}]}],
        "systemInstruction": {"role": "user", "parts": [{"text": "Be kind."}]},
        "generationConfig": {"temperature": 0.3, "maxOutputTokens": 256, "stopSequences": ["END"]},
    }
    assert response.raw_request == sent(route)
    assert KEY not in json.dumps(response.raw_request)


@respx.mock
async def test_function_calls_with_signatures_and_thinking(client: GeminiClient) -> None:
    parts = [
        {"text": "The user wants two sums.", "thought": True},
        call_part("add", {"a": 1, "b": 2}, SIG_1),
        call_part("add", {"a": 3, "b": 4}, SIG_2),
    ]
    route = respx.post(url__regex=GENERATE).respond(json=body(parts))
    response = await client.chat(
        [Message(role="user", content="1+2 and 3+4?")],
        [add.definition],
        settings=ModelSettings(thinking_budget=1024),
    )
    assert response.stop_reason == "tool_use"
    assert response.thinking == "The user wants two sums."
    first, second = response.tool_calls
    assert (first.name, first.input, second.input) == ("add", {"a": 1, "b": 2}, {"a": 3, "b": 4})
    assert first.id != second.id
    assert first.provider_metadata["thought_signature"] == SIG_1
    assert second.provider_metadata["thought_signature"] == SIG_2
    request = sent(route)
    # google-genai passes declarations through with their proto field names (the API accepts
    # both spellings), so this is exactly what goes over the wire.
    assert request["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "add",
                    "description": "Add two integers.",
                    "parameters_json_schema": add.parameters,
                }
            ]
        }
    ]
    assert request["generationConfig"]["thinkingConfig"] == {
        "thinking_budget": 1024,
        "include_thoughts": True,
    }


@respx.mock
async def test_call_ids_from_gemini_are_kept(client: GeminiClient) -> None:
    part = {"functionCall": {"id": "gemini-id-7", "name": "add", "args": {"a": 1, "b": 1}}}
    respx.post(url__regex=GENERATE).respond(json=body([part]))
    response = await client.chat([Message(role="user", content="1+1")], [add.definition])
    assert response.tool_calls[0].id == "gemini-id-7"
    assert response.tool_calls[0].provider_metadata == {}


@respx.mock
async def test_blocked_prompt_names_the_reason(client: GeminiClient) -> None:
    blocked = {
        "promptFeedback": {
            "blockReason": "SAFETY",
            "safetyRatings": [
                {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH"}
            ],
        },
        "usageMetadata": {"promptTokenCount": 9, "totalTokenCount": 9},
    }
    respx.post(url__regex=GENERATE).respond(json=blocked)
    with pytest.raises(ContentBlockedError, match="SAFETY") as info:
        await client.chat([Message(role="user", content="something bad")])
    assert info.value.reason == "SAFETY"


@respx.mock
async def test_blocked_answer_names_the_reason(client: GeminiClient) -> None:
    stopped = {"candidates": [{"finishReason": "RECITATION", "index": 0}], "usageMetadata": USAGE}
    respx.post(url__regex=GENERATE).respond(json=stopped)
    with pytest.raises(ContentBlockedError, match="RECITATION"):
        await client.chat([Message(role="user", content="recite")])


@respx.mock
async def test_attachments_are_sent_inline(client: GeminiClient, tmp_path) -> None:
    image = tmp_path / "chart.png"
    image.write_bytes(b"\x89PNG\r\n\x1a\nfake image")
    pdf = tmp_path / "report.pdf"
    pdf.write_bytes(b"%PDF-1.7 fake")
    route = respx.post(url__regex=GENERATE).respond(json=body([{"text": "Seen."}]))
    message = Message(
        role="user",
        content="Compare these.",
        attachments=(Attachment.from_path(image), Attachment.from_path(pdf)),
    )
    await client.chat([message])
    parts = sent(route)["contents"][0]["parts"]
    assert parts[0] == {"text": "Compare these."}
    assert parts[1]["inlineData"]["mime_type"] == "image/png"
    assert base64.urlsafe_b64decode(parts[1]["inlineData"]["data"]) == image.read_bytes()
    assert parts[2]["inlineData"]["mime_type"] == "application/pdf"
    assert base64.urlsafe_b64decode(parts[2]["inlineData"]["data"]) == pdf.read_bytes()


# ---- streaming -------------------------------------------------------------------------


@respx.mock
async def test_stream_yields_deltas_then_one_response(client: GeminiClient) -> None:
    chunks = [
        {
            "candidates": [
                {"content": {"role": "model", "parts": [{"text": "Hmm, ", "thought": True}]}}
            ]
        },
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "The answer"}]}}]},
        body([{"text": " is 42."}]),
    ]
    respx.post(url__regex=STREAM).respond(
        content=sse(*chunks), headers={"content-type": "text/event-stream"}
    )
    parts = [p async for p in client.stream([Message(role="user", content="?")])]
    assert parts[:3] == [ThinkingDelta("Hmm, "), TextDelta("The answer"), TextDelta(" is 42.")]
    final = parts[3]
    assert isinstance(final, LLMResponse)
    assert len(parts) == 4
    assert (final.text, final.thinking, final.stop_reason) == (
        "The answer is 42.",
        "Hmm, ",
        "end_turn",
    )
    assert final.usage.total_tokens == 24
    assert len(final.raw_response) == 3
    assert final.raw_request["contents"][0]["parts"] == [{"text": "?"}]


@respx.mock
async def test_truncated_stream_is_a_parse_error(client: GeminiClient) -> None:
    first = {"candidates": [{"content": {"role": "model", "parts": [{"text": "Par"}]}}]}
    respx.post(url__regex=STREAM).respond(
        content=sse(first) + b'data: {"candidates": [{"content": {"ro',
        headers={"content-type": "text/event-stream"},
    )
    with pytest.raises(ResponseParseError):
        _ = [p async for p in client.stream([Message(role="user", content="?")])]


# ---- errors ----------------------------------------------------------------------------


def error_body(code: int, status: str, message: str, details: list[Any] | None = None) -> dict:
    error: dict[str, Any] = {"code": code, "message": message, "status": status}
    if details is not None:
        error["details"] = details
    return {"error": error}


INVALID_KEY = error_body(
    400,
    "INVALID_ARGUMENT",
    "API key not valid. Please pass a valid API key.",
    [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"}],
)
RETRY_INFO = error_body(
    429,
    "RESOURCE_EXHAUSTED",
    "You exceeded your current quota.",
    [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "12s"}],
)


@pytest.mark.parametrize(
    ("status", "payload", "headers", "expected"),
    [
        (400, INVALID_KEY, {}, AuthenticationError),
        (403, error_body(403, "PERMISSION_DENIED", "Permission denied."), {}, AuthenticationError),
        (429, RETRY_INFO, {}, RateLimitError),
        (
            429,
            error_body(429, "RESOURCE_EXHAUSTED", "Slow down."),
            {"Retry-After": "7"},
            RateLimitError,
        ),
        (500, error_body(500, "INTERNAL", "Internal error."), {}, ProviderUnavailableError),
        (
            503,
            error_body(503, "UNAVAILABLE", "The model is overloaded."),
            {},
            ProviderUnavailableError,
        ),
        (404, error_body(404, "NOT_FOUND", "models/nope is not found."), {}, ProviderError),
    ],
    ids=["400-invalid-key", "403", "429-retry-info", "429-retry-after", "500", "503", "404"],
)
@respx.mock
async def test_error_mapping(client, status, payload, headers, expected) -> None:
    respx.post(url__regex=GENERATE).respond(status, json=payload, headers=headers)
    with pytest.raises(expected) as info:
        await client.chat([Message(role="user", content="hi")])
    error = info.value
    assert type(error) is expected
    assert (error.status, error.provider) == (status, "gemini")
    assert payload["error"]["message"] in str(error)
    assert KEY not in str(error)
    assert KEY not in (error.body or "")
    if status == 429:
        assert error.retry_after == (12.0 if payload is RETRY_INFO else 7.0)


@respx.mock
async def test_stream_errors_are_mapped_too(client: GeminiClient) -> None:
    respx.post(url__regex=STREAM).respond(503, json=error_body(503, "UNAVAILABLE", "Overloaded."))
    with pytest.raises(ProviderUnavailableError, match="Overloaded"):
        _ = [p async for p in client.stream([Message(role="user", content="?")])]


@respx.mock
async def test_non_json_bodies(client: GeminiClient) -> None:
    route = respx.post(url__regex=GENERATE)
    route.respond(200, text="<html>proxy login</html>")
    with pytest.raises(ResponseParseError):
        await client.chat([Message(role="user", content="hi")])
    route.respond(502, text="<html>Bad gateway</html>")
    with pytest.raises(ProviderUnavailableError, match="Bad gateway"):
        await client.chat([Message(role="user", content="hi")])


@respx.mock
async def test_network_failures_are_unavailable(client: GeminiClient) -> None:
    respx.post(url__regex=GENERATE).mock(side_effect=httpx.ConnectError("connection refused"))
    with pytest.raises(ProviderUnavailableError, match="Could not reach Gemini"):
        await client.chat([Message(role="user", content="hi")])


async def test_user_http_client_is_used_and_not_closed(monkeypatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        return httpx.Response(200, json=body([{"text": "via yours"}]))

    http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    async with GeminiClient(http_client=http) as client:
        assert (await client.chat([Message(role="user", content="hi")])).text == "via yours"
    assert not http.is_closed
    assert seen == ["/v1/models/gemini-2.5-flash:generateContent"]
    await http.aclose()


# ---- a whole agent run -----------------------------------------------------------------


def agent_replies() -> list[dict[str, Any]]:
    return [
        body(
            [
                {"text": "Adding.", "thoughtSignature": SIG_1},
                call_part("add", {"a": 17, "b": 25}, SIG_2),
            ]
        ),
        body([call_part("add", {"a": 42, "b": 1}, SIG_1), call_part("add", {"a": 0, "b": 0})]),
        body([{"text": "17 + 25 + 1 = 43"}]),
    ]


def check_second_request(request: dict[str, Any]) -> None:
    user, model, results = request["contents"]
    assert user == {"role": "user", "parts": [{"text": "17 + 25 + 1?"}]}
    text_part, call = model["parts"]
    assert model["role"] == "model"
    assert text_part["text"] == "Adding."
    # Signatures go back unchanged (google-genai re-encodes bytes as URL-safe base64).
    assert base64.urlsafe_b64decode(text_part["thoughtSignature"]) == base64.b64decode(SIG_1)
    assert base64.urlsafe_b64decode(call["thoughtSignature"]) == base64.b64decode(SIG_2)
    assert call["functionCall"] == {"name": "add", "args": {"a": 17, "b": 25}}
    assert results == {
        "role": "user",
        "parts": [{"functionResponse": {"name": "add", "response": {"result": "42"}}}],
    }


EXPECTED_EVENTS = [
    "llm_request", "text_chunk", "llm_response",
    "function_call_start", "function_execution_start", "function_execution_complete",
    "sending_function_response",
    "llm_request", "llm_response",
    "function_call_start", "function_call_start", "function_execution_start",
    "function_execution_complete", "function_execution_complete", "sending_function_response",
    "llm_request", "text_chunk", "llm_response", "complete",
]  # fmt: skip


@pytest.mark.parametrize("streaming", [False, True], ids=["generate", "stream"])
@respx.mock
async def test_agent_two_tool_rounds(monkeypatch, streaming: bool) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    replies = agent_replies()
    if streaming:
        route = respx.post(url__regex=STREAM)
        route.side_effect = [
            httpx.Response(200, content=sse(r), headers={"content-type": "text/event-stream"})
            for r in replies
        ]
    else:
        route = respx.post(url__regex=GENERATE)
        route.side_effect = [httpx.Response(200, json=r) for r in replies]
    client = GeminiClient(streaming=streaming)
    result = await Agent(client, [add]).run("17 + 25 + 1?")
    assert result.text == "17 + 25 + 1 = 43"
    assert [e.type for e in result.events] == EXPECTED_EVENTS
    check_second_request(sent(route, 1))
    third = sent(route, 2)["contents"][-1]
    assert third["parts"] == [
        {"functionResponse": {"name": "add", "response": {"result": "43"}}},
        {"functionResponse": {"name": "add", "response": {"result": "0"}}},
    ]
    assert result.usage.input_tokens == 36
    await client.aclose()

    # The conversation survives a JSON round trip with its signatures, and is sent the same way.
    adapter = TypeAdapter(list[Message])
    reloaded = adapter.validate_json(adapter.dump_json(list(result.all_messages)))
    assert reloaded == list(result.all_messages)
    route.side_effect = None
    route.return_value = (
        httpx.Response(
            200, content=sse(body([{"text": "ok"}])), headers={"content-type": "text/event-stream"}
        )
        if streaming
        else httpx.Response(200, json=body([{"text": "ok"}]))
    )
    again = GeminiClient(streaming=streaming)
    await Agent(again).run("And again?", messages=reloaded)
    check_second_request({"contents": sent(route)["contents"][:3]})
    await again.aclose()


class HangingStream(httpx.AsyncByteStream):
    """An SSE body that sends one chunk and then never ends, unless closed."""

    def __init__(self, first: bytes) -> None:
        self.first = first
        self.closed = False

    async def __aiter__(self):
        yield self.first
        await asyncio.sleep(30)
        yield b""

    async def aclose(self) -> None:
        self.closed = True


async def test_abort_closes_the_http_stream(monkeypatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    first = {"candidates": [{"content": {"role": "model", "parts": [{"text": "Once upon"}]}}]}
    stream = HangingStream(sse(first))

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=stream, headers={"content-type": "text/event-stream"})

    http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    run = Agent(GeminiClient(http_client=http)).run("Tell me a story")
    async for event in run:
        if event.type == "text_chunk":
            run.abort("enough")
        if event.type == "aborted":
            assert stream.closed  # closed before the run reports the abort
    assert stream.closed
    assert run.result is not None
    assert run.result.new_messages[-1].content == "Once upon"
    assert run.result.new_messages[-1].status == "aborted"
    await http.aclose()


@respx.mock
async def test_ids_errors_and_system_messages_go_back_in_gemini_shape(client) -> None:
    from glassagent import ToolCall

    route = respx.post(url__regex=GENERATE).respond(json=body([{"text": "ok"}]))
    call = ToolCall("gemini-id-1", "add", {"a": "x"})
    conversation = [
        Message(role="system", content="Answer in French."),
        Message(role="user", content="add x"),
        Message(role="assistant", tool_calls=(call,)),
        Message(
            role="tool",
            content="Error: bad a",
            tool_call_id="gemini-id-1",
            name="add",
            is_error=True,
        ),
        Message(role="assistant", content="", status="aborted"),  # nothing to send: skipped
    ]
    await client.chat(conversation, system="Be brief.")
    request = sent(route)
    assert request["systemInstruction"]["parts"] == [{"text": "Be brief.\n\nAnswer in French."}]
    assert request["contents"][1:] == [
        {
            "role": "model",
            "parts": [{"functionCall": {"id": "gemini-id-1", "name": "add", "args": {"a": "x"}}}],
        },
        {
            "role": "user",
            "parts": [
                {
                    "functionResponse": {
                        "id": "gemini-id-1",
                        "name": "add",
                        "response": {"error": "Error: bad a"},
                    }
                }
            ],
        },
    ]


@respx.mock
async def test_malformed_function_call_is_a_parse_error(client) -> None:
    respx.post(url__regex=GENERATE).respond(json=body([], "MALFORMED_FUNCTION_CALL"))
    with pytest.raises(ResponseParseError, match="MALFORMED_FUNCTION_CALL"):
        await client.chat([Message(role="user", content="call it")], [add.definition])


@respx.mock
async def test_retry_after_as_an_http_date(client) -> None:
    import email.utils
    import time

    when = email.utils.formatdate(time.time() + 120, usegmt=True)
    respx.post(url__regex=GENERATE).respond(
        429, json=error_body(429, "RESOURCE_EXHAUSTED", "Later."), headers={"Retry-After": when}
    )
    with pytest.raises(RateLimitError) as info:
        await client.chat([Message(role="user", content="hi")])
    assert 100 < info.value.retry_after <= 120
