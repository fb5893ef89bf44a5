"""The JSON tool protocol's reply schema, and the clients that send it as a grammar."""

import json
from typing import Any

import httpx
import jsonschema
import pytest
import respx

from glassagent import ModelSettings, Tool
from glassagent._core.json_protocol import reply_schema
from glassagent.errors import ConfigurationError
from glassagent.llm import (
    LlamaClient,
    Message,
    OllamaClient,
    OpenAICompatibleClient,
    ToolDefinition,
)

BASE = "http://127.0.0.1:8080/v1"
OLLAMA = "http://127.0.0.1:11434"
ADD = ToolDefinition(
    "add",
    "Add two integers.",
    {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
)
WEATHER = ToolDefinition(
    "get_weather",
    "The weather in a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
TOOLS = [ADD, WEATHER]
HI = [Message(role="user", content="Hi")]


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"thought": "t", "tool_call": {"name": name, "input": arguments}}


ANSWER = {"thought": "t", "response": "Hello."}


def valid(schema: dict[str, Any], reply: dict[str, Any]) -> bool:
    return jsonschema.Draft202012Validator(schema).is_valid(reply)


def tool_names(schema: dict[str, Any]) -> list[str]:
    branches = schema.get("anyOf", [schema])
    return [
        b["properties"]["tool_call"]["properties"]["name"]["enum"][0]
        for b in branches
        if "tool_call" in b["properties"]
    ]


@pytest.mark.parametrize("choice", [None, "auto"])
def test_by_default_each_tool_and_the_response_have_a_branch(choice: str | None) -> None:
    schema = reply_schema(TOOLS, choice)
    assert tool_names(schema) == ["add", "get_weather"]
    response = schema["anyOf"][-1]
    thought = {"type": "string", "maxLength": 200}
    assert response["properties"] == {"thought": thought, "response": {"type": "string"}}
    assert response["required"] == ["thought", "response"]
    for tool, branch in zip(TOOLS, schema["anyOf"], strict=False):
        tool_call = branch["properties"]["tool_call"]
        assert tool_call["properties"]["input"] == tool.parameters
        assert tool_call["required"] == ["name", "input"]
    assert valid(schema, call("add", a=1, b=2))
    assert valid(schema, call("get_weather", city="Oslo"))
    assert valid(schema, ANSWER)


def test_the_input_must_fit_the_named_tool() -> None:
    schema = reply_schema(TOOLS)
    assert not valid(schema, call("add", city="Oslo"))  # another tool's arguments
    assert not valid(schema, call("get_weather", a=1, b=2))
    assert not valid(schema, call("add", a="one", b=2))
    assert not valid(schema, call("subtract", a=1, b=2))  # no such tool
    assert not valid(schema, {"thought": "t"})  # neither a call nor a response
    assert not valid(schema, {"response": "no thought"})
    assert not valid(schema, {**ANSWER, "thought": "x" * 201})  # the thought is capped
    assert not valid(schema, {**ANSWER, "tool_call": call("add", a=1, b=2)["tool_call"]})


def test_required_leaves_out_the_response() -> None:
    schema = reply_schema(TOOLS, "required")
    assert tool_names(schema) == ["add", "get_weather"]
    assert len(schema["anyOf"]) == 2
    assert valid(schema, call("add", a=1, b=2))
    assert not valid(schema, ANSWER)


def test_none_leaves_the_response_only() -> None:
    schema = reply_schema(TOOLS, "none")
    assert "anyOf" not in schema  # a single branch stands alone
    assert tool_names(schema) == []
    assert valid(schema, ANSWER)
    assert not valid(schema, call("add", a=1, b=2))


def test_a_tool_name_allows_a_call_of_that_tool_only() -> None:
    schema = reply_schema(TOOLS, "get_weather")
    assert tool_names(schema) == ["get_weather"]
    assert valid(schema, call("get_weather", city="Oslo"))
    assert not valid(schema, call("add", a=1, b=2))
    assert not valid(schema, ANSWER)


def test_without_tools_only_the_response_is_left() -> None:
    assert reply_schema([]) == reply_schema(TOOLS, "none")


@pytest.mark.parametrize(
    ("tools", "choice", "message"),
    [
        (TOOLS, "subtract", "names no tool"),
        ([], "add", "names no tool"),
        ([], "required", "at least one tool"),
    ],
)
def test_a_choice_that_cannot_be_met_is_refused(
    tools: list[ToolDefinition], choice: str, message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        reply_schema(tools, choice)


def test_definitions_move_to_the_top_with_their_references() -> None:
    parameters = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {
            "point": {"$ref": "#/$defs/Point"},
            "labels": {"type": "array", "items": {"$ref": "#/definitions/Label"}},
        },
        "required": ["point"],
        "$defs": {"Point": {"type": "object", "properties": {"x": {"$ref": "#/$defs/Num"}}}},
        "definitions": {"Label": {"type": "string"}},
    }
    parameters["$defs"]["Num"] = {"type": "number"}
    before = json.dumps(parameters, sort_keys=True)
    plot = ToolDefinition("plot", "Plot points.", parameters)
    schema = reply_schema([plot, ADD])
    assert json.dumps(parameters, sort_keys=True) == before  # the tool's schema is untouched
    assert set(schema["$defs"]) == {"plot.Point", "plot.Num", "plot.Label"}
    assert schema["$defs"]["plot.Point"]["properties"]["x"] == {"$ref": "#/$defs/plot.Num"}
    sent = schema["anyOf"][0]["properties"]["tool_call"]["properties"]["input"]
    assert sent["properties"]["point"] == {"$ref": "#/$defs/plot.Point"}
    assert sent["properties"]["labels"]["items"] == {"$ref": "#/$defs/plot.Label"}
    assert "$defs" not in sent
    assert "$schema" not in sent
    assert valid(schema, call("plot", point={"x": 1.5}))
    assert valid(schema, call("plot", point={}, labels=["a"]))
    assert not valid(schema, call("plot", point={"x": "far"}))
    assert not valid(schema, call("plot", point={}, labels=[1]))


def test_parameters_that_refer_into_themselves_are_kept_whole_and_referred_to() -> None:
    # as zod-to-json-schema (MCP servers in TypeScript) writes a reused part, and a tree
    move = ToolDefinition(
        "move",
        "Move.",
        {
            "type": "object",
            "properties": {
                "src": {"type": "object", "properties": {"x": {"type": "number"}}},
                "dst": {"$ref": "#/properties/src"},
                "then": {"type": "array", "items": {"$ref": "#"}},
                "unit": {"$ref": "#/$defs/Unit"},
            },
            "required": ["src", "dst"],
            "$defs": {"Unit": {"enum": ["m", "km"]}},
        },
    )
    schema = reply_schema([move, ADD])
    assert schema["anyOf"][0]["properties"]["tool_call"]["properties"]["input"] == {
        "$ref": "#/$defs/move"
    }
    kept = schema["$defs"]["move"]
    assert kept["properties"]["dst"] == {"$ref": "#/$defs/move/properties/src"}
    assert kept["properties"]["then"]["items"] == {"$ref": "#/$defs/move"}
    assert kept["properties"]["unit"] == {"$ref": "#/$defs/move.Unit"}
    assert valid(schema, call("move", src={"x": 1}, dst={"x": 2}, then=[{"src": {}, "dst": {}}]))
    assert valid(schema, call("add", a=1, b=2))
    assert not valid(schema, call("move", src={"x": 1}, dst={"x": "far"}))
    assert not valid(schema, call("move", src={}, dst={}, then=[{"src": {}}]))
    assert not valid(schema, call("move", src={}, dst={}, unit="mile"))


def test_a_tool_made_from_a_schema_has_its_parameters_in_its_branch() -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string", "enum": ["a", "b"]}}}
    search = Tool.from_schema("search", "Search.", schema, lambda q: q)
    branch = reply_schema([search.definition], "search")
    assert branch["properties"]["tool_call"]["properties"]["input"]["properties"] == {
        "q": {"type": "string", "enum": ["a", "b"]}
    }


# ---- what the clients send -----------------------------------------------------------------

COMPLETION = {
    "choices": [
        {
            "message": {"role": "assistant", "content": json.dumps(call("add", a=1, b=2))},
            "finish_reason": "stop",
        }
    ]
}


def sent(route: respx.Route, n: int = 0) -> dict[str, Any]:
    return json.loads(route.calls[n].request.content)


@respx.mock
async def test_openai_compatible_client_sends_the_schema_when_asked() -> None:
    route = respx.post(f"{BASE}/chat/completions").mock(
        return_value=httpx.Response(200, json=COMPLETION)
    )
    async with OpenAICompatibleClient(
        "m", base_url=BASE, tool_protocol="json", json_grammar=True
    ) as client:
        response = await client.chat(HI, TOOLS)
        await client.chat(HI)  # no tools: no constraint
    assert [(c.name, c.input) for c in response.tool_calls] == [("add", {"a": 1, "b": 2})]
    assert sent(route)["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "tool_protocol_reply", "schema": reply_schema(TOOLS)},
    }
    assert "response_format" not in sent(route, 1)


@respx.mock
async def test_openai_compatible_client_asks_for_any_json_object_by_default() -> None:
    route = respx.post(f"{BASE}/chat/completions").mock(
        return_value=httpx.Response(200, json=COMPLETION)
    )
    async with OpenAICompatibleClient("m", base_url=BASE, tool_protocol="json") as client:
        assert client.json_grammar is False
        await client.chat(HI, TOOLS)
    assert sent(route)["response_format"] == {"type": "json_object"}


@respx.mock
async def test_the_streamed_request_carries_the_schema_too() -> None:
    chunk = {"choices": [{"delta": {"content": json.dumps(ANSWER)}, "finish_reason": "stop"}]}
    stream = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n"
    route = respx.post(f"{BASE}/chat/completions").mock(
        return_value=httpx.Response(200, text=stream, headers={"content-type": "text/event-stream"})
    )
    async with OpenAICompatibleClient(
        "m", base_url=BASE, tool_protocol="json", json_grammar=True
    ) as client:
        parts = [part async for part in client.stream(HI, [ADD])]
    assert parts[-1].text == "Hello."
    assert sent(route)["response_format"]["json_schema"]["schema"] == reply_schema([ADD])


def ollama_reply(content: str) -> httpx.Response:
    body = {"message": {"role": "assistant", "content": content}, "done": True}
    return httpx.Response(200, json={**body, "done_reason": "stop"})


@respx.mock
async def test_ollama_sends_the_schema_as_its_format() -> None:
    route = respx.post(f"{OLLAMA}/api/chat").mock(
        return_value=ollama_reply(json.dumps(call("get_weather", city="Oslo")))
    )
    async with OllamaClient("m", base_url=OLLAMA, tool_protocol="json") as client:
        response = await client.chat(HI, TOOLS)
    assert [(c.name, c.input) for c in response.tool_calls] == [("get_weather", {"city": "Oslo"})]
    assert sent(route)["format"] == reply_schema(TOOLS)


@respx.mock
async def test_ollama_without_the_grammar_asks_for_any_json() -> None:
    route = respx.post(f"{OLLAMA}/api/chat").mock(return_value=ollama_reply(json.dumps(ANSWER)))
    async with OllamaClient("m", base_url=OLLAMA, tool_protocol="json", json_grammar=False) as a:
        await a.chat(HI, TOOLS)
    async with LlamaClient("m", base_url=OLLAMA, json_grammar=False) as b:
        await b.chat(HI, TOOLS)
    async with LlamaClient("m", base_url=OLLAMA) as c:
        await c.chat(HI, [ADD])
    assert sent(route, 0)["format"] == sent(route, 1)["format"] == "json"
    assert sent(route, 2)["format"] == reply_schema([ADD])


@respx.mock
async def test_the_grammar_follows_the_tool_choice() -> None:
    openai = respx.post(f"{BASE}/chat/completions").mock(
        return_value=httpx.Response(200, json=COMPLETION)
    )
    ollama = respx.post(f"{OLLAMA}/api/chat").mock(
        return_value=ollama_reply(json.dumps(call("get_weather", city="Oslo")))
    )
    choices = ["required", "get_weather", "none"]
    async with OpenAICompatibleClient(
        "m", base_url=BASE, tool_protocol="json", json_grammar=True
    ) as client:
        for choice in choices:
            await client.chat(HI, TOOLS, settings=ModelSettings(tool_choice=choice))
    async with OllamaClient("m", base_url=OLLAMA, tool_protocol="json") as local:
        for choice in choices[:2]:
            await local.chat(HI, TOOLS, settings=ModelSettings(tool_choice=choice))
    required, named, none = (sent(openai, n) for n in range(3))
    schema = required["response_format"]["json_schema"]["schema"]
    assert schema == reply_schema(TOOLS, "required")
    assert tool_names(schema) == ["add", "get_weather"]
    assert not valid(schema, ANSWER)
    schema = named["response_format"]["json_schema"]["schema"]
    assert tool_names(schema) == ["get_weather"]
    assert not valid(schema, call("add", a=1, b=2))
    # "none": no tool offered, the reply can only be an answer
    assert none["response_format"]["json_schema"]["schema"] == reply_schema(TOOLS, "none")
    assert valid(reply_schema(TOOLS, "none"), ANSWER)
    assert sent(ollama, 0)["format"] == reply_schema(TOOLS, "required")
    assert tool_names(sent(ollama, 1)["format"]) == ["get_weather"]
