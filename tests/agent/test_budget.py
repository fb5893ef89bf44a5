"""Cost of each model call and run, and `Budget`: limits checked before each model call.

The scripted client records every request: a budget stop "before the call" means the
script's next answer was never asked for.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from glassagent import Agent, Budget, LLMResponse, ToolCall, Usage, tool
from glassagent.errors import UserError
from glassagent.events import BudgetExceededEvent, LLMResponseEvent, parse_event
from glassagent.history import History
from glassagent.testing import ScriptedClient
from tests.support.profiles import acme_profiles

# $1 per million input tokens, $4 output, $8 thinking, $0.10 cached input
PRICING = {
    "input_per_1m_tokens": "1.00",
    "output_per_1m_tokens": "4.00",
    "thinking_per_1m_tokens": "8.00",
    "cached_input_per_1m_tokens": "0.10",
    "currency": "USD",
    "as_of": "2026-11-24",
}


@tool
def shout(text: str) -> str:
    """Repeat the text, louder."""
    return text.upper() * 4


@pytest.fixture(autouse=True)
def profiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """``acme-priced`` with `PRICING`, ``acme-free`` without pricing (its provider is local)."""
    with acme_profiles(tmp_path / "profiles", monkeypatch, PRICING) as directory:
        yield directory


def call(text: str = "go", usage: Usage | None = None) -> LLMResponse:
    calls = [ToolCall(f"c-{text[:8]}", "shout", {"text": text})]
    return LLMResponse(tool_calls=calls, usage=usage or Usage())


def responses(result_events: Any) -> list[LLMResponseEvent]:
    return [e for e in result_events if isinstance(e, LLMResponseEvent)]


# -- cost ------------------------------------------------------------------------------------


async def test_each_call_and_the_run_are_priced_thinking_and_cached_tokens_included() -> None:
    usage = Usage(input_tokens=1000, output_tokens=200, thinking_tokens=100, cache_read_tokens=400)
    client = ScriptedClient(
        [call(usage=usage), LLMResponse("DONE", usage=Usage(2000, 50))], model="acme-priced"
    )
    result = await Agent(client, [shout]).run("Shout go")
    first, second = (e.cost for e in responses(result.events))
    # 600 uncached x $1 + 400 cached x $0.10 + 200 output x $4 + 100 thinking x $8, per 1M
    assert first.amount == Decimal("0.00224")
    assert (first.currency, first.source, first.reason) == ("USD", "profile", None)
    assert second.amount == Decimal("0.0022")  # 2000 x $1 + 50 x $4
    assert result.cost.amount == Decimal("0.00444")
    assert result.cost.currency == "USD"
    for event in result.events:
        assert parse_event(json.loads(json.dumps(event.to_dict()))) == event


async def test_a_shipped_profile_prices_its_model() -> None:
    client = ScriptedClient([LLMResponse("hi", usage=Usage(1_000_000, 0))], model="gpt-4o-mini")
    result = await Agent(client).run("hello")
    assert result.cost.amount == Decimal("0.15")
    assert "gpt-4o-mini" in (result.cost.priced_as or "")


async def test_a_call_that_cannot_be_priced_says_why_never_zero() -> None:
    client = ScriptedClient([LLMResponse("hi", usage=Usage(10, 5))], model="acme-free")
    result = await Agent(client).run("hello")
    (event,) = responses(result.events)
    assert event.cost.amount is None
    assert "runs locally" in (event.cost.reason or "")
    assert result.cost.amount is None
    assert result.cost.reason == event.cost.reason
    assert event.to_dict()["cost"]["amount"] is None


async def test_a_call_without_reported_usage_is_unpriced() -> None:
    client = ScriptedClient(["hi"], model="acme-priced")
    result = await Agent(client).run("hello")
    assert result.cost.amount is None
    assert result.cost.reason == "the client reported no token usage for the call"


async def test_a_run_without_model_calls_cost_nothing() -> None:
    client = ScriptedClient(["never"], model="acme-priced")
    result = await Agent(client, budget=Budget(max_tokens=1)).run("x" * 40)
    assert result.iterations == 0
    assert result.cost.amount == Decimal(0)


# -- the budget: each limit stops the run before the call ------------------------------------


async def test_max_model_calls_stops_before_the_next_call_keeping_the_run() -> None:
    client = ScriptedClient([call("a"), call("b"), "never"], model="acme-priced")
    agent = Agent(client, [shout], budget=Budget(max_model_calls=2))
    run = agent.run("Shout twice")
    events = [event async for event in run]
    result = await run
    assert len(client.requests) == 2
    assert client.remaining == 1
    assert result.stop_reason == "budget"
    assert result.iterations == 2
    last = events[-1]
    assert isinstance(last, BudgetExceededEvent)
    assert last.limit == "max_model_calls"
    assert last.reason == "the run has made 2 model calls, its budget's max_model_calls"
    assert last.iterations == 2
    assert [m.role for m in result.new_messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]
    assert result.new_messages[-1].content == "BBBB"  # the last tool round is kept
    assert parse_event(json.loads(json.dumps(last.to_dict()))) == last


async def test_max_tokens_stops_before_a_call_that_would_pass_it() -> None:
    client = ScriptedClient(
        [call("q" * 100, usage=Usage(50, 10)), "never"],
        model="acme-priced",
    )
    agent = Agent(client, [shout], budget=Budget(max_tokens=150))
    result = await agent.run("Shout")
    assert len(client.requests) == 1
    assert result.stop_reason == "budget"
    last = result.events[-1]
    assert isinstance(last, BudgetExceededEvent)
    assert last.limit == "max_tokens"
    # 60 tokens used; the next prompt: the 50 reported plus about 100 of call and result
    assert last.reason.startswith("the run has used 60 tokens and the next call's prompt is")
    assert "over the budget's max_tokens of 150" in last.reason
    assert last.usage == Usage(50, 10)


async def test_max_tokens_can_stop_a_run_before_its_first_call() -> None:
    client = ScriptedClient(["never"], model="acme-priced")
    result = await Agent(client, budget=Budget(max_tokens=100)).run("x" * 800)  # ~200 tokens
    assert client.requests == []
    assert result.stop_reason == "budget"
    assert [e.type for e in result.events] == ["budget_exceeded"]
    assert result.text == ""


async def test_max_tokens_counts_calls_without_reported_usage_by_estimate() -> None:
    client = ScriptedClient([call("q" * 200), "never"], model="acme-priced")  # no usage
    result = await Agent(client, [shout], budget=Budget(max_tokens=200)).run("Shout")
    assert len(client.requests) == 1
    assert result.stop_reason == "budget"


async def test_max_cost_stops_before_a_call_that_would_pass_it() -> None:
    client = ScriptedClient(
        [call("q" * 100, usage=Usage(50, 10)), "never"],
        model="acme-priced",
    )
    agent = Agent(client, [shout], budget=Budget(max_cost="0.0001"))
    result = await agent.run("Shout")
    assert len(client.requests) == 1
    assert result.stop_reason == "budget"
    last = result.events[-1]
    assert isinstance(last, BudgetExceededEvent)
    assert last.limit == "max_cost"
    # spent 50 x $1 + 10 x $4 per 1M; the next prompt of about 150 tokens costs $0.00015
    assert last.cost.amount == Decimal("0.00009") == result.cost.amount
    assert last.reason.startswith("the run has cost 0.00009 USD and the next call's prompt")
    assert "over the budget's max_cost of 0.0001 USD" in last.reason


async def test_max_cost_within_the_budget_lets_the_run_finish() -> None:
    client = ScriptedClient(
        [call("go", usage=Usage(50, 10)), LLMResponse("GO", usage=Usage(80, 2))],
        model="acme-priced",
    )
    result = await Agent(client, [shout], budget=Budget(max_cost=0.01)).run("Shout")
    assert result.stop_reason == "end_turn"
    assert result.cost.amount == Decimal("0.000178")


async def test_max_cost_stops_once_a_call_cannot_be_priced() -> None:
    client = ScriptedClient([call("go"), "never"], model="acme-priced")  # no usage reported
    result = await Agent(client, [shout], budget=Budget(max_cost=1)).run("Shout")
    assert len(client.requests) == 1
    last = result.events[-1]
    assert isinstance(last, BudgetExceededEvent)
    assert "cannot be known (the client reported no token usage" in last.reason


async def test_a_free_model_without_usage_still_costs_nothing_and_keeps_its_cost_budget() -> None:
    # the embedded model's profile prices every token at 0; a reply the server could not read
    # reports no usage, and must not make the run's cost unknown
    client = ScriptedClient([call("go"), "done"], model="qwen2.5-coder-0.5b-instruct")
    result = await Agent(client, [shout], budget=Budget(max_cost="0.01")).run("Shout")
    assert result.stop_reason == "end_turn"
    assert result.cost.amount == 0
    costs = [e.cost.amount for e in result.events if isinstance(e, LLMResponseEvent)]
    assert costs == [0, 0]


async def test_a_cost_budget_on_a_model_that_cannot_be_priced_is_refused_up_front() -> None:
    client = ScriptedClient(["never"], model="acme-free")
    with pytest.raises(UserError, match="budget has a max_cost, but calls of 'acme-free'") as e:
        await Agent(client, budget=Budget(max_cost="1")).run("hello")
    assert client.requests == []
    assert e.value.result is not None
    assert [event.type for event in e.value.result.events] == ["error"]


async def test_a_cost_budget_in_another_currency_is_refused_up_front() -> None:
    client = ScriptedClient(["never"], model="acme-priced")
    with pytest.raises(UserError, match=r"priced in USD: give Budget\(currency='USD'\)"):
        await Agent(client, budget=Budget(max_cost="1", currency="EUR")).run("hello")
    assert client.requests == []


async def test_a_token_budget_needs_no_pricing() -> None:
    client = ScriptedClient([LLMResponse("hi", usage=Usage(5, 1))], model="acme-free")
    result = await Agent(client, budget=Budget(max_tokens=1000)).run("hello")
    assert result.stop_reason == "end_turn"


async def test_a_budget_stop_is_appended_to_the_history() -> None:
    history = History()
    client = ScriptedClient([call("a"), "never"], model="acme-priced")
    agent = Agent(client, [shout], budget=Budget(max_model_calls=1))
    result = await agent.run("Shout", history=history, append_to_history=True)
    assert result.stop_reason == "budget"
    assert [m.role for m in history.to_messages()] == ["user", "assistant", "tool"]


def test_budget_values_are_checked() -> None:
    assert Budget(max_cost=0.05).max_cost == Decimal("0.05")
    assert Budget(max_cost="0.10", max_tokens=5, max_model_calls=1).max_cost == Decimal("0.10")
    for bad in (
        {"max_cost": -1},
        {"max_cost": "lots"},
        {"max_cost": float("nan")},
        {"max_cost": True},
        {"max_tokens": 0},
        {"max_model_calls": 1.5},
        {"currency": "usd"},
    ):
        with pytest.raises(UserError):
            Budget(**bad)
    with pytest.raises(UserError, match="`budget` must be a Budget"):
        Agent(ScriptedClient([]), budget={"max_cost": 1})  # type: ignore[arg-type]
