"""`OllamaClient` and `LlamaClient`, made from `OllamaWire` by the toolkit's `WireClient`."""

from __future__ import annotations

import gc
import json
import weakref
from typing import Any

import pytest

from glassagent._core import tool_choice
from glassagent._providers import ollama_wire
from glassagent.errors import ConfigurationError, ProviderError
from glassagent.llm import (
    LlamaClient,
    Message,
    ModelRequest,
    ModelSettings,
    OllamaClient,
    RetryPolicy,
    ToolDefinition,
)
from glassagent.providers import WireClient
from tests.support.loopback_server import LoopbackServer, Reply, Request

HI = (Message(role="user", content="Hi"),)
NO_RETRY = RetryPolicy(max_retries=0)
ADD = ToolDefinition("add", "Add.", {"type": "object", "properties": {}})
SUB = ToolDefinition("sub", "Subtract.", {"type": "object", "properties": {}})
DONE = {"model": "m", "message": {"role": "assistant", "content": "hi"}, "done": True}


def answer(request: Request) -> Reply:
    return Reply.body(json.dumps(DONE).encode(), Content_Type="application/json")


@pytest.mark.parametrize("make", [OllamaClient, LlamaClient])
async def test_a_dropped_client_is_freed_without_the_cycle_collector(make: Any) -> None:
    with LoopbackServer(answer) as server:
        client = make("m", base_url=server.url)
        assert isinstance(client, WireClient)
        assert (await client.chat(HI)).text == "hi"
        gc.collect()
        gc.disable()
        try:
            alive = weakref.ref(client)
            del client
            assert alive() is None  # no cycle (client -> transport -> hook -> client)
        finally:
            gc.enable()


async def test_the_missing_model_error_names_the_model_the_client_has_now() -> None:
    def missing(request: Request) -> Reply:
        error = {"error": 'model "other:1b" not found, try pulling it first'}
        return Reply.body(json.dumps(error).encode(), 404, Content_Type="application/json")

    with LoopbackServer(missing) as server:
        for protocol in ("native", "auto"):  # auto: the 404 answers its /api/show question
            client = OllamaClient(
                "first", base_url=server.url + "/", tool_protocol=protocol, retry=NO_RETRY
            )
            client.model = "other:1b"
            async with client:
                with pytest.raises(ProviderError) as info:
                    await client.chat(HI, [ADD])
            assert info.value.status == 404
            assert str(info.value).startswith(f"Ollama at {server.url} has no model 'other:1b'")
            assert "`ollama pull other:1b`" in str(info.value)
        assert [r.path for r in server.requests] == ["/api/chat", "/api/show"]


def test_the_body_reads_the_choice_the_request_resolved_not_the_settings(monkeypatch) -> None:
    request = ModelRequest(HI, (ADD, SUB), None, ModelSettings(tool_choice="sub"))
    native = ModelRequest(HI, (ADD, SUB), None, ModelSettings(tool_choice="none"))

    def again(*args: object) -> None:
        raise AssertionError("the wire resolved the tool choice again")

    monkeypatch.setattr(tool_choice, "resolve", again)
    wire = ollama_wire.OllamaWire(json_grammar=True)
    body = wire.request_body("m", request, stream=False, json_mode=True)
    call = body["format"]["properties"]["tool_call"]  # a call of "sub" is a must
    assert call["properties"]["name"]["enum"] == ["sub"]
    assert "- sub:" in body["messages"][0]["content"]
    assert "- add:" not in body["messages"][0]["content"]
    with pytest.raises(ConfigurationError, match="Ollama's chat API has no tool choice"):
        wire.request_body("m", request, stream=False)
    assert "tools" not in wire.request_body("m", native, stream=True)


def test_a_plain_answer_stays_plain_text_when_no_tools_are_offered() -> None:
    from glassagent._providers import openai_wire
    from glassagent.llm import ToolCall

    earlier = (
        Message(role="user", content="1 + 2?"),
        Message(role="assistant", tool_calls=(ToolCall("c1", "add", {"a": 1, "b": 2}),)),
        Message(role="tool", content="3", tool_call_id="c1", name="add"),
        Message(role="assistant", content="It is 3."),
        Message(role="user", content="Thanks"),
    )
    plain = ModelRequest(earlier, (), None, ModelSettings())
    offered = ModelRequest(earlier, (ADD,), None, ModelSettings())
    wire = ollama_wire.OllamaWire(encode_history=True)  # the JSON tool protocol's client
    bodies = {
        "ollama": wire.request_body("m", plain, stream=False),
        "ollama, tools": wire.request_body("m", offered, stream=False, json_mode=True),
        "openai": openai_wire.request_body("m", "llama", plain, json_tools=True, stream=False),
        "openai, tools": openai_wire.request_body(
            "m", "llama", offered, json_tools=True, stream=False
        ),
    }
    for name, body in bodies.items():
        answers = [m["content"] for m in body["messages"] if m["role"] == "assistant"]
        # the tool call always goes as protocol JSON: no native tools carry it
        assert json.loads(answers[0]) == {"tool_call": {"name": "add", "input": {"a": 1, "b": 2}}}
        if name.endswith("tools"):  # the reply must be protocol JSON: so are the answers
            assert json.loads(answers[1]) == {"response": "It is 3."}, name
        else:  # shown as {"response": ...}, a small model copies the form into its answer
            assert answers[1] == "It is 3.", name
