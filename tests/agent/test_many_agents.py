"""Many agents: an agent as another's tool (nested runs in one glass box), and handoffs."""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from glassagent import Agent, Budget, LLMResponse, ModelSettings, ToolCall, Usage, tool
from glassagent.errors import GlassAgentError, RunAborted, UserError
from glassagent.events import (
    BudgetExceededEvent,
    Event,
    FunctionExecutionCompleteEvent,
    HandoffEvent,
    LLMRequestEvent,
    parse_event,
)
from glassagent.history import History
from glassagent.testing import FunctionClient, ScriptedClient
from tests.support.profiles import acme_profiles

PRICING = {
    "input_per_1m_tokens": "1.00",
    "output_per_1m_tokens": "4.00",
    "currency": "USD",
    "as_of": "2026-11-24",
}


@pytest.fixture(autouse=True)
def profiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    with acme_profiles(tmp_path / "profiles", monkeypatch, PRICING) as directory:
        yield directory


def ask(tool_name: str, call_id: str, usage: Usage | None = None, **args: Any) -> LLMResponse:
    return LLMResponse(tool_calls=[ToolCall(call_id, tool_name, args)], usage=usage or Usage())


@tool
def capital(country: str) -> str:
    """The capital of a country."""
    return {"France": "Paris"}.get(country, "unknown")


def researcher(*answers: Any) -> Agent:
    client = ScriptedClient(list(answers), model="acme-priced")
    return Agent(client, [capital], name="researcher", description="Looks facts up.")


# -- agent as a tool -------------------------------------------------------------------------


async def test_a_sub_agents_run_streams_inside_the_parents_call_and_rolls_up() -> None:
    child = researcher(
        ask("capital", "k1", Usage(100, 10), country="France"),
        LLMResponse("Paris", usage=Usage(200, 5)),
    )
    parent_client = ScriptedClient(
        [
            ask("researcher", "p1", Usage(50, 7), task="Find the capital of France."),
            LLMResponse("It is Paris.", usage=Usage(80, 4)),
        ],
        model="acme-priced",
    )
    parent = Agent(parent_client, [child.as_tool()], name="writer")
    run = parent.run("What is the capital of France?")
    streamed = [event async for event in run]
    result = await run

    assert result.text == "It is Paris."
    assert streamed == list(result.events)
    nested = [e for e in streamed if e.depth == 1]
    own = [e for e in streamed if e.depth == 0]
    assert {e.run_id for e in own} == {run.run_id}
    (child_id,) = {e.run_id for e in nested}
    assert child_id != run.run_id
    assert all(e.parent_run_id == run.run_id and e.parent_call_id == "p1" for e in nested)
    assert [e.seq for e in own] == list(range(len(own)))
    assert [e.seq for e in nested] == list(range(len(nested)))
    assert [e.type for e in nested][-1] == "complete"
    # the child's whole run is inside the parent's call
    kinds = [(e.depth, e.type) for e in streamed]
    start = kinds.index((0, "function_execution_start"))
    end = kinds.index((0, "function_execution_complete"))
    assert all(start < i < end for i, e in enumerate(streamed) if e.depth == 1)
    # the child's answer is the call's result; the child got only the task
    done = next(e for e in own if isinstance(e, FunctionExecutionCompleteEvent))
    assert done.execution.result == "Paris"
    assert not done.execution.is_error
    child_request = next(e for e in nested if isinstance(e, LLMRequestEvent))
    assert [m.content for m in child_request.messages] == ["Find the capital of France."]
    # usage and cost roll up: the parent's run includes the child's calls
    assert result.usage == Usage(430, 26)
    assert result.cost.amount == Decimal(430 + 26 * 4) / Decimal(1_000_000)
    complete = own[-1]
    assert complete.type == "complete"
    assert complete.usage == Usage(430, 26)


async def test_nested_events_round_trip_and_plain_ones_keep_their_dict() -> None:
    child = researcher("Paris")
    parent = Agent(
        ScriptedClient([ask("researcher", "p1", task="France?"), "Paris."]), [child.as_tool()]
    )
    result = await parent.run("Capital?")
    for event in result.events:
        data = json.loads(json.dumps(event.to_dict()))
        assert parse_event(data) == event
        if event.depth:
            assert (data["parent_run_id"], data["parent_call_id"], data["depth"]) == (
                result.events[0].run_id,
                "p1",
                1,
            )
        else:
            assert not {"parent_run_id", "parent_call_id", "depth"} & set(data)


