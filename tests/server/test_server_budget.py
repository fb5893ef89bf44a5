"""The invoke API with a budget and a cost: how a budget stop ends a turn, what a turn cost."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from glassagent import Budget, LLMResponse, ToolCall, Usage, tool
from glassagent.errors import ConfigurationError, UserError
from glassagent.history import HistoryStore
from glassagent.server import (
    ANONYMOUS_USER,
    InvokeRequest,
    ServerLimits,
    create_app,
    invoke,
    user_directory,
)
from glassagent.testing import ScriptedClient
from tests.support.profiles import acme_profiles
from tests.support.server import INVOKE, document, http, sse_events

TERMINAL = ("complete", "aborted", "error", "budget_exceeded")


@pytest.fixture(autouse=True)
def profiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """``acme-priced`` at $1 and $4 per million tokens; ``acme-free`` without prices."""
    with acme_profiles(tmp_path / "profiles", monkeypatch) as directory:
        yield directory


@tool
def shout(text: str) -> str:
    """Repeat the text, louder."""
    return text.upper()


def shouting(model: str = "acme-priced") -> ScriptedClient:
    """A model that calls `shout` (50 tokens in, 10 out), then would answer if asked."""
    calls = [ToolCall("c1", "shout", {"text": "go"})]
    return ScriptedClient(
        [LLMResponse(tool_calls=calls, usage=Usage(50, 10)), "never asked"], model=model
    )


ONE_CALL = ServerLimits(budget=Budget(max_model_calls=1))


def stored_roles(directory: Path, chat_id: str) -> list[str]:
    history = HistoryStore(user_directory(directory, ANONYMOUS_USER)).load(chat_id)
    return [m.role for m in history.thread()]


# ---- a budget stop is a way a turn ends ------------------------------------------------------


async def test_a_budget_stop_answers_200_with_status_budget_exceeded(tmp_path: Path) -> None:
    client = shouting()
    app = create_app(model=client, tools=[shout], store=tmp_path, limits=ONE_CALL)
    body = {"message": "Shout", "chat_id": "b", "append_to_history": True}
    async with http(app) as api:
        response = await api.post(INVOKE, json=body)
    assert response.status_code == 200
    result = response.json()
    assert result["status"] == "budget_exceeded"
    assert result["stop_reason"] == "tool_use"  # why the model stopped its last answer
    assert result["budget_exceeded"] == {
        "limit": "max_model_calls",
        "reason": "the run has made 1 model calls, its budget's max_model_calls",
    }
    assert result["iterations"] == 1
    assert result["cost"] == {"amount": "0.00009", "currency": "USD"}  # 50 x $1 + 10 x $4
    assert len(client.requests) == 1  # the call past the budget was not made
    assert stored_roles(tmp_path, "b") == ["user", "assistant", "tool"]


async def test_a_budget_stop_ends_the_stream_as_its_one_final_event(tmp_path: Path) -> None:
    app = create_app(model=shouting(), tools=[shout], store=tmp_path, limits=ONE_CALL)
    body = {"message": "Shout", "stream": True, "chat_id": "s", "append_to_history": True}
    async with http(app) as api:
        response = await api.post(INVOKE, json=body)
    assert response.status_code == 200
    events = sse_events(response.text)
    kinds = [e["type"] for e in events]
    assert kinds[-1] == "budget_exceeded"
    assert sum(kind in TERMINAL for kind in kinds) == 1
    assert [e["seq"] for e in events] == list(range(len(events)))
    last = events[-1]
    assert last["limit"] == "max_model_calls"
    assert last["chat_id"] == "s"  # sent once the turn is kept
    assert last["cost"]["amount"] == "0.00009"
    assert stored_roles(tmp_path, "s") == ["user", "assistant", "tool"]


async def test_a_budget_stop_on_a_posted_history_returns_it_with_the_turn() -> None:
    app = create_app(model=shouting(), tools=[shout], limits=ONE_CALL)
    posted = document(("user", "Hello"), ("assistant", "Hi."))
    body = {"message": "Shout", "history": posted, "append_to_history": True}
    async with http(app) as api:
        plain = (await api.post(INVOKE, json=body)).json()
    app = create_app(model=shouting(), tools=[shout], limits=ONE_CALL)
    async with http(app) as api:
        streamed = sse_events((await api.post(INVOKE, json={**body, "stream": True})).text)
    for history in (plain["history"], streamed[-1]["history"]):
        roles = [m["role"] for m in history["messages"]]
        assert roles == ["user", "assistant", "user", "assistant", "tool"]


async def test_a_token_budget_can_stop_a_turn_before_any_model_call() -> None:
    client = shouting()
    limits = ServerLimits(budget=Budget(max_tokens=10))
    result = await invoke(
        InvokeRequest(message="x" * 400, append_to_history=True), clients=client, limits=limits
    )
    assert (result.status, result.text, result.iterations) == ("budget_exceeded", "", 0)
    assert result.budget_exceeded is not None
    assert result.budget_exceeded.limit == "max_tokens"
    assert result.stop_reason is None
    assert result.to_dict()["cost"] == {"amount": "0", "currency": "USD"}
    assert client.requests == []
    assert result.history is not None
    assert [m.role for m in result.history.thread()] == ["user"]


async def test_a_turn_within_the_budget_completes() -> None:
    client = ScriptedClient([LLMResponse("Done.", usage=Usage(50, 10))], model="acme-priced")
    limits = ServerLimits(budget=Budget(max_cost="0.01"))
    result = await invoke(InvokeRequest(message="Hi"), clients=client, limits=limits)
    assert (result.status, result.text, result.budget_exceeded) == ("completed", "Done.", None)
    assert "budget_exceeded" not in result.to_dict()


# ---- cost --------------------------------------------------------------------------------------


async def test_the_answer_carries_the_cost_or_null_when_it_cannot_be_priced() -> None:
    priced = ScriptedClient([LLMResponse("Hi.", usage=Usage(1000, 500))], model="acme-priced")
    free = ScriptedClient([LLMResponse("Hi.", usage=Usage(1000, 500))], model="acme-free")
    silent = ScriptedClient(["Hi."], model="acme-priced")  # reports no usage
    answers = []
    for client in (priced, free, silent):
        async with http(create_app(model=client)) as api:
            answers.append((await api.post(INVOKE, json={"message": "Hi"})).json())
    assert answers[0]["cost"] == {"amount": "0.003", "currency": "USD"}
    assert answers[1]["cost"] is None
    assert answers[2]["cost"] is None


async def test_invoke_result_keeps_the_whole_cost_with_the_reason() -> None:
    client = ScriptedClient([LLMResponse("Hi.", usage=Usage(10, 5))], model="acme-free")
    result = await invoke(InvokeRequest(message="Hi"), clients=client)
    assert result.cost is not None
    assert result.cost.amount is None
    assert "runs locally" in (result.cost.reason or "")


async def test_a_tiny_cost_is_a_plain_decimal_string() -> None:
    client = ScriptedClient([LLMResponse("Hi.", usage=Usage(1, 0))], model="acme-priced")
    result = await invoke(InvokeRequest(message="Hi"), clients=client)
    assert result.to_dict()["cost"] == {"amount": "0.000001", "currency": "USD"}


# ---- configuration -----------------------------------------------------------------------------


def test_a_cost_budget_needs_a_model_with_prices_in_its_currency() -> None:
    cost = ServerLimits(budget=Budget(max_cost="1"))
    with pytest.raises(ConfigurationError, match="'acme-free' cannot be priced"):
        create_app(model=ScriptedClient([], model="acme-free"), limits=cost)
    euros = ServerLimits(budget=Budget(max_cost="1", currency="EUR"))
    with pytest.raises(ConfigurationError, match="'acme-priced' is priced in USD"):
        create_app(model=ScriptedClient([], model="acme-priced"), limits=euros)
    create_app(model=ScriptedClient([], model="acme-free"), limits=ONE_CALL)  # no cost limit


def test_server_limits_check_the_budget() -> None:
    with pytest.raises(UserError, match=r"ServerLimits\.budget must be a Budget"):
        ServerLimits(budget={"max_cost": 1})  # type: ignore[arg-type]
