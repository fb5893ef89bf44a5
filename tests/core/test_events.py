import dataclasses
import json
import typing
from datetime import date
from decimal import Decimal

import pytest

from glassagent import Agent, LLMResponse, Message, ModelSettings, ToolCall, Usage, tool
from glassagent import events as ev
from glassagent.errors import UserError
from glassagent.llm import Attachment, ToolDefinition
from glassagent.profiles import Cost
from glassagent.testing import ScriptedClient

COMMON = {"run_id": "r1", "seq": 7, "timestamp": 1700000000.25}
CALL = ToolCall("c1", "add", {"a": 1}, {"thought_signature": "c2lnbmF0dXJl"})
BAD_CALL = ToolCall("c2", "add", {}, arguments_error="the arguments are not valid JSON")
DEFINITION = ToolDefinition("add", "Add.", {"type": "object", "properties": {}})

SAMPLES: list[ev.BaseEvent] = [
    ev.TextChunkEvent(text="Hel", is_follow_up=False, **COMMON),
    ev.ThinkingChunkEvent(text="hmm", **COMMON),
    ev.FunctionCallStartEvent(
        function_name="add",
        tool_name="add",
        args={"a": 1},
        call_id="c1",
        ui_info={"icon": "+"},
        **COMMON,
    ),
    ev.ToolProgressEvent(tool="add", message="half way", call_id="c1", **COMMON),
    ev.FunctionExecutionStartEvent(count=2, **COMMON),
    ev.FunctionExecutionCompleteEvent(
        execution=ev.ToolExecution(
            function_name="add",
            tool_name="add",
            args={"a": 1},
            result="2",
            is_error=False,
            duration_ms=1.5,
            has_ui=True,
            ui_info={"icon": "+"},
            call_id="c1",
        ),
        **COMMON,
    ),
    ev.SendingFunctionResponseEvent(count=2, **COMMON),
    ev.CompleteEvent(
        text="done", usage=Usage(1, 2, 3), iterations=2, stop_reason="max_tokens", **COMMON
    ),
    ev.AbortedEvent(text="partial", reason="user", **COMMON),
    ev.ErrorEvent(error="slow down", error_type="RateLimitError", **COMMON),
    ev.LLMRequestEvent(
        iteration=1,
        provider="gemini",
        model="gemini-2.5-flash",
        messages=(
            Message(
                role="user",
                content="look",
                attachments=(
                    Attachment(data=b"\x89PNG\x00\xff", mime_type="image/png"),
                    Attachment(url="https://example.com/cat.png"),
                ),
            ),
            Message(
                role="assistant", tool_calls=(CALL,), thinking="t", provider_metadata={"k": "v"}
            ),
            Message(role="tool", content="2", tool_call_id="c1", name="add", is_error=True),
            Message(role="assistant", content="cut", status="aborted"),
        ),
        tools=(DEFINITION,),
        system="Be brief.",
        settings=ModelSettings(temperature=0.5, stop_sequences=("END",)),
        **COMMON,
    ),
    ev.LLMResponseEvent(
        iteration=1,
        text="",
        tool_calls=(CALL, BAD_CALL),
        stop_reason="tool_use",
        thinking=None,
        usage=Usage(5, 6),
        latency_ms=12.5,
        raw_stop_reason="tool_calls",
        cost=Cost(
            Decimal("0.0000165"),
            "USD",
            "profile",
            priced_as="gemini-2.5-flash (gemini profile)",
            as_of=date(2026, 11, 24),
        ),
        **COMMON,
    ),
    ev.LLMRetryEvent(
        iteration=1,
        attempt=1,
        delay=0.75,
        error="gemini returned HTTP 429: slow down",
        error_type="RateLimitError",
        status=429,
        **COMMON,
    ),
    ev.OutputRetryEvent(
        iteration=2,
        attempt=1,
        text='{"name": "Paris", "population": "many"}',
        errors=("population: Input should be a valid integer",),
        **COMMON,
    ),
    ev.ContextCompactedEvent(
        iteration=1,
        policy="summarize",
        messages_before=40,
        messages_after=6,
        tokens_before=3900,
        tokens_after=900,
        window=4096,
        tokenizer="estimate",
        dropped=tuple(range(34)),
        summary="The user asked about Paris.",
        summary_of=34,
        new_summary=True,
        usage=Usage(input_tokens=3000, output_tokens=40),
        **COMMON,
    ),
    ev.HandoffEvent(from_agent="triage", to_agent="billing", call_id="h1", **COMMON),
    ev.ContextSelectionEvent(
        scores=(
            ev.ContextScore("tasks", 90, 80, "selected", duration_ms=0.5),
            ev.ContextScore("docs", 90, 20, "over_cap"),
            ev.ContextScore("news", 10, 50, "below_threshold"),
            ev.ContextScore("crm", 0, 50, "relevance_failed", "ValueError: boom"),
        ),
        min_relevance=50,
        max_tools=1,
        **COMMON,
    ),
    ev.ContextToolCompleteEvent(
        tool_name="tasks",
        score=90,
        output="- write the report",
        is_error=False,
        error=None,
        duration_ms=3.5,
        **COMMON,
    ),
    ev.BudgetExceededEvent(
        limit="max_cost",
        reason="the cost of the run cannot be known (the client reported no token usage)",
        text="so far",
        usage=Usage(10, 2),
        cost=Cost(None, reason="the client reported no token usage for the call"),
        iterations=1,
        **COMMON,
    ),
    ev.ApprovalRequiredEvent(call=CALL, tool_name="add", ui_info={"icon": "+"}, **COMMON),
    ev.ApprovalAnsweredEvent(
        call_id="c1", tool_name="add", approved=False, reason="not today", **COMMON
    ),
    ev.AwaitingApprovalEvent(
        pending=(CALL,), text="first", usage=Usage(4, 5), iterations=1, **COMMON
    ),
]


