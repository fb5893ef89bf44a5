"""OpenTelemetry with many agents: a sub-agent's run below its call's span; handoffs."""

from __future__ import annotations

import asyncio
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from glassagent import Agent
from glassagent.otel import EventTracer, traced
from glassagent.testing import FunctionClient, ScriptedClient
from tests.support.many_agents import (
    ask,
    researcher,
    researcher_script,
    scripted_writer,
    triage_and_billing,
    writer,
    writer_script,
)


def tree(spans: tuple[ReadableSpan, ...]) -> list[tuple[int, str]]:
    """Each span as (depth, name), depth first in the order the spans started."""
    children: dict[int | None, list[ReadableSpan]] = {}
    for span in sorted(spans, key=lambda s: s.start_time or 0):
        parent = span.parent.span_id if span.parent is not None else None
        children.setdefault(parent, []).append(span)
    known = {s.context.span_id for s in spans if s.context is not None}
    roots = [s for key, found in children.items() if key not in known for s in found]
    out: list[tuple[int, str]] = []

    def walk(span: ReadableSpan, depth: int) -> None:
        out.append((depth, span.name))
        assert span.context is not None
        for child in children.get(span.context.span_id, []):
            walk(child, depth + 1)

    for root in roots:
        walk(root, 0)
    return out


TWO_LEVELS = [
    (0, "invoke_agent writer"),
    (1, "chat scripted"),
    (1, "execute_tool researcher"),
    (2, "invoke_agent researcher"),
    (3, "chat scripted"),
    (3, "execute_tool capital"),
    (3, "chat scripted"),
    (1, "chat scripted"),
]


def named(spans: tuple[ReadableSpan, ...], name: str) -> ReadableSpan:
    (span,) = [s for s in spans if s.name == name]
    return span


async def test_a_sub_agents_run_is_a_child_of_its_tool_call_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    result = await traced(
        scripted_writer().run("Capital?"), tracer_provider=provider, agent_name="writer"
    )
    spans = exporter.get_finished_spans()
    assert tree(spans) == TWO_LEVELS

    call = named(spans, "execute_tool researcher")
    child = named(spans, "invoke_agent researcher")
    assert child.parent is not None
    assert call.context is not None
    assert child.parent.span_id == call.context.span_id
    attributes = child.attributes or {}
    assert attributes["gen_ai.agent.name"] == "researcher"
    assert attributes["gen_ai.operation.name"] == "invoke_agent"
    child_id = next(e.run_id for e in result.events if e.depth)
    assert attributes["glassagent.run.id"] == child_id
    assert attributes["gen_ai.usage.input_tokens"] == 300  # its own two calls
    assert attributes["glassagent.run.stop_reason"] == "end_turn"
    top = named(spans, "invoke_agent writer").attributes or {}
    assert top["gen_ai.usage.input_tokens"] == 430  # the run's usage holds the sub-agent's
    # the sub-agent's run ended before the call that ran it
    assert (child.end_time or 0) <= (call.end_time or 0)


async def test_the_event_tracer_builds_the_same_tree_once(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    hook = EventTracer(tracer_provider=provider, agent_name="writer")
    child = researcher(ScriptedClient(researcher_script()))
    child.on_event = hook  # the sub-agent's own hook sees its events too: traced once
    parent = Agent(ScriptedClient(writer_script()), [child.as_tool()], on_event=hook)
    await parent.run("Capital?")

    spans = exporter.get_finished_spans()
    assert tree(spans) == TWO_LEVELS
    top = named(spans, "invoke_agent writer").attributes or {}
    assert top["glassagent.run.iterations"] == 2
    assert top["gen_ai.usage.input_tokens"] == 430
    assert (named(spans, "invoke_agent researcher").attributes or {})[
        "glassagent.run.iterations"
    ] == 2
    assert repr(hook) == "EventTracer(runs_open=0)"


async def test_a_grandchild_nests_below_its_parents_call(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    leaf = researcher(ScriptedClient(["Paris"]))
    middle = Agent(
        ScriptedClient([ask("researcher", "m1", task="France"), "Paris, it says."]),
        [leaf.as_tool()],
        name="middle",
    )
    top = Agent(ScriptedClient([ask("middle", "t1", task="find it"), "Done."]), [middle.as_tool()])
    await traced(top.run("go"), tracer_provider=provider)
    assert tree(exporter.get_finished_spans()) == [
        (0, "invoke_agent"),
        (1, "chat scripted"),
        (1, "execute_tool middle"),
        (2, "invoke_agent middle"),
        (3, "chat scripted"),
        (3, "execute_tool researcher"),
        (4, "invoke_agent researcher"),
        (5, "chat scripted"),
        (3, "chat scripted"),
        (1, "chat scripted"),
    ]


async def test_a_handoff_is_a_span_event_and_names_the_next_calls_agent(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    await traced(triage_and_billing().run("Refund"), tracer_provider=provider, agent_name="triage")
    spans = exporter.get_finished_spans()
    run = named(spans, "invoke_agent triage")
    (event,) = [e for e in run.events if e.name == "glassagent.handoff"]
    assert dict(event.attributes or {}) == {
        "glassagent.handoff.from_agent": "triage",
        "glassagent.handoff.to_agent": "billing",
        "gen_ai.tool.call.id": "h1",
    }
    chats = sorted((s for s in spans if s.name.startswith("chat")), key=lambda s: s.start_time or 0)
    agents = [(s.attributes or {}).get("gen_ai.agent.name") for s in chats]
    assert agents == [None, "billing"]


async def test_an_aborted_parent_ends_the_open_sub_agent_spans(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    started = asyncio.Event()

    async def never(*_: Any) -> Any:
        started.set()
        await asyncio.sleep(60)

    parent = writer(ScriptedClient(writer_script()), FunctionClient(never))
    run = traced(parent.run("Capital?"), tracer_provider=provider)

    async def consume() -> None:
        async for _ in run:
            pass

    consumer = asyncio.create_task(consume())
    await asyncio.wait_for(started.wait(), 10)
    run.abort("stop")
    await asyncio.wait_for(consumer, 20)
    spans = exporter.get_finished_spans()
    names = {s.name for s in spans}
    assert {"invoke_agent", "execute_tool researcher", "invoke_agent researcher"} <= names
    child = named(spans, "invoke_agent researcher")
    assert child.status.status_code.name == "ERROR"
    assert (child.attributes or {})["error.type"] == "RunAborted"
