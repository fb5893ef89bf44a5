"""The JSON forms a durable run keeps (no DBOS here): what goes in comes back equal."""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal

import pytest
from pydantic import BaseModel

from glassagent import Agent, LLMResponse, ToolCall, Usage, tool
from glassagent._durable import codec
from glassagent.errors import (
    GlassAgentError,
    MaxIterationsExceeded,
    OutputValidationError,
    ProviderError,
    RunError,
    ToolCallFormatError,
)
from glassagent.llm import Attachment, WireRecord
from glassagent.testing import ScriptedClient


def through_json(data: object) -> object:
    return json.loads(json.dumps(data))  # what the database gives back


def test_an_answer_comes_back_equal_without_its_raw_bodies() -> None:
    response = LLMResponse(
        "hi",
        tool_calls=[ToolCall("c1", "f", {"x": [1, 2]}, provider_metadata={"sig": "abc"})],
        thinking="hmm",
        usage=Usage(10, 5, 2, 1, 0),
        model="m",
        provider_metadata={"signature": "xyz"},
        raw_request={"Authorization": "Bearer sk-SECRET"},
        raw_response=[{"secret": "sk-SECRET"}],
        raw_stop_reason="tool_calls",
        wire=WireRecord({"model": "m"}, [{"a": 1}], streamed=True),
    )
    data = codec.response_dict(response)
    assert "sk-SECRET" not in json.dumps(data)
    back = codec.response_from(through_json(data))
    assert back == response
    assert back.wire == response.wire
    assert back.raw_request is None
    assert back.raw_response is None


def test_errors_come_back_as_their_class_with_their_attributes() -> None:
    cases: list[GlassAgentError] = [
        ProviderError("boom", status=503, body="busy", provider="openai"),
        ToolCallFormatError("not a call", provider="ollama"),
        MaxIterationsExceeded("too many", max_iterations=3),
        OutputValidationError("bad", text="{}", errors=("a: missing", "b: wrong")),
    ]
    for error in cases:
        back = codec.error_from(through_json(codec.error_dict(error)))
        assert type(back) is type(error)
        assert str(back) == str(error)
        assert vars(back) == vars(error)


def test_an_error_class_of_a_plugin_comes_back_as_its_nearest_glassagent_class() -> None:
    class AcmeOverloaded(ProviderError):
        pass

    back = codec.error_from(through_json(codec.error_dict(AcmeOverloaded("x", provider="acme"))))
    assert type(back) is ProviderError
    assert back.provider == "acme"  # type: ignore[attr-defined]
    unknown = codec.error_from({"types": ["Nope"], "args": ["y"], "state": {"message": "y"}})
    assert type(unknown) is RunError


class Invoice(BaseModel):
    total: Decimal
    lines: list[str]


@dataclass
class Point:
    x: int
    y: int


@pytest.mark.parametrize(
    ("output_type", "answer"),
    [
        (None, "plain text"),
        (Invoice, '{"total": "12.50", "lines": ["a", "b"]}'),
        (Point, '{"x": 1, "y": 2}'),
        (list[int], '{"result": [1, 2, 3]}'),
    ],
)
async def test_a_run_result_comes_back_equal(output_type: object, answer: str) -> None:
    @tool
    def look(ctx_free: str) -> str:
        return ctx_free

    script = [LLMResponse(tool_calls=[ToolCall("c1", "look", {"ctx_free": "seen"})]), answer]
    attachment = Attachment(data=b"\x89PNG\x00", mime_type="image/png", name="a.png")
    agent: Agent = Agent(ScriptedClient(script), [look], output_type=output_type)  # type: ignore[arg-type]
    result = await agent.run("look", attachments=[attachment])
    back = codec.result_from(through_json(codec.result_dict(result, agent._output)), agent._output)
    assert back == result  # every field: messages (the attachment's bytes), events, usage...
    assert back.output == result.output
    assert type(back.output) is type(result.output)
    assert back.new_messages == result.new_messages
