"""The JSON form a durable run keeps of a result with sub-agents' events and a handoff."""

from __future__ import annotations

import json

from glassagent._durable import codec
from tests.support.many_agents import scripted_writer, triage_and_billing


def through_json(data: object) -> object:
    return json.loads(json.dumps(data))  # what the database gives back


async def test_a_result_with_nested_events_and_a_handoff_comes_back_equal() -> None:
    nested = await scripted_writer().run("Capital?")
    handed = await triage_and_billing().run("Refund")
    for result in (nested, handed):
        back = codec.result_from(through_json(codec.result_dict(result, None)), None)
        assert back == result
        assert back.events == result.events
        assert back.last_agent == result.last_agent
    assert any(e.depth for e in nested.events)
    assert any(e.type == "handoff" for e in handed.events)
    assert codec.result_from(through_json(codec.result_dict(handed, None)), None).last_agent == (
        "billing"
    )


async def test_a_result_kept_before_handoffs_reads_without_a_last_agent() -> None:
    result = await scripted_writer().run("Capital?")
    data = codec.result_dict(result, None)
    del data["last_agent"]
    assert codec.result_from(through_json(data), None).last_agent is None