async def test_a_grandchild_is_depth_two_below_its_own_parent() -> None:
    leaf = researcher("Paris")
    middle = Agent(
        ScriptedClient([ask("researcher", "m1", task="France"), "Paris, it says."]),
        [leaf.as_tool()],
        name="middle",
    )
    top = Agent(ScriptedClient([ask("middle", "t1", task="find it"), "Done."]), [middle.as_tool()])
    result = await top.run("go")
    by_depth: dict[int, set[tuple[str | None, str | None]]] = defaultdict(set)
    for event in result.events:
        by_depth[event.depth].add((event.parent_run_id, event.parent_call_id))
    top_id = result.events[0].run_id
    middle_id = next(e.run_id for e in result.events if e.depth == 1)
    assert by_depth == {
        0: {(None, None)},
        1: {(top_id, "t1")},
        2: {(middle_id, "m1")},
    }
    assert result.text == "Done."


async def test_the_parents_budget_stops_a_runaway_child() -> None:
    loops = [ask("capital", f"k{i}", Usage(10, 1), country="France") for i in range(50)]
    child = researcher(*loops)
    parent_client = ScriptedClient(
        [ask("researcher", "p1", Usage(10, 1), task="loop"), "never"], model="acme-priced"
    )
    parent = Agent(parent_client, [child.as_tool()], budget=Budget(max_model_calls=4))
    result = await parent.run("go")

    stops = [e for e in result.events if isinstance(e, BudgetExceededEvent)]
    assert [(e.depth, e.limit) for e in stops] == [(1, "max_model_calls"), (0, "max_model_calls")]
    assert "the budget of the parent run" in stops[0].reason
    done = next(
        e for e in result.events if isinstance(e, FunctionExecutionCompleteEvent) and not e.depth
    )
    assert done.execution.is_error
    assert "stopped without an answer (budget)" in str(done.execution.result)
    assert result.stop_reason == "budget"
    calls = [e for e in result.events if e.type == "llm_response"]
    assert len(calls) == 4  # one parent call, three child calls: the budget's four


async def test_aborting_the_parent_aborts_the_child() -> None:
    started = asyncio.Event()

    @tool
    async def slow() -> str:
        """Takes forever."""
        started.set()
        await asyncio.sleep(60)
        return "late"

    child = Agent(ScriptedClient([ask("slow", "s1")]), [slow], name="worker")
    parent = Agent(ScriptedClient([ask("worker", "p1", task="work")]), [child.as_tool()])
    run = parent.run("go")
    seen: list[Event] = []

    async def consume() -> None:
        async for event in run:
            seen.append(event)

    consumer = asyncio.create_task(consume())
    await asyncio.wait_for(started.wait(), 10)
    run.abort("stop now")
    await asyncio.wait_for(consumer, 20)
    with pytest.raises(RunAborted):
        await run
    child_ends = [e for e in seen if e.depth == 1 and e.type in ("aborted", "complete", "error")]
    assert len(child_ends) == 1
    assert child_ends[0].type == "aborted"
    assert "the parent run was aborted: stop now" in child_ends[0].reason  # type: ignore[union-attr]
    assert seen[-1].type == "aborted"
    assert seen[-1].depth == 0


async def test_a_failing_child_is_the_calls_error_result() -> None:
    def broken(*_: Any) -> LLMResponse:
        raise RuntimeError("the model broke")

    child = Agent(FunctionClient(broken), name="flaky")
    parent = Agent(
        ScriptedClient([ask("flaky", "p1", task="try"), "It failed, sorry."]), [child.as_tool()]
    )
    result = await parent.run("go")
    assert result.text == "It failed, sorry."
    assert result.stop_reason == "end_turn"
    done = next(
        e for e in result.events if isinstance(e, FunctionExecutionCompleteEvent) and not e.depth
    )
    assert done.execution.is_error
    assert "The sub-agent's run failed" in str(done.execution.result)
    assert [e.type for e in result.events if e.depth == 1][-1] == "error"


async def test_a_call_waiting_for_approval_in_the_child_is_answered_on_the_parent() -> None:
    @tool(requires_approval=True)
    def delete(path: str) -> str:
        """Delete a file."""
        return f"deleted {path}"

    child = Agent(ScriptedClient([ask("delete", "d1", path="a.txt"), "Deleted."]), [delete])
    parent = Agent(
        ScriptedClient([ask("cleaner", "p1", task="clean"), "Clean."]),
        [child.as_tool("cleaner")],
    )
    run = parent.run("go")
    async for event in run:
        if event.type == "approval_required":
            assert event.depth == 1
            assert [c.id for c in run.pending_approvals] == ["d1"]
            assert run.approve("d1")
    result = await run
    assert result.text == "Clean."
    executed = [
        e.execution.result
        for e in result.events
        if isinstance(e, FunctionExecutionCompleteEvent) and e.depth == 1
    ]
    assert executed == ["deleted a.txt"]


