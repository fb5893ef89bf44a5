import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import respx

from glassagent import Agent, ModelSettings, tool
from glassagent.errors import (
    AuthenticationError,
    ConfigurationError,
    ProviderError,
    ProviderUnavailableError,
    RateLimitError,
)
from glassagent.llm import (
    Attachment,
    LLMResponse,
    Message,
    OpenAICompatibleClient,
    RetryPolicy,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    ToolDefinition,
)

BASE = "http://127.0.0.1:8080/v1"
URL = f"{BASE}/chat/completions"
KEY = "sk-test-0123456789abcdefXYZ"
ADD = ToolDefinition(
    "add",
    "Add two integers.",
    {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
)
HI = (Message(role="user", content="Hi"),)


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: First addend.
        b: Second addend.
    """
    return a + b


def completion(message: dict[str, Any], finish: str = "stop", **extra: Any) -> dict[str, Any]:
    """A chat.completion body as OpenAI sends it."""
    return {
        "id": "chatcmpl-AWx0gQ3Vx",
        "object": "chat.completion",
        "created": 1732345678,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "refusal": None, **message},
                "logprobs": None,
                "finish_reason": finish,
            }
        ],
        "usage": {
            "prompt_tokens": 12,
            "completion_tokens": 7,
            "total_tokens": 19,
            "prompt_tokens_details": {"cached_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0},
        },
        "system_fingerprint": "fp_0ba0d124f1",
        **extra,
    }


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> dict:
    """A chat.completion.chunk as OpenAI streams it."""
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return {
        "id": "chatcmpl-AWx0gQ3Vx",
        "object": "chat.completion.chunk",
        "created": 1732345678,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": choices,
        **extra,
    }


USAGE_CHUNK = chunk(usage={"prompt_tokens": 40, "completion_tokens": 9, "total_tokens": 49})


def sse(*chunks: dict[str, Any], done: bool = True) -> httpx.Response:
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks)
    body += "data: [DONE]\n\n" if done else ""
    return httpx.Response(200, text=body, headers={"content-type": "text/event-stream"})


def tool_delta(index: int, arguments: str, call_id: str | None = None, name: str | None = None):
    call: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
    if call_id:
        call.update(id=call_id, type="function")
        call["function"]["name"] = name
    return {"tool_calls": [call]}


def body_of(route: respx.Route, n: int = 0) -> dict[str, Any]:
    return json.loads(route.calls[n].request.content)


async def stream_all(client: OpenAICompatibleClient, *args: Any, **kwargs: Any) -> list[Any]:
    return [part async for part in client.stream(*args, **kwargs)]


NO_RETRY = RetryPolicy(max_retries=0)  # retries have their own tests (test_retries.py)


@pytest.fixture
def client() -> OpenAICompatibleClient:
    return OpenAICompatibleClient("qwen2.5-coder", base_url=BASE)


# ---- plain and streamed answers ---------------------------------------------------------


@respx.mock
async def test_chat_sends_the_chat_completions_shape_and_reads_the_answer(client) -> None:
    route = respx.post(URL).mock(
        return_value=httpx.Response(200, json=completion({"content": "Hello!"}))
    )
    history = (
        Message(role="user", content="What is 17 + 25?"),
        Message(role="assistant", content="", tool_calls=(ToolCall("c1", "add", {"a": 17}),)),
        Message(role="tool", content="42", tool_call_id="c1", name="add"),
    )
    settings = ModelSettings(temperature=0.2, max_tokens=64, stop_sequences=("END",))
    response = await client.chat(history, [ADD], "Be brief.", settings=settings)

    sent = body_of(route)
    assert sent == {
        "model": "qwen2.5-coder",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "What is 17 + 25?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "add", "arguments": '{"a": 17}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "42"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "add",
                    "description": "Add two integers.",
                    "parameters": ADD.parameters,
                },
            }
        ],
        "temperature": 0.2,
        "max_tokens": 64,
        "stop": ["END"],
    }
    assert "authorization" not in route.calls[0].request.headers
    assert response.text == "Hello!"
    assert response.stop_reason == "end_turn"
    assert response.usage.input_tokens == 12
    assert response.usage.output_tokens == 7
    assert response.model == "gpt-4o-mini-2024-07-18"
    assert response.raw_request == sent
    assert response.raw_response["id"] == "chatcmpl-AWx0gQ3Vx"
    assert response.protocol_error is None


@respx.mock
async def test_chat_reads_a_llama_server_tool_call_with_its_timings(client) -> None:
    body = {
        "choices": [
            {
                "finish_reason": "tool_calls",
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "type": "function",
                            "function": {"name": "add", "arguments": '{"a":17,"b":25}'},
                            "id": "kLp0Xq3aBcDeFgHiJkLmNoPqRsTuVwXy",
                        }
                    ],
                },
            }
        ],
        "created": 1732345678,
        "model": "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        "object": "chat.completion",
        "usage": {"completion_tokens": 21, "prompt_tokens": 190, "total_tokens": 211},
        "id": "chatcmpl-xyz",
        "timings": {
            "prompt_n": 190,
            "prompt_ms": 312.4,
            "prompt_per_token_ms": 1.64,
            "prompt_per_second": 608.1,
            "predicted_n": 21,
            "predicted_ms": 402.7,
        },
    }
    respx.post(URL).mock(return_value=httpx.Response(200, json=body))
    response = await client.chat(HI, [ADD])
    assert response.tool_calls == (
        ToolCall("kLp0Xq3aBcDeFgHiJkLmNoPqRsTuVwXy", "add", {"a": 17, "b": 25}),
    )
    assert response.stop_reason == "tool_use"
    assert response.text == ""
    assert response.usage.input_tokens == 190
    assert response.timings == {"prompt_ms": 312.4, "predicted_ms": 402.7}


@respx.mock
async def test_reasoning_tokens_count_as_thinking(client) -> None:
    body = completion({"content": "4", "reasoning_content": "2 and 2 make 4."})
    body["usage"]["completion_tokens_details"]["reasoning_tokens"] = 5
    respx.post(URL).mock(return_value=httpx.Response(200, json=body))
    response = await client.chat(HI)
    assert response.thinking == "2 and 2 make 4."
    assert (response.usage.output_tokens, response.usage.thinking_tokens) == (2, 5)


@respx.mock
async def test_stream_yields_text_deltas_then_the_response_with_usage(client) -> None:
    route = respx.post(URL).mock(
        return_value=sse(
            chunk({"role": "assistant", "content": ""}),
            chunk({"content": "Hel"}),
            chunk({"content": "lo!"}),
            chunk({}, "stop"),
            USAGE_CHUNK,
        )
    )
    parts = await stream_all(client, HI)
    assert parts[:2] == [TextDelta("Hel"), TextDelta("lo!")]
    final = parts[2]
    assert isinstance(final, LLMResponse)
    assert final.text == "Hello!"
    assert final.stop_reason == "end_turn"
    assert (final.usage.input_tokens, final.usage.output_tokens) == (40, 9)
    assert len(final.raw_response) == 5
    sent = body_of(route)
    assert sent["stream"] is True
    assert sent["stream_options"] == {"include_usage": True}
    assert final.raw_request == sent


@respx.mock
async def test_stream_assembles_two_parallel_calls_from_fragments(client) -> None:
    respx.post(URL).mock(
        return_value=sse(
            chunk({"role": "assistant", "content": None, **tool_delta(0, "", "call_A", "add")}),
            chunk(tool_delta(0, '{"a"')),
            chunk(tool_delta(0, ": 17, ")),
            chunk(tool_delta(1, "", "call_B", "add")),
            chunk(tool_delta(0, '"b": 25}')),
            chunk(tool_delta(1, '{"a": 1, "b": 2}')),
            chunk({}, "tool_calls"),
            USAGE_CHUNK,
        )
    )
    parts = await stream_all(client, HI, [ADD])
    assert len(parts) == 1
    final = parts[0]
    assert final.tool_calls == (
        ToolCall("call_A", "add", {"a": 17, "b": 25}),
        ToolCall("call_B", "add", {"a": 1, "b": 2}),
    )
    assert final.stop_reason == "tool_use"


@respx.mock
async def test_stream_turns_reasoning_deltas_into_thinking(client) -> None:
    respx.post(URL).mock(
        return_value=sse(
            chunk({"role": "assistant", "reasoning_content": "Two "}),
            chunk({"reasoning": "and two."}),
            chunk({"content": "4"}, "stop"),
        )
    )
    parts = await stream_all(client, HI)
    assert parts[:3] == [ThinkingDelta("Two "), ThinkingDelta("and two."), TextDelta("4")]
    assert parts[3].thinking == "Two and two."


@respx.mock
async def test_a_stream_may_end_without_done_after_a_finish_reason(client) -> None:
    respx.post(URL).mock(return_value=sse(chunk({"content": "ok"}, "stop"), done=False))
    assert (await stream_all(client, HI))[-1].text == "ok"


@respx.mock
async def test_invalid_json_arguments_are_marked_not_raised(client) -> None:
    respx.post(URL).mock(
        return_value=sse(
            chunk(tool_delta(0, '{"a": 17, "b": ', "call_A", "add")),
            chunk(tool_delta(1, "[1, 2]", "call_B", "add")),
            chunk({}, "tool_calls"),
        )
    )
    final = (await stream_all(client, HI, [ADD]))[-1]
    first, second = final.tool_calls
    assert first.input == {}
    assert first.arguments_error.startswith("the arguments are not valid JSON")
    assert "must be a JSON object" in second.arguments_error
    assert first.provider_metadata == second.provider_metadata == {}


# ---- attachments, configuration, ownership ---------------------------------------------


@respx.mock
async def test_attachments_become_content_parts(client) -> None:
    route = respx.post(URL).mock(
        return_value=httpx.Response(200, json=completion({"content": "A cat."}))
    )
    message = Message(
        role="user",
        content="Describe these.",
        attachments=(
            Attachment(data=b"\x89PNG", mime_type="image/png"),
            Attachment(data=b"hello", mime_type="text/plain", name="note.txt"),
            Attachment(data=b"%PDF", mime_type="application/pdf", name="doc.pdf"),
        ),
    )
    await client.chat([message])
    assert body_of(route)["messages"][0]["content"] == [
        {"type": "text", "text": "Describe these."},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw=="}},
        {"type": "text", "text": "[note.txt]\nhello"},
        {
            "type": "file",
            "file": {"filename": "doc.pdf", "file_data": "data:application/pdf;base64,JVBERg=="},
        },
    ]


def test_openai_itself_needs_a_key() -> None:
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        OpenAICompatibleClient("gpt-4o-mini")


@respx.mock
async def test_key_and_base_url_come_from_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    route = respx.post("https://api.openai.com/v1/chat/completions").mock(
        return_value=httpx.Response(200, json=completion({"content": "hi"}))
    )
    client = OpenAICompatibleClient("gpt-4o-mini")
    assert client.provider_name == "openai"
    await client.chat(HI)
    assert route.calls[0].request.headers["authorization"] == f"Bearer {KEY}"
    assert KEY not in repr(client)

    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1/")
    assert OpenAICompatibleClient("m").base_url == "http://127.0.0.1:9/v1"
    monkeypatch.setenv("OPENAI_API_BASE", "http://127.0.0.1:7/v1")
    compatible = OpenAICompatibleClient("m")
    assert compatible.base_url == "http://127.0.0.1:7/v1"
    assert compatible.provider_name == "openai_compatible"
    assert OpenAICompatibleClient("m", base_url=BASE).base_url == BASE


def test_an_unknown_tool_protocol_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="tool_protocol"):
        OpenAICompatibleClient("m", base_url=BASE, tool_protocol="xml")


@respx.mock
async def test_a_supplied_http_client_is_used_and_left_open() -> None:
    respx.post(URL).mock(return_value=httpx.Response(200, json=completion({"content": "x"})))
    async with httpx.AsyncClient() as http:
        client = OpenAICompatibleClient("m", base_url=BASE, http_client=http)
        await client.chat(HI)
        await client.aclose()
        assert not http.is_closed
        assert respx.calls.call_count == 1


@respx.mock
async def test_an_owned_http_client_is_closed_by_aclose() -> None:
    respx.post(URL).mock(return_value=httpx.Response(200, json=completion({"content": "x"})))
    async with OpenAICompatibleClient("m", base_url=BASE) as client:
        await client.chat(HI)
        await client.chat(HI)
    await client.aclose()  # a second close is harmless
    assert respx.calls.call_count == 2


# ---- errors ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (403, AuthenticationError),
        (429, RateLimitError),
        (500, ProviderUnavailableError),
        (502, ProviderUnavailableError),
        (503, ProviderUnavailableError),
        (504, ProviderUnavailableError),
        (400, ProviderError),
    ],
)
@respx.mock
async def test_error_statuses_map_to_typed_errors_without_the_key(status, error) -> None:
    message = f"Incorrect API key provided: {KEY}."
    respx.post(URL).mock(
        return_value=httpx.Response(
            status,
            json={"error": {"message": message, "type": "invalid_request_error", "code": None}},
            headers={"retry-after": "3"},
        )
    )
    client = OpenAICompatibleClient("m", base_url=BASE, api_key=KEY, retry=NO_RETRY)
    for call in (client.chat(HI), stream_all(client, HI)):
        with pytest.raises(error) as info:
            await call
        assert type(info.value) is error
        assert info.value.status == status
        assert "Incorrect API key provided" in str(info.value)
        assert KEY not in str(info.value)
        assert KEY not in (info.value.body or "")
        if status == 429:
            assert info.value.retry_after == 3.0


def unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_a_refused_connection_names_the_url_and_how_to_start_a_server() -> None:
    base = f"http://127.0.0.1:{unused_port()}/v1"
    async with OpenAICompatibleClient("m", base_url=base, retry=NO_RETRY) as client:
        for call in (client.chat(HI), stream_all(client, HI)):
            with pytest.raises(ProviderUnavailableError) as info:
                await call
            assert f"{base}/chat/completions" in str(info.value)
            assert "llama-server" in str(info.value)


class SlowStream(httpx.AsyncByteStream):
    """An SSE body that sends one chunk, then waits forever; records whether it was closed."""

    def __init__(self) -> None:
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield f"data: {json.dumps(chunk({'content': 'Hel'}))}\n\n".encode()
        import asyncio

        await asyncio.Event().wait()
        yield b""  # pragma: no cover

    async def aclose(self) -> None:
        self.closed = True


@respx.mock
async def test_closing_the_stream_closes_the_http_response_at_once(client) -> None:
    body = SlowStream()
    respx.post(URL).mock(return_value=httpx.Response(200, stream=body))
    parts = client.stream(HI)
    assert await anext(parts) == TextDelta("Hel")
    assert not body.closed
    await parts.aclose()
    assert body.closed


@respx.mock
async def test_aborting_a_run_closes_the_model_stream(client) -> None:
    body = SlowStream()
    respx.post(URL).mock(return_value=httpx.Response(200, stream=body))
    run = Agent(client).run("Tell me a story.")
    async for event in run:
        if event.type == "text_chunk":
            run.abort("stop")
    assert body.closed
    assert run.result is not None
    assert run.result.stop_reason == "aborted"
    assert run.result.text == "Hel"


# ---- full agent runs -------------------------------------------------------------------


@respx.mock
async def test_agent_runs_two_native_tool_rounds() -> None:
    route = respx.post(URL).mock(
        side_effect=[
            sse(
                chunk({"role": "assistant", **tool_delta(0, '{"a": 17,', "call_1", "add")}),
                chunk(tool_delta(0, ' "b": 25}')),
                chunk({}, "tool_calls"),
                USAGE_CHUNK,
            ),
            sse(
                chunk({"reasoning_content": "Add one more."}),
                chunk(tool_delta(0, '{"a": 42, "b": 1}', "call_2", "add")),
                chunk({}, "tool_calls"),
                USAGE_CHUNK,
            ),
            sse(
                chunk({"content": "The total "}), chunk({"content": "is 43."}, "stop"), USAGE_CHUNK
            ),
        ]
    )
    async with OpenAICompatibleClient("qwen", base_url=BASE, api_key=KEY) as client:
        run = Agent(client, [add], system="Be brief.").run("What is 17 + 25 + 1?")
        events = [event async for event in run]
    assert [e.type for e in events] == [
        "llm_request",
        "llm_response",
        "function_call_start",
        "function_execution_start",
        "function_execution_complete",
        "sending_function_response",
        "llm_request",
        "thinking_chunk",
        "llm_response",
        "function_call_start",
        "function_execution_start",
        "function_execution_complete",
        "sending_function_response",
        "llm_request",
        "text_chunk",
        "text_chunk",
        "llm_response",
        "complete",
    ]
    assert events[0].tool_protocol == "native"
    assert [e.execution.result for e in events if e.type == "function_execution_complete"] == [
        "42",
        "43",
    ]
    assert run.result.text == "The total is 43."
    assert run.result.usage.input_tokens == 120
    third = body_of(route, 2)["messages"]
    assert third[0] == {"role": "system", "content": "Be brief."}
    assert third[1] == {"role": "user", "content": "What is 17 + 25 + 1?"}
    assert third[2]["tool_calls"][0]["function"] == {
        "name": "add",
        "arguments": '{"a": 17, "b": 25}',
    }
    assert third[3] == {"role": "tool", "tool_call_id": "call_1", "content": "42"}
    assert third[4]["tool_calls"][0]["id"] == "call_2"
    assert third[5] == {"role": "tool", "tool_call_id": "call_2", "content": "43"}
    assert all(KEY not in json.dumps(e.to_dict()) for e in events)


@respx.mock
async def test_invalid_arguments_go_back_to_the_model_as_an_error() -> None:
    route = respx.post(URL).mock(
        side_effect=[
            sse(chunk(tool_delta(0, "{a: 17, b: 25}", "call_1", "add")), chunk({}, "tool_calls")),
            sse(chunk({"content": "Sorry."}, "stop")),
        ]
    )
    client = OpenAICompatibleClient("qwen", base_url=BASE)
    result = await Agent(client, [add]).run("17 + 25?")
    done = next(e for e in result.events if e.type == "function_execution_complete")
    assert done.execution.is_error
    assert "invalid arguments for tool 'add'" in done.execution.result
    assert "not valid JSON" in done.execution.result
    assert body_of(route, 1)["messages"][-1]["content"] == done.execution.result
    assert result.text == "Sorry."


@respx.mock
async def test_agent_runs_two_rounds_with_the_json_protocol() -> None:
    replies = [
        '```json\n{"thought": "I should add.", '
        '"tool_call": {"name": "add", "input": {"a": 17, "b": 25}}}\n```',
        '{"thought": "Now plus one.", "tool_call": {"name": "add", "input": {a: 42, b: 1}}}',
        '{"thought": "Done.", "response": "The total is 43."}',
    ]
    route = respx.post(URL).mock(
        side_effect=[
            sse(chunk({"content": r[:10]}), chunk({"content": r[10:]}, "stop")) for r in replies
        ]
    )
    client = OpenAICompatibleClient("qwen", base_url=BASE, tool_protocol="json")
    run = Agent(client, [add], system="Be brief.").run("What is 17 + 25 + 1?")
    events = [event async for event in run]
    assert [e.type for e in events] == [
        "llm_request",
        "thinking_chunk",
        "llm_response",
        "function_call_start",
        "function_execution_start",
        "function_execution_complete",
        "sending_function_response",
        "llm_request",
        "thinking_chunk",
        "llm_response",
        "function_call_start",
        "function_execution_start",
        "function_execution_complete",
        "sending_function_response",
        "llm_request",
        "thinking_chunk",
        "text_chunk",
        "llm_response",
        "complete",
    ]
    assert events[0].tool_protocol == "json"
    assert events[1].text == "I should add."
    assert events[3].args == {"a": 17, "b": 25}
    assert events[10].args == {"a": 42, "b": 1}
    assert run.result.text == "The total is 43."
    assert all(e.protocol_error is None for e in events if e.type == "llm_response")

    third = body_of(route, 2)
    assert third["response_format"] == {"type": "json_object"}
    assert "tools" not in third
    system = third["messages"][0]
    assert system["role"] == "system"
    assert system["content"].startswith("Be brief.\n\n")
    assert '"tool_call"' in system["content"]
    assert "- add: Add two integers." in system["content"]
    assert [m["role"] for m in third["messages"][1:]] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    assert json.loads(third["messages"][2]["content"]) == {
        "thought": "I should add.",
        "tool_call": {"name": "add", "input": {"a": 17, "b": 25}},
    }
    assert json.loads(third["messages"][3]["content"]) == {
        "tool_result": {"name": "add", "result": "42"}
    }
    assert json.loads(third["messages"][5]["content"]) == {
        "tool_result": {"name": "add", "result": "43"}
    }


@respx.mock
async def test_a_reply_outside_the_json_protocol_becomes_the_answer_visibly() -> None:
    respx.post(URL).mock(
        side_effect=[
            httpx.Response(200, json=completion({"content": "The answer is 42."})),
            sse(chunk({"content": "The answer is 42."}, "stop")),
        ]
    )
    client = OpenAICompatibleClient("qwen", base_url=BASE, tool_protocol="json")
    response = await client.chat(HI, [ADD])
    assert response.text == "The answer is 42."
    assert "did not follow the JSON tool protocol" in response.protocol_error
    result = await Agent(client, [add]).run("Hi")
    assert result.text == "The answer is 42."
    llm_response = next(e for e in result.events if e.type == "llm_response")
    assert "did not follow the JSON tool protocol" in llm_response.protocol_error


# ---- transport edge cases --------------------------------------------------------------


@respx.mock
async def test_sse_comments_event_names_and_an_unterminated_last_event_are_handled(client) -> None:
    text = (
        ": keep-alive\n\n"
        f"event: message\nid: 1\ndata: {json.dumps(chunk({'content': 'Hel'}))}\n\n"
        f"data: {json.dumps(chunk({'content': 'lo'}, 'stop'))}"
    )
    respx.post(URL).mock(return_value=httpx.Response(200, text=text))
    assert (await stream_all(client, HI))[-1].text == "Hello"


@respx.mock
async def test_llama_server_error_lines_mid_stream_are_provider_errors(client) -> None:
    text = (
        f"data: {json.dumps(chunk({'content': 'a'}))}\n\n"
        'error: {"code": 500, "message": "the request exceeds the context size", '
        '"type": "exceed_context_size_error"}\n\n'
    )
    respx.post(URL).mock(return_value=httpx.Response(200, text=text))
    with pytest.raises(ProviderError, match="exceeds the context size"):
        await stream_all(client, HI)


@respx.mock
async def test_a_non_json_error_body_is_reported_as_text() -> None:
    respx.post(URL).mock(return_value=httpx.Response(502, text="<html>Bad Gateway</html>"))
    client = OpenAICompatibleClient("qwen2.5-coder", base_url=BASE, retry=NO_RETRY)
    with pytest.raises(ProviderUnavailableError, match="Bad Gateway"):
        await client.chat(HI)


@respx.mock
async def test_a_timeout_is_a_provider_unavailable_error() -> None:
    respx.post(URL).mock(side_effect=httpx.ReadTimeout("timed out"))
    client = OpenAICompatibleClient("qwen2.5-coder", base_url=BASE, retry=NO_RETRY)
    with pytest.raises(ProviderUnavailableError, match="did not answer in time"):
        await client.chat(HI)


class BrokenStream(httpx.AsyncByteStream):
    """Sends one chunk, then the connection drops."""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield f"data: {json.dumps(chunk({'content': 'Hel'}))}\n\n".encode()
        raise httpx.RemoteProtocolError("peer closed connection without sending complete body")


@respx.mock
async def test_a_connection_lost_mid_stream_is_a_provider_unavailable_error() -> None:
    client = OpenAICompatibleClient("qwen2.5-coder", base_url=BASE, retry=NO_RETRY)
    respx.post(URL).mock(return_value=httpx.Response(200, stream=BrokenStream()))
    with pytest.raises(ProviderUnavailableError, match="was lost"):
        await stream_all(client, HI)
    respx.post(URL).mock(return_value=httpx.Response(200, stream=BrokenStream()))
    with pytest.raises(ProviderUnavailableError, match="was lost"):
        await client.chat(HI)


@respx.mock
async def test_an_empty_assistant_turn_is_sent_with_empty_content(client) -> None:
    route = respx.post(URL).mock(
        return_value=httpx.Response(200, json=completion({"content": "x"}))
    )
    await client.chat([*HI, Message(role="assistant", content=""), *HI])
    assert body_of(route)["messages"][1] == {"role": "assistant", "content": ""}


@respx.mock
async def test_a_refusal_is_the_answer_text(client) -> None:
    refusal = "I'm sorry, I can't help with that."
    respx.post(URL).mock(
        return_value=httpx.Response(200, json=completion({"content": None, "refusal": refusal}))
    )
    assert (await client.chat(HI)).text == refusal
