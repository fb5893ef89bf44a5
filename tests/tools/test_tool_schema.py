import dataclasses
import enum
from typing import Annotated, Literal, Optional

import pytest
from pydantic import BaseModel, Field
from typing_extensions import TypedDict  # pydantic needs this one before Python 3.12

from glassagent import Tool, ToolContext, tool
from glassagent.errors import UserError
from glassagent.llm import ToolDefinition


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Point(TypedDict):
    x: int
    y: int


@dataclasses.dataclass
class Box:
    width: float
    height: float = 1.0


class Person(BaseModel):
    name: str
    age: int = 0


def test_google_docstring_gives_description_and_parameter_descriptions() -> None:
    @tool
    def get_weather(city: str, days: int = 1) -> str:
        """Get the weather forecast.

        Looks it up in the weather service.

        Args:
            city: Name of the city.
            days: How many days ahead.
        """
        return city

    assert get_weather.name == "get_weather"
    assert (
        get_weather.description
        == "Get the weather forecast.\n\nLooks it up in the weather service."
    )
    assert get_weather.parameters == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "Name of the city."},
            "days": {"type": "integer", "description": "How many days ahead.", "default": 1},
        },
        "required": ["city"],
        "additionalProperties": False,
    }
    assert get_weather.definition == ToolDefinition(
        "get_weather", get_weather.description, get_weather.parameters
    )


def test_numpy_docstring() -> None:
    @tool
    def scale(value: float, factor: float = 2.0) -> float:
        """Scale a value.

        Parameters
        ----------
        value : float
            The value to scale.
        factor : float
            The multiplier.
        """
        return value * factor

    props = scale.parameters["properties"]
    assert props["value"] == {"type": "number", "description": "The value to scale."}
    assert props["factor"]["description"] == "The multiplier."
    assert scale.description == "Scale a value."


def test_sphinx_docstring() -> None:
    @tool
    def greet(name: str, loud: bool = False) -> str:
        """Greet someone.

        :param name: Who to greet.
        :param loud: Shout the greeting.
        """
        return name

    props = greet.parameters["properties"]
    assert props["name"] == {"type": "string", "description": "Who to greet."}
    assert props["loud"] == {
        "type": "boolean",
        "description": "Shout the greeting.",
        "default": False,
    }


def test_every_supported_type() -> None:
    @tool
    def everything(
        s: str,
        i: int,
        f: float,
        b: bool,
        maybe: Optional[int],  # noqa: UP045 - Optional spelling is supported too
        pipe: str | None = None,
        mode: Literal["fast", "slow"] = "fast",
        color: Color = Color.RED,
        names: list[str] | None = None,
        pair: tuple[int, str] = (1, "a"),
        scores: dict[str, float] | None = None,
        point: Point | None = None,
        box: Box | None = None,
        person: Person | None = None,
        note: Annotated[str, Field(description="A note.", max_length=10)] = "",
    ) -> str:
        """Use every type."""
        return s

    schema = everything.parameters
    props = schema["properties"]
    assert schema["required"] == ["s", "i", "f", "b", "maybe"]
    assert props["s"] == {"type": "string"}
    assert props["i"] == {"type": "integer"}
    assert props["f"] == {"type": "number"}
    assert props["b"] == {"type": "boolean"}
    assert props["maybe"] == {"anyOf": [{"type": "integer"}, {"type": "null"}]}
    assert props["pipe"] == {"anyOf": [{"type": "string"}, {"type": "null"}]}
    assert props["mode"] == {"enum": ["fast", "slow"], "type": "string", "default": "fast"}
    assert props["color"] == {"$ref": "#/$defs/Color", "default": "red"}
    assert schema["$defs"]["Color"] == {"enum": ["red", "blue"], "type": "string"}
    assert props["names"]["anyOf"][0] == {"type": "array", "items": {"type": "string"}}
    assert props["pair"]["prefixItems"] == [{"type": "integer"}, {"type": "string"}]
    assert props["scores"]["anyOf"][0] == {
        "type": "object",
        "additionalProperties": {"type": "number"},
    }
    assert schema["$defs"]["Point"]["properties"] == {
        "x": {"type": "integer"},
        "y": {"type": "integer"},
    }
    assert schema["$defs"]["Box"]["required"] == ["width"]
    assert schema["$defs"]["Person"]["properties"]["age"] == {"type": "integer", "default": 0}
    assert props["note"] == {
        "type": "string",
        "description": "A note.",
        "maxLength": 10,
        "default": "",
    }
    assert "title" not in str(schema.keys())


