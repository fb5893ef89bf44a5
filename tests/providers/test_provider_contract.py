"""The provider contract (contract_suite.py) over the built-in HTTP clients.

Each case writes answers in its provider's documented wire form: OpenAI's chat completions
(SSE chunks ended by ``[DONE]``), Anthropic's Messages API (named SSE events ended by
``message_stop``), Ollama's ``/api/chat`` (JSON lines ended by ``"done": true``) and Gemini's
``generateContent`` (``streamGenerateContent?alt=sse``: candidates whose content parts carry
text and whole ``functionCall``s, the last chunk with ``finishReason`` and ``usageMetadata``),
read by google-genai's own client over glassagent's httpx.
"""

from __future__ import annotations

import json
from typing import Any

from glassagent.llm import (
    AnthropicClient,
    BaseLLMClient,
    GeminiClient,
    OllamaClient,
    OpenAICompatibleClient,
)
from tests.providers.contract_suite import Answer, Call, ContractSuite, Event, ProviderCase


def halves(text: str) -> list[str]:
    """`text` in two pieces, as a stream sends a tool call's arguments."""
    return [text[: len(text) // 2], text[len(text) // 2 :]]


# ---- OpenAI's chat completions ----------------------------------------------------------------


def openai_call(call: Call, index: int) -> dict[str, Any]:
    function = {"name": call.name, "arguments": json.dumps(call.arguments)}
    return {"index": index, "id": call.id, "type": "function", "function": function}


def openai_body(answer: Answer) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": answer.text or None}
    if answer.calls:
        message["tool_calls"] = [openai_call(c, i) for i, c in enumerate(answer.calls)]
    choice = {"index": 0, "message": message, "finish_reason": answer.finish}
    usage = {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}
    return {"id": "chatcmpl-1", "object": "chat.completion", "choices": [choice], "usage": usage}


def openai_events(answer: Answer) -> list[Event]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> Event:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return None, {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [choice]}

    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": delta}) for delta in answer.deltas]
    for index, call in enumerate(answer.calls):
        first, second = halves(json.dumps(call.arguments))
        start = {**openai_call(call, index), "function": {"name": call.name, "arguments": first}}
        events.append(chunk({"tool_calls": [start]}))
        events.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": second}}]}))
    usage = {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}
    last = (None, {"id": "chatcmpl-1", "choices": [], "usage": usage})
    return [*events, chunk({}, answer.finish), last, (None, "[DONE]")]


def openai(base_url: str, api_key: str, **options: Any) -> BaseLLMClient:
    return OpenAICompatibleClient("gpt-test", base_url=base_url + "/v1", api_key=api_key, **options)


OPENAI = ProviderCase(
    name="openai",
    make=openai,
    path="/v1/chat/completions",
    body=openai_body,
    events=openai_events,
    finish_reasons={"end_turn": "stop", "max_tokens": "length", "tool_use": "tool_calls"},
    error_event=lambda message: (None, {"error": {"message": message}}),
    malformed_bodies=[
        {"choices": "none"},
        {"choices": [{"message": {"content": 5}, "finish_reason": "stop"}]},
        {"choices": [{"message": {"tool_calls": [{"function": "f"}]}, "finish_reason": "stop"}]},
    ],
    malformed_events=[
        (None, {"choices": [{"index": 0, "delta": {"content": 5}}]}),
        (None, {"choices": {"index": 0, "delta": {}}}),
    ],
)


# ---- Anthropic's Messages API -----------------------------------------------------------------


def anthropic_body(answer: Answer) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": answer.text}] if answer.text else []
    content += [
        {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in answer.calls
    ]
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": content,
        "stop_reason": answer.finish,
        "stop_sequence": None,
        "usage": {"input_tokens": 9, "output_tokens": 4},
    }


def anthropic_event(kind: str, **data: Any) -> Event:
    return kind, {"type": kind, **data}


def anthropic_events(answer: Answer) -> list[Event]:
    start = {**anthropic_body(Answer()), "stop_reason": None}
    events = [anthropic_event("message_start", message=start)]
    blocks: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    if answer.deltas:
        deltas = [{"type": "text_delta", "text": d} for d in answer.deltas]
        blocks.append(({"type": "text", "text": ""}, deltas))
    for call in answer.calls:
        block = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
        pieces = halves(json.dumps(call.arguments))
        blocks.append((block, [{"type": "input_json_delta", "partial_json": p} for p in pieces]))
    for index, (block, deltas) in enumerate(blocks):
        events.append(anthropic_event("content_block_start", index=index, content_block=block))
        for delta in deltas:
            events.append(anthropic_event("content_block_delta", index=index, delta=delta))
        events.append(anthropic_event("content_block_stop", index=index))
    stop = {"stop_reason": answer.finish, "stop_sequence": None}
    events.append(anthropic_event("message_delta", delta=stop, usage={"output_tokens": 4}))
    return [*events, anthropic_event("message_stop")]


def anthropic(base_url: str, api_key: str, **options: Any) -> BaseLLMClient:
    return AnthropicClient("claude-test", base_url=base_url, api_key=api_key, **options)


ANTHROPIC = ProviderCase(
    name="anthropic",
    make=anthropic,
    path="/v1/messages",
    body=anthropic_body,
    events=anthropic_events,
    finish_reasons={"end_turn": "end_turn", "max_tokens": "max_tokens", "tool_use": "tool_use"},
    error_body=lambda message: {"type": "error", "error": {"type": "x", "message": message}},
    error_event=lambda message: anthropic_event(
        "error", error={"type": "invalid_request_error", "message": message}
    ),
    malformed_bodies=[
        {"type": "message", "content": "Sunny", "stop_reason": "end_turn"},
        {"type": "message", "content": [{"type": "text", "text": 5}], "stop_reason": "end_turn"},
    ],
    malformed_events=[
        anthropic_event("content_block_start", index="0", content_block={"type": "text"}),
        anthropic_event("content_block_start", index=0, content_block="text"),
    ],
)


# ---- Ollama's /api/chat -------------------------------------------------------------------------


def ollama_calls(answer: Answer) -> list[dict[str, Any]]:
    return [{"function": {"name": c.name, "arguments": c.arguments}} for c in answer.calls]


def ollama_line(content: str, *, done: bool = False, **fields: Any) -> Event:
    message = {"role": "assistant", "content": content, **fields.pop("message", {})}
    return None, {"model": "llama-test", "message": message, "done": done, **fields}


def ollama_body(answer: Answer) -> dict[str, Any]:
    message = {"tool_calls": ollama_calls(answer)} if answer.calls else {}
    counts = {"prompt_eval_count": 9, "eval_count": 4}
    _, body = ollama_line(
        answer.text, done=True, done_reason=answer.finish, message=message, **counts
    )
    return dict(body)


def ollama_events(answer: Answer) -> list[Event]:
    events = [ollama_line(delta) for delta in answer.deltas]
    if answer.calls:
        events.append(ollama_line("", message={"tool_calls": ollama_calls(answer)}))
    counts = {"prompt_eval_count": 9, "eval_count": 4}
    return [*events, ollama_line("", done=True, done_reason=answer.finish, **counts)]


def ollama(base_url: str, api_key: str, **options: Any) -> BaseLLMClient:
    return OllamaClient(
        "llama-test", base_url=base_url, api_key=api_key, tool_protocol="native", **options
    )


OLLAMA = ProviderCase(
    name="ollama",
    make=ollama,
    path="/api/chat",
    body=ollama_body,
    events=ollama_events,
    finish_reasons={"end_turn": "stop", "max_tokens": "length", "tool_use": "stop"},
    framing="ndjson",
    error_body=lambda message: {"error": message},
    error_event=lambda message: (None, {"error": message}),
    malformed_bodies=[
        {"message": "Sunny", "done": True},
        {"message": {"role": "assistant", "content": 5}, "done": True},
    ],
    malformed_events=[
        (None, {"message": {"role": "assistant", "content": 5}, "done": False}),
        (None, {"message": {"role": "assistant", "tool_calls": "x"}, "done": False}),
    ],
    call_ids=False,
)


# ---- Gemini's generateContent (google-genai's own client over our httpx) -------------------

GEMINI_MODEL = "gemini-test"
GEMINI_STATUS = {401: "UNAUTHENTICATED", 429: "RESOURCE_EXHAUSTED", 503: "UNAVAILABLE"}
NOT_OBJECTS_READ = (
    "google-genai reads a 200 body that is no JSON object (null, [1, 2], a string) as an "
    "empty answer, and GeminiClient returns it as an empty end_turn answer; a stream chunk "
    "that is no object, or whose candidates are no array, is skipped, not refused"
)


def gemini_candidate(parts: list[dict[str, Any]], finish: str | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return candidate


def gemini_response(candidate: dict[str, Any], *, usage: bool = True) -> dict[str, Any]:
    response: dict[str, Any] = {"candidates": [candidate], "modelVersion": GEMINI_MODEL}
    if usage:
        counts = {"promptTokenCount": 9, "candidatesTokenCount": 4, "totalTokenCount": 13}
        response |= {"usageMetadata": counts, "responseId": "resp-1"}
    return response


def gemini_calls(answer: Answer) -> list[dict[str, Any]]:
    return [
        {"functionCall": {"id": c.id, "name": c.name, "args": c.arguments}} for c in answer.calls
    ]


def gemini_body(answer: Answer) -> dict[str, Any]:
    parts = [{"text": answer.text}] if answer.text else []
    return gemini_response(gemini_candidate([*parts, *gemini_calls(answer)], answer.finish))


def gemini_events(answer: Answer) -> list[Event]:
    """One chunk per delta, the calls whole (Gemini streams no argument pieces), then the
    finish reason and the usage in a last chunk."""
    chunks = [gemini_candidate([{"text": delta}]) for delta in answer.deltas]
    chunks += [gemini_candidate([call]) for call in gemini_calls(answer)]
    events: list[Event] = [(None, gemini_response(c, usage=False)) for c in chunks]
    last = gemini_response({"finishReason": answer.finish, "index": 0})
    return [*events, (None, last)]


def gemini_error(status: int, message: str) -> dict[str, Any]:
    return {"error": {"code": status, "message": message, "status": GEMINI_STATUS.get(status)}}


def gemini(base_url: str, api_key: str, **options: Any) -> BaseLLMClient:
    return GeminiClient(GEMINI_MODEL, base_url=base_url, api_key=api_key, **options)


GEMINI = ProviderCase(
    name="gemini",
    make=gemini,
    path=f"/v1/models/{GEMINI_MODEL}:generateContent",
    stream_path=f"/v1/models/{GEMINI_MODEL}:streamGenerateContent?alt=sse",
    body=gemini_body,
    events=gemini_events,
    finish_reasons={"end_turn": "STOP", "max_tokens": "MAX_TOKENS", "tool_use": "STOP"},
    status_error_body=gemini_error,
    error_event=lambda message: (None, gemini_error(500, message)),
    malformed_bodies=[
        {"candidates": 5},
        {"candidates": [{"content": {"parts": [{"text": 5}]}, "finishReason": "STOP"}]},
        {"candidates": [gemini_candidate([{"functionCall": {"name": ["get_weather"]}}], "STOP")]},
    ],
    malformed_events=[
        (None, {"candidates": "Sunny"}),
        (None, {"candidates": [{"content": {"parts": [{"text": 5}]}}]}),
    ],
    known_bugs={
        "test_bodies_that_are_no_json_object_raise_response_parse_error": NOT_OBJECTS_READ,
        "test_events_that_are_no_json_object_raise_response_parse_error": NOT_OBJECTS_READ,
        "test_malformed_events_raise_response_parse_error": NOT_OBJECTS_READ,
        "test_the_key_stays_out_of_errors_on_unreadable_answers[chat]": NOT_OBJECTS_READ,
    },
)


class TestBuiltInProviders(ContractSuite):
    cases = (OPENAI, ANTHROPIC, OLLAMA, GEMINI)
