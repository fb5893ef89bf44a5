"""The JSON tool protocol: tool calling for models without native function calling.

The system prompt lists the tools and asks for exactly one JSON object per reply::

    {"thought": "...", "tool_call": {"name": "...", "input": {...}}}   # call a tool
    {"thought": "...", "response": "..."}                             # answer

Tool results go back as a user message ``{"tool_result": {"name": ..., "result": ...}}``.
`parse_reply` reads what models really write: code fences, prose around the object, a list
of several calls, unquoted keys, single quotes, trailing commas. A reply it cannot read
becomes the final text, and the reply says why (`ProtocolReply.error`).

Servers that constrain decoding to a JSON Schema (llama.cpp, Ollama) can be sent
`reply_schema`: the protocol's own reply shape, with one branch per tool, so every reply
parses and names a real tool with arguments of that tool's shape.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from glassagent._core import tool_choice
from glassagent._core.errors import ConfigurationError
from glassagent._core.fence import CODE_FENCE
from glassagent._core.json_stream import ReplyStream
from glassagent._core.jsontext import loads, snippet
from glassagent._core.messages import (
    LLMResponse,
    Message,
    ToolCall,
    ToolDefinition,
    new_call_id,
)

_INSTRUCTIONS = """\
You can use tools. Reply with exactly one JSON object and nothing else: no prose, no code fence.
To call a tool, reply:
{"thought": "<your reasoning>", "tool_call": {"name": "<tool name>", "input": {<arguments>}}}
To answer the user, reply:
{"thought": "<your reasoning>", "response": "<your answer>"}
After a tool call you receive {"tool_result": {"name": "<tool name>", "result": "<output>"}}.
When the results answer the question, reply with a "response" object that uses them;
never repeat a tool call you already made.

Tools:"""

_ANSWER_ONLY = """\
No tool can be called now: answer the user from the tool results above.
Reply with exactly one JSON object and nothing else: no prose, no code fence:
{"thought": "...", "response": "..."}"""
# (no placeholder to fill in, no example answer: a small model copies "<your answer>" or
# "It is 5." as its own answer)

_MUST_CALL = 'This reply must call {what}: reply with a "tool_call" object, not a "response".'

_UNQUOTED_KEY = re.compile(r"([{,]\s*)([A-Za-z_][A-Za-z0-9_\-]*)\s*:")
_TRAILING_COMMA = re.compile(r",\s*([}\]])")
_PY_LITERALS = {"True": "true", "False": "false", "None": "null"}
# A JSON string (kept as it is) or a Python literal outside strings (made JSON).
_PY_LITERAL = re.compile(r'("(?:\\.|[^"\\])*")|\b(True|False|None)\b')
_MAX_STARTS = 20
THOUGHT_LIMIT = 200
"""The longest ``thought`` `reply_schema` allows, in characters: a constrained thought cannot
use up the reply's tokens before the call or the answer."""


def system_prompt(
    system: str | None, tools: Sequence[ToolDefinition], choice: str | None = None
) -> str:
    """The system prompt of a JSON-protocol request: `system`, then the protocol and tools.

    `choice` (``ModelSettings.tool_choice``) ``"required"`` or a tool's name adds that this
    reply must be a tool call; `tools` are those the request offers (`ModelRequest.offered`).
    Without tools (under ``"none"``) the reply must be an answer.
    """
    if not tools:
        protocol = _ANSWER_ONLY
        return f"{system}\n\n{protocol}" if system else protocol
    lines = [_INSTRUCTIONS]
    for tool in tools:
        schema = json.dumps(tool.parameters, separators=(",", ":"))
        lines.append(f"- {tool.name}: {tool.description or '(no description)'}")
        lines.append(f"  input JSON Schema: {schema}")
    if choice == "required":
        lines.append(_MUST_CALL.format(what="one of these tools"))
    elif choice is not None and choice not in tool_choice.KEYWORDS:
        lines.append(_MUST_CALL.format(what=f"the tool {choice}"))
    protocol = "\n".join(lines)
    return f"{system}\n\n{protocol}" if system else protocol


