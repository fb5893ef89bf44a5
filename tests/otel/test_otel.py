"""glassagent.otel: the spans of a run, read from the SDK's in-memory exporter."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from glassagent import Agent, LLMResponse, ModelSettings, ToolCall, Usage, tool
from glassagent.errors import (
    UserError,
)
from glassagent.otel import INSTRUMENTATION, traced
from glassagent.testing import ScriptedClient
from tests.support.otel import add, boom, by_name, finish, the_run, tool_round

# ---- the shape of a run ----------------------------------------------------------------


async def test_a_tool_round_is_a_run_span_over_its_model_calls_and_tool_call(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    agent = Agent(tool_round(), [add])
    result = await traced(agent.run("What is 17 + 25?"), tracer_provider=provider)

    assert result.text == "17 + 25 = 42"
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans] == [
        "chat test-model",
        "execute_tool add",
        "chat test-model",
        "invoke_agent",
    ]
    run = the_run(spans)
    assert run.parent is None
    assert run.kind is SpanKind.INTERNAL
    assert all(s.parent is not None and s.parent.span_id == run.context.span_id for s in spans[:3])
    assert {s.context.trace_id for s in spans} == {run.context.trace_id}
    kinds = {s.name: s.kind for s in spans}
    assert kinds["chat test-model"] is SpanKind.CLIENT
    assert kinds["execute_tool add"] is SpanKind.INTERNAL
    assert all(s.status.status_code is StatusCode.UNSET for s in spans)
    assert run.instrumentation_scope is not None
    assert run.instrumentation_scope.name == INSTRUMENTATION == "glassagent"


async def test_spans_follow_one_another_inside_the_run_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    await traced(Agent(tool_round(), [add]).run("17 + 25?"), tracer_provider=provider)

    first, tool_span, second, run = exporter.get_finished_spans()
    for span in (first, tool_span, second, run):
        assert span.start_time is not None
        assert span.end_time is not None
        assert span.start_time <= span.end_time
    assert run.start_time is not None
    assert run.end_time is not None
    for child in (first, tool_span, second):
        assert run.start_time <= child.start_time  # type: ignore[operator]
        assert child.end_time <= run.end_time  # type: ignore[operator]
    assert first.end_time <= tool_span.start_time  # type: ignore[operator]
    assert tool_span.end_time <= second.start_time  # type: ignore[operator]


async def test_model_call_spans_carry_the_conventions_attributes(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    usage = Usage(
        input_tokens=100,
        output_tokens=20,
        thinking_tokens=7,
        cache_read_tokens=60,
        cache_write_tokens=5,
    )
    agent = Agent(
        tool_round(usage=usage),
        [add],
        settings=ModelSettings(temperature=0.2, max_tokens=256, stop_sequences=("END",)),
    )
    await traced(agent.run("17 + 25?"), tracer_provider=provider)

    first, second = by_name(exporter.get_finished_spans())["chat test-model"]
    assert dict(first.attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "scripted",
        "gen_ai.system": "scripted",
        "gen_ai.request.model": "test-model",
        "gen_ai.request.temperature": 0.2,
        "gen_ai.request.max_tokens": 256,
        "gen_ai.request.stop_sequences": ("END",),
        "glassagent.iteration": 1,
        "gen_ai.response.finish_reasons": ("tool_call",),
        "gen_ai.usage.input_tokens": 100,
        "gen_ai.usage.output_tokens": 27,  # the conventions count reasoning as output
        "gen_ai.usage.reasoning.output_tokens": 7,
        "gen_ai.usage.cache_read.input_tokens": 60,
        "gen_ai.usage.cache_creation.input_tokens": 5,
    }
    assert second.attributes is not None
    assert second.attributes["glassagent.iteration"] == 2
    assert second.attributes["gen_ai.response.finish_reasons"] == ("stop",)


async def test_the_run_span_carries_the_runs_totals_and_the_agents_name(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    usage = Usage(input_tokens=10, output_tokens=3)
    run = traced(
        Agent(tool_round(usage=usage), [add]).run("17 + 25?"),
        tracer_provider=provider,
        agent_name="Math Tutor",
    )
    result = await run

    span = the_run(exporter.get_finished_spans())
    assert span.name == "invoke_agent Math Tutor"
    assert span.attributes is not None
    assert span.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert span.attributes["gen_ai.agent.name"] == "Math Tutor"
    assert span.attributes["gen_ai.provider.name"] == "scripted"
    assert span.attributes["gen_ai.request.model"] == "test-model"
    assert span.attributes["glassagent.run.id"] == run.run_id == result.events[0].run_id
    assert span.attributes["gen_ai.usage.input_tokens"] == 20
    assert span.attributes["gen_ai.usage.output_tokens"] == 6
    assert span.attributes["glassagent.run.stop_reason"] == "end_turn"
    assert span.attributes["glassagent.run.iterations"] == 2


async def test_tool_spans_carry_the_call_and_its_failure(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    client = ScriptedClient(
        [
            LLMResponse(
                tool_calls=(
                    ToolCall("c1", "add", {"a": 1, "b": 2}),
                    ToolCall("c2", "boom", {"text": "this"}),
                    ToolCall("c3", "missing", {}),
                )
            ),
            "Done.",
        ]
    )
    result = await traced(Agent(client, [add, boom]).run("Go."), tracer_provider=provider)

    assert result.text == "Done."
    tools = {s.name: s for s in exporter.get_finished_spans() if s.name.startswith("execute")}
    assert set(tools) == {"execute_tool add", "execute_tool boom", "execute_tool missing"}
    fine = tools["execute_tool add"]
    assert fine.status.status_code is StatusCode.UNSET
    assert dict(fine.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "add",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.call.id": "c1",
    }
    failed = tools["execute_tool boom"]
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.status.description is None  # the error text is content: not by default
    assert failed.attributes is not None
    assert failed.attributes["error.type"] == "tool_error"
    unknown = tools["execute_tool missing"]
    assert unknown.attributes is not None
    assert unknown.attributes["error.type"] == "unknown_tool"
    assert the_run(exporter.get_finished_spans()).status.status_code is StatusCode.UNSET


# ---- ways to run -------------------------------------------------------------------------


async def test_async_for_yields_every_event_of_the_run(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    run = traced(Agent(tool_round(), [add]).run("17 + 25?"), tracer_provider=provider)
    events = [event async for event in run]

    assert run.result is not None
    assert events == list(run.result.events)
    assert events[-1].type == "complete"
    assert len(exporter.get_finished_spans()) == 4


async def test_a_slow_loop_body_does_not_stretch_the_spans(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    async for _ in traced(
        Agent(ScriptedClient(["a b c d e f"])).run("Hi"), tracer_provider=provider
    ):
        await asyncio.sleep(0.1)  # the events are read (and traced) as they are emitted

    chat = by_name(exporter.get_finished_spans())["chat scripted"][0]
    assert chat.start_time is not None
    assert chat.end_time is not None
    assert (chat.end_time - chat.start_time) / 1e9 < 0.1  # 5 events behind a 0.1 s body each


def test_run_sync_traces_the_run(provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    result = traced(Agent(tool_round(), [add]).run("17 + 25?"), tracer_provider=provider).run_sync()

    assert result.text == "17 + 25 = 42"
    assert [s.name for s in exporter.get_finished_spans()][-1] == "invoke_agent"


async def test_code_inside_the_run_sees_the_run_span_as_current(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    seen: list[int] = []

    @tool
    def where() -> str:
        """Report the current span."""
        seen.append(trace.get_current_span().get_span_context().span_id)
        return "here"

    client = ScriptedClient([LLMResponse(tool_calls=(ToolCall("c1", "where", {}),)), "Done."])
    await traced(Agent(client, [where]).run("Where?"), tracer_provider=provider)

    assert seen == [the_run(exporter.get_finished_spans()).context.span_id]
    assert not trace.get_current_span().get_span_context().is_valid  # detached afterwards


@pytest.mark.parametrize("streamed", [False, True], ids=["awaited", "streamed"])
async def test_the_run_span_is_a_child_of_the_current_span(
    provider: TracerProvider, exporter: InMemorySpanExporter, streamed: bool
) -> None:
    tracer = provider.get_tracer("my-app")
    with tracer.start_as_current_span("handle request") as request:
        run = traced(Agent(ScriptedClient(["Hi"])).run("Hello"), tracer_provider=provider)
        await finish(run, streamed=streamed)

    span = the_run(exporter.get_finished_spans())
    assert span.parent is not None
    assert span.parent.span_id == request.get_span_context().span_id


async def test_a_traced_run_runs_once(provider: TracerProvider) -> None:
    run = traced(Agent(ScriptedClient(["Hi"])).run("Hello"), tracer_provider=provider)
    await run
    with pytest.raises(UserError, match="only once"):
        await run


async def test_traced_refuses_what_it_cannot_trace() -> None:
    with pytest.raises(UserError, match=r"from Agent\.run"):
        traced("a prompt")  # type: ignore[arg-type]
    run = Agent(ScriptedClient(["Hi"])).run("Hello")
    with pytest.raises(UserError, match="redact"):
        traced(run, redact="everything")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="agent_name"):
        traced(Agent(ScriptedClient(["Hi"])).run("Hello"), agent_name=" ")


# ---- no provider, no SDK, no import ----------------------------------------------------------

_NO_PROVIDER = """
import asyncio, sys
from opentelemetry import trace
from glassagent import Agent
from glassagent.otel import traced
from glassagent.testing import ScriptedClient

