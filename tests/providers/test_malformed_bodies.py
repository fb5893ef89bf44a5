"""Malformed response bodies the fuzzing found: each one is a typed error or a clean answer.

The clients are driven directly (not through the Agent), over ``httpx.MockTransport``.
"""

import json
from typing import Any

import httpx
import pytest

from glassagent import Agent, tool
from glassagent.errors import ProviderError, ResponseParseError
from glassagent.llm import (
    GeminiClient,
    LLMResponse,
    Message,
    OllamaClient,
    OpenAICompatibleClient,
    RetryPolicy,
    ToolCall,
    ToolDefinition,
    Usage,
)
from glassagent.testing import FunctionClient

HI = [Message(role="user", content="Hi")]
ADD = ToolDefinition("add", "Add.", {"type": "object", "properties": {}})
DEEP = "[" * 100_000 + "]" * 100_000


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: First addend.
        b: Second addend.
    """
    return a + b


def serve(payload: str | bytes, status: int = 200) -> httpx.AsyncClient:
    content = payload.encode() if isinstance(payload, str) else payload

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, content=content)

    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


NO_RETRY = RetryPolicy(max_retries=0)  # retries have their own tests


def openai(payload: str | bytes, status: int = 200, **kwargs: Any) -> OpenAICompatibleClient:
    return OpenAICompatibleClient(
        "m",
        base_url="http://127.0.0.1:8080/v1",
        http_client=serve(payload, status),
        retry=NO_RETRY,
        **kwargs,
    )


def ollama(payload: str | bytes, status: int = 200, **kwargs: Any) -> OllamaClient:
    kwargs.setdefault("tool_protocol", "native")
    return OllamaClient(
        "m",
        base_url="http://127.0.0.1:11434",
        http_client=serve(payload, status),
        retry=NO_RETRY,
        **kwargs,
    )


def completion(message: Any, **extra: Any) -> str:
    return json.dumps({"choices": [{"message": message, "finish_reason": "stop"}], **extra})


async def streamed(client: Any) -> list[Any]:
    return [part async for part in client.stream(HI, [ADD])]


# ---- OpenAI-compatible -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ('{"choices": {"0": {"message": {}}}}', "a body without choices"),
        ('{"choices": true}', "a body without choices"),
        ('{"choices": [[]]}', "a choice that is an array, not an object"),
        (completion("Hi"), "a choice whose 'message' is a string, not an object"),
        (completion({"content": ["Hi"]}), "a message whose 'content' is an array"),
        (completion({"reasoning_content": 5}), "'reasoning_content' is a number"),
        (completion({"tool_calls": {"id": "c1"}}), "'tool_calls' is an object, not an array"),
        (completion({"tool_calls": ["add"]}), "'tool_calls' holds a string, not an object"),
        (completion({"tool_calls": [{"function": "add"}]}), "'function' is a string"),
        (completion({"tool_calls": [{"function": {"name": ["add"]}}]}), "'name' is an array"),
        (completion({"tool_calls": [{"function": {"name": {"n": 1}}}]}), "'name' is an object"),
        (completion({"tool_calls": [{"function": {"name": 7}}]}), "'name' is a number"),
        (completion({"tool_calls": [{"id": 7, "function": {"name": "add"}}]}), "'id' is a number"),
        (completion({"tool_calls": [{"index": "0"}]}), "'index' is a string, not an integer"),
        (completion({"tool_calls": [{"index": [0]}]}), "'index' is an array, not an integer"),
        ('{"choices": [{"message": {}, "finish_reason": ["stop"]}]}', "'finish_reason' is an"),
        (DEEP, "not JSON"),
    ],
)
async def test_openai_chat_malformed_bodies_are_parse_errors(body: str, match: str) -> None:
    with pytest.raises(ResponseParseError, match=match) as info:
        await openai(body).chat(HI, [ADD])
    assert info.value.provider == "openai_compatible"
    assert info.value.body is None or len(info.value.body) <= 500


async def test_openai_error_status_with_a_deeply_nested_body_keeps_its_status() -> None:
    with pytest.raises(ProviderError) as info:
        await openai(DEEP, status=500).chat(HI)
    assert info.value.status == 500


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        ('{"prompt_tokens": [12], "completion_tokens": "7"}', Usage(0, 0, 0)),
        ('{"prompt_tokens": 1e400, "completion_tokens": NaN}', Usage(0, 0, 0)),
        ('{"prompt_tokens": 1' + "0" * 400 + ', "completion_tokens": -Infinity}', Usage(0, 0, 0)),
        ('{"prompt_tokens": -3, "completion_tokens": 7.0}', Usage(0, 7, 0)),
        ('{"prompt_tokens": 2.5, "completion_tokens": true}', Usage(0, 0, 0)),
        ('{"completion_tokens": 7, "completion_tokens_details": []}', Usage(0, 7, 0)),
        (
            '{"completion_tokens": 7, "completion_tokens_details": {"reasoning_tokens": 9}}',
            Usage(0, 0, 7),
        ),
        ('{"prompt_tokens": 12, "completion_tokens": 7}', Usage(12, 7, 0)),
    ],
)
async def test_openai_malformed_token_counts_count_as_zero(usage: str, expected: Usage) -> None:
    body = '{"choices": [{"message": {"content": "Hi"}}], "usage": ' + usage + "}"
    response = await openai(body).chat(HI)
    assert response.text == "Hi"
    assert response.usage == expected


async def test_openai_malformed_timings_are_left_out() -> None:
    timings = '{"prompt_ms": 1' + "0" * 400 + ', "predicted_ms": Infinity, "x": 1}'
    body = '{"choices": [{"message": {"content": "Hi"}}], "timings": ' + timings + "}"
    assert (await openai(body).chat(HI)).timings == {}
    body = body.replace(timings, '{"prompt_ms": true, "predicted_ms": 20}')
    assert (await openai(body).chat(HI)).timings == {"predicted_ms": 20.0}


async def test_openai_model_name_that_is_not_a_string_is_ignored() -> None:
    body = completion({"content": "Hi"}, model=["gpt"])
    assert (await openai(body).chat(HI)).model == "m"


@pytest.mark.parametrize("arguments", [[1, 2], 5, True])
async def test_openai_arguments_that_are_no_object_go_back_to_the_model(arguments: Any) -> None:
    call = {"id": "c1", "function": {"name": "add", "arguments": arguments}}
    response = await openai(completion({"tool_calls": [call]})).chat(HI, [ADD])
    (parsed,) = response.tool_calls
    assert parsed.input == {}
    assert "must be a JSON object" in parsed.arguments_error


async def test_openai_deeply_nested_arguments_go_back_to_the_model() -> None:
    call = {"id": "c1", "function": {"name": "add", "arguments": DEEP}}
    response = await openai(completion({"tool_calls": [call]})).chat(HI, [ADD])
    assert "not valid JSON" in response.tool_calls[0].arguments_error


async def test_json_protocol_reply_nested_too_deeply_becomes_the_text() -> None:
    client = openai(completion({"content": DEEP}), tool_protocol="json")
    response = await client.chat(HI, [ADD])
    assert response.text == DEEP
    assert response.protocol_error is not None


async def test_json_protocol_input_nested_too_deeply_goes_back_to_the_model() -> None:
    reply = json.dumps({"tool_call": {"name": "add", "input": DEEP}})
    response = await openai(completion({"content": reply}), tool_protocol="json").chat(HI, [ADD])
    (call,) = response.tool_calls
    assert "'input' must be a JSON object" in call.arguments_error


@pytest.mark.parametrize(
    ("lines", "match"),
    [
        (["data: " + DEEP], "a malformed stream chunk"),
        (['data: {"choices": "abc"}'], "'choices' is not an array"),
        (['data: {"choices": [7]}'], "a choice that is a number"),
        (['data: {"choices": [{"delta": [1]}]}'], "'delta' is an array"),
        (['data: {"choices": [{"delta": {"content": {"t": 1}}}]}'], "'content' is an object"),
        (
            ['data: {"choices": [{"delta": {"tool_calls": [{"index": {}}]}}]}'],
            "'index' is an object",
        ),
    ],
)
async def test_openai_stream_malformed_chunks_are_parse_errors(
    lines: list[str], match: str
) -> None:
    body = "\n\n".join([*lines, "data: [DONE]"]) + "\n\n"
    with pytest.raises(ResponseParseError, match=match):
        await streamed(openai(body))


async def test_openai_stream_error_event_with_odd_fields_is_a_provider_error() -> None:
    body = 'data: {"error": {"message": ["boom"]}, "message": 5}\n\n'
    with pytest.raises(ProviderError, match="error mid-stream: no details"):
        await streamed(openai(body))


# ---- Ollama ----------------------------------------------------------------------------


def ollama_body(message: Any, **extra: Any) -> str:
    return json.dumps({"model": "m", "message": message, "done": True, **extra})


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (ollama_body("Hi"), "a body whose 'message' is a string, not an object"),
        (ollama_body({"content": ["Hi"]}), "'content' is an array, not a string"),
        (ollama_body({"thinking": True}), "'thinking' is a boolean, not a string"),
        (ollama_body({"tool_calls": {"function": {}}}), "'tool_calls' is an object"),
        (ollama_body({"tool_calls": ["add"]}), "'tool_calls' holds a string"),
        (ollama_body({"tool_calls": [{"function": ["add"]}]}), "'function' is an array"),
        (ollama_body({"tool_calls": [{"function": {"name": ["add"]}}]}), "'name' is an array"),
        (ollama_body({"tool_calls": [{"id": {}, "function": {"name": "a"}}]}), "'id' is an obj"),
        (DEEP, "not JSON"),
    ],
)
async def test_ollama_chat_malformed_bodies_are_parse_errors(body: str, match: str) -> None:
    with pytest.raises(ResponseParseError, match=match) as info:
        await ollama(body).chat(HI, [ADD])
    assert info.value.provider == "ollama"


async def test_ollama_malformed_counts_and_durations_are_dropped() -> None:
    body = ollama_body(
        {"content": "Hi"},
        model=7,
        prompt_eval_count="12",
        eval_count=1e30,
        total_duration=10**400,
        eval_duration=-5,
        load_duration=2_000_000,
    )
    response = await ollama(body).chat(HI)
    assert (response.text, response.model) == ("Hi", "m")
    assert response.usage == Usage(0, 0, 0)
    assert response.timings == {"load_ms": 2.0}


@pytest.mark.parametrize("arguments", [["a", 1], 3, "[1]"])
async def test_ollama_arguments_that_are_no_object_go_back_to_the_model(arguments: Any) -> None:
    call = {"function": {"name": "add", "arguments": arguments}}
    response = await ollama(ollama_body({"tool_calls": [call]})).chat(HI, [ADD])
    assert "must be a JSON object" in response.tool_calls[0].arguments_error


@pytest.mark.parametrize(
    ("lines", "match"),
    [
        ([DEEP], "malformed stream line"),
        (['{"message": [1], "done": false}'], "'message' is an array"),
        (['{"message": {"content": 5}, "done": false}'], "'content' is a number"),
        (['{"message": {"tool_calls": "add"}, "done": true}'], "'tool_calls' is a string"),
    ],
)
async def test_ollama_stream_malformed_lines_are_parse_errors(lines: list[str], match: str) -> None:
    with pytest.raises(ResponseParseError, match=match):
        await streamed(ollama("\n".join(lines) + "\n"))


async def test_ollama_error_that_is_not_a_string_is_shown_as_json() -> None:
    with pytest.raises(ProviderError, match=r'reported an error: \{"code": 1\}'):
        await ollama('{"error": {"code": 1}}').chat(HI)


async def test_ollama_template_that_is_not_a_string_means_json_protocol() -> None:
    client = ollama('{"template": ["{{ .Tools }}"]}', tool_protocol="auto")
    assert await client.resolve_tool_protocol() == "json"


# ---- Gemini ----------------------------------------------------------------------------


def gemini(payload: str, status: int = 200) -> GeminiClient:
    return GeminiClient(
        api_key="AIzaSyMalformed00000000000000000x9Qk",
        http_client=serve(payload, status),
        retry=NO_RETRY,
    )


async def test_gemini_body_google_genai_cannot_read_is_a_parse_error() -> None:
    with pytest.raises(ResponseParseError, match="could not be read: TypeError"):
        await gemini('{"candidates": 5}').chat(HI)


async def test_gemini_stream_error_chunk_google_genai_cannot_read_is_a_parse_error() -> None:
    client = gemini('data: {"error": {"code": null}}\r\n\r\n')
    with pytest.raises(ResponseParseError, match="could not be read: TypeError"):
        await streamed(client)


async def test_gemini_stream_error_chunk_with_an_absurd_code_is_a_provider_error() -> None:
    client = gemini('data: {"error": {"code": 1e400, "message": "overloaded"}}\r\n\r\n')
    with pytest.raises(ProviderError, match="overloaded"):
        await streamed(client)


@pytest.mark.parametrize("status", [429, 503])
async def test_gemini_error_status_with_a_deeply_nested_body_keeps_its_status(status: int) -> None:
    with pytest.raises(ProviderError) as info:
        await gemini(DEEP, status=status).chat(HI)
    assert info.value.status == status
    assert "google-genai raised" not in str(info.value)
    assert len(info.value.body or "") <= 2000


async def test_gemini_negative_token_counts_count_as_zero() -> None:
    parts = [{"text": "Hi"}]
    body = {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": -4, "candidatesTokenCount": 7},
    }
    response = await gemini(json.dumps(body)).chat(HI)
    assert response.usage == Usage(0, 7, 0)


# ---- through the Agent -----------------------------------------------------------------


async def test_a_tool_name_that_is_a_list_fails_the_run_with_a_typed_error() -> None:
    call = {"id": "c1", "function": {"name": ["add"], "arguments": "{}"}}
    body = json.dumps({"choices": [{"delta": {"tool_calls": [call]}}]})
    sse = "data: " + body + "\n\ndata: [DONE]\n\n"
    agent = Agent(openai(sse), tools=[add])
    with pytest.raises(ResponseParseError, match="'name' is an array") as info:
        await agent.run("What is 2 + 3?")
    assert info.value.result is not None
    assert info.value.result.stop_reason == "error"


def _unchecked(call: ToolCall, **values: Any) -> ToolCall:
    """`call` with `values` set past its own checks (ToolCall refuses a non-dict input)."""
    for name, value in values.items():
        object.__setattr__(call, name, value)
    return call


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (ToolCall("c1", ["add"], {}), "whose name is a list, not a str"),  # type: ignore[arg-type]
        (_unchecked(ToolCall("c1", "add", {}), input=[1]), "whose input is a list, not a dict"),
        (ToolCall(None, "add", {}), "whose id is a NoneType"),  # type: ignore[arg-type]
        ("add", "a tool call that is a str, not a ToolCall"),
        (ToolCall("c1", "", {}), "a tool call without a name \\(id 'c1'\\)"),
        (ToolCall("c1", "  ", {}), "a tool call without a name"),
        ((ToolCall("c1", "add", {}), ToolCall("c1", "add", {})), "two tool calls with the same id"),
    ],
)
async def test_custom_client_tool_calls_are_checked_before_the_agent_acts(
    call: Any, match: str
) -> None:
    calls = call if isinstance(call, tuple) else (call,)
    client = FunctionClient(lambda *_: LLMResponse(tool_calls=calls))
    with pytest.raises(ResponseParseError, match=match) as info:
        await Agent(client, tools=[add]).run("What is 2 + 3?")
    assert info.value.provider == "function"