_DEFINITIONS = ("#/$defs/", "#/definitions/")


def _hoisted(value: Any, prefix: str, own: str | None) -> Any:
    """`value` with its local ``$ref``s rewritten for the reply schema.

    References to definitions (``#/$defs/X``, ``#/definitions/X``) point to ``#/$defs/`` +
    `prefix` + ``X``; any other local reference (``#``, ``#/properties/...``) into `own`,
    where the parameters themselves are kept.
    """
    if isinstance(value, list):
        return [_hoisted(item, prefix, own) for item in value]
    if not isinstance(value, dict):
        return value
    out = {key: _hoisted(item, prefix, own) for key, item in value.items()}
    ref = out.get("$ref")
    if isinstance(ref, str) and ref.startswith("#"):
        root = next((root for root in _DEFINITIONS if ref.startswith(root)), None)
        if root is not None:
            out["$ref"] = "#/$defs/" + prefix + ref[len(root) :]
        elif own is not None:
            out["$ref"] = own + ref[1:]
    return out


def _refers_to_itself(value: Any) -> bool:
    """Whether a schema holds a local ``$ref`` that is not to a definition."""
    if isinstance(value, list):
        return any(_refers_to_itself(item) for item in value)
    if not isinstance(value, dict):
        return False
    ref = value.get("$ref")
    if isinstance(ref, str) and ref.startswith("#") and not ref.startswith(_DEFINITIONS):
        return True
    return any(_refers_to_itself(item) for item in value.values())


def _tool_branch(tool: ToolDefinition, defs: dict[str, Any]) -> dict[str, Any]:
    """The reply that calls `tool`; its parameters' definitions move into `defs`.

    Parameters that refer into themselves (``#/properties/...``, as some schema generators
    write a reused part) are kept whole in `defs` under the tool's name, and referred to.
    """
    prefix = f"{tool.name}."
    raw = dict(tool.parameters) or {"type": "object"}
    own = f"#/$defs/{tool.name}" if _refers_to_itself(raw) else None
    parameters = _hoisted(raw, prefix, own)
    for key in ("$defs", "definitions"):
        for name, definition in (parameters.pop(key, None) or {}).items():
            defs[prefix + name] = definition
    parameters.pop("$schema", None)
    if own is not None:
        defs[tool.name] = parameters
        parameters = {"$ref": own}
    call = {
        "type": "object",
        "properties": {"name": {"type": "string", "enum": [tool.name]}, "input": parameters},
        "required": ["name", "input"],
        "additionalProperties": False,
    }
    return _reply_object("tool_call", call)


def _reply_object(key: str, value: dict[str, Any]) -> dict[str, Any]:
    thought = {"type": "string", "maxLength": THOUGHT_LIMIT}
    return {
        "type": "object",
        "properties": {"thought": thought, key: value},
        "required": ["thought", key],
        "additionalProperties": False,
    }


def reply_schema(tools: Sequence[ToolDefinition], choice: str | None = None) -> dict[str, Any]:
    """The JSON Schema of a protocol reply, for servers that constrain decoding to one.

    An ``anyOf`` with one branch per tool, ``{"thought": str, "tool_call": {"name": <that
    tool>, "input": <its parameters>}}``, and a ``{"thought": str, "response": str}`` branch
    (a single branch stands alone); the thought is at most `THOUGHT_LIMIT` characters.
    Definitions (``$defs``) in tool parameters move to the top, renamed ``<tool>.<name>``,
    with the references to them.

    Args:
        tools: The tools on offer.
        choice: Which replies are allowed: `None` or ``"auto"``, all; ``"required"``, a tool
            call only; ``"none"``, a response only; a tool's name, a call of that tool only.

    Raises:
        ConfigurationError: For a tool name not in `tools`, or ``"required"`` without tools.
    """
    chosen = tool_choice.offered(choice, tools)
    if choice not in (None, *tool_choice.KEYWORDS) and not chosen:
        raise ConfigurationError(f"The tool choice {choice!r} names no tool on offer.")
    if choice == "required" and not chosen:
        raise ConfigurationError("The tool choice 'required' needs at least one tool.")
    defs: dict[str, Any] = {}
    branches = [_tool_branch(tool, defs) for tool in chosen]
    if choice in (None, "auto", "none"):
        branches.append(_reply_object("response", {"type": "string"}))
    schema = branches[0] if len(branches) == 1 else {"anyOf": branches}
    return {**schema, "$defs": defs} if defs else schema