def test_as_tool_needs_a_valid_name() -> None:
    anonymous = Agent(ScriptedClient([]))
    with pytest.raises(UserError, match="tool name"):
        anonymous.as_tool()
    with pytest.raises(UserError, match="letters, digits"):
        anonymous.as_tool("has space")
    with pytest.raises(UserError, match="letters, digits"):
        Agent(ScriptedClient([]), name="bad name")
    named = Agent(ScriptedClient([]), name="helper", description="Helps.")
    definition = named.as_tool().definition
    assert definition.name == "helper"
    assert definition.description == "Helps."
    assert list(definition.parameters["properties"]) == ["task"]


# -- handoffs --------------------------------------------------------------------------------


async def test_a_handoff_goes_on_with_the_other_agents_model_and_tools() -> None:
    @tool
    def refund(order: str) -> str:
        """Refund an order."""
        return f"refunded {order}"

    billing_client = ScriptedClient([ask("refund", "r1", order="42"), "Refunded order 42."])
    billing = Agent(
        billing_client, [refund], name="billing", system="You do billing.", description="Money."
    )
    triage_client = ScriptedClient([ask("transfer_to_billing", "h1")])
    triage = Agent(triage_client, name="triage", handoffs=[billing])
    history = History()
    result = await triage.run("Refund order 42", history=history, append_to_history=True)

    assert result.text == "Refunded order 42."
    assert result.last_agent == "billing"
    (handoff,) = [e for e in result.events if isinstance(e, HandoffEvent)]
    assert (handoff.from_agent, handoff.to_agent, handoff.call_id) == ("triage", "billing", "h1")
    assert [d.name for d in triage_client.requests[0].tools] == ["transfer_to_billing"]
    first = billing_client.requests[0]
    assert first.system == "You do billing."
    assert [d.name for d in first.tools] == ["refund"]
    # the conversation continues: billing sees the user's message and the handoff's result
    assert [m.role for m in first.messages] == ["user", "assistant", "tool"]
    assert "handed over to billing" in first.messages[-1].content
    # the history holds the whole conversation
    assert [m.role for m in history.to_messages()] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]


async def test_handoffs_both_ways_and_a_second_handoff_in_one_answer_is_refused() -> None:
    a_client = ScriptedClient(
        [
            LLMResponse(
                tool_calls=[
                    ToolCall("h1", "transfer_to_b", {}),
                    ToolCall("h2", "transfer_to_b", {}),
                ]
            ),
            "A again.",
        ]
    )
    b_client = ScriptedClient([ask("transfer_to_a", "h3")])
    a = Agent(a_client, name="a")
    b = Agent(b_client, name="b", handoffs=[a])
    a.handoffs.append(b)
    result = await a.run("go")
    moves = [(e.from_agent, e.to_agent) for e in result.events if isinstance(e, HandoffEvent)]
    assert moves == [("a", "b"), ("b", "a")]
    assert result.last_agent == "a"
    assert result.text == "A again."
    results = [
        e.execution.result for e in result.events if isinstance(e, FunctionExecutionCompleteEvent)
    ]
    assert "already" in str(results[1])


def test_a_handoff_target_needs_a_name_and_tool_choice_may_name_a_handoff() -> None:
    with pytest.raises(UserError, match="handed off to"):
        Agent(ScriptedClient([]), handoffs=[Agent(ScriptedClient([]))])
    billing = Agent(ScriptedClient([]), name="billing")
    forced = ModelSettings(tool_choice="transfer_to_billing")
    agent = Agent(ScriptedClient([]), handoffs=[billing], settings=forced)
    assert [t.definition.name for t in agent._tool_map().values()] == ["transfer_to_billing"]


# -- runs that cannot wait, hooks, limits ----------------------------------------------------


@tool(requires_approval=True)
def wipe(path: str) -> str:
    """Delete a file."""
    return f"wiped {path}"


