"""The terminal view of a run with a sub-agent and a handoff: nested lines, answers apart."""

from __future__ import annotations

import io
import json

from glassagent import RunResult
from glassagent.cli._view import PLAIN_MARKS, HumanView, JsonView, Marks, PlainWriter, Turn
from tests.support.many_agents import (
    CHILD_ANSWER,
    PARENT_ANSWER,
    scripted_writer,
    triage_and_billing,
)


def shown(result: RunResult, marks: Marks = PLAIN_MARKS) -> list[str]:
    out = io.StringIO()
    view = HumanView(PlainWriter(out), marks)
    for event in result.events:
        view.show(event)
    view.turn_done(Turn(result, None, 1.0))
    return out.getvalue().splitlines()


async def test_a_sub_agents_steps_are_indented_and_labelled() -> None:
    result = await scripted_writer().run("Capital?")
    lines = shown(result)

    nested = [line for line in lines if line.startswith("  > researcher: ")]
    assert nested == [
        "  > researcher: * model call 1 (scripted)",
        '  > researcher: -> capital(country="France")',
        nested[2],
        "  > researcher: * model call 2 (scripted)",
        f"  > researcher: {CHILD_ANSWER}",
    ]
    assert nested[2].startswith("  > researcher: ok capital (")
    # the sub-agent's lines come inside the parent's call: after it starts, before its result
    call = lines.index('-> researcher(task="Find the capital of France.")')
    result_line = next(i for i, line in enumerate(lines) if line.startswith("  ok researcher ("))
    assert call < lines.index(nested[0]) < lines.index(nested[-1]) < result_line
    # the parent's streamed answer is its own text alone, on a line of its own
    assert PARENT_ANSWER in lines
    assert not any(CHILD_ANSWER in line and PARENT_ANSWER in line for line in lines)
    assert lines[-1].startswith("-- 430 in / 26 out tokens - 2 model calls (+2 by sub-agents)")


async def test_a_handoff_is_a_line_of_its_own() -> None:
    result = await triage_and_billing().run("Refund order 42")
    lines = shown(result, Marks())
    handoff = lines.index("⇄ handed over from triage to billing")
    assert lines[handoff + 1] == "· model call 2 (scripted/scripted)"
    assert lines[handoff + 2] == "Billing here: refunded."


async def test_the_json_view_prints_the_nested_events_with_their_depth() -> None:
    result = await scripted_writer().run("Capital?")
    out = io.StringIO()
    view = JsonView(out, HumanView(PlainWriter(io.StringIO()), PLAIN_MARKS))
    for event in result.events:
        view.show(event)
    printed = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [d.get("depth", 0) for d in printed] == [e.depth for e in result.events]
    assert printed[-1]["type"] == "complete"
    assert "depth" not in printed[-1]