def _call_object(call: ToolCall) -> dict[str, Any]:
    return {"name": call.name, "input": call.input}


def encode_assistant(message: Message) -> str:
    """An assistant turn as the JSON the protocol asked the model to write."""
    head: dict[str, Any] = {"thought": message.thinking} if message.thinking else {}
    if not message.tool_calls:
        return json.dumps({**head, "response": message.content})
    if len(message.tool_calls) == 1:
        return json.dumps({**head, "tool_call": _call_object(message.tool_calls[0])})
    items = [{"tool_call": _call_object(call)} for call in message.tool_calls]
    if head:
        items[0] = {**head, **items[0]}
    return json.dumps(items)


def encode_history(messages: Sequence[Message], *, tools: bool = True) -> list[Message]:
    """The conversation as a model without tool calling sees it.

    Assistant turns become protocol JSON; the results of one tool round become one user
    message with a ``{"tool_result": ...}`` object per line. Without `tools` (a request
    that offers none, so the model answers in plain text) a plain answer stays plain text:
    shown as ``{"response": ...}``, the model would copy the form.
    """
    encoded: list[Message] = []
    results: list[str] = []

    def flush() -> None:
        if results:
            encoded.append(Message(role="user", content="\n".join(results)))
            results.clear()

    for message in messages:
        if message.role == "tool":
            result = {"name": message.name, "result": message.content}
            results.append(json.dumps({"tool_result": result}))
            continue
        flush()
        plain = not tools and not message.tool_calls
        if message.role == "assistant" and message.status != "unreadable" and not plain:
            message = replace(
                message, content=encode_assistant(message), tool_calls=(), thinking=None
            )
        encoded.append(message)
    flush()
    return encoded


@dataclass(frozen=True)
class ProtocolReply:
    """A model reply read with the JSON tool protocol."""

    text: str
    """The answer text (the whole reply when it could not be read)."""
    thinking: str | None
    """The ``thought`` the model gave, if any."""
    tool_calls: tuple[ToolCall, ...]
    """The tool calls the reply asked for."""
    error: str | None
    """Why the reply could not be read as the protocol; `None` when it could."""


def _repair(text: str) -> str:
    """Common non-JSON habits made JSON: unquoted keys, single quotes, Python literals."""
    if '"' not in text:
        text = text.replace("'", '"')
    text = _UNQUOTED_KEY.sub(r'\1"\2":', text)
    text = _TRAILING_COMMA.sub(r"\1", text)
    return _PY_LITERAL.sub(lambda m: m.group(1) or _PY_LITERALS[m.group(2)], text)


def _decode_first(text: str) -> Any:
    """The first JSON object or array in `text`, read as is or repaired.

    Raises:
        ValueError: When there is none.
    """
    decoder = json.JSONDecoder()
    starts = [i for i, char in enumerate(text) if char in "{["][:_MAX_STARTS]
    for start in starts:
        for candidate in (text[start:], _repair(text[start:])):
            try:
                value, _ = decoder.raw_decode(candidate)
            except (ValueError, RecursionError):
                continue
            if isinstance(value, dict | list):
                return value
    raise ValueError("the reply contains no JSON object")


def _extract(text: str) -> Any:
    """The protocol value in a reply: inside a code fence first, else anywhere in the text."""
    for candidate in [m.group(1) for m in CODE_FENCE.finditer(text)] + [text]:
        try:
            return _decode_first(candidate)
        except ValueError:
            pass
    raise ValueError("the reply contains no JSON object")


