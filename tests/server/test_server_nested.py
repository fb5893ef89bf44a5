"""The invoke server streams a sub-agent's events inside the turn; only the turn's end ends it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from glassagent.server import create_app
from glassagent.testing import ScriptedClient
from tests.support.many_agents import (
    CHILD_ANSWER,
    PARENT_ANSWER,
    ask,
    researcher,
    researcher_script,
    triage_and_billing,
    writer_script,
)
from tests.support.server import INVOKE, http, sse_events


def sub_agent_tool() -> Any:
    return researcher(ScriptedClient(researcher_script())).as_tool()


async def test_a_streamed_turn_carries_the_sub_agents_events_and_ends_once() -> None:
    app = create_app(model=ScriptedClient(writer_script()), tools=[sub_agent_tool()])
    async with http(app) as api:
        response = await api.post(
            INVOKE, json={"message": "Capital?", "stream": True, "append_to_history": True}
        )
    events = sse_events(response.text)

    nested = [e for e in events if e.get("depth")]
    assert nested
    assert {e["depth"] for e in nested} == {1}
    assert {e["parent_call_id"] for e in nested} == {"p1"}
    assert nested[-1]["type"] == "complete"
    assert nested[-1]["text"] == CHILD_ANSWER
    assert "status" not in nested[-1]  # a sub-agent's end streams as it is, never held
    ends = [e for e in events if e["type"] == "complete"]
    assert len(ends) == 2
    assert ends[-1] is events[-1]
    last = events[-1]
    assert (last["text"], last["status"]) == (PARENT_ANSWER, "completed")
    assert "depth" not in last
    assert [m["content"] for m in last["history"]["messages"]][-1] == PARENT_ANSWER
    # the sub-agent's run comes inside the parent's call
    kinds = [(e.get("depth", 0), e["type"]) for e in events]
    start, done = (
        kinds.index((0, "function_execution_start")),
        kinds.index((0, "function_execution_complete")),
    )
    assert all(start < i < done for i, e in enumerate(events) if e.get("depth"))


async def test_a_handoff_inside_a_sub_agent_streams_as_an_event() -> None:
    model = ScriptedClient([ask("triage", "p1", task="Refund order 42"), "Refunded."])
    app = create_app(model=model, tools=[triage_and_billing().as_tool()])
    async with http(app) as api:
        response = await api.post(INVOKE, json={"message": "Refund", "stream": True})
    events = sse_events(response.text)
    (handoff,) = [e for e in events if e["type"] == "handoff"]
    assert (handoff["from_agent"], handoff["to_agent"], handoff["call_id"]) == (
        "triage",
        "billing",
        "h1",
    )
    assert (handoff["depth"], handoff["parent_call_id"]) == (1, "p1")
    assert [e["text"] for e in events if e["type"] == "complete"] == [
        "Billing here: refunded.",
        "Refunded.",
    ]


async def test_a_failing_sub_agent_does_not_end_the_turn() -> None:
    broken = researcher(ScriptedClient([])).as_tool()  # its model has no answer at all
    model = ScriptedClient([ask("researcher", "p1", task="x"), "It failed; sorry."])
    async with http(create_app(model=model, tools=[broken])) as api:
        response = await api.post(INVOKE, json={"message": "Go", "stream": True})
    events = sse_events(response.text)
    assert [e["type"] for e in events if e.get("depth")][-1] == "error"
    assert events[-1]["type"] == "complete"
    assert events[-1]["status"] == "completed"
    assert events[-1]["text"] == "It failed; sorry."


@asynccontextmanager
async def served(app: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with app.router.lifespan_context(app), http(app) as api:
        yield api


@pytest.mark.durable
async def test_a_durable_turn_streams_the_sub_agents_events_too(tmp_path: Path) -> None:
    pytest.importorskip("dbos")
    url = f"sqlite:///{tmp_path / 'turns.sqlite'}"
    app = create_app(
        model=ScriptedClient(writer_script()), tools=[sub_agent_tool()], durable=url, worker_id="w"
    )
    turn = {"message": "Capital?", "stream": True, "run_id": "n-1"}
    async with served(app) as api:
        response = await api.post(INVOKE, json=turn)
    events = sse_events(response.text)
    assert [e["type"] for e in events if e.get("depth")][-1] == "complete"
    last = events[-1]
    assert (last["type"], last["status"], last["text"]) == ("complete", "completed", PARENT_ANSWER)
    assert last["run_id"] == "n-1"
    assert "depth" not in last
