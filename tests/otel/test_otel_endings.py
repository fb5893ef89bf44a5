"""glassagent.otel: failed, aborted and other runs end every span they opened."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from glassagent import Agent, Budget, LLMResponse, ModelSettings, ToolCall, tool
from glassagent.errors import (
    HistoryAppendError,
    MaxIterationsExceeded,
    RateLimitError,
    RunAborted,
)
from glassagent.history import History, HistoryMessage
from glassagent.llm import Message, RetryNotice, StreamPart, ToolDefinition
from glassagent.otel import traced
from glassagent.testing import FunctionClient, ScriptedClient
from glassagent.tools import ToolContext, TurnInfo, context_tool
from tests.support.otel import SECRET, add, by_name, finish, the_run, tool_round


async def test_a_failed_model_call_marks_its_span_and_the_run_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    def fail(*_: Any) -> LLMResponse:
        raise RateLimitError("slow down", provider="function")

    run = traced(Agent(FunctionClient(fail)).run("Hi"), tracer_provider=provider)
    with pytest.raises(RateLimitError):
        await run

    chat, span = exporter.get_finished_spans()
    for failed in (chat, span):
        assert failed.status.status_code is StatusCode.ERROR
        assert failed.attributes is not None
        assert failed.attributes["error.type"] == "RateLimitError"
    assert span.status.description is not None
    assert "slow down" in span.status.description
    assert span.attributes is not None
    assert span.attributes["glassagent.run.stop_reason"] == "error"


async def test_max_iterations_fails_the_run_span_only(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    client = ScriptedClient([LLMResponse(tool_calls=(ToolCall("c1", "add", {"a": 1, "b": 2}),))])
    run = traced(Agent(client, [add], max_iterations=1).run("Go"), tracer_provider=provider)
    with pytest.raises(MaxIterationsExceeded):
        await run

    spans = exporter.get_finished_spans()
    assert [s.status.status_code for s in spans] == [
        StatusCode.UNSET,
        StatusCode.UNSET,
        StatusCode.ERROR,
    ]
    assert spans[-1].attributes is not None
    assert spans[-1].attributes["error.type"] == "MaxIterationsExceeded"


async def test_an_abort_during_a_tool_call_ends_its_spans_as_aborted(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    started = asyncio.Event()

    @tool
    async def wait_forever(ctx: ToolContext[None]) -> str:
        """Wait."""
        started.set()
        await asyncio.Event().wait()
        return "never"

    client = ScriptedClient([LLMResponse(tool_calls=(ToolCall("c1", "wait_forever", {}),))])
    run = traced(Agent(client, [wait_forever]).run("Wait"), tracer_provider=provider)
    task = asyncio.ensure_future(run)
    await started.wait()
    run.abort("the user left")
    with pytest.raises(RunAborted):
        await task

    chat, tool_span, span = exporter.get_finished_spans()
    assert chat.status.status_code is StatusCode.UNSET
    assert tool_span.status.status_code is StatusCode.ERROR
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "the user left"
    assert span.attributes is not None
    assert span.attributes["error.type"] == "RunAborted"
    assert span.attributes["glassagent.run.stop_reason"] == "aborted"


async def test_an_abort_mid_answer_ends_the_open_model_call_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    client = ScriptedClient(["one two three four five six"], chunk_delay=0.05)
    run = traced(Agent(client).run("Count"), tracer_provider=provider)
    types = []
    async for event in run:
        types.append(event.type)
        if event.type == "text_chunk":
            run.abort()

    assert types[-1] == "aborted"
    chat, span = exporter.get_finished_spans()
    for aborted in (chat, span):
        assert aborted.status.status_code is StatusCode.ERROR
        assert aborted.attributes is not None
        assert aborted.attributes["error.type"] == "RunAborted"
    assert "gen_ai.response.finish_reasons" not in (chat.attributes or {})


async def test_leaving_the_loop_early_aborts_the_run_and_ends_its_spans(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    run = traced(Agent(tool_round(), [add]).run("17 + 25?"), tracer_provider=provider)
    stream = run.__aiter__()
    first = await stream.__anext__()
    assert first.type == "llm_request"
    await stream.aclose()  # what leaving an `async for` does, once the generator is dropped

    assert run.result is not None
    assert run.result.stop_reason == "aborted"
    span = the_run(exporter.get_finished_spans())
    assert span.status.description == "the consumer stopped iterating"
    assert all(s.end_time is not None for s in exporter.get_finished_spans())


async def test_leaving_its_context_aborts_the_run_and_ends_its_spans(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    async with traced(Agent(tool_round(), [add]).run("17 + 25?"), tracer_provider=provider) as run:
        async for event in run:
            if event.type == "function_call_start":
                break

    assert run.result is not None
    assert run.result.stop_reason == "aborted"
    spans = exporter.get_finished_spans()
    assert spans[-1].name == "invoke_agent"
    assert spans[-1].status.description == "the run's context was exited"


class RefusingHistory(History):
    """Refuses to append assistant messages."""

    def append(self, message: Message | HistoryMessage, parent: str | None = None) -> str:
        if message.role == "assistant":
            raise ValueError("no assistant messages here")
        return super().append(message, parent)


@pytest.mark.parametrize("streamed", [False, True], ids=["awaited", "streamed"])
async def test_a_refused_history_append_fails_the_run_span(
    provider: TracerProvider, exporter: InMemorySpanExporter, streamed: bool
) -> None:
    agent = Agent(ScriptedClient(["Hello."]))
    run = traced(
        agent.run("Hi", history=RefusingHistory(), append_to_history=True),
        tracer_provider=provider,
    )
    with pytest.raises(HistoryAppendError):
        await finish(run, streamed=streamed)

    span = the_run(exporter.get_finished_spans())
    assert span.attributes is not None
    assert span.attributes["error.type"] == "HistoryAppendError"
    assert span.attributes["glassagent.run.stop_reason"] == "end_turn"


def test_a_keyboard_interrupt_in_a_tool_reaches_the_consumer_not_the_loop(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    @tool
    def interrupt() -> str:
        """Press Ctrl-C."""
        raise KeyboardInterrupt

    async def main() -> list[str]:
        client = ScriptedClient([LLMResponse(tool_calls=(ToolCall("c1", "interrupt", {}),))])
        seen: list[str] = []
        with pytest.raises(KeyboardInterrupt):  # noqa: PT012
            async for event in traced(
                Agent(client, [interrupt]).run("Go"), tracer_provider=provider
            ):
                seen.append(event.type)
        return seen

    try:
        seen = asyncio.run(main())
    except KeyboardInterrupt:
        pytest.fail("the KeyboardInterrupt escaped the event loop")
    assert seen[-1] == "aborted"
    span = the_run(exporter.get_finished_spans())
    assert span.attributes is not None
    assert span.attributes["error.type"] == "RunAborted"


async def test_a_budget_stop_is_not_an_error(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    agent = Agent(tool_round(), [add], budget=Budget(max_model_calls=1))
    result = await traced(agent.run("17 + 25?"), tracer_provider=provider)

    assert result.stop_reason == "budget"
    span = the_run(exporter.get_finished_spans())
    assert span.status.status_code is StatusCode.UNSET
    assert span.attributes is not None
    assert span.attributes["glassagent.run.stop_reason"] == "budget"
    assert span.attributes["glassagent.budget.limit"] == "max_model_calls"


class RetryingClient(ScriptedClient):
    """Reports one retry before each answer, as the built-in clients do."""

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        system: str | None = None,
        *,
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[StreamPart]:
        yield RetryNotice(
            attempt=1, delay=0.0, error="busy", error_type="RateLimitError", status=429
        )
        async for part in super().stream(messages, tools, system, settings=settings):
            yield part


async def test_retries_are_events_of_the_model_call_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    await traced(Agent(RetryingClient(["Hi"])).run("Hello"), tracer_provider=provider)

    chat = by_name(exporter.get_finished_spans())["chat scripted"][0]
    (retry,) = chat.events
    assert retry.name == "glassagent.llm_retry"
    assert dict(retry.attributes or {}) == {
        "glassagent.retry.attempt": 1,
        "glassagent.retry.delay": 0.0,
        "error.type": "RateLimitError",
        "http.response.status_code": 429,
    }
    assert chat.status.status_code is StatusCode.UNSET


@pytest.mark.parametrize("capture_content", [False, True])
async def test_tool_progress_is_an_event_of_the_tool_span(
    provider: TracerProvider, exporter: InMemorySpanExporter, capture_content: bool
) -> None:
    @tool
    async def work(ctx: ToolContext[None]) -> str:
        """Work in steps."""
        await ctx.progress(f"halfway through {SECRET}")
        return "done"

    client = ScriptedClient([LLMResponse(tool_calls=(ToolCall("c1", "work", {}),)), "Done."])
    run = traced(
        Agent(client, [work]).run("Work"),
        tracer_provider=provider,
        capture_content=capture_content,
    )
    await run

    (span,) = by_name(exporter.get_finished_spans())["execute_tool work"]
    (progress,) = span.events
    assert progress.name == "glassagent.tool_progress"
    expected = {"glassagent.tool.progress": f"halfway through {SECRET}"} if capture_content else {}
    assert dict(progress.attributes or {}) == expected


async def test_context_tools_are_tool_spans_too(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    @context_tool(relevance=90)
    def notes(query: str, ctx: TurnInfo) -> str:
        """The user's notes."""
        return "Likes tea."

    @context_tool(relevance=10)
    def weather(query: str, ctx: TurnInfo) -> str:
        """Never relevant."""
        return "Rain."

    agent = Agent(ScriptedClient(["Tea it is."]), context_tools=[notes, weather])
    await traced(agent.run("What do I like?"), tracer_provider=provider, capture_content=True)

    spans = exporter.get_finished_spans()
    assert [s.name for s in spans] == ["execute_tool notes", "chat scripted", "invoke_agent"]
    notes_span = spans[0]
    assert notes_span.parent is not None
    assert notes_span.parent.span_id == spans[-1].context.span_id
    assert notes_span.attributes is not None
    assert notes_span.attributes["glassagent.tool.context"] is True
    assert notes_span.attributes["glassagent.tool.context_score"] == 90
    assert notes_span.attributes["gen_ai.tool.call.result"] == "Likes tea."
