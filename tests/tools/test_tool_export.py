from glassagent import tool
from glassagent.llm import ToolDefinition
from glassagent.tools import to_anthropic_tools, to_gemini_tools, to_openai_tools


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: First addend.
        b: Second addend.
    """
    return a + b


def lookup(key: str) -> str:
    """Look up a key."""
    return key


SCHEMA = add.parameters


def test_openai_shape() -> None:
    assert to_openai_tools([add]) == [
        {
            "type": "function",
            "function": {"name": "add", "description": "Add two integers.", "parameters": SCHEMA},
        }
    ]


def test_anthropic_shape() -> None:
    assert to_anthropic_tools([add]) == [
        {"name": "add", "description": "Add two integers.", "input_schema": SCHEMA}
    ]


def test_gemini_shape_groups_declarations_in_one_tool() -> None:
    assert to_gemini_tools([add, lookup]) == [
        {
            "functionDeclarations": [
                {"name": "add", "description": "Add two integers.", "parametersJsonSchema": SCHEMA},
                {
                    "name": "lookup",
                    "description": "Look up a key.",
                    "parametersJsonSchema": {
                        "type": "object",
                        "properties": {"key": {"type": "string"}},
                        "required": ["key"],
                        "additionalProperties": False,
                    },
                },
            ]
        }
    ]
    assert to_gemini_tools([]) == []


def test_exports_accept_definitions_and_plain_functions() -> None:
    definition = ToolDefinition("noop", "Nothing.", {"type": "object", "properties": {}})
    names = [t["function"]["name"] for t in to_openai_tools([definition, lookup])]
    assert names == ["noop", "lookup"]


@tool
def meta_lookup(meta: dict[str, object] | None = None) -> str:
    """Look something up."""
    return "ok"


def test_exported_definitions_are_copies() -> None:
    for export in (to_openai_tools, to_anthropic_tools, to_gemini_tools):
        exported = export([meta_lookup])
        exported_schema = str(exported)
        exported.clear()
        assert str(export([meta_lookup])) == exported_schema
    schema = to_openai_tools([meta_lookup])[0]["function"]["parameters"]
    schema["properties"]["extra"] = {"type": "integer"}
    assert "extra" not in meta_lookup.parameters["properties"]
