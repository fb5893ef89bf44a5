"""Nested runs and handoffs in the notebook view and in recordings."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from glassagent import Agent, LLMResponse
from glassagent._core.record.timeline import read
from glassagent.events import load_events, save_events
from glassagent.testing import ScriptedClient
from tests.support.many_agents import (
    CHILD_ANSWER,
    PARENT_ANSWER,
    ask,
    researcher,
    scripted_writer,
    triage_and_billing,
)


async def test_the_timeline_holds_the_sub_agents_run_inside_its_call() -> None:
    result = await scripted_writer().run("Capital?")
    timeline = read(e.to_dict() for e in result.events)

    assert timeline.status == "complete"
    assert len(timeline.steps) == 2
    (call,) = timeline.steps[0].tools
    (child,) = call.runs
    assert (child.agent, child.depth, child.status) == ("researcher", 1, "complete")
    assert child.run_id != timeline.run_id
    assert [s.text for s in child.steps] == ["", CHILD_ANSWER]
    assert child.steps[0].tools[0].name == "capital"
    # the child's text stays in its own timeline: the parent's steps hold only their own
    assert [s.text for s in timeline.steps] == ["", PARENT_ANSWER]
    assert timeline.end is not None
    assert timeline.end["text"] == PARENT_ANSWER
    # tokens add up the sub-agent's calls, as the run's usage does
    assert timeline.tokens == (430, 26) == (result.usage.input_tokens, result.usage.output_tokens)


async def test_the_html_marks_the_sub_agent_and_keeps_its_text_apart() -> None:
    result = await scripted_writer().run("Capital?")
    page = result._repr_html_()

    sub = re.search(r'<div class="ga-sub" data-depth="1">(.*?)</div></div></div>', page)
    assert sub is not None
    assert "↳ researcher" in sub.group(1)
    assert "2 model calls" in sub.group(1)
    assert CHILD_ANSWER in sub.group(1)
    # the sub-agent's run sits in the parent's call, before that call's result
    assert page.index('class="ga-sub"') < page.index("Result (")
    assert '2 model calls</span> <span class="ga-dim">· 2 by sub-agents' in page
    answer = page[page.rindex('class="ga-end ga-ok"') :]
    assert PARENT_ANSWER in answer
    assert CHILD_ANSWER not in answer
    assert CHILD_ANSWER + PARENT_ANSWER not in page


async def test_the_markdown_quotes_the_sub_agents_run() -> None:
    result = await scripted_writer().run("Capital?")
    text = result._repr_markdown_()

    quoted = [line for line in text.splitlines() if line.startswith(">")]
    assert any("↳ `researcher`" in line and "**complete**" in line for line in quoted)
    assert "> " + CHILD_ANSWER in quoted
    assert not any(PARENT_ANSWER in line for line in quoted)
    assert text.rstrip().endswith(PARENT_ANSWER + "\n```")


async def test_a_grandchild_is_quoted_twice() -> None:
    leaf = researcher(ScriptedClient(["Paris"]))
    middle = Agent(
        ScriptedClient([ask("researcher", "m1", task="France"), "Paris, it says."]),
        [leaf.as_tool()],
        name="middle",
    )
    top = Agent(ScriptedClient([ask("middle", "t1", task="find it"), "Done."]), [middle.as_tool()])
    result = await top.run("go")
    timeline = read(e.to_dict() for e in result.events)
    middle_run = timeline.steps[0].tools[0].runs[0]
    leaf_run = middle_run.steps[0].tools[0].runs[0]
    assert (middle_run.agent, leaf_run.agent, leaf_run.depth) == ("middle", "researcher", 2)
    assert len(timeline.all_steps()) == 5
    assert "> > **↳ `researcher`**" in result._repr_markdown_()
    assert result._repr_html_().count('class="ga-sub"') == 2


async def test_a_handoff_is_a_line_between_the_calls() -> None:
    result = await triage_and_billing().run("Refund order 42")
    timeline = read(e.to_dict() for e in result.events)
    assert timeline.steps[0].handoff == ("triage", "billing")
    assert timeline.steps[1].handoff is None
    page = result._repr_html_()
    assert '<div class="ga-handoff">⇄ handed over from triage to billing</div>' in page
    assert "**`⇄ handed over from triage to billing`**" in result._repr_markdown_()


async def test_a_sub_agents_run_whose_call_a_hook_dropped_still_shows() -> None:
    def drop_calls(event: dict[str, Any]) -> dict[str, Any]:
        if event["type"] == "function_call_start" and not event.get("depth"):
            return {"type": "dropped"}
        return event

    agent = scripted_writer()
    agent.redact = drop_calls
    result = await agent.run("Capital?")
    page = result._repr_html_()
    assert "↳ researcher" not in page  # its call's name was dropped with the call
    assert "↳ sub-agent" in page
    assert CHILD_ANSWER in page
    assert '<div class="ga-sub" data-depth="1">' in page


async def test_a_saved_parent_run_loads_back_equal_under_one_header(tmp_path: Path) -> None:
    result = await scripted_writer().run("Capital?")
    path = tmp_path / "run.jsonl"
    result.save_events(path)

    lines = [json.loads(line) for line in path.read_text().splitlines()]
    headers = [line for line in lines if line["type"] == "recording"]
    assert len(headers) == 1
    assert headers[0]["run_id"] == result.events[0].run_id
    assert load_events(path) == result.events
    assert any(e.depth == 1 for e in load_events(path))


async def test_a_live_recording_of_a_parent_run_holds_its_sub_agents_events(
    tmp_path: Path,
) -> None:
    path = tmp_path / "live.jsonl"
    result = await scripted_writer().run("Capital?").save_events(path)
    assert load_events(path) == result.events


async def test_two_conversation_turns_with_sub_agents_keep_their_order(tmp_path: Path) -> None:
    first = await scripted_writer().run("Capital?")
    second = await scripted_writer().run("Again?")
    path = tmp_path / "both.jsonl"
    save_events(path, [*first.events, *second.events])
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["run_id"] for line in lines if line["type"] == "recording"] == [
        first.events[0].run_id,
        second.events[0].run_id,
    ]
    assert load_events(path) == (*first.events, *second.events)


def test_a_timeline_of_events_without_depth_reads_as_before() -> None:
    events = [
        {"type": "llm_request", "run_id": "r", "seq": 0, "iteration": 1},
        {"type": "text_chunk", "run_id": "r", "seq": 1, "text": "hi", "depth": "bad"},
        {"type": "complete", "run_id": "r", "seq": 2, "text": "hi"},
    ]
    timeline = read(events)
    assert timeline.status == "complete"
    assert timeline.steps[0].text == "hi"


def test_a_child_answer_is_never_glued_to_the_parents_streamed_text() -> None:
    events = [
        {"type": "llm_request", "run_id": "p", "seq": 0, "iteration": 1},
        {"type": "text_chunk", "run_id": "p", "seq": 1, "text": "Let me ask. "},
        {
            "type": "function_call_start",
            "run_id": "p",
            "seq": 2,
            "call_id": "c",
            "function_name": "helper",
            "tool_name": "helper",
            "args": {},
        },
        {
            "type": "llm_request",
            "run_id": "k",
            "seq": 0,
            "iteration": 1,
            "depth": 1,
            "parent_run_id": "p",
            "parent_call_id": "c",
        },
        {
            "type": "text_chunk",
            "run_id": "k",
            "seq": 1,
            "text": "CHILD",
            "depth": 1,
            "parent_run_id": "p",
            "parent_call_id": "c",
        },
    ]
    timeline = read(events)
    assert timeline.steps[0].text == "Let me ask. "
    assert timeline.steps[0].tools[0].runs[0].steps[0].text == "CHILD"
    assert timeline.status == "running"


def test_an_unnested_run_renders_as_it_did() -> None:
    client = ScriptedClient([LLMResponse("hello")])
    result = Agent(client).run_sync("hi")
    page = result._repr_html_()
    assert "ga-sub" not in page.split("</style>", 1)[1]
    assert "by sub-agents" not in page
    assert "ga-handoff" not in page.split("</style>", 1)[1]
