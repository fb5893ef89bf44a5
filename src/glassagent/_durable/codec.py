"""The JSON forms a durable run keeps in its database: answers, tool results, errors, results.

Every checkpoint is plain JSON values (objects, arrays, strings, numbers), written with the
event dicts' conversion (`to_jsonable`) and read back with pydantic, so that the first run and
a replay after a crash build the same objects from the same data. Nothing here holds a key:
answers lose their raw request and response (`LLMResponse.raw_request`), and the recorded wire
bodies (`LLMResponse.wire`) are masked by the clients that record them.
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import cache
from typing import TYPE_CHECKING, Any, TypeVar, cast

from glassagent._core import errors
from glassagent._core.cost import Cost
from glassagent._core.errors import GlassAgentError, RunError, _rebuild
from glassagent._core.events import parse_event, to_jsonable
from glassagent._core.messages import (
    LLMResponse,
    Message,
    ModelSettings,
    RetryNotice,
    StreamPart,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    ToolDefinition,
    Usage,
)
from glassagent._core.request import ModelRequest
from glassagent._core.result import RunResult, ToolResult

if TYPE_CHECKING:
    from pydantic import TypeAdapter

    from glassagent._agent.output import OutputSpec
    from glassagent._core.record.redact import Redact

_T = TypeVar("_T")

_NOT_STATE = frozenset({"result"})  # a failed run's partial result is kept on its own


@cache
def _adapter(kind: Any) -> TypeAdapter[Any]:
    from pydantic import ConfigDict, TypeAdapter

    # a tuple of `kind`: a dataclass takes no config of its own, its container does
    return TypeAdapter(tuple[kind, ...], config=ConfigDict(val_json_bytes="base64"))


def many_from(kind: type[_T], data: Any) -> tuple[_T, ...]:
    """Rebuild a list of `kind` (a dataclass of glassagent's) from its `to_jsonable` form."""
    adapter = _adapter(cast("Any", kind))
    return cast("tuple[_T, ...]", adapter.validate_json(json.dumps(data)))


def from_jsonable(kind: type[_T], data: Any) -> _T:
    """Rebuild a `kind` (a dataclass of glassagent's) from its `to_jsonable` form."""
    return many_from(kind, [data])[0]


def response_dict(response: LLMResponse) -> dict[str, Any]:
    """A model answer as JSON values, without its raw request and response."""
    data: dict[str, Any] = to_jsonable(replace(response, raw_request=None, raw_response=None))
    del data["raw_request"], data["raw_response"]
    return data


def response_from(data: Any) -> LLMResponse:
    """The answer `response_dict` wrote."""
    return from_jsonable(LLMResponse, data)


def tool_result_dict(result: ToolResult) -> dict[str, Any]:
    """A tool call's result as JSON values."""
    data: dict[str, Any] = to_jsonable(result)
    return data


def tool_result_from(data: Any) -> ToolResult:
    """The tool result `tool_result_dict` wrote."""
    return from_jsonable(ToolResult, data)


def error_dict(exc: GlassAgentError) -> dict[str, Any]:
    """A glassagent error as JSON values: its classes, arguments and attributes.

    The classes are the names of glassagent's error classes it is an instance of, most
    specific first (an error class of a plugin is read back as its nearest glassagent base).
    """
    kinds = [k.__name__ for k in type(exc).__mro__ if getattr(errors, k.__name__, None) is k]
    state = {k: v for k, v in vars(exc).items() if k not in _NOT_STATE}
    return {"types": kinds, "args": to_jsonable(exc.args), "state": to_jsonable(state)}


def error_from(data: Any) -> GlassAgentError:
    """The error `error_dict` wrote, of the most specific class glassagent has.

    Its attributes are the JSON values that were stored (a tuple comes back as a tuple, a
    dataclass as a dict).
    """
    kind: type[GlassAgentError] = RunError
    for name in data.get("types", ()):
        found = getattr(errors, str(name), None)
        if isinstance(found, type) and issubclass(found, GlassAgentError):
            kind = found
            break
    state = {k: tuple(v) if isinstance(v, list) else v for k, v in data["state"].items()}
    error: GlassAgentError = _rebuild(kind, tuple(data["args"]), state)
    return error


def result_dict(result: RunResult[Any], spec: OutputSpec | None) -> dict[str, Any]:
    """A run's result as JSON values; a structured output as its JSON form."""
    output: Any = result.output
    if spec is not None and output is not None:
        output = spec.adapter.dump_python(output, mode="json")
    return {
        "text": result.text,
        "output": to_jsonable(output),
        "prior": len(result.all_messages) - len(result.new_messages),
        "messages": to_jsonable(result.all_messages),
        "events": [event.to_dict() for event in result.events],
        "usage": to_jsonable(result.usage),
        "iterations": result.iterations,
        "stop_reason": result.stop_reason,
        "model_stop_reason": result.model_stop_reason,
        "cost": to_jsonable(result.cost),
        "pending_approvals": to_jsonable(result.pending_approvals),
        "last_agent": result.last_agent,
    }


def result_from(data: Any, spec: OutputSpec | None, redact: Redact | None = None) -> RunResult[Any]:
    """The result `result_dict` wrote; a structured output validated as the agent's type."""
    messages = many_from(Message, data["messages"])
    output = data["output"]
    if spec is not None and output is not None:
        output = spec.adapter.validate_python(output)
    return RunResult(
        text=data["text"],
        new_messages=messages[data["prior"] :],
        all_messages=messages,
        events=tuple(parse_event(event) for event in data["events"]),
        usage=from_jsonable(Usage, data["usage"]),
        iterations=data["iterations"],
        stop_reason=data["stop_reason"],
        model_stop_reason=data["model_stop_reason"],
        cost=from_jsonable(Cost, data["cost"]),
        pending_approvals=many_from(ToolCall, data["pending_approvals"]),
        output=output,
        last_agent=data.get("last_agent"),  # absent in a result kept before handoffs
        redact=redact,
    )


def request_dict(request: ModelRequest) -> dict[str, Any]:
    """A model call's request as JSON values: its messages, tools, system and settings."""
    return {
        "messages": to_jsonable(request.messages),
        "tools": to_jsonable(request.tools),
        "system": request.system,
        "settings": to_jsonable(request.settings),
    }


def request_from(data: Any) -> ModelRequest:
    """The request `request_dict` wrote (its tool choice worked out again from the settings)."""
    return ModelRequest(
        messages=many_from(Message, data["messages"]),
        tools=many_from(ToolDefinition, data["tools"]),
        system=data["system"],
        settings=from_jsonable(ModelSettings, data["settings"]),
    )


def part_dict(part: StreamPart) -> dict[str, Any]:
    """A streamed delta (or retry notice) as JSON values, with its ``kind``."""
    data: dict[str, Any] = to_jsonable(part)
    return data


def part_from(data: Any) -> StreamPart:
    """The delta `part_dict` wrote."""
    kind = data.get("kind")
    if kind == "text":
        return TextDelta(data["text"])
    if kind == "thinking":
        return ThinkingDelta(data["text"])
    return from_jsonable(RetryNotice, data)
