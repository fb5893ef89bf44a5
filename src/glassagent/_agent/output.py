"""Structured output: how a run asks for an answer of the agent's `output_type`, and reads it.

Everything here is a plain decision without I/O; `AgentRun` emits the events and keeps the
conversation. The mode comes from the agent (``output_mode``) or the client
(`BaseLLMClient.output_mode`):

- ``native``: the schema goes to the client in `ModelSettings.output_schema`;
- ``tool``: the run offers a final-answer tool (`FINAL_TOOL`) whose parameters are the schema;
- ``prompted``: the schema goes in the system prompt.

A schema that is not an object (``list[str]``, ``int``) is wrapped as ``{"result": ...}``, as
providers' constrained modes and tool parameters take objects only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from glassagent._core.errors import OutputValidationError, UserError
from glassagent._core.fence import CODE_FENCE
from glassagent._core.messages import LLMResponse, Message, ToolCall, ToolDefinition
from glassagent._core.output import FINAL_TOOL, OutputMode, OutputSchema, schema_name
from glassagent._core.result import ToolResult

if TYPE_CHECKING:
    from pydantic import TypeAdapter

    from glassagent._core.client import BaseLLMClient

WRAPPER = "result"
"""The property a non-object output sits under."""
MODES: tuple[OutputMode, ...] = ("native", "tool", "prompted")

_TOOL_DESCRIPTION = (
    "Give your final answer: call this tool once, when you have it; its arguments are the answer."
)


@dataclass(frozen=True)
class OutputSpec:
    """What an agent's `output_type` asks for: made once, when the agent is created."""

    output_type: Any
    adapter: TypeAdapter[Any]
    schema: OutputSchema
    wrapped: bool
    """Whether the value sits under `WRAPPER`."""
    retries: int
    mode: OutputMode | None
    """The mode the agent asks for (`None`: the client's choice)."""


@dataclass(frozen=True)
class Plan:
    """How one run gets its structured answer."""

    spec: OutputSpec
    mode: OutputMode


@dataclass(frozen=True)
class Valid:
    """The answer validated: the run ends with it."""

    value: Any
    """The validated output."""
    text: str
    """The answer's JSON text, kept as the final assistant message's content."""
    data: Any
    """`value` as plain JSON values (for the ``complete`` event)."""


@dataclass(frozen=True)
class Invalid:
    """An answer that is not valid output: sent back to the model with the errors."""

    text: str
    """The raw output: the answer's text, or the final-answer call's arguments as JSON."""
    errors: tuple[str, ...]
    """What is wrong, one line each."""
    call: ToolCall | None = None
    """The final-answer call whose arguments were invalid (``tool`` mode)."""


def output_spec(output_type: Any, retries: int, mode: OutputMode | None) -> OutputSpec | None:
    """The `OutputSpec` of an agent's `output_type`; `None` for ``str`` (plain text).

    Raises:
        UserError: For a type pydantic cannot make a JSON Schema of, a negative `retries` or
            an unknown `mode`.
    """
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise UserError(f"`output_retries` must be an integer of at least 0, not {retries!r}.")
    if mode is not None and mode not in MODES:
        raise UserError(f"`output_mode` must be one of {', '.join(MODES)} or None, not {mode!r}.")
    if output_type is str:
        return None
    from pydantic import PydanticUserError, TypeAdapter

    try:
        adapter: TypeAdapter[Any] = TypeAdapter(output_type)
        schema = adapter.json_schema()
    except (PydanticUserError, TypeError, ValueError) as exc:
        raise UserError(f"`output_type` {output_type!r} has no JSON Schema: {exc}") from exc
    wrapped = schema.get("type") != "object" or "$ref" in schema
    if wrapped:
        defs = schema.pop("$defs", None)
        schema = {"type": "object", "properties": {WRAPPER: schema}, "required": [WRAPPER]}
        if defs:
            schema["$defs"] = defs
    strict = _close_objects(schema)
    name = schema_name(getattr(output_type, "__name__", "") or "output")
    description = schema.get("description") if isinstance(schema.get("description"), str) else None
    output = OutputSchema(name=name, schema=schema, description=description, strict=strict)
    return OutputSpec(output_type, adapter, output, wrapped, retries, mode)


_TYPING = frozenset({"type", "$ref", "anyOf", "oneOf", "allOf", "enum", "const", "not"})


def _typed(schema: Any) -> bool:
    """Whether a property's schema says what it may be (``Any`` gives only a title)."""
    return isinstance(schema, dict) and not _TYPING.isdisjoint(schema)


def _close_objects(schema: Any) -> bool:
    """Forbid extra properties on every object schema that lists its properties (in place).

    Returns whether the schema suits strict modes (OpenAI's): every property required, no
    defaults, every object closed (a ``dict`` is not) and every property typed (``Any`` is not).
    """
    strict = True
    if isinstance(schema, dict):
        properties = schema.get("properties")
        if isinstance(properties, dict):
            schema.setdefault("additionalProperties", False)
            strict = set(schema.get("required", ())) == set(properties)
            strict = strict and all(_typed(value) for value in properties.values())
        if schema.get("type") == "object" and schema.get("additionalProperties") is not False:
            strict = False
        strict = strict and "default" not in schema
        for value in schema.values():
            strict = _close_objects(value) and strict
    elif isinstance(schema, list):
        for item in schema:
            strict = _close_objects(item) and strict
    return strict