async def main():
    run = traced(Agent(ScriptedClient(["Hi"])).run("Hello"), capture_content=True)
    result = await run
    assert result.text == "Hi"
    assert not trace.get_current_span().is_recording()

asyncio.run(main())
assert "opentelemetry.sdk" not in sys.modules, "glassagent.otel imported the SDK"

# A provider configured afterwards receives nothing of the run that went before.
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
provider.force_flush()
print(len(exporter.get_finished_spans()))

# ... and the next run goes to it, through the global provider.
asyncio.run(main())
print(sorted(s.name for s in exporter.get_finished_spans()))
"""


def test_without_a_configured_provider_nothing_is_recorded() -> None:
    out = subprocess.run(
        [sys.executable, "-W", "error", "-c", _NO_PROVIDER], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n", 1) == ["0", "['chat scripted', 'invoke_agent']\n"]


def test_import_glassagent_does_not_import_opentelemetry() -> None:
    code = "import sys, glassagent; print([m for m in sys.modules if 'opentelemetry' in m])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_without_the_extra_the_import_says_what_to_install() -> None:
    code = (
        "import sys\n"
        "sys.modules['opentelemetry'] = None\n"
        "try:\n"
        "    import glassagent.otel\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == (
        'glassagent.otel needs the OpenTelemetry API: pip install "glassagent[otel]"'
    )