def test_samples_cover_every_event_type() -> None:
    assert {type(e) for e in SAMPLES} == set(typing.get_args(ev.Event))


@pytest.mark.parametrize("event", SAMPLES, ids=lambda e: e.type)
def test_every_event_round_trips_through_json(event: ev.BaseEvent) -> None:
    data = event.to_dict()
    assert next(iter(data)) == "type"
    assert data["run_id"] == "r1"
    assert data["seq"] == 7
    wire = json.loads(json.dumps(data))
    assert wire == data
    assert ev.parse_event(wire) == event
    assert ev.parse_event(wire).timestamp == 1700000000.25


def test_standard_dict_shapes() -> None:
    assert SAMPLES[0].to_dict() == {
        "type": "text_chunk",
        "run_id": "r1",
        "seq": 7,
        "timestamp": 1700000000.25,
        "text": "Hel",
        "is_follow_up": False,
    }
    assert SAMPLES[5].to_dict()["execution"] == {
        "function_name": "add",
        "tool_name": "add",
        "args": {"a": 1},
        "result": "2",
        "is_error": False,
        "duration_ms": 1.5,
        "has_ui": True,
        "ui_info": {"icon": "+"},
        "call_id": "c1",
    }
    assert SAMPLES[7].to_dict()["usage"] == {
        "input_tokens": 1,
        "output_tokens": 2,
        "thinking_tokens": 3,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
    }
    request = SAMPLES[10].to_dict()
    assert request["messages"][0]["attachments"][0]["data"] == "iVBORwD/"  # base64
    assert request["messages"][0]["attachments"][1]["url"] == "https://example.com/cat.png"
    assert request["messages"][1]["tool_calls"][0] == {
        "id": "c1",
        "name": "add",
        "input": {"a": 1},
        "provider_metadata": {"thought_signature": "c2lnbmF0dXJl"},
        "arguments_error": None,
    }
    assert SAMPLES[11].to_dict()["tool_calls"][1] == {
        "id": "c2",
        "name": "add",
        "input": {},
        "provider_metadata": {},
        "arguments_error": "the arguments are not valid JSON",
    }


