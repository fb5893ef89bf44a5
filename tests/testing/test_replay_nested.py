"""`ReplayClient` with many agents: a parent and its sub-agents replayed from one recording."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from glassagent import Agent, LLMResponse, Message, ToolCall
from glassagent.errors import ReplayMismatchError, UserError
from glassagent.testing import FunctionClient, ReplayClient, ScriptedClient
from tests.support.many_agents import (
    CHILD_ANSWER,
    PARENT_ANSWER,
    ask,
    researcher,
    researcher_script,
    scripted_writer,
    triage_and_billing,
    writer,
    writer_script,
)


async def record(path: Path, agent: Agent, prompt: str = "Capital?") -> Any:
    return await agent.run(prompt).save_events(path)


async def test_the_parent_and_its_sub_agent_replay_from_one_recording(tmp_path: Path) -> None:
    path = tmp_path / "two-levels.jsonl"
    recorded = await record(path, scripted_writer(model="gpt-4o-mini"))

    parent = ReplayClient.from_events(path)
    child = ReplayClient.from_events(path, agent="researcher")
    assert (parent.remaining, child.remaining) == (2, 2)  # each agent's own calls
    assert (parent.model, child.model) == ("gpt-4o-mini", "gpt-4o-mini")
    result = await writer(parent, child).run("Capital?")

    assert result.text == PARENT_ANSWER == recorded.text
    assert (parent.remaining, child.remaining) == (0, 0)
    parent.check(result)  # the whole run: the parent's events and the sub-agent's
    child.check(result)  # the sub-agent's run inside it
    assert [e.type for e in result.events if e.depth][-2:] == ["llm_response", "complete"]
    assert child.requests[0].messages[0].content == "Find the capital of France."


async def test_a_changed_child_answer_fails_with_a_diff(tmp_path: Path) -> None:
    path = tmp_path / "two-levels.jsonl"
    await record(path, scripted_writer())

    parent = ReplayClient(path)
    changed = ScriptedClient(researcher_script("Lyon, says the atlas."))
    with pytest.raises(ReplayMismatchError, match="Model call 2 sent a request") as caught:
        await writer(parent, changed).run("Capital?")
    lines = (caught.value.diff or "").splitlines()
    assert any(line.startswith("-") and f'content: "{CHILD_ANSWER}"' in line for line in lines)
    assert any(
        line.startswith("+") and 'content: "Lyon, says the atlas."' in line for line in lines
    )


async def test_check_compares_the_sub_agents_events(tmp_path: Path) -> None:
    path = tmp_path / "two-levels.jsonl"
    await record(path, scripted_writer())

    parent = ReplayClient(path)
    # the sub-agent looks Spain up instead, yet answers the same: the parent sees no change
    other = [ask("capital", "k1", country="Spain"), LLMResponse(CHILD_ANSWER)]
    result = await writer(parent, ScriptedClient(other)).run("Capital?")
    assert result.text == PARENT_ANSWER
    with pytest.raises(ReplayMismatchError, match="events differ") as caught:
        parent.check(result)
    diff = caught.value.diff or ""
    assert '-    country: "France"' in diff
    assert '+    country: "Spain"' in diff


async def test_a_sub_agent_replays_on_its_own(tmp_path: Path) -> None:
    path = tmp_path / "two-levels.jsonl"
    await record(path, scripted_writer())

    child = ReplayClient(path, agent="researcher")
    result = await researcher(child).run("Find the capital of France.")
    assert result.text == CHILD_ANSWER
    child.check(result)  # the recorded sub-agent's run, read as a run of its own
    with pytest.raises(ReplayMismatchError, match="not made"):
        ReplayClient(path).check(result)  # the parent's calls were not made


async def test_a_handoff_replays_each_agent_from_one_recording(tmp_path: Path) -> None:
    path = tmp_path / "handoff.jsonl"
    recorded = await record(path, triage_and_billing(), "Refund order 42")
    assert recorded.last_agent == "billing"

    triage = ReplayClient(path, agent="triage")
    billing = ReplayClient(path, agent="billing")
    assert (triage.remaining, billing.remaining) == (1, 1)
    result = await triage_and_billing(triage, billing).run("Refund order 42")
    assert result.text == "Billing here: refunded."
    assert result.last_agent == "billing"
    triage.check(result)
    billing.check(result)


def _looks_up(
    messages: Sequence[Message], tools: Sequence[Any], system: Any, settings: Any
) -> LLMResponse:
    """A researcher's model: a task asks for the capital, a result is the answer."""
    last = messages[-1]
    if last.role == "tool":
        return LLMResponse(f"The capital is {last.content}.")
    country = last.content.split()[-1]
    return LLMResponse(tool_calls=[ToolCall(f"k-{country}", "capital", {"country": country})])


async def test_sub_agents_that_ran_at_once_replay_in_any_order(tmp_path: Path) -> None:
    both = LLMResponse(
        tool_calls=[
            ToolCall("p1", "researcher", {"task": "Capital of France"}),
            ToolCall("p2", "researcher", {"task": "Capital of Spain"}),
        ]
    )

    def parent_client() -> ScriptedClient:
        return ScriptedClient([both, "France: Paris; Spain: unknown."])

    path = tmp_path / "fan-out.jsonl"
    recorded = await record(path, writer(parent_client(), FunctionClient(_looks_up)))
    # the recording has Spain's run first: the replay asks for France's first
    nested = sorted((e for e in recorded.events if e.depth), key=lambda e: e.parent_call_id != "p2")
    first = next(i for i, e in enumerate(recorded.events) if e.depth)
    own = [e for e in recorded.events if not e.depth]
    events = [*own[:first], *nested, *own[first:]]
    assert next(e.parent_call_id for e in events if e.type == "llm_request" and e.depth) == "p2"

    parent, child = ReplayClient(events), ReplayClient(events, agent="researcher")
    assert child.remaining == 4
    result = await writer(parent, child).run("Capital?")
    assert child.remaining == 0
    assert result.text == "France: Paris; Spain: unknown."
    assert next(r.messages[0].content for r in child.requests) == "Capital of France"
    parent.check(result)  # each call's sub-agent events go with their call, in call order
    child.check(result)
    assert len({e.run_id for e in result.events if e.depth}) == 2


def test_agent_must_be_a_name() -> None:
    with pytest.raises(UserError, match="agent's name"):
        ReplayClient([], agent="")


async def test_a_recording_without_sub_agents_replays_as_before(tmp_path: Path) -> None:
    path = tmp_path / "plain.jsonl"
    await record(path, Agent(ScriptedClient(writer_script()[1:])))
    replay = ReplayClient(path)
    result = await Agent(replay).run("Capital?")
    replay.check(result)
    assert ReplayClient(path, agent="researcher").remaining == 0
