"""`ResponseBuilder`: one answer from text, thinking and tool-call fragments (pure, no I/O)."""

from __future__ import annotations

import re

import pytest

from glassagent._providers.builder import GENERATED_ID, ResponseBuilder, new_call_id
from glassagent.errors import ResponseParseError
from glassagent.llm import TextDelta, ThinkingDelta, Usage

REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}


def build(builder: ResponseBuilder, **kwargs):
    return builder.build(stop_reasons=REASONS, **kwargs)


def test_text_and_thinking_deltas_are_returned_and_joined() -> None:
    b = ResponseBuilder("p")
    assert b.thinking("Let me ") == ThinkingDelta("Let me ")
    assert b.thinking("think.") == ThinkingDelta("think.")
    assert b.text("Hel") == TextDelta("Hel")
    assert b.text("") is None
    assert b.thinking("") is None
    assert b.text("lo") == TextDelta("lo")
    response = build(b)
    assert response.text == "Hello"
    assert response.thinking == "Let me think."


def test_nothing_gives_an_empty_end_turn_answer() -> None:
    response = build(ResponseBuilder("p"), model="fallback")
    assert (response.text, response.thinking, response.tool_calls) == ("", None, ())
    assert response.stop_reason == "end_turn"
    assert response.raw_stop_reason is None
    assert response.model == "fallback"


def test_fragments_by_index_are_joined_per_call() -> None:
    b = ResponseBuilder("p")
    b.tool_call(index=0, call_id="call_a", name="add", arguments="")
    b.tool_call(index=1, call_id="call_b", name="mul", arguments='{"a": ')
    b.tool_call(index=0, arguments='{"a": 1, ')
    b.tool_call(index=1, arguments="3}")
    b.tool_call(index=0, arguments='"b": 2}')
    calls = build(b).tool_calls
    assert [(c.id, c.name, c.input) for c in calls] == [
        ("call_a", "add", {"a": 1, "b": 2}),
        ("call_b", "mul", {"a": 3}),
    ]


def test_fragments_by_id_without_index_are_joined_per_call() -> None:
    b = ResponseBuilder("p")
    b.tool_call(call_id="a", name="add", arguments='{"a"')
    b.tool_call(call_id="a", arguments=": 1}")
    calls = build(b).tool_calls
    assert [(c.id, c.input) for c in calls] == [("a", {"a": 1})]


def test_interleaved_parallel_calls_without_index_are_not_merged() -> None:
    b = ResponseBuilder("p")
    b.tool_call(call_id="a", name="add", arguments='{"a": ')
    b.tool_call(call_id="b", name="mul", arguments='{"x": ')
    b.tool_call(call_id="a", arguments="1}")
    b.tool_call(call_id="b", arguments="2}")
    calls = build(b).tool_calls
    assert [(c.id, c.name, c.input) for c in calls] == [
        ("a", "add", {"a": 1}),
        ("b", "mul", {"x": 2}),
    ]


def test_whole_parallel_calls_without_index_stay_apart_by_id() -> None:
    b = ResponseBuilder("p")
    b.tool_call(call_id="a", name="add", arguments={"a": 1})
    b.tool_call(call_id="b", name="add", arguments={"a": 2})
    assert [c.input for c in build(b).tool_calls] == [{"a": 1}, {"a": 2}]


def test_one_index_with_a_new_id_starts_a_new_call() -> None:
    # Some servers number every parallel call 0; their ids tell them apart.
    b = ResponseBuilder("p")
    b.tool_call(index=0, call_id="a", name="add", arguments='{"a": 1}')
    b.tool_call(index=0, call_id="b", name="add", arguments='{"a": 2}')
    b.tool_call(index=0, arguments="")  # a continuation goes to the latest call at 0
    assert [(c.id, c.input) for c in build(b).tool_calls] == [("a", {"a": 1}), ("b", {"a": 2})]


def test_a_fragment_with_neither_index_nor_id_continues_the_latest_call() -> None:
    b = ResponseBuilder("p")
    b.tool_call(call_id="a", name="add", arguments='{"a"')
    b.tool_call(arguments=": 5}")
    assert build(b).tool_calls[0].input == {"a": 5}