def test_a_cost_is_a_decimal_string_in_json_and_round_trips_exactly() -> None:
    assert SAMPLES[11].to_dict()["cost"] == {
        "amount": "0.0000165",
        "currency": "USD",
        "source": "profile",
        "reason": None,
        "priced_as": "gemini-2.5-flash (gemini profile)",
        "as_of": "2026-11-24",
    }
    again = ev.parse_event(json.loads(json.dumps(SAMPLES[11].to_dict())))
    assert again.cost.amount == Decimal("0.0000165")  # type: ignore[union-attr]
    assert isinstance(again.cost.amount, Decimal)  # type: ignore[union-attr]
    budget = next(e for e in SAMPLES if e.type == "budget_exceeded").to_dict()
    assert budget["type"] == "budget_exceeded"
    assert budget["limit"] == "max_cost"
    assert budget["cost"]["amount"] is None


def test_events_are_immutable() -> None:
    import dataclasses

    with pytest.raises(dataclasses.FrozenInstanceError):
        SAMPLES[0].text = "changed"  # type: ignore[misc]


def test_unserialisable_values_become_their_repr() -> None:
    marker = object()
    event = ev.FunctionCallStartEvent(
        function_name="f", tool_name="f", args={}, call_id="c", ui_info=marker, **COMMON
    )
    assert json.dumps(event.to_dict())
    assert event.to_dict()["ui_info"] == repr(marker)


def test_dicts_from_before_the_stop_reason_fields_still_parse() -> None:
    complete = SAMPLES[7].to_dict()
    del complete["stop_reason"]
    assert ev.parse_event(complete).stop_reason == "end_turn"  # type: ignore[union-attr]
    response = SAMPLES[11].to_dict()
    del response["raw_stop_reason"]
    assert ev.parse_event(response).raw_stop_reason is None  # type: ignore[union-attr]
    del response["cost"]
    cost = ev.parse_event(response).cost  # type: ignore[union-attr]
    assert cost.amount is None
    assert cost.reason == "no cost was recorded"


def test_invalid_dicts_are_user_errors() -> None:
    with pytest.raises(UserError, match="Not a valid event dict"):
        ev.parse_event({"type": "text_chunk", "run_id": "r"})
    with pytest.raises(UserError):
        ev.parse_event({"type": "no_such_event", "run_id": "r", "seq": 0})


async def test_events_of_a_real_run_round_trip() -> None:
    @tool
    async def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    client = ScriptedClient([LLMResponse("", [ToolCall("c1", "add", {"a": 1, "b": 2})]), "3"])
    result = await Agent(client, [add]).run("1+2?")
    for event in result.events:
        assert ev.parse_event(json.loads(json.dumps(event.to_dict()))) == event


def test_every_event_class_takes_its_fields_by_keyword_with_their_defaults() -> None:
    for cls in typing.get_args(ev.Event):
        required = {
            f.name
            for f in dataclasses.fields(cls)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        }
        values = {name: f"v-{name}" for name in required}
        event = cls(**values)
        for f in dataclasses.fields(cls):
            if f.name in required:
                assert getattr(event, f.name) == values[f.name]
            elif f.default is not dataclasses.MISSING:
                assert getattr(event, f.name) == f.default
        assert isinstance(event.timestamp, float)
        assert dataclasses.replace(event, seq=7).seq == 7
        with pytest.raises(TypeError):
            cls(**{name: values[name] for name in sorted(required)[1:]})
        with pytest.raises(dataclasses.FrozenInstanceError):
            event.seq = 3  # type: ignore[misc]


def test_only_a_replayed_event_carries_the_replayed_key() -> None:
    live = ev.TextChunkEvent(run_id="r", seq=0, text="hi", is_follow_up=False)
    replayed = dataclasses.replace(live, replayed=True)
    assert "replayed" not in live.to_dict()  # the standard dict is unchanged
    assert replayed.to_dict()["replayed"] is True
    assert ev.parse_event(json.loads(json.dumps(replayed.to_dict()))) == replayed
    assert ev.parse_event(live.to_dict()).replayed is False
    assert live != replayed
