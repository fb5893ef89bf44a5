"""The wire readers alone: bodies, stream chunks and lines read into one `LLMResponse`.

No I/O: each reader gets what its server sends (parsed JSON, or google-genai's objects for
Gemini), and the SSE/line splitting is checked against ``str.splitlines`` on every cut.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from glassagent._providers import anthropic_wire, gemini_wire, ollama_wire, openai_wire
from glassagent._providers.sse import LineSplitter, SSEReader
from glassagent.errors import ProviderError, ResponseParseError
from glassagent.llm import TextDelta, ThinkingDelta, Usage

# ---- lines and SSE events --------------------------------------------------------------

BODY = (
    'data: {"a": 1}\r\n\r\n: comment\nevent: ping\ndata: x\ndata: y\n\n'
    'error: {"e": 1}\n\ndata:tail\x85\u2028end'
)


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 13, len(BODY)])
def test_lines_cut_at_any_piece_size_match_splitlines(size: int) -> None:
    splitter = LineSplitter()
    lines: list[str] = []
    for start in range(0, len(BODY), size):
        lines += splitter.feed(BODY[start : start + size])
    lines += splitter.end()
    assert lines == BODY.splitlines()


def test_a_carriage_return_at_the_end_of_a_piece_waits_for_its_line_feed() -> None:
    splitter = LineSplitter()
    assert splitter.feed("a\r") == []
    assert splitter.feed("\nb\n") == ["a", "b"]
    assert splitter.end() == []


def test_sse_events_fold_fields_skip_comments_and_keep_an_unfinished_event() -> None:
    reader = SSEReader()
    events = reader.feed(BODY.splitlines())  # U+2028 ends a line, as in splitlines
    expected = [("message", '{"a": 1}'), ("ping", "x\ny"), ("error", '{"e": 1}')]
    assert events == [*expected, ("message", "tail")]
    assert reader.end() == []
    assert reader.feed(["data: open"]) == []
    assert reader.end() == [("message", "open")]


# ---- OpenAI chat completions -----------------------------------------------------------


def _openai_chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> Any:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}


def test_openai_stream_chunks_join_tool_call_fragments_by_index() -> None:
    reader = openai_wire.Reader("openai", secret="sk-secret")
    first = {"index": 0, "id": "c1", "function": {"name": "add", "arguments": '{"a"'}}
    parts = reader.chunk(_openai_chunk({"reasoning_content": "hm", "content": "Hi"}))
    parts += reader.chunk(_openai_chunk({"tool_calls": [first]}))
    parts += reader.chunk(
        _openai_chunk({"tool_calls": [{"index": 0, "function": {"arguments": ": 1}"}}]})
    )
    usage = {"prompt_tokens": 7, "completion_tokens": 5}
    parts += reader.chunk(_openai_chunk({}, "tool_calls", model="m1", usage=usage))
    assert parts == [ThinkingDelta("hm"), TextDelta("Hi")]
    response = reader.builder.build(stop_reasons=openai_wire.STOP_REASONS)
    assert response.text == "Hi"
    assert response.thinking == "hm"
    assert response.model == "m1"
    assert [(c.id, c.name, c.input) for c in response.tool_calls] == [("c1", "add", {"a": 1})]
    assert response.stop_reason == "tool_use"
    assert response.usage == Usage(7, 5)


def test_openai_body_reads_the_message_usage_and_llama_timings() -> None:
    reader = openai_wire.Reader("openai_compatible")
    reader.body(
        {
            "choices": [{"message": {"content": "done"}, "finish_reason": "length"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2},
            "timings": {"prompt_ms": 1.5, "predicted_ms": "oops"},
        }
    )
    response = reader.builder.build(stop_reasons=openai_wire.STOP_REASONS)
    assert (response.text, response.stop_reason) == ("done", "max_tokens")
    assert response.timings == {"prompt_ms": 1.5}


@pytest.mark.parametrize(
    "body",
    [{"choices": []}, {"choices": [7]}, {"choices": [{"message": {"content": 3}}]}, []],
)
def test_openai_malformed_bodies_are_parse_errors(body: Any) -> None:
    with pytest.raises(ResponseParseError):
        openai_wire.Reader("openai").body(body)


def test_openai_a_tool_call_index_that_is_not_an_integer_is_a_parse_error() -> None:
    call = {"index": "0", "function": {"name": "f", "arguments": "{}"}}
    with pytest.raises(ResponseParseError, match="index"):
        openai_wire.Reader("openai").chunk(_openai_chunk({"tool_calls": [call]}))


# ---- Ollama ----------------------------------------------------------------------------


def test_ollama_lines_read_text_thinking_tool_calls_and_the_final_counts() -> None:
    reader = ollama_wire.Reader()
    call = {"function": {"name": "add", "arguments": {"a": 1}}}
    parts = reader.line({"message": {"content": "Hi", "thinking": "hm"}})
    parts += reader.line({"message": {"content": "", "tool_calls": [call]}})
    assert not reader.done
    last = {"message": {"content": ""}, "done": True, "done_reason": "stop"}
    last |= {"prompt_eval_count": 9, "eval_count": 4, "total_duration": 2_000_000, "model": "q"}
    parts += reader.line(last)
    assert reader.done
    assert parts == [ThinkingDelta("hm"), TextDelta("Hi")]
    response = reader.builder.build(stop_reasons=ollama_wire.STOP_REASONS)
    assert [(c.name, c.input) for c in response.tool_calls] == [("add", {"a": 1})]
    assert response.usage == Usage(9, 4)
    assert response.model == "q"
    assert response.stop_reason == "tool_use"
    assert response.timings["total_ms"] == pytest.approx(2.0)


def test_ollama_an_error_line_is_a_provider_error_and_a_nameless_call_a_parse_error() -> None:
    with pytest.raises(ProviderError, match="model not found"):
        ollama_wire.check({"error": "model not found"}, "a stream line")
    with pytest.raises(ResponseParseError):
        ollama_wire.check([1], "a stream line")
    with pytest.raises(ResponseParseError, match="without a name"):
        ollama_wire.Reader().line({"message": {"tool_calls": [{"function": {"name": ""}}]}})


# ---- Anthropic -------------------------------------------------------------------------


def test_anthropic_stream_events_build_text_thinking_and_a_tool_call() -> None:
    reader = anthropic_wire.Reader(secret="sk-ant-secret")
    usage = {"input_tokens": 10, "output_tokens": 1}
    events: list[tuple[str, Any]] = [
        ("message_start", {"type": "message_start", "message": {"model": "c", "usage": usage}}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "thinking", "thinking": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "thinking_delta", "thinking": "hm"}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "signature_delta", "signature": "sig"}}),
        ("content_block_start", {"type": "content_block_start", "index": 1,
                                 "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 1,
                                 "delta": {"type": "text_delta", "text": "Hi"}}),
        ("content_block_start", {"type": "content_block_start", "index": 2,
                                 "content_block": {"type": "tool_use", "id": "t1", "name": "add",
                                                   "input": {}}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 2,
                                 "delta": {"type": "input_json_delta", "partial_json": '{"a": '}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 2,
                                 "delta": {"type": "input_json_delta", "partial_json": "1}"}}),
        ("ping", {"type": "ping"}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use"},
                           "usage": {"output_tokens": 8}}),
    ]  # fmt: skip
    parts = [part for name, data in events for part in reader.event(name, data)]
    assert not reader.stopped
    reader.event("message_stop", {"type": "message_stop"})
    assert reader.stopped
    assert parts == [ThinkingDelta("hm"), TextDelta("Hi")]
    response = reader.builder.build(stop_reasons=anthropic_wire.STOP_REASONS)
    assert [(c.id, c.name, c.input) for c in response.tool_calls] == [("t1", "add", {"a": 1})]
    assert response.usage == Usage(10, 8)
    assert response.model == "c"
    thinking = response.provider_metadata[anthropic_wire.THINKING_BLOCKS]
    assert thinking == [{"type": "thinking", "thinking": "hm", "signature": "sig"}]


def test_anthropic_error_events_and_strays_are_typed_errors_without_the_key() -> None:
    reader = anthropic_wire.Reader(secret="sk-ant-secret-key")
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}
    with pytest.raises(ProviderError, match="overloaded_error") as caught:
        reader.event("error", overloaded)
    assert caught.value.status == 529
    stray = {"type": "content_block_delta", "index": 4, "delta": {"type": "text_delta"}}
    with pytest.raises(ResponseParseError, match="never started"):
        reader.event("content_block_delta", stray)
    with pytest.raises(ResponseParseError) as caught_key:
        reader.message({"type": "message", "content": "sk-ant-secret-key"})
    assert "sk-ant-secret-key" not in str(caught_key.value)


def test_anthropic_a_complete_message_body() -> None:
    reader = anthropic_wire.Reader()
    body = {
        "type": "message",
        "model": "c",
        "content": [{"type": "text", "text": "Hello"}],
        "stop_reason": "max_tokens",
        "usage": {"input_tokens": 4, "output_tokens": 2},
    }
    reader.message(body)
    response = reader.builder.build(stop_reasons=anthropic_wire.STOP_REASONS)
    assert (response.text, response.stop_reason, response.usage) == (
        "Hello",
        "max_tokens",
        Usage(4, 2),
    )


# ---- Gemini (google-genai's response objects) -------------------------------------------


def _gemini_chunk(parts: list[Any], finish: str | None = "STOP", **extra: Any) -> Any:
    content = SimpleNamespace(parts=parts)
    candidate = SimpleNamespace(content=content, finish_reason=finish)
    return SimpleNamespace(candidates=[candidate], **extra)


def _part(**fields: Any) -> Any:
    defaults = {"text": None, "thought": False, "thought_signature": None, "function_call": None}
    return SimpleNamespace(**{**defaults, **fields})


def test_gemini_chunks_read_text_thinking_calls_usage_and_signatures() -> None:
    reader = gemini_wire.Reader()
    call = SimpleNamespace(name="add", id=None, args={"a": 1})
    usage = SimpleNamespace(prompt_token_count=6, candidates_token_count=3, thoughts_token_count=2)
    parts = reader.add(_gemini_chunk([_part(text="hm", thought=True), _part(text="Hi")], None))
    parts += reader.add(
        _gemini_chunk(
            [_part(function_call=call, thought_signature=b"\x01\x02")],
            usage_metadata=usage,
            model_version="g",
        )
    )
    assert parts == [ThinkingDelta("hm"), TextDelta("Hi")]
    response = reader.response(raw_response=None, raw_request=None, streamed=True)
    assert [(c.name, c.input) for c in response.tool_calls] == [("add", {"a": 1})]
    assert response.tool_calls[0].provider_metadata[gemini_wire.SIGNATURE] == "AQI="
    assert response.usage == Usage(6, 3, 2)
    assert response.model == "g"
    assert response.stop_reason == "tool_use"


def test_gemini_a_stream_without_a_finish_reason_and_a_nameless_call_are_refused() -> None:
    reader = gemini_wire.Reader()
    reader.add(_gemini_chunk([_part(text="Hi")], None))
    with pytest.raises(ResponseParseError, match="ended before"):
        reader.response(raw_response=None, raw_request=None, streamed=True)
    nameless = SimpleNamespace(name="", id=None, args={})
    with pytest.raises(ResponseParseError, match="without a name"):
        gemini_wire.Reader().add(_gemini_chunk([_part(function_call=nameless)]))