def _tool_call(raw: Any) -> ToolCall:
    """One protocol ``tool_call`` object as a `ToolCall` (a malformed one carries an error)."""
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str) or not raw["name"]:
        problem = f"a tool_call needs a string 'name' and an 'input' object, got {raw!r}"
        return ToolCall(new_call_id(), "", {}, arguments_error=problem)
    args: Any = next((raw[k] for k in ("input", "arguments", "parameters") if k in raw), {})
    if isinstance(args, str):
        with contextlib.suppress(ValueError):
            args = loads(args) if args.strip() else {}
    if not isinstance(args, dict):
        problem = f"'input' must be a JSON object, got {args!r}"
        return ToolCall(new_call_id(), raw["name"], {}, arguments_error=problem)
    return ToolCall(new_call_id(), raw["name"], args)


def _read_object(obj: dict[str, Any]) -> tuple[str | None, list[ToolCall], str | None]:
    """``(thought, calls, response)`` of one protocol object."""
    thought = obj.get("thought")
    thought = thought if isinstance(thought, str) and thought else None
    calls: list[ToolCall] = []
    if "tool_call" in obj:
        calls.append(_tool_call(obj["tool_call"]))
    if isinstance(obj.get("tool_calls"), list):
        calls.extend(_tool_call(raw) for raw in obj["tool_calls"])
    if not calls and "name" in obj and "response" not in obj:
        calls.append(_tool_call(obj))  # a bare {"name": ..., "arguments": ...} call
    response = obj.get("response")
    if response is not None and not isinstance(response, str):
        response = snippet(response, limit=None)
    return thought, calls, response


def parse_reply(text: str) -> ProtocolReply:
    """Read a model reply written with the JSON tool protocol.

    Never raises: a reply that cannot be read is returned as the final text, with `error`
    saying why.

    Args:
        text: The model's reply text.
    """
    stripped = text.strip()
    try:
        value = _extract(stripped)
    except ValueError as exc:
        return ProtocolReply(stripped, None, (), f"{exc}")
    objects = value if isinstance(value, list) else [value]
    thoughts: list[str] = []
    calls: list[ToolCall] = []
    answers: list[str] = []
    for obj in objects:
        if not isinstance(obj, dict):
            continue
        thought, found, response = _read_object(obj)
        thoughts += [thought] if thought else []
        calls += found
        answers += [response] if response is not None else []
    thinking = "\n".join(thoughts) or None
    if not calls and not answers:
        error = "the JSON has neither a 'tool_call' nor a 'response'"
        return ProtocolReply(stripped, thinking, (), error)
    return ProtocolReply("\n".join(answers), thinking, tuple(calls), None)


def read_response(response: LLMResponse) -> LLMResponse:
    """A raw answer whose text is a protocol reply, read into text, thinking and tool calls.

    Thinking the server reported natively comes first, then the reply's ``thought``. A reply
    that cannot be read stays the final text and `LLMResponse.protocol_error` says why.
    """
    reply = parse_reply(response.text)
    error = None
    if reply.error:
        error = (
            f"The reply did not follow the JSON tool protocol ({reply.error}); "
            "it became the final text."
        )
        cut = ReplyStream()  # a reply cut short (max_tokens) still holds its answer's start
        cut.feed(response.text)
        if cut.text:
            reply = replace(reply, text=cut.text, thinking=cut.thought or None)
            error = (
                f"The reply did not follow the JSON tool protocol ({reply.error}); its "
                "unfinished response became the final text."
            )
    thinking = "\n".join(t for t in (response.thinking, reply.thinking) if t) or None
    stop = "end_turn" if response.stop_reason == "tool_use" else response.stop_reason
    return replace(  # a response with tool calls always stops for tool use
        response,
        text=reply.text,
        tool_calls=response.tool_calls + reply.tool_calls,
        stop_reason=stop,
        thinking=thinking,
        protocol_error=error,
    )
