"""glassagent.otel: message content only when asked, after the redact hook."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from glassagent import Agent, LLMResponse, ToolCall
from glassagent.events import Redactor
from glassagent.otel import TracedRun, traced
from glassagent.testing import ScriptedClient
from tests.support.otel import SECRET, add, attributes_of, boom, by_name


def secret_run(provider: TracerProvider, **options: Any) -> TracedRun:
    client = ScriptedClient(
        [
            LLMResponse(
                tool_calls=(ToolCall("c1", "boom", {"text": SECRET}),),
                thinking=f"I should not say {SECRET}.",
            ),
            LLMResponse(tool_calls=(ToolCall("c2", "add", {"a": 1, "b": 2}),)),
            f"Never tell anyone {SECRET}.",
        ]
    )
    agent = Agent(client, [add, boom], system=f"The code is {SECRET}.")
    return traced(agent.run(f"What is {SECRET}?"), tracer_provider=provider, **options)


async def test_no_content_is_exported_by_default(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    await secret_run(provider)

    spans = exporter.get_finished_spans()
    assert len(spans) == 6
    assert SECRET not in attributes_of(spans)
    content_keys = {
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.system_instructions",
        "gen_ai.tool.definitions",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
    }
    assert not content_keys & {key for s in spans for key in (s.attributes or {})}


async def test_content_is_exported_in_the_conventions_shapes_when_asked(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    await secret_run(provider, capture_content=True)

    spans = by_name(exporter.get_finished_spans())
    first, _, third = spans["chat scripted"]
    assert first.attributes is not None
    assert third.attributes is not None
    assert json.loads(str(first.attributes["gen_ai.input.messages"])) == [
        {"role": "user", "parts": [{"type": "text", "content": f"What is {SECRET}?"}]}
    ]
    assert json.loads(str(first.attributes["gen_ai.system_instructions"])) == [
        {"type": "text", "content": f"The code is {SECRET}."}
    ]
    definitions = json.loads(str(first.attributes["gen_ai.tool.definitions"]))
    assert [(d["type"], d["name"]) for d in definitions] == [
        ("function", "add"),
        ("function", "boom"),
    ]
    assert definitions[0]["parameters"]["required"] == ["a", "b"]
    assert json.loads(str(first.attributes["gen_ai.output.messages"])) == [
        {
            "role": "assistant",
            "parts": [
                {"type": "reasoning", "content": f"I should not say {SECRET}."},
                {"type": "tool_call", "id": "c1", "name": "boom", "arguments": {"text": SECRET}},
            ],
        }
    ]
    history = json.loads(str(third.attributes["gen_ai.input.messages"]))
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "assistant", "tool"]
    assert history[2]["parts"] == [
        {
            "type": "tool_call_response",
            "id": "c1",
            "response": f"Error: tool 'boom' raised ValueError: cannot handle {SECRET}",
        }
    ]
    assert json.loads(str(third.attributes["gen_ai.output.messages"])) == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": f"Never tell anyone {SECRET}."}],
        }
    ]
    (failed,) = spans["execute_tool boom"]
    assert failed.attributes is not None
    assert json.loads(str(failed.attributes["gen_ai.tool.call.arguments"])) == {"text": SECRET}
    assert "gen_ai.tool.call.result" not in failed.attributes  # only for a successful call
    assert failed.status.description == history[2]["parts"][0]["response"]
    (fine,) = spans["execute_tool add"]
    assert fine.attributes is not None
    assert fine.attributes["gen_ai.tool.call.result"] == "3"


async def test_redact_applies_to_everything_exported(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    seen: list[str] = []

    def redact(event: dict[str, Any]) -> dict[str, Any]:
        seen.append(event["type"])
        return json.loads(json.dumps(event).replace(SECRET, "[redacted]"))

    await secret_run(provider, capture_content=True, redact=redact)

    text = attributes_of(exporter.get_finished_spans())
    assert SECRET not in text
    assert "What is [redacted]?" in text
    assert {"llm_request", "llm_response", "function_call_start"} <= set(seen)
    assert "function_execution_complete" in seen


async def test_a_failing_redact_hook_leaves_the_content_out_and_the_run_goes_on(
    provider: TracerProvider, exporter: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    def redact(event: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("broken hook")

    with caplog.at_level(logging.WARNING, logger="glassagent.otel"):
        result = await secret_run(provider, capture_content=True, redact=redact)

    assert result.text == f"Never tell anyone {SECRET}."
    spans = exporter.get_finished_spans()
    assert len(spans) == 6
    assert SECRET not in attributes_of(spans)
    assert [r.getMessage() for r in caplog.records] == [
        "glassagent.otel: the redact hook failed on a llm_request event; the run goes on"
    ]


async def test_content_of_attachments_leaves_the_bytes_out(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    from glassagent.llm import Attachment

    attachments = [
        Attachment(data=b"\x89PNG-secret-bytes", mime_type="image/png", name="chart.png"),
        Attachment(url="https://example.com/report.pdf", mime_type="application/pdf"),
    ]
    agent = Agent(ScriptedClient(["A chart."]))
    run = agent.run("Describe.", attachments=attachments)
    await traced(run, tracer_provider=provider, capture_content=True)

    chat = by_name(exporter.get_finished_spans())["chat scripted"][0]
    assert chat.attributes is not None
    (message,) = json.loads(str(chat.attributes["gen_ai.input.messages"]))
    assert message["parts"] == [
        {"type": "text", "content": "Describe."},
        {"type": "attachment", "modality": "image", "mime_type": "image/png", "name": "chart.png"},
        {
            "type": "uri",
            "modality": "document",
            "mime_type": "application/pdf",
            "uri": "https://example.com/report.pdf",
        },
    ]


async def test_redact_defaults_to_the_agents_own_hook(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    client = ScriptedClient([f"Never tell anyone {SECRET}."])
    agent = Agent(client, system=f"The code is {SECRET}.", redact=Redactor([SECRET]))
    await traced(agent.run(f"What is {SECRET}?"), tracer_provider=provider, capture_content=True)

    text = attributes_of(exporter.get_finished_spans())
    assert SECRET not in text
    assert "What is [redacted]?" in text
    assert "Never tell anyone [redacted]." in text


async def test_an_explicit_redact_replaces_the_agents_hook(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    agent = Agent(ScriptedClient(["fine"]), redact=Redactor(["What"]))
    run = agent.run(f"What is {SECRET}?")
    await traced(run, tracer_provider=provider, capture_content=True, redact=Redactor([SECRET]))

    text = attributes_of(exporter.get_finished_spans())
    assert SECRET not in text
    assert "What is [redacted]?" in text  # only the hook passed to traced() applied
