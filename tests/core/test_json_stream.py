"""`ReplyStream`: a JSON-protocol reply's thought and answer, decoded as they stream in."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from glassagent._core.json_stream import ReplyStream, final_deltas, streamed_deltas
from glassagent.llm import LLMResponse, TextDelta, ThinkingDelta


def fed(reply: str, size: int) -> ReplyStream:
    replies = ReplyStream()
    for start in range(0, len(reply), size):
        replies.feed(reply[start : start + size])
    return replies


@pytest.mark.parametrize("size", [1, 2, 3, 7, 1000])
def test_the_thought_and_the_answer_come_out_decoded_whatever_the_pieces(size: int) -> None:
    reply = json.dumps(
        {"thought": 'say "hi" \\ back', "response": "Hi!\nLine 2 \u00e9 \U0001f30a \t end"}
    )
    replies = fed(reply, size)
    assert replies.thought == 'say "hi" \\ back'
    assert replies.text == "Hi!\nLine 2 \u00e9 \U0001f30a \t end"


def test_escaped_unicode_and_surrogate_pairs_are_decoded() -> None:
    reply = json.dumps({"response": "caf\u00e9 \U0001f30a"}, ensure_ascii=True)
    assert "\\ud83c\\udf0a" in reply
    assert fed(reply, 1).text == "caf\u00e9 \U0001f30a"


def test_a_tool_call_streams_nothing_but_its_thought() -> None:
    reply = (
        '{"thought": "list them", "tool_call": {"name": "list_files", '
        '"input": {"response": "not an answer", "thought": "nor this"}}}'
    )
    replies = fed(reply, 4)
    assert (replies.thought, replies.text) == ("list them", "")


def test_keys_and_strings_inside_other_values_and_prose_around_are_not_the_answer() -> None:
    reply = 'Sure: "response": "no" ```json\n{"note": "\\"response\\": \\"x\\"", "response": "yes"}'
    assert fed(reply, 5).text == "yes"


def test_the_final_deltas_add_only_what_was_not_streamed() -> None:
    replies = ReplyStream()
    parts = streamed_deltas(replies, '{"thought": "ok", "response": "Hel')
    assert parts == [ThinkingDelta("ok"), TextDelta("Hel")]
    final = LLMResponse("Hello", thinking="ok")
    assert final_deltas(final, "", replies) == [TextDelta("lo")]
    # a final text read otherwise (e.g. repaired) adds nothing to what was shown
    assert final_deltas(LLMResponse("Other", thinking="ok"), "", replies) == []
    # without a stream, the whole thought and text follow
    assert final_deltas(final, "", None) == [ThinkingDelta("ok"), TextDelta("Hello")]


@given(st.text(), st.text(), st.integers(min_value=1, max_value=9))
def test_any_thought_and_answer_round_trip(thought: str, answer: str, size: int) -> None:
    for ascii_only in (True, False):
        reply = json.dumps({"thought": thought, "response": answer}, ensure_ascii=ascii_only)
        replies = fed(reply, size)
        assert (replies.thought, replies.text) == (thought, answer)


def test_a_reply_cut_short_keeps_the_start_of_its_answer() -> None:
    from glassagent._core.json_protocol import read_response

    cut = LLMResponse(
        '{"thought": "a poem", "response": "The sea is wide,\\nthe sea is', stop_reason="max_tokens"
    )
    read = read_response(cut)
    assert read.text == "The sea is wide,\nthe sea is"
    assert read.thinking == "a poem"
    assert read.protocol_error is not None
    assert "unfinished response became the final text" in read.protocol_error
    # what streamed is what the answer says: nothing is added at the end
    replies = ReplyStream()
    replies.feed(cut.text)
    assert final_deltas(read, "", replies) == []


HIGH, LOW = chr(0xD83C), chr(0xDF0A)


@pytest.mark.parametrize("answer", [HIGH, f"{HIGH}x", f"a{HIGH}{LOW}b", LOW, f"{HIGH}{HIGH}{LOW}"])
def test_surrogate_escapes_decode_as_json_loads_decodes_them(answer: str) -> None:
    reply = json.dumps({"response": answer})  # ensure_ascii: surrogates as \\u escapes
    assert fed(reply, 1).text == json.loads(reply)["response"]


@given(
    st.text(st.characters(exclude_categories=())),
    st.integers(min_value=1, max_value=9),
)
def test_any_answer_with_any_code_point_streams_as_json_loads_reads_it(
    answer: str, size: int
) -> None:
    reply = json.dumps({"thought": "t", "response": answer})
    assert fed(reply, size).text == json.loads(reply)["response"]


def test_only_the_first_top_level_value_is_read() -> None:
    assert fed('{"response": "a"}{"response": "b"}', 3).text == "a"
    reply = '{"tool_call": {"name": "x", "input": {}}} {"response": "b"}'
    assert fed(reply, 4).text == ""
