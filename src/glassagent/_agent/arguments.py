"""Checks of the arguments of `Agent` and `Agent.run`: a wrong type is a `UserError`.

Without them a wrong type fails later, deep inside a run, as a built-in ``TypeError`` or
``AttributeError``, or is taken silently.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from glassagent._core.errors import UserError
from glassagent._core.messages import Attachment, Message, ModelSettings
from glassagent._core.result import RunResult
from glassagent._tools.context_tools import ContextTool, check_context_tool
from glassagent._tools.tool import Tool
from glassagent._tools.wrap import as_tool

if TYPE_CHECKING:
    from glassagent._history.tree import History

_PATH_TYPES = (str, os.PathLike)


def check_count(name: str, value: object) -> None:
    """Refuse anything but a whole number of at least 1 (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UserError(f"`{name}` must be a whole number of at least 1, got {value!r}.")


def check_seconds(name: str, value: object) -> None:
    """Refuse anything but `None` or a positive number of seconds (not a bool, not NaN)."""
    if value is None:
        return
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or math.isnan(value)
        or not value > 0
    ):
        raise UserError(f"`{name}` must be a positive number of seconds, got {value!r}.")


def check_type(name: str, value: object, kind: type, what: str) -> None:
    """Refuse anything but `None` or an instance of `kind` (described as `what`)."""
    if value is not None and not isinstance(value, kind):
        raise UserError(f"`{name}` must be {what} or None, got {type(value).__name__}.")


def check_iterable(name: str, value: object, what: str) -> None:
    """Refuse a lone string (its characters would be taken one by one) or a non-iterable."""
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise UserError(f"`{name}` must be a list of {what}, got {type(value).__name__}.")


def check_settings(settings: object) -> None:
    """Refuse settings that are not a `ModelSettings` (or `None`)."""
    check_type("settings", settings, ModelSettings, "a ModelSettings")


def prompt_message(prompt: object, attachments: object) -> Message:
    """The user message of a run: `prompt` with its `attachments` (paths or `Attachment`s)."""
    if not isinstance(prompt, str):
        raise UserError(f"`prompt` must be a string, got {type(prompt).__name__}.")
    check_iterable("attachments", attachments, "file paths or Attachments")
    taken: list[Attachment] = []
    for item in attachments:  # type: ignore[attr-defined]  # checked just above
        if isinstance(item, Attachment):
            taken.append(item)
        elif isinstance(item, _PATH_TYPES):
            taken.append(Attachment.from_path(item))
        else:
            raise UserError(
                f"`attachments` must hold file paths or Attachments, got {type(item).__name__}."
            )
    return Message(role="user", content=prompt, attachments=tuple(taken))


def conversation(messages: object, history: object) -> list[Message]:
    """The conversation a run starts from: `history`'s thread, or a copy of `messages`."""
    from glassagent._history.tree import History

    if history is not None:
        if not isinstance(history, History):
            raise UserError(f"`history` must be a History or None, got {type(history).__name__}.")
        return history.to_messages()
    if messages is None:
        return []
    return message_list("messages", messages)


def message_list(name: str, messages: object) -> list[Message]:
    """`messages` as a list, when it is a sequence of `Message`s."""
    if isinstance(messages, str | bytes) or not isinstance(messages, Iterable):
        raise UserError(f"`{name}` must be a list of Messages, got {type(messages).__name__}.")
    listed = list(messages)
    for index, item in enumerate(listed):
        if not isinstance(item, Message):
            raise UserError(
                f"`{name}` must hold Messages only; item {index} is a {type(item).__name__}."
            )
    return listed


def tools_by_name(tools: Iterable[Tool | ContextTool | Callable[..., Any]]) -> dict[str, Tool]:
    """The agent's tools by name (functions wrapped as tools).

    Raises:
        UserError: When two tools have one name.
    """
    by_name: dict[str, Tool] = {}
    for item in tools:
        wrapped = as_tool(item)
        if wrapped.name in by_name:
            raise UserError(f"Two tools are named {wrapped.name!r}; tool names must be unique.")
        by_name[wrapped.name] = wrapped
    return by_name


def conversation_of(
    previous: RunResult[Any] | History | Sequence[Message],
) -> tuple[History | None, list[Message]]:
    """The conversation a resumed run continues, and the history it came from (if any)."""
    from glassagent._history.tree import History

    if isinstance(previous, History):
        return previous, previous.to_messages()
    if isinstance(previous, RunResult):
        return None, list(previous.all_messages)
    return None, message_list("previous", previous)


def unique_context_tools(items: Iterable[ContextTool]) -> tuple[ContextTool, ...]:
    """The agent's context tools, checked.

    Raises:
        UserError: When one is not a context tool, or two have one name.
    """
    checked = tuple(check_context_tool(item) for item in items)
    names = [item.name for item in checked]
    if twice := next((n for n in names if names.count(n) > 1), None):
        raise UserError(f"Two context tools are named {twice!r}; their names must be unique.")
    return checked