async def test_a_deferring_parent_fails_a_childs_call_that_needs_approval_without_hanging() -> None:
    child = Agent(ScriptedClient([ask("wipe", "d1", path="a.txt"), "never"]), [wipe], name="ops")
    parent = Agent(
        ScriptedClient([ask("ops", "p1", task="clean"), "Could not."]), [child.as_tool()]
    )
    result = await asyncio.wait_for(parent.run("go", defer_approval=True), 10)
    assert result.text == "Could not."
    done = next(
        e for e in result.events if isinstance(e, FunctionExecutionCompleteEvent) and not e.depth
    )
    assert done.execution.is_error
    assert "need a person's approval (d1)" in str(done.execution.result)
    assert [e.type for e in result.events if e.depth][-1] == "awaiting_approval"


async def test_a_sub_agents_redact_hook_applies_in_the_parents_recording(tmp_path: Path) -> None:
    @tool
    def secret() -> str:
        """Read the secret."""
        return "hunter2"

    def hide(data: dict[str, Any]) -> dict[str, Any]:
        return json.loads(json.dumps(data).replace("hunter2", "[hidden]"))

    child = Agent(ScriptedClient([ask("secret", "s1"), "It is set."]), [secret], name="keeper")
    child.redact = hide
    parent = Agent(ScriptedClient([ask("keeper", "p1", task="check"), "ok"]), [child.as_tool()])
    live = tmp_path / "live.jsonl"
    result = await parent.run("go").save_events(live)
    after = tmp_path / "after.jsonl"
    result.save_events(after)
    for text in (live.read_text(), after.read_text(), result._repr_markdown_()):
        assert "hunter2" not in text
        assert "[hidden]" in text
    # the program still sees the events themselves
    assert any(
        isinstance(e, FunctionExecutionCompleteEvent) and e.execution.result == "hunter2"
        for e in result.events
    )


async def test_a_handoff_with_other_calls_is_refused_in_a_deferring_run() -> None:
    billing = Agent(ScriptedClient(["billing here"]), name="billing")
    triage = Agent(
        ScriptedClient(
            [
                LLMResponse(
                    tool_calls=[
                        ToolCall("w1", "wipe", {"path": "x"}),
                        ToolCall("h1", "transfer_to_billing", {}),
                    ]
                )
            ]
        ),
        [wipe],
        name="triage",
        handoffs=[billing],
    )
    result = await triage.run("go", defer_approval=True)
    assert result.stop_reason == "awaiting_approval"
    assert result.last_agent == "triage"
    refused = next(e for e in result.events if isinstance(e, FunctionExecutionCompleteEvent))
    assert "hand over in an answer without other calls" in str(refused.execution.result)
    assert not [e for e in result.events if isinstance(e, HandoffEvent)]


async def test_after_a_handoff_the_runs_max_iterations_still_counts_every_call() -> None:
    billing = Agent(ScriptedClient(["Billing answers."]), name="billing", max_iterations=1)
    triage = Agent(
        ScriptedClient([ask("transfer_to_billing", "h1")]),
        name="triage",
        handoffs=[billing],
        max_iterations=3,
    )
    result = await triage.run("go")
    assert result.text == "Billing answers."
    assert result.iterations == 2


async def test_a_childs_unreported_usage_counts_in_the_parents_token_budget() -> None:
    def silent(*_: Any) -> LLMResponse:  # reports no usage: its tokens are estimated
        return ask("capital", "k", country="France " * 100)

    child = Agent(FunctionClient(silent), [capital], name="silent")
    parent = Agent(
        ScriptedClient([ask("silent", "p1", task="loop"), "done"]),
        [child.as_tool()],
        budget=Budget(max_tokens=2000),
    )
    result = await parent.run("go")
    child_calls = [e for e in result.events if e.type == "llm_response" and e.depth]
    assert 1 <= len(child_calls) < 9  # stopped by the parent's budget, not max_iterations
    stops = [e for e in result.events if isinstance(e, BudgetExceededEvent)]
    assert stops[0].depth == 1


async def test_an_agent_that_is_its_own_tool_stops_at_the_depth_limit() -> None:
    def again(*_: Any) -> LLMResponse:
        return ask("echo", "e1", task="again")

    echo = Agent(FunctionClient(again), name="echo", max_iterations=1)
    echo._tools = {"echo": echo.as_tool()}  # its own tool
    with pytest.raises(GlassAgentError):
        await echo.run("go")
    # every level's call failed at the deepest one: depth 8 is the last that ran
    result = await Agent(
        ScriptedClient([ask("echo", "t1", task="go"), "top done"]), [echo.as_tool()]
    ).run("go")
    depths = {e.depth for e in result.events}
    assert max(depths) == 8
    deepest = [
        e for e in result.events if isinstance(e, FunctionExecutionCompleteEvent) and e.depth == 8
    ]
    assert deepest
    assert "nest 8 deep at most" in str(deepest[0].execution.result)
