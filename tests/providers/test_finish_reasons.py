"""Finish reasons are read honestly, and odd tool-call shapes are read or refused."""

import json
from typing import Any

import httpx
import pytest
import respx

from glassagent import Agent, LLMResponse, Message, ModelSettings, tool
from glassagent import events as ev
from glassagent.errors import ContentBlockedError, ProviderError, ResponseParseError
from glassagent.llm import GeminiClient, OllamaClient, OpenAICompatibleClient, RetryPolicy
from glassagent.testing import ScriptedClient

BASE = "http://127.0.0.1:8080/v1"
URL = f"{BASE}/chat/completions"
OLLAMA = "http://127.0.0.1:11434"
HI = (Message(role="user", content="Hi"),)
GEMINI_KEY = "AIzaSyD3adB33fTestKey0000000000x9Qk"
GENERATE = r".*/models/gemini-2\.5-flash:generateContent$"
STREAM = r".*/models/gemini-2\.5-flash:streamGenerateContent\?alt=sse$"


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: First addend.
        b: Second addend.
    """
    return a + b


def openai() -> OpenAICompatibleClient:
    return OpenAICompatibleClient("m", base_url=BASE, retry=RetryPolicy(max_retries=0))


def completion(message: dict[str, Any], finish: str | None = "stop", **extra: Any) -> dict:
    choice = {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}
    return {"id": "c1", "object": "chat.completion", "choices": [choice], **extra}


def chunk(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> dict:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return {"id": "c1", "object": "chat.completion.chunk", "choices": choices, **extra}


def sse(*chunks: dict[str, Any]) -> httpx.Response:
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    return httpx.Response(200, text=body, headers={"content-type": "text/event-stream"})


async def streamed(client: Any, *args: Any) -> LLMResponse:
    parts = [part async for part in client.stream(*args)]
    assert isinstance(parts[-1], LLMResponse)
    return parts[-1]


# ---- OpenAI-compatible finish reasons ----------------------------------------------------


@pytest.mark.parametrize(
    ("finish", "expected"),
    [
        ("model_length", "max_tokens"),
        ("content_filter", "content_filter"),
        ("eos_token", "end_turn"),
        ("abort", "other"),
        ("something_new", "other"),
    ],
)
@respx.mock
async def test_openai_finish_reasons_are_mapped_and_kept_raw(finish, expected) -> None:
    respx.post(URL).mock(
        side_effect=[
            httpx.Response(200, json=completion({"content": "Once upon"}, finish)),
            sse(chunk({"content": "Once upon"}), chunk({}, finish)),
        ]
    )
    for response in (await openai().chat(HI), await streamed(openai(), HI)):
        assert (response.text, response.stop_reason) == ("Once upon", expected)
        assert response.raw_stop_reason == finish


@respx.mock
async def test_openai_without_a_finish_reason_is_an_end_turn_with_no_raw_reason() -> None:
    respx.post(URL).respond(json=completion({"content": "ok"}, None))
    response = await openai().chat(HI)
    assert (response.stop_reason, response.raw_stop_reason) == ("end_turn", None)


@respx.mock
async def test_openai_content_filter_with_no_text_is_content_blocked() -> None:
    respx.post(URL).mock(
        side_effect=[
            httpx.Response(200, json=completion({"content": None}, "content_filter")),
            sse(chunk({"role": "assistant"}), chunk({}, "content_filter")),
        ]
    )
    with pytest.raises(ContentBlockedError, match="content_filter") as info:
        await openai().chat(HI)
    assert info.value.reason == "content_filter"
    with pytest.raises(ContentBlockedError):
        await streamed(openai(), HI)


@respx.mock
async def test_json_protocol_keeps_the_finish_reason() -> None:
    client = OpenAICompatibleClient("m", base_url=BASE, tool_protocol="json")
    respx.post(URL).respond(json=completion({"content": '{"thought": "hm", "resp'}, "length"))
    response = await client.chat(HI, [add.definition])
    assert (response.stop_reason, response.raw_stop_reason) == ("max_tokens", "length")
    assert response.protocol_error is not None


# ---- OpenAI-compatible wire shapes -------------------------------------------------------


@respx.mock
async def test_a_tool_call_without_the_function_wrapper_is_read() -> None:
    unwrapped = {"id": "call_1", "type": "function", "name": "add", "arguments": '{"a": 1}'}
    respx.post(URL).respond(json=completion({"tool_calls": [unwrapped]}, "tool_calls"))
    call = (await openai().chat(HI, [add.definition])).tool_calls[0]
    assert (call.id, call.name, call.input) == ("call_1", "add", {"a": 1})


@respx.mock
async def test_a_streamed_tool_call_without_the_function_wrapper_is_read() -> None:
    respx.post(URL).mock(
        return_value=sse(
            chunk({"tool_calls": [{"index": 0, "id": "call_1", "name": "add", "arguments": ""}]}),
            chunk({"tool_calls": [{"index": 0, "arguments": '{"a": 1,'}]}),
            chunk({"tool_calls": [{"index": 0, "arguments": ' "b": 2}'}]}, "tool_calls"),
        )
    )
    response = await streamed(openai(), HI, [add.definition])
    call = response.tool_calls[0]
    assert (call.id, call.name, call.input) == ("call_1", "add", {"a": 1, "b": 2})
    assert (response.stop_reason, response.raw_stop_reason) == ("tool_use", "tool_calls")


@respx.mock
async def test_a_nameless_tool_call_is_a_parse_error() -> None:
    nameless = {"id": "call_1", "type": "function", "function": {"arguments": "{}"}}
    respx.post(URL).mock(
        side_effect=[
            httpx.Response(200, json=completion({"tool_calls": [nameless]}, "tool_calls")),
            sse(chunk({"tool_calls": [{"index": 0, **nameless}]}, "tool_calls")),
        ]
    )
    with pytest.raises(ResponseParseError, match="a tool call without a name"):
        await openai().chat(HI, [add.definition])
    with pytest.raises(ResponseParseError, match="a tool call without a name"):
        await streamed(openai(), HI, [add.definition])


@respx.mock
async def test_groq_usage_under_x_groq_is_read() -> None:
    groq_usage = {"prompt_tokens": 40, "completion_tokens": 9, "total_tokens": 49}
    respx.post(URL).mock(
        return_value=sse(
            chunk({"content": "Hi"}),
            chunk({}, "stop", x_groq={"id": "req_01", "usage": groq_usage}),
        )
    )
    usage = (await streamed(openai(), HI)).usage
    assert (usage.input_tokens, usage.output_tokens) == (40, 9)


# ---- Ollama ------------------------------------------------------------------------------


def ollama_line(message: dict[str, Any], **extra: Any) -> dict[str, Any]:
    content = {"role": "assistant", "content": "", **message}
    return {"model": "llama3.1:8b", "message": content, "done": True, **extra}


@pytest.mark.parametrize(
    ("done_reason", "expected"),
    [("unload", "other"), (None, "end_turn")],
)
@respx.mock
async def test_ollama_done_reasons_are_mapped_and_kept_raw(done_reason, expected) -> None:
    extra = {} if done_reason is None else {"done_reason": done_reason}
    respx.post(f"{OLLAMA}/api/chat").respond(json=ollama_line({"content": "Once"}, **extra))
    response = await OllamaClient(base_url=OLLAMA, tool_protocol="native").chat(HI)
    assert (response.stop_reason, response.raw_stop_reason) == (expected, done_reason)


@respx.mock
async def test_ollama_reads_unwrapped_calls_and_refuses_nameless_ones() -> None:
    client = OllamaClient(base_url=OLLAMA, tool_protocol="native")
    unwrapped = {"name": "add", "arguments": {"a": 1, "b": 2}}
    nameless = {"function": {"arguments": {"a": 1}}}
    respx.post(f"{OLLAMA}/api/chat").mock(
        side_effect=[
            httpx.Response(200, json=ollama_line({"tool_calls": [unwrapped]})),
            httpx.Response(200, json=ollama_line({"tool_calls": [nameless]})),
        ]
    )
    call = (await client.chat(HI, [add.definition])).tool_calls[0]
    assert (call.name, call.input) == ("add", {"a": 1, "b": 2})
    with pytest.raises(ResponseParseError, match="a tool call without a name"):
        await client.chat(HI, [add.definition])


# ---- Gemini ------------------------------------------------------------------------------


def gemini() -> GeminiClient:
    return GeminiClient(api_key=GEMINI_KEY, retry=RetryPolicy(max_retries=0))


def gemini_body(parts: list[dict[str, Any]], finish: str) -> dict[str, Any]:
    candidate: dict[str, Any] = {"finishReason": finish, "index": 0}
    if parts:
        candidate["content"] = {"role": "model", "parts": parts}
    return {"candidates": [candidate], "modelVersion": "gemini-2.5-flash"}


def gemini_sse(*chunks: dict[str, Any]) -> httpx.Response:
    body = b"".join(b"data: " + json.dumps(c).encode() + b"\r\n\r\n" for c in chunks)
    return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})


@pytest.mark.parametrize(
    ("finish", "expected"),
    [
        ("CONTINUATION", "max_tokens"),
        ("SAFETY", "content_filter"),
        ("MODEL_ARMOR", "content_filter"),
        ("PROHIBITED_CONTENT", "content_filter"),
        ("OTHER", "other"),
        ("TOO_MANY_TOOL_CALLS", "other"),
        ("IMAGE_OTHER", "other"),
        ("NO_IMAGE", "other"),
        ("FINISH_REASON_UNSPECIFIED", "other"),
    ],
)
@respx.mock
async def test_gemini_finish_reasons_are_mapped_and_kept_raw(finish, expected) -> None:
    respx.post(url__regex=GENERATE).respond(json=gemini_body([{"text": "Part"}], finish))
    respx.post(url__regex=STREAM).mock(
        return_value=gemini_sse(
            {"candidates": [{"content": {"role": "model", "parts": [{"text": "Pa"}]}}]},
            gemini_body([{"text": "rt"}], finish),
        )
    )
    for response in (await gemini().chat(HI), await streamed(gemini(), HI)):
        assert (response.text, response.stop_reason) == ("Part", expected)
        assert response.raw_stop_reason == finish


@pytest.mark.filterwarnings("ignore:.*is not a valid FinishReason:UserWarning")
@respx.mock
async def test_an_unknown_gemini_finish_reason_is_other_never_end_turn() -> None:
    respx.post(url__regex=GENERATE).respond(json=gemini_body([{"text": "x"}], "BRAND_NEW"))
    response = await gemini().chat(HI)
    assert (response.stop_reason, response.raw_stop_reason) == ("other", "BRAND_NEW")


@pytest.mark.parametrize("finish", ["MODEL_ARMOR", "SAFETY", "SPII", "IMAGE_SAFETY"])
@respx.mock
async def test_a_gemini_answer_withheld_entirely_is_content_blocked(finish) -> None:
    respx.post(url__regex=GENERATE).respond(json=gemini_body([], finish))
    with pytest.raises(ContentBlockedError, match=finish) as info:
        await gemini().chat(HI)
    assert info.value.reason == finish


@pytest.mark.parametrize(
    "finish", ["MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "MALFORMED_RESPONSE"]
)
@respx.mock
async def test_malformed_gemini_answers_are_parse_errors(finish) -> None:
    respx.post(url__regex=GENERATE).respond(json=gemini_body([], finish))
    with pytest.raises(ResponseParseError, match=finish):
        await gemini().chat(HI, [add.definition])


@respx.mock
async def test_a_missing_thought_signature_is_a_provider_error_saying_why() -> None:
    respx.post(url__regex=GENERATE).respond(json=gemini_body([], "MISSING_THOUGHT_SIGNATURE"))
    with pytest.raises(ProviderError, match="thought signature") as info:
        await gemini().chat(HI)
    assert not isinstance(info.value, ResponseParseError | ContentBlockedError)


def test_every_finish_reason_google_genai_knows_is_decided() -> None:
    from google.genai import types

    from glassagent._providers import gemini_wire

    decided = set(gemini_wire.STOP_REASONS) | gemini_wire.MALFORMED
    decided.add(gemini_wire.MISSING_SIGNATURE)
    assert {reason.value for reason in types.FinishReason} <= decided


@respx.mock
async def test_a_nameless_gemini_function_call_is_a_parse_error() -> None:
    nameless = {"functionCall": {"args": {"a": 1}}}
    respx.post(url__regex=GENERATE).respond(json=gemini_body([nameless], "STOP"))
    with pytest.raises(ResponseParseError, match="without a name"):
        await gemini().chat(HI, [add.definition])


# ---- the agent ---------------------------------------------------------------------------


async def test_a_truncated_answer_is_reported_by_the_run() -> None:
    cut = LLMResponse("Once upon a", stop_reason="max_tokens", raw_stop_reason="length")
    result = await Agent(ScriptedClient([cut])).run("Tell a story")
    assert (result.text, result.stop_reason) == ("Once upon a", "end_turn")
    assert (result.model_stop_reason, result.truncated) == ("max_tokens", True)
    response = next(e for e in result.events if isinstance(e, ev.LLMResponseEvent))
    assert (response.stop_reason, response.raw_stop_reason) == ("max_tokens", "length")
    complete = result.events[-1]
    assert isinstance(complete, ev.CompleteEvent)
    assert complete.stop_reason == "max_tokens"
    assert ev.parse_event(complete.to_dict()) == complete


async def test_a_finished_answer_is_not_truncated() -> None:
    result = await Agent(ScriptedClient(["All done."])).run("Hi")
    assert (result.model_stop_reason, result.truncated) == ("end_turn", False)
    assert result.events[-1].stop_reason == "end_turn"  # type: ignore[union-attr]


@respx.mock
async def test_agent_over_the_wire_reports_a_cut_answer() -> None:
    respx.post(URL).mock(return_value=sse(chunk({"content": "Once upon"}), chunk({}, "length")))
    agent = Agent(openai(), settings=ModelSettings(max_tokens=3))
    result = await agent.run("Tell a story")
    assert result.truncated
    assert [e.stop_reason for e in result.events if isinstance(e, ev.CompleteEvent)] == [
        "max_tokens"
    ]
