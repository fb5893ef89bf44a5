"""Thin functions with the names applications already use, over `History`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from glassagent._core.errors import UserError
from glassagent._core.messages import Attachment, Message, MessageStatus, Role, ToolCall
from glassagent._history.model import (
    HistoryAttachment,
    HistoryMessage,
    HistoryToolCall,
    new_message_id,
    now_timestamp,
)
from glassagent._history.tree import History


def create_standard_history(
    *,
    conversation_id: str | None = None,
    title: str | None = None,
    model: str | None = None,
    platform: str | None = None,
) -> History:
    """Create an empty conversation (same as ``History(...)``).

    Args:
        conversation_id: The conversation's id; a fresh UUID when not given.
        title: A display title.
        model: The model the conversation is held with.
        platform: The application or provider that keeps it.
    """
    return History(conversation_id=conversation_id, title=title, model=model, platform=platform)


def create_standard_message(
    role: Role,
    content: str = "",
    *,
    attachments: Iterable[Attachment | HistoryAttachment] = (),
    tool_calls: Iterable[ToolCall | HistoryToolCall] = (),
    tool_call_id: str | None = None,
    status: MessageStatus = "completed",
    message_id: str | None = None,
    timestamp: str | None = None,
) -> HistoryMessage:
    """Create a message with a fresh id and timestamp, ready for `add_message_to_history`.

    Args:
        role: ``system``, ``user``, ``assistant`` or ``tool``.
        content: The text.
        attachments: Files sent with it (neutral `Attachment`s are converted).
        tool_calls: Tool calls of an assistant message (neutral `ToolCall`s are converted).
        tool_call_id: For a tool message: the call it answers.
        status: ``completed`` or ``aborted``.
        message_id: Its id; a fresh ``msg_<hex>`` id when not given.
        timestamp: Its ISO 8601 time; now when not given.
    """
    return HistoryMessage(
        id=message_id or new_message_id(),
        role=role,
        content=content,
        created_at=timestamp or now_timestamp(),
        status=status,
        attachments=tuple(
            a if isinstance(a, HistoryAttachment) else HistoryAttachment.from_attachment(a)
            for a in attachments
        ),
        tool_calls=tuple(
            c if isinstance(c, HistoryToolCall) else HistoryToolCall.from_tool_call(c)
            for c in tool_calls
        ),
        tool_call_id=tool_call_id,
    )


def add_message_to_history(
    history: History, message: HistoryMessage | Message, parent_id: str | None = None
) -> str:
    """Append `message` below `parent_id` (default: the current node); see `History.append`.

    Args:
        history: The conversation.
        message: The message to add.
        parent_id: The message it follows.

    Returns:
        The message's id.
    """
    return history.append(message, parent=parent_id)


def get_conversation_thread(
    history: History | Mapping[str, Any], node: str | None = None
) -> list[HistoryMessage]:
    """The messages from the root to `node` (default: the current node); see `History.thread`.

    Args:
        history: The conversation: a `History`, or a standard history dict (version 1 or
            2.0, validated as `History.from_dict` does).
        node: The last message of the thread.

    Raises:
        HistoryValidationError: For a dict that is not a valid history.
        UserError: For anything else, or an unknown `node`.
    """
    if isinstance(history, Mapping):
        history = History.from_dict(history)
    elif not isinstance(history, History):
        raise UserError(
            "get_conversation_thread takes a History or a standard history dict, "
            f"not {type(history).__name__}."
        )
    return history.thread(node)