def final_tool(schema: OutputSchema) -> ToolDefinition:
    """The final-answer tool: its parameters are the output schema."""
    description = _TOOL_DESCRIPTION
    if schema.description:
        description = f"{description} The answer: {schema.description}"
    return ToolDefinition(FINAL_TOOL, description, dict(schema.schema))


def instructions(schema: OutputSchema) -> str:
    """The system prompt's part that asks for JSON following `schema` (``prompted`` mode)."""
    text = json.dumps(schema.schema, separators=(",", ":"))
    return (
        "Answer with exactly one JSON object that follows this JSON Schema, and nothing else "
        f"(no prose, no code fence):\n{text}"
    )


def read(plan: Plan, response: LLMResponse) -> Valid | Invalid | None:
    """Read a model answer as output; `None` when it asks for tools of the run instead."""
    if plan.mode == "tool":
        call = next((c for c in response.tool_calls if c.name == FINAL_TOOL), None)
        if call is not None:
            return _validate(plan.spec, call.input, json.dumps(call.input), call)
    if response.tool_calls:
        return None
    try:
        data = parse_json(response.text)
    except ValueError as exc:
        return Invalid(response.text, (f"the answer is not JSON: {exc}",))
    return _validate(plan.spec, data, response.text, None)


def parse_json(text: str) -> Any:
    """The JSON value of an answer: the whole text, in a code fence, or its first object.

    Raises:
        ValueError: When there is none.
    """
    stripped = text.strip()
    candidates = [stripped] + [m.group(1).strip() for m in CODE_FENCE.finditer(stripped)]
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except (ValueError, RecursionError):
            pass
    start = stripped.find("{")
    if start >= 0:
        try:
            return json.JSONDecoder().raw_decode(stripped[start:])[0]
        except (ValueError, RecursionError):
            pass
    raise ValueError("no JSON value found" if stripped else "the answer is empty")


def _validate(spec: OutputSpec, data: Any, text: str, call: ToolCall | None) -> Valid | Invalid:
    from pydantic import ValidationError

    if spec.wrapped:
        if isinstance(data, Mapping) and WRAPPER in data:
            data = data[WRAPPER]
        elif call is not None:
            return Invalid(text, (f"the arguments need the property {WRAPPER!r}",), call)
    try:
        value = spec.adapter.validate_python(data)
    except ValidationError as exc:
        return Invalid(text, _errors(exc), call)
    except (ValueError, TypeError) as exc:  # a validator that raised something else
        return Invalid(text, (f"{type(exc).__name__}: {exc}",), call)
    try:
        plain = spec.adapter.dump_python(value, mode="json")
    except Exception:  # a value pydantic cannot serialise: the event carries the input
        plain = data
    return Valid(value, text, plain)


def _errors(exc: Any) -> tuple[str, ...]:
    lines = []
    for error in exc.errors(include_url=False)[:20]:
        where = ".".join(str(part) for part in error.get("loc", ()))
        lines.append(f"{where}: {error['msg']}" if where else str(error["msg"]))
    return tuple(lines) or (str(exc),)


def final_message(message: Message, valid: Valid) -> Message:
    """The final assistant message: the answer's JSON text (a final-answer call becomes it)."""
    if not message.tool_calls:
        return message
    return replace(message, content=valid.text, tool_calls=())


_RETRY_OPENING = "That is not a valid answer:\n"
_RETRY_ENDINGS = (
    f"Give your final answer by calling the {FINAL_TOOL} tool.",
    "Reply again with only the corrected JSON object, following the schema.",
)


def feedback(plan: Plan, invalid: Invalid) -> str:
    """What the model is told about an invalid answer, to try again."""
    errors = "\n".join(f"- {line}" for line in invalid.errors)
    if invalid.call is not None:
        return (
            f"The arguments are not a valid answer:\n{errors}\n"
            f"Call {FINAL_TOOL} again with corrected arguments."
        )
    ending = _RETRY_ENDINGS[0] if plan.mode == "tool" else _RETRY_ENDINGS[1]
    return f"{_RETRY_OPENING}{errors}\n{ending}"


def is_retry_request(message: Message) -> bool:
    """Whether `message` is the ``user`` message `ask_again` wrote after an invalid answer.

    It is recognised by its text, so also in a conversation stored before: the run wrote
    it, not the user, and it starts no turn of its own (see `compact.layout`).
    """
    content = message.content
    return (
        message.role == "user"
        and content.startswith(_RETRY_OPENING)
        and content.endswith(_RETRY_ENDINGS)
        and not message.attachments
    )


def ask_again(
    plan: Plan, message: Message, invalid: Invalid, client: BaseLLMClient
) -> list[Message]:
    """The invalid answer as kept, and the message that asks the model to answer again.

    A final-answer call keeps only that call (the answer's other calls never ran) and gets an
    error result; an invalid text answer gets a user message (`is_retry_request`: it stays
    in the turn of the question it answers).
    """
    text = feedback(plan, invalid)
    if invalid.call is None:
        return [message, Message(role="user", content=text)]
    if message.tool_calls != (invalid.call,):
        message = replace(message, tool_calls=(invalid.call,))
    result = ToolResult(invalid.call.id, invalid.call.name, text, True, 0.0)
    return [message, client.format_tool_result(invalid.call, result)]


def exhausted(plan: Plan, invalid: Invalid, retries: int) -> OutputValidationError:
    """The error of a run whose answer is still invalid after `retries` retries."""
    return OutputValidationError(
        f"The answer is not a valid {plan.spec.schema.name} after {retries} "
        f"retr{'y' if retries == 1 else 'ies'}: {'; '.join(invalid.errors)}",
        text=invalid.text,
        errors=invalid.errors,
    )
