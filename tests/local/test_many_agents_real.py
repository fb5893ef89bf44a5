"""The embedded default model delegates once to a sub-agent (``pytest -m real_model``)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from glassagent import Agent, ModelSettings
from glassagent.events import FunctionExecutionCompleteEvent, LLMRequestEvent, parse_event
from glassagent.local import LocalServer, ensure_default_model

pytestmark = pytest.mark.real_model


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    ensure_default_model()
    with LocalServer(context_size=2048) as running:
        yield running


async def test_the_embedded_model_hands_a_task_to_a_sub_agent(server: LocalServer) -> None:
    async with server.client() as parent_client, server.client() as child_client:
        writer = Agent(
            child_client,
            name="writer",
            description="Writes one short sentence about a topic.",
            settings=ModelSettings(temperature=0, max_tokens=48),
        )
        # the first call must be the delegation; after it, the model may answer
        lead = Agent(
            parent_client,
            [writer.as_tool()],
            max_iterations=2,
            settings=ModelSettings(temperature=0, max_tokens=96, tool_choice="writer"),
        )
        run = lead.run("Get one sentence about the sea written.")
        events = [event async for event in run]

    nested = [e for e in events if e.depth == 1]
    assert nested, "the sub-agent's run streamed no events into the parent's"
    parent_id = events[0].run_id
    assert {(e.parent_run_id, e.depth) for e in nested} == {(parent_id, 1)}
    calls = [e for e in events if isinstance(e, FunctionExecutionCompleteEvent) and not e.depth]
    assert calls
    assert {c.execution.function_name for c in calls} == {"writer"}
    assert {e.parent_call_id for e in nested} <= {c.execution.call_id for c in calls}
    # the first delegation: the sub-agent was asked the task the model wrote, as a new
    # conversation, and its run ended with an answer that is the call's result
    first = calls[0].execution
    mine = [e for e in nested if e.parent_call_id == first.call_id]
    request = next(e for e in mine if isinstance(e, LLMRequestEvent))
    (task,) = [m.content for m in request.messages]
    assert task.strip()
    assert task == first.args["task"]
    assert mine[-1].type == "complete"
    assert not first.is_error
    assert first.result == mine[-1].text  # type: ignore[union-attr]
    for event in events:  # the whole tree survives the event dicts
        assert parse_event(json.loads(json.dumps(event.to_dict()))) == event