def test_annotated_description_wins_over_docstring() -> None:
    @tool
    def f(x: Annotated[int, Field(description="From Field.")]) -> int:
        """Do it.

        Args:
            x: From docstring.
        """
        return x

    assert f.parameters["properties"]["x"]["description"] == "From Field."


def test_context_parameter_is_hidden_from_the_schema() -> None:
    @tool
    async def search(query: str, ctx: ToolContext) -> str:
        """Search."""
        return query

    @tool
    async def typed(query: str, ctx: ToolContext[dict[str, int]]) -> str:
        """Search with typed deps."""
        return query

    assert list(search.parameters["properties"]) == ["query"]
    assert list(typed.parameters["properties"]) == ["query"]


def test_decorator_options_and_plain_call() -> None:
    @tool(name="sum_numbers", description="Adds.", timeout=2.0, ui_info={"icon": "plus"})
    def add(a: int, b: int) -> int:
        return a + b

    assert isinstance(add, Tool)
    assert (add.name, add.description, add.timeout, add.ui_info) == (
        "sum_numbers",
        "Adds.",
        2.0,
        {"icon": "plus"},
    )
    assert add(2, 3) == 5


def test_parameter_named_like_a_pydantic_attribute_is_fine() -> None:
    @tool
    def odd(json: str, schema: int, model_config: bool = True) -> str:
        """Odd names."""
        return json

    assert list(odd.parameters["properties"]) == ["json", "schema", "model_config"]


def test_schema_is_computed_once() -> None:
    @tool
    def f(x: int) -> int:
        """F."""
        return x

    assert f.parameters is f.parameters
    assert f.definition is f.definition


def test_unhinted_parameters_accept_anything() -> None:
    @tool
    def f(x) -> str:  # type: ignore[no-untyped-def]
        """F."""
        return str(x)

    assert f.parameters["properties"] == {"x": {}}


@pytest.mark.parametrize(
    ("definition", "message"),
    [
        (lambda: tool(name="f")(lambda *args: None), "args"),
        (lambda: tool(name="has space")(lambda: None), "name"),
        (lambda: tool(timeout=0)(lambda: None), "timeout"),
        (lambda: Tool(42), "function"),  # type: ignore[arg-type]
    ],
    ids=["var-args", "bad-name", "bad-timeout", "not-callable"],
)
def test_bad_definitions_are_user_errors(definition, message: str) -> None:
    with pytest.raises(UserError, match=message):
        definition()


def test_unresolvable_hints_are_user_errors() -> None:
    def f(x: "DoesNotExist") -> None:  # type: ignore[name-defined]  # noqa: F821
        """F."""

    with pytest.raises(UserError, match="type hints"):
        tool(f)


def test_default_values_keep_their_title_keys() -> None:
    @tool
    def tag(meta: dict[str, object] = {"title": "Untitled", "tags": []}) -> str:  # noqa: B006
        """Tag a thing."""
        return "ok"

    assert tag.parameters["properties"]["meta"]["default"] == {"title": "Untitled", "tags": []}


def test_optional_parameters_are_exported_without_a_null_default() -> None:
    """A ``"default": null`` led a small model to send ``null`` as the value."""

    class Filters(BaseModel):
        tag: str | None = None

    @tool
    def search(
        query: str,
        limit: Optional[int] = None,  # noqa: UP045 - the spelling of the report
        filters: Filters | None = None,
        meta: dict[str, object] = {"owner": None},  # noqa: B006
    ) -> str:
        """Search."""
        return f"{query} {limit} {filters}"

    props = search.parameters["properties"]
    assert props["limit"] == {"anyOf": [{"type": "integer"}, {"type": "null"}]}
    assert "default" not in props["filters"]
    assert search.parameters["$defs"]["Filters"]["properties"]["tag"] == {
        "anyOf": [{"type": "string"}, {"type": "null"}]
    }
    assert props["meta"]["default"] == {"owner": None}  # a value, not a null default
    assert search.parameters["required"] == ["query"]
    # still optional, and null still accepted
    assert search._signature.bind({"query": "q"}, None) == (
        [],
        {"query": "q", "limit": None, "filters": None, "meta": {"owner": None}},
    )
    _, kwargs = search._signature.bind({"query": "q", "limit": None, "filters": None}, None)
    assert (kwargs["limit"], kwargs["filters"]) == (None, None)


def test_a_name_with_a_trailing_newline_is_refused() -> None:
    with pytest.raises(UserError, match="name"):
        tool(name="add\n")(lambda: None)