def test_a_call_without_an_id_gets_a_generated_one_marked_as_such() -> None:
    b = ResponseBuilder("p")
    b.tool_call(index=0, name="add", arguments="{}")
    (call,) = build(b).tool_calls
    assert re.fullmatch(r"call_[0-9a-f]{24}", call.id)
    assert call.provider_metadata[GENERATED_ID] is True


def test_new_call_id_is_unique() -> None:
    ids = {new_call_id() for _ in range(1000)}
    assert len(ids) == 1000


def test_a_whole_arguments_object_is_taken_as_is_and_text_wins_over_it() -> None:
    b = ResponseBuilder("p")
    b.tool_call(index=0, call_id="a", name="f", arguments={"k": [1, 2]})
    b.tool_call(index=1, call_id="b", name="f", arguments={})
    b.tool_call(index=1, arguments='{"streamed": true}')
    calls = build(b).tool_calls
    assert calls[0].input == {"k": [1, 2]}
    assert calls[1].input == {"streamed": True}


def test_empty_arguments_are_an_empty_object() -> None:
    b = ResponseBuilder("p")
    b.tool_call(index=0, call_id="a", name="now")
    assert build(b).tool_calls[0].input == {}


def test_invalid_arguments_mark_the_call_instead_of_raising() -> None:
    b = ResponseBuilder("p")
    b.tool_call(index=0, call_id="a", name="add", arguments='{"a": 1')
    (call,) = build(b).tool_calls
    assert call.input == {}
    assert call.arguments_error is not None
    assert "not valid JSON" in call.arguments_error


def test_call_metadata_is_kept() -> None:
    b = ResponseBuilder("p")
    b.tool_call(index=0, call_id="a", name="f", metadata={"sig": "x"})
    assert build(b).tool_calls[0].provider_metadata == {"sig": "x"}


def test_a_call_without_a_name_is_a_parse_error() -> None:
    b = ResponseBuilder("acme")
    b.tool_call(index=0, call_id="a", arguments="{}")
    with pytest.raises(ResponseParseError, match="acme answered with a tool call without a name"):
        build(b)


def test_usage_latest_report_wins() -> None:
    b = ResponseBuilder("p")
    b.usage = Usage(10, 1)
    b.usage = Usage(10, 25, 5)
    assert build(b).usage == Usage(10, 25, 5)


@pytest.mark.parametrize(
    ("raw", "neutral"),
    [("stop", "end_turn"), ("length", "max_tokens"), ("weird_new_reason", "other")],
)
def test_stop_reasons_are_mapped_and_the_raw_one_kept(raw: str, neutral: str) -> None:
    b = ResponseBuilder("p")
    b.text("x")
    b.finish(raw)
    response = build(b)
    assert response.stop_reason == neutral
    assert response.raw_stop_reason == raw


def test_a_later_empty_finish_reason_keeps_the_first() -> None:
    b = ResponseBuilder("p")
    assert not b.finished
    b.finish("length")
    b.finish(None)
    b.finish("")
    assert b.finished
    assert build(b).raw_stop_reason == "length"


def test_tool_calls_make_the_stop_reason_tool_use_whatever_was_said() -> None:
    b = ResponseBuilder("p")
    b.tool_call(index=0, call_id="a", name="f")
    b.finish("stop")
    response = build(b)
    assert response.stop_reason == "tool_use"
    assert response.raw_stop_reason == "stop"


def test_model_metadata_timings_and_raw_bodies_are_carried() -> None:
    b = ResponseBuilder("p")
    b.set_model("m-2024")
    b.set_model(None)
    b.metadata["blocks"] = [{"type": "thinking", "signature": "s"}]
    b.timings["prompt_ms"] = 1.5
    response = build(b, model="fallback", raw_response={"r": 1}, raw_request={"q": 2})
    assert response.model == "m-2024"
    assert response.provider_metadata == {"blocks": [{"type": "thinking", "signature": "s"}]}
    assert response.timings == {"prompt_ms": 1.5}
    assert (response.raw_response, response.raw_request) == ({"r": 1}, {"q": 2})
