"""`Tool.from_schema`: a tool from a JSON Schema given as is, its arguments validated."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest

from glassagent import Agent, LLMResponse, Tool, ToolCall, ToolContext
from glassagent.errors import UserError
from glassagent.testing import ScriptedClient
from glassagent.tools import to_openai_tools

WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "minLength": 1, "title": "City"},
        "unit": {"enum": ["celsius", "fahrenheit"], "default": "celsius"},
        "days": {"type": "integer", "minimum": 1, "maximum": 7},
    },
    "required": ["city"],
    "additionalProperties": False,
}


def weather(**arguments: Any) -> dict[str, Any]:
    return arguments


def tool_messages(result: Any) -> dict[str, Any]:
    return {m.tool_call_id: m for m in result.new_messages if m.role == "tool"}


def test_the_model_sees_the_schema_as_it_is() -> None:
    made = Tool.from_schema("weather", "Forecast the weather.", WEATHER, weather)
    assert (made.name, made.description) == ("weather", "Forecast the weather.")
    assert made.parameters == WEATHER
    assert made.parameters is not WEATHER  # a copy: later changes to ours do not leak in
    assert to_openai_tools([made])[0]["function"]["parameters"] == WEATHER
    assert made(city="Oslo") == {"city": "Oslo"}  # still callable like the function


async def test_arguments_are_validated_against_the_schema_in_a_run() -> None:
    seen: list[dict[str, Any]] = []

    async def forecast(**arguments: Any) -> str:
        seen.append(arguments)
        return f"sunny in {arguments['city']}"

    client = ScriptedClient(
        [
            LLMResponse(
                "",
                [
                    ToolCall("c1", "weather", {"city": "Oslo", "days": 3}),
                    ToolCall("c2", "weather", {"city": "", "days": 9}),
                    ToolCall("c3", "weather", {"town": "Oslo"}),
                    ToolCall("c4", "weather", {"city": "Oslo", "unit": "kelvin"}),
                ],
            ),
            "done",
        ]
    )
    made = Tool.from_schema("weather", "Forecast.", WEATHER, forecast)
    result = await Agent(client, [made]).run("weather?")
    tools = tool_messages(result)
    assert (tools["c1"].content, tools["c1"].is_error) == ("sunny in Oslo", False)
    assert seen == [{"city": "Oslo", "days": 3}]  # only the valid call ran
    assert tools["c2"].content == (
        "Error: invalid arguments for tool 'weather': city: '' should be non-empty; "
        "days: 9 is greater than the maximum of 7"
    )
    assert tools["c3"].is_error
    assert "'city' is a required property" in tools["c3"].content
    assert "Additional properties are not allowed ('town' was unexpected)" in tools["c3"].content
    assert tools["c4"].content == (
        "Error: invalid arguments for tool 'weather': "
        "unit: 'kelvin' is not one of ['celsius', 'fahrenheit']"
    )


async def test_the_context_is_given_by_keyword_or_positionally() -> None:
    def by_keyword(city: str, ctx: ToolContext) -> str:
        ctx.progress_nowait(f"looking up {city}")
        return f"{ctx.tool_name}: {city}"

    async def positional(ctx: ToolContext, /, **arguments: Any) -> str:
        await ctx.progress("ctx is a property here too")
        return f"{sorted(arguments.items())}"

    with_ctx_property = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "ctx": {"type": "integer"}},
    }
    client = ScriptedClient(
        [
            LLMResponse(
                "",
                [
                    ToolCall("c1", "kw", {"city": "Oslo"}),
                    ToolCall("c2", "pos", {"city": "Rome", "ctx": 2}),
                ],
            ),
            "done",
        ]
    )
    tools = [
        Tool.from_schema("kw", "", WEATHER, by_keyword),
        Tool.from_schema("pos", "", with_ctx_property, positional),
    ]
    result = await Agent(client, tools).run("go")
    messages = tool_messages(result)
    assert messages["c1"].content == "kw: Oslo"
    assert messages["c2"].content == "[('city', 'Rome'), ('ctx', 2)]"
    progress = [e.message for e in result.events if e.type == "tool_progress"]
    assert sorted(progress) == ["ctx is a property here too", "looking up Oslo"]


async def test_timeouts_and_failures_are_tool_errors_like_any_tool() -> None:
    async def hang(**arguments: Any) -> str:
        await asyncio.sleep(10)
        return "late"

    def broken(**arguments: Any) -> str:
        raise RuntimeError("kaboom")

    schema = {"type": "object", "properties": {}}
    client = ScriptedClient(
        [LLMResponse("", [ToolCall("c1", "hang", {}), ToolCall("c2", "broken", {})]), "ok"]
    )
    tools = [
        Tool.from_schema("hang", "", schema, hang, timeout=0.05),
        Tool.from_schema("broken", "", schema, broken),
    ]
    result = await Agent(client, tools).run("go")
    messages = tool_messages(result)
    assert messages["c1"].content == "Error: tool 'hang' timed out after 0.05 s."
    assert messages["c2"].content == "Error: tool 'broken' raised RuntimeError: kaboom"


async def test_a_schema_that_cannot_be_checked_is_a_tool_error_not_a_crash() -> None:
    schema = {"type": "object", "properties": {"x": {"$ref": "#/$defs/Missing"}}}
    client = ScriptedClient([LLMResponse("", [ToolCall("c1", "odd", {"x": 1})]), "ok"])
    result = await Agent(client, [Tool.from_schema("odd", "", schema, weather)]).run("go")
    message = tool_messages(result)["c1"]
    assert message.is_error
    assert message.content.startswith("Error: invalid arguments for tool 'odd': cannot be checked")


def test_the_schemas_draft_is_honoured() -> None:
    draft7 = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"pair": {"type": "array", "items": [{"type": "integer"}]}},
    }
    made = Tool.from_schema("pairs", "", draft7, weather)
    assert made._signature.bind({"pair": [1, "a"]}, None) == ([], {"pair": [1, "a"]})
    with pytest.raises(Exception, match="'x' is not of type 'integer'"):
        made._signature.bind({"pair": ["x"]}, None)


@pytest.mark.parametrize(
    ("name", "parameters", "function", "message"),
    [
        ("has space", WEATHER, weather, "name"),
        ("ok", {"type": "string"}, weather, "describe an object"),
        (
            "ok",
            {"type": "object", "properties": {"a": {"type": "no-such-type"}}},
            weather,
            "JSON Schema",
        ),
        ("ok", ["not", "a", "schema"], weather, "JSON Schema object"),
        ("ok", WEATHER, "not callable", "function"),
        (
            "ok",
            {"type": "object", "properties": {"ctx": {"type": "string"}}},
            lambda ctx, **kw: None,
            None,
        ),
    ],
)
def test_bad_definitions_are_user_errors(
    name: str, parameters: Any, function: Any, message: str | None
) -> None:
    if message is None:  # an unannotated parameter named like a property is just a parameter
        Tool.from_schema(name, "", parameters, function)
        return
    with pytest.raises(UserError, match=message):
        Tool.from_schema(name, "", parameters, function)


def test_a_keyword_context_named_like_a_property_is_refused() -> None:
    def f(ctx: ToolContext, **arguments: Any) -> str:
        return ""

    with pytest.raises(UserError, match="positional-only"):
        Tool.from_schema("f", "", {"type": "object", "properties": {"ctx": {}}}, f)
    with pytest.raises(UserError, match="timeout"):
        Tool.from_schema("f", "", {"type": "object"}, f, timeout=0)


def test_import_glassagent_does_not_import_jsonschema() -> None:
    import subprocess

    code = "import sys, glassagent, glassagent.tools; print('jsonschema' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_many_problems_are_listed_briefly() -> None:
    from glassagent._tools.invalid import InvalidArguments

    schema = {
        "type": "object",
        "properties": {f"p{i}": {"type": "integer"} for i in range(12)}
        | {"long": {"enum": ["x" * 400]}},
    }
    made = Tool.from_schema("many", "", schema, weather)
    with pytest.raises(InvalidArguments) as caught:
        made._signature.bind({f"p{i}": "no" for i in range(12)} | {"long": "y"}, None)
    problems = str(caught.value).split("; ")
    assert len(problems) == 11
    assert problems[0].startswith("long: 'y' is not one of ['xxx")
    assert problems[0].endswith("...")
    assert all(len(p) <= 310 for p in problems)
    assert problems[-1] == "and 3 more"


def test_context_parameters_are_found_or_refused() -> None:
    schema = {"type": "object"}
    assert Tool.from_schema("b", "", schema, print)._signature.context_param is None  # type: ignore[attr-defined]

    def unresolvable(x: Nowhere, **kw: Any) -> None:  # type: ignore[name-defined]  # noqa: F821
        return None

    assert Tool.from_schema("u", "", schema, unresolvable)._signature.context_param is None  # type: ignore[attr-defined]

    def two(a: ToolContext, b: ToolContext) -> None:
        return None

    def star(*ctx: ToolContext) -> None:
        return None

    with pytest.raises(UserError, match="one ToolContext"):
        Tool.from_schema("two", "", schema, two)
    with pytest.raises(UserError, match=r"\*args"):
        Tool.from_schema("star", "", schema, star)
    with pytest.raises(UserError, match="description"):
        Tool.from_schema("d", None, schema, weather)  # type: ignore[arg-type]
