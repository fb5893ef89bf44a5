"""The design's plain values to glassagent's and back: history, files, tools, settings, events."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from glassagent._core.errors import UserError
from glassagent._core.messages import Attachment, Message, ModelSettings, ToolCall, ToolDefinition
from glassagent._core.result import ToolResult
from glassagent._history.tree import History
from glassagent._tools.tool import Tool
from glassagent._tools.wrap import as_tool

_SETTINGS = frozenset(f.name for f in dataclasses.fields(ModelSettings))
_ALIASES = {"max_output_tokens": "max_tokens", "max_completion_tokens": "max_tokens"}
HOST_KEYS = ("chat_id", "chat_manager", "app_path", "main_port", "chat_path", "history_path")
"""The keys of the design's context dict a glassagent tool reads as host facts."""


def conversation(
    history: Mapping[str, Any] | History | None,
    text: str | None,
    file_paths: Iterable[str] | None,
) -> list[Message]:
    """The thread of the design's `history` dict, then the new user message (when any).

    An empty or missing history is a new conversation. The history is the application's own
    document, so its attachments may name local files.

    Raises:
        ValueError: `HistoryValidationError` for a malformed history; `UserError` (also a
            `ValueError` here) for a bad text or file path.
    """
    messages = thread_of(history)
    if text is None and not file_paths:
        return messages
    if text is not None and not isinstance(text, str):
        raise ContractValueError(f"current_text_input must be a string, got {type(text).__name__}.")
    paths = list(file_paths or ())
    for path in paths:
        if not isinstance(path, str) or not path:
            raise ContractValueError(f"A file path must be a non-empty string, got {path!r}.")
    attachments = tuple(Attachment(path=path) for path in paths)
    messages.append(Message(role="user", content=text or "", attachments=attachments))
    return messages


def thread_of(history: Mapping[str, Any] | History | None) -> list[Message]:
    """The model messages of `history`'s current thread (none for an empty history)."""
    if history is None or (isinstance(history, Mapping) and not history.get("messages")):
        return []
    tree = history if isinstance(history, History) else History.from_dict(history)
    return tree.to_messages()


class ContractValueError(UserError, ValueError):
    """A value given to the design's client methods is not what they take."""


def model_settings(
    temperature: float | None,
    thinking_budget: int | None,
    options: Mapping[str, Any],
) -> ModelSettings:
    """`ModelSettings` from the design's arguments; ``**kwargs`` name its fields.

    ``max_output_tokens`` and ``max_completion_tokens`` (the profile's names) mean
    ``max_tokens``; a list of ``stop_sequences`` is taken as a tuple.

    Raises:
        ContractValueError: For a keyword that is no setting, or a value a setting refuses.
    """
    values: dict[str, Any] = {}
    for key, value in options.items():
        name = _ALIASES.get(key, key)
        if name not in _SETTINGS:
            known = ", ".join(sorted(_SETTINGS | _ALIASES.keys()))
            raise ContractValueError(f"Unknown parameter {key!r}; the settings are: {known}.")
        values[name] = tuple(value) if name == "stop_sequences" and value is not None else value
    values["temperature"] = temperature
    values["thinking_budget"] = thinking_budget
    try:
        return ModelSettings(**values)
    except (TypeError, ValueError) as exc:
        raise ContractValueError(str(exc)) from None


def tool_definitions(tools: Iterable[Any] | None) -> tuple[list[ToolDefinition], dict[str, Tool]]:
    """What the model is told about `tools`, and those of them glassagent can run itself.

    A tool is a glassagent `Tool`, a plain function, a `ToolDefinition`, or a definition
    dict: OpenAI's ``{"type": "function", "function": {...}}``, Gemini's
    ``{"function_declarations": [...]}``, or ``{"name", "description", "parameters"}``.
    """
    definitions: list[ToolDefinition] = []
    runnable: dict[str, Tool] = {}
    for item in tools or ():
        if isinstance(item, ToolDefinition):
            definitions.append(item)
        elif isinstance(item, Mapping):
            definitions.extend(_from_dict(item))
        elif isinstance(item, Tool) or callable(item):
            made = as_tool(item)
            definitions.append(made.definition)
            runnable[made.name] = made
        else:
            raise ContractValueError(f"Not a tool or tool definition: {type(item).__name__}.")
    return definitions, runnable


def _from_dict(item: Mapping[str, Any]) -> list[ToolDefinition]:
    if "function_declarations" in item:
        return [d for entry in item["function_declarations"] for d in _from_dict(entry)]
    spec = item.get("function", item) if item.get("type") == "function" else item
    name, parameters = spec.get("name"), spec.get("parameters", {"type": "object"})
    if not isinstance(name, str) or not isinstance(parameters, Mapping):
        raise ContractValueError(f"A tool definition needs a name and parameters: {item!r:.200}.")
    return [ToolDefinition(name, str(spec.get("description", "")), dict(parameters))]


def tool_result(call: ToolCall, value: Any, *, is_error: bool, duration_ms: float) -> ToolResult:
    """A `ToolResult` for what an application's tool loader returned."""
    if isinstance(value, str):
        return ToolResult(call.id, call.name, value, is_error, duration_ms)
    try:
        output = json.dumps(value, ensure_ascii=False, default=str)
    except ValueError as exc:
        return ToolResult(call.id, call.name, f"Error: result not JSON: {exc}", True, duration_ms)
    structured = value if isinstance(value, (dict, list)) else None
    return ToolResult(call.id, call.name, output, is_error, duration_ms, None, structured)


def call_start(call: ToolCall, display_name: str, ui_info: Any) -> dict[str, Any]:
    """The design's ``function_call_start`` event of `call`."""
    event: dict[str, Any] = {
        "type": "function_call_start",
        "function_name": call.name,
        "tool_name": display_name,
        "args": dict(call.input),
    }
    if ui_info is not None:
        event["ui_info"] = ui_info
    return event


def display_name_of(name: str, tools: Mapping[str, Tool], loader: Any) -> str:
    """A tool's display name: the glassagent tool's, the loader's when it tells, else `name`."""
    if name in tools:
        return tools[name].display_name
    ask: Callable[[str], Any] | None = getattr(loader, "get_display_name", None)
    shown = ask(name) if callable(ask) else None
    return shown if isinstance(shown, str) and shown else name
