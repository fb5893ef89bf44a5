"""Helpers shared by the glassagent.otel tests: a tracer provider that keeps spans in memory."""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from glassagent import LLMResponse, ToolCall, Usage
from glassagent.otel import TracedRun
from glassagent.testing import ScriptedClient

SECRET = "the-launch-code-is-0000"


def memory_provider(exporter: InMemorySpanExporter) -> TracerProvider:
    """A tracer provider that hands each ended span to `exporter` at once."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def boom(text: str) -> str:
    """Always fails."""
    raise ValueError(f"cannot handle {text}")


def tool_round(*, usage: Usage | None = None) -> ScriptedClient:
    """A model that calls `add` once, then answers."""
    return ScriptedClient(
        [
            LLMResponse(
                tool_calls=(ToolCall("c1", "add", {"a": 17, "b": 25}),),
                stop_reason="tool_use",
                usage=usage or Usage(),
            ),
            LLMResponse(
                "17 + 25 = 42", thinking="Easy.", usage=usage or Usage(), stop_reason="end_turn"
            ),
        ],
        model="test-model",
    )


async def finish(run: TracedRun, *, streamed: bool) -> None:
    """Iterate the events of `run` to its end when `streamed`, else await it."""
    if streamed:
        async for _ in run:
            pass
    else:
        await run


def by_name(spans: Sequence[ReadableSpan]) -> dict[str, list[ReadableSpan]]:
    found: dict[str, list[ReadableSpan]] = {}
    for span in spans:
        found.setdefault(span.name, []).append(span)
    return found


def the_run(spans: Sequence[ReadableSpan]) -> ReadableSpan:
    (run,) = [s for s in spans if s.name.startswith("invoke_agent")]
    return run


def attributes_of(spans: Sequence[ReadableSpan]) -> str:
    """Every attribute and event of every span, as one string to search."""
    parts = [repr(dict(s.attributes or {})) for s in spans]
    parts += [repr(dict(e.attributes or {})) for s in spans for e in s.events]
    parts += [repr(s.status.description) for s in spans]
    return "\n".join(parts)
