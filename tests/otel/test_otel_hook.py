"""glassagent.otel.EventTracer: the ``on_event`` hook traces runs as `traced` does."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from glassagent import Agent, LLMResponse, Usage
from glassagent.errors import MaxIterationsExceeded, UserError
from glassagent.events import Redactor
from glassagent.otel import EventTracer, traced
from glassagent.server import create_app
from glassagent.testing import ScriptedClient
from tests.support.otel import SECRET, add, attributes_of, the_run, tool_round
from tests.support.server import INVOKE, http


def shape(spans: tuple[ReadableSpan, ...]) -> list[tuple[str, dict[str, Any], str]]:
    """Each span's name, attributes (without the run id) and status, in the order they ended."""
    found = []
    for span in spans:
        attributes = {k: v for k, v in (span.attributes or {}).items() if k != "glassagent.run.id"}
        found.append((span.name, attributes, span.status.status_code.name))
    return found


async def test_the_hook_gives_the_spans_traced_gives(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    usage = Usage(10, 5)
    await traced(Agent(tool_round(usage=usage), [add]).run("17 + 25?"), tracer_provider=provider)
    by_traced = shape(exporter.get_finished_spans())
    exporter.clear()

    hook = EventTracer(tracer_provider=provider)
    await Agent(tool_round(usage=usage), [add], on_event=hook).run("17 + 25?")
    assert shape(exporter.get_finished_spans()) == by_traced
    assert repr(hook) == "EventTracer(runs_open=0)"
    run = the_run(exporter.get_finished_spans()).attributes or {}
    assert run["glassagent.run.stop_reason"] == "end_turn"
    assert run["glassagent.run.iterations"] == 2
    assert run["gen_ai.usage.input_tokens"] == 20


def test_runs_of_run_sync_are_traced(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    agent = Agent(tool_round(), [add], on_event=EventTracer(tracer_provider=provider))
    agent.run_sync("17 + 25?")
    with pytest.raises(UserError, match="ran out"):
        agent.run_sync("again?")  # the script is used up: the second run fails
    runs = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent"]
    assert [s.status.status_code.name for s in runs] == ["UNSET", "ERROR"]


async def test_a_run_stopped_by_max_iterations_says_so(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    hook = EventTracer(tracer_provider=provider)
    agent = Agent(tool_round(), [add], max_iterations=1, on_event=hook)
    with pytest.raises(MaxIterationsExceeded):
        await agent.run("17 + 25?")
    run = the_run(exporter.get_finished_spans())
    assert (run.attributes or {})["glassagent.run.stop_reason"] == "max_iterations"
    assert (run.attributes or {})["error.type"] == "MaxIterationsExceeded"


async def test_the_invoke_server_runs_are_traced_with_content_redacted(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    hook = EventTracer(tracer_provider=provider, capture_content=True, redact=Redactor([SECRET]))
    client = ScriptedClient([f"one {SECRET}", "two"])
    async with http(create_app(model=client, on_event=hook)) as api:
        for text in (f"first {SECRET}", "second"):
            assert (await api.post(INVOKE, json={"message": text})).status_code == 200
    spans = exporter.get_finished_spans()
    runs = [s for s in spans if s.name == "invoke_agent"]
    assert len(runs) == 2
    assert len({(s.attributes or {})["glassagent.run.id"] for s in runs}) == 2
    text = attributes_of(spans)
    assert SECRET not in text
    assert "first [redacted]" in text


def test_the_hook_checks_its_options() -> None:
    with pytest.raises(UserError, match="redact"):
        EventTracer(redact="everything")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="agent_name"):
        EventTracer(agent_name=" ")


async def test_the_run_span_is_named_after_the_agent(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    hook = EventTracer(tracer_provider=provider, agent_name="helper")
    await Agent(ScriptedClient([LLMResponse("hi")]), on_event=hook).run("hello")
    assert [s.name for s in exporter.get_finished_spans()][-1] == "invoke_agent helper"
