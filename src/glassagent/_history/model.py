"""The in-memory shapes of a stored conversation: messages, tool calls, attachments, limits.

A `HistoryMessage` is what a history keeps: the neutral `Message` plus its id, its parent,
its timestamp and any fields this library does not know (kept so they survive a round trip).
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

from glassagent._core.attachments import DEFAULT_POLICY, AttachmentPolicy
from glassagent._core.errors import AttachmentError, UserError
from glassagent._core.messages import (
    REMOTE_SCHEMES,
    Attachment,
    Message,
    MessageStatus,
    Role,
    ToolCall,
)

Version = Literal["1", "2.0"]
"""A document format version this library reads and writes."""

AttachmentType = Literal["image", "video", "audio", "file"]
"""The kind of an attachment, derived from its mime type."""


def new_id() -> str:
    """A fresh random id (a UUID4 string), for conversations."""
    return str(uuid.uuid4())


def new_message_id() -> str:
    """A fresh random message id: ``msg_`` and 24 hex digits (96 random bits)."""
    return f"msg_{uuid.uuid4().hex[:24]}"


def now_timestamp() -> str:
    """The current UTC time as ISO 8601 with milliseconds and ``Z``."""
    stamp = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
    return stamp.replace("+00:00", "Z")


@dataclass(frozen=True, kw_only=True)
class HistoryLimits:
    """Bounds a loaded history must respect; input beyond them is rejected, never truncated.

    The defaults admit very long real chats (a 100,000-message chain) while refusing input that
    would exhaust memory or time. Each limit is a whole number of at least 1 (`UserError`
    otherwise).
    """

    max_messages: int = 200_000
    """Most messages in one history."""
    max_depth: int = 200_000
    """Longest path from the root to a message, in messages."""
    max_message_bytes: int = 16 * 1024 * 1024
    """Most UTF-8 bytes of text (content, attachment URLs, metadata) in one message."""
    max_total_bytes: int = 256 * 1024 * 1024
    """Most bytes of one document (the file size when loading from disk)."""
    max_nesting: int = 64
    """Deepest nesting of JSON objects and arrays inside one message or top-level field."""

    def __post_init__(self) -> None:
        for name in _LIMIT_FIELDS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UserError(
                    f"HistoryLimits.{name} must be a whole number of at least 1, got {value!r}."
                )


_LIMIT_FIELDS = ("max_messages", "max_depth", "max_message_bytes", "max_total_bytes", "max_nesting")


DEFAULT_LIMITS = HistoryLimits()


@dataclass(frozen=True, kw_only=True)
class HistoryAttachment:
    """A file attached to a stored message, by URL: a ``data:`` URL, a file path or a link."""

    type: AttachmentType
    """``image``, ``video``, ``audio`` or ``file``."""
    url: str
    """Where the file is: a ``data:`` URL with its bytes, a local path, or another URL."""
    mime_type: str | None = None
    """The file's media type, e.g. ``image/png``."""
    name: str | None = None
    """A display name."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Fields this library does not know, kept for the round trip."""

    @classmethod
    def from_attachment(cls, attachment: Attachment) -> HistoryAttachment:
        """Store a neutral `Attachment`: a path or URL stays as it is, bytes become a ``data:`` URL.

        Args:
            attachment: The attachment sent with a message.
        """
        mime = attachment.mime_type or "application/octet-stream"
        if attachment.data is not None:
            url = f"data:{mime};base64,{base64.b64encode(attachment.data).decode('ascii')}"
        elif attachment.path is not None:
            url = attachment.path
        else:
            assert attachment.url is not None
            url = attachment.url
        return cls(type=attachment_type(mime), url=url, mime_type=mime, name=attachment.name)

    def to_attachment(self, policy: AttachmentPolicy | None = None) -> Attachment:
        """The neutral `Attachment` for a model request, as `policy` allows.

        ``data:`` URLs give bytes; ``file:`` URLs and plain paths give a path (checked against
        the policy's ``local_roots``); ``http(s):`` URLs give a remote attachment unless the
        policy neither passes URLs on nor downloads them.

        Args:
            policy: What the attachment may refer to; `AttachmentPolicy()` when not given.

        Raises:
            AttachmentError: When the policy refuses it, or for another URL scheme.
            UserError: For a malformed ``data:`` URL.
        """
        policy = policy or DEFAULT_POLICY
        if self.url.startswith("data:"):
            mime, data = _parse_data_url(self.url)
            return Attachment(data=data, mime_type=self.mime_type or mime, name=self.name)
        try:
            parts = urlsplit(self.url)
        except ValueError:
            raise AttachmentError(f"Attachment {self._label()!r} is not a valid URL.") from None
        scheme = parts.scheme.lower()
        if scheme == "file" or len(scheme) <= 1:  # no scheme, or a Windows drive letter
            path = unquote(parts.path) if scheme == "file" else self.url
            if scheme == "file" and parts.netloc not in ("", "localhost"):
                raise AttachmentError(
                    f"Attachment {self._label()!r} is a file: URL on another host."
                )
            real = policy.check_path(path)
            name = self.name if self.name is not None else os.path.basename(path)
            return Attachment(path=real, mime_type=self.mime_type, name=name)
        if scheme in REMOTE_SCHEMES:
            if not (policy.remote or policy.download):
                raise AttachmentError(
                    f"Attachment {self._label()!r} is a remote URL, and the attachment policy "
                    "neither passes URLs on nor downloads them."
                )
            return Attachment(url=self.url, mime_type=self.mime_type, name=self.name)
        raise AttachmentError(
            f"Attachment {self._label()!r} is a {scheme}: URL; glassagent sends data: URLs, "
            "local files and http(s) URLs only."
        )

    def _label(self) -> str:
        return self.name or self.url[:200]


def attachment_type(mime_type: str) -> AttachmentType:
    """The attachment kind for a mime type: ``image/*``, ``video/*``, ``audio/*``, else ``file``.

    Args:
        mime_type: A media type such as ``image/png``.
    """
    major = mime_type.partition("/")[0].lower()
    if major in ("image", "video", "audio"):
        return major  # type: ignore[return-value]
    return "file"


def _parse_data_url(url: str) -> tuple[str, bytes]:
    header, comma, payload = url[5:].partition(",")
    if not comma:
        raise UserError("A data: URL attachment has no ',' before its data.")
    mime, _, encoding = header.partition(";")
    try:
        if encoding == "base64":
            return mime or "application/octet-stream", base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise UserError(f"A data: URL attachment is not valid base64: {exc}") from None
    return mime or "text/plain", unquote(payload).encode("utf-8")


@dataclass(frozen=True, kw_only=True)
class HistoryToolCall:
    """A tool call stored with an assistant message."""

    tool_call_id: str
    """The call's id; the tool result's ``tool_call_id`` refers to it."""
    function_name: str
    """The tool the model called."""
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    """The arguments: a JSON object, or a string holding one (kept as it was read)."""
    provider_metadata: Mapping[str, Any] = field(default_factory=dict)
    """Opaque provider data (e.g. Gemini's thought signature), kept for the round trip."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Fields this library does not know, kept for the round trip."""

    @classmethod
    def from_tool_call(cls, call: ToolCall) -> HistoryToolCall:
        """Store a neutral `ToolCall`.

        Args:
            call: The call the model made.
        """
        return cls(
            tool_call_id=call.id,
            function_name=call.name,
            arguments=dict(call.input),
            provider_metadata=dict(call.provider_metadata),
        )

    def to_tool_call(self) -> ToolCall:
        """The neutral `ToolCall`; string arguments are parsed as JSON.

        Raises:
            UserError: When string arguments are not a JSON object.
        """
        arguments: Mapping[str, Any] | None
        if isinstance(self.arguments, str):
            arguments = parse_arguments(self.arguments)
            if arguments is None:
                raise UserError(f"Tool call {self.tool_call_id!r} has arguments that are not JSON.")
        else:
            arguments = self.arguments
        return ToolCall(
            self.tool_call_id, self.function_name, dict(arguments), dict(self.provider_metadata)
        )


def parse_arguments(text: str) -> dict[str, Any] | None:
    """The JSON object in `text`, or `None` when it holds something else."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


@dataclass(frozen=True, kw_only=True)
class HistoryMessage:
    """One message of a stored conversation tree."""

    id: str
    """Unique id of the message within its history."""
    role: Role
    """``system``, ``user``, ``assistant`` or ``tool``."""
    content: str = ""
    """The text (for a tool message: the tool's output)."""
    parent_id: str | None = None
    """The message this one answers or follows; `None` for the root."""
    created_at: str = field(default_factory=now_timestamp)
    """When it was written: ISO 8601 with milliseconds and ``Z``, kept as read."""
    status: MessageStatus = "completed"
    """``aborted`` when the message was cut short by an abort; ``unreadable`` for an
    assistant reply that could not be read as a tool call."""
    protocol: bool = False
    """Written by the agent's tool protocol (a correction after an unreadable reply), not by
    the user; stored as ``"protocol": true`` and never sent to the model in later turns."""
    summary_of: int | None = None
    """For a summary a `Summarize` context policy wrote: how many messages of the thread,
    from its start, it stands for (`Message.summary_of`); stored as ``"summary_of": n``."""
    pinned: bool = False
    """Never left out of a request by a context policy; stored as ``"pinned": true``."""
    attachments: tuple[HistoryAttachment, ...] = ()
    """Files sent with the message."""
    tool_calls: tuple[HistoryToolCall, ...] = ()
    """Tool calls of an assistant message."""
    tool_call_id: str | None = None
    """For a tool message: the id of the call it answers."""
    name: str | None = None
    """For a tool message: the tool that produced it."""
    is_error: bool = False
    """For a tool message: whether the output is an error report."""
    thinking: str | None = None
    """The model's visible reasoning that came with an assistant message."""
    provider_metadata: Mapping[str, Any] = field(default_factory=dict)
    """Opaque provider data, kept for the round trip."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Fields this library does not know, kept for the round trip."""

    @classmethod
    def from_message(
        cls,
        message: Message,
        *,
        id: str | None = None,
        parent_id: str | None = None,
        created_at: str | None = None,
    ) -> HistoryMessage:
        """Store a neutral `Message`.

        Args:
            message: The message.
            id: Its id; a fresh ``msg_<hex>`` id when not given.
            parent_id: Its parent's id.
            created_at: Its timestamp; now when not given.
        """
        return cls(
            id=id or new_message_id(),
            role=message.role,
            content=message.content,
            parent_id=parent_id,
            created_at=created_at or now_timestamp(),
            status=message.status,
            protocol=message.protocol,
            summary_of=message.summary_of,
            pinned=message.pinned,
            attachments=tuple(HistoryAttachment.from_attachment(a) for a in message.attachments),
            tool_calls=tuple(HistoryToolCall.from_tool_call(c) for c in message.tool_calls),
            tool_call_id=message.tool_call_id,
            name=message.name,
            is_error=message.is_error,
            thinking=message.thinking,
            provider_metadata=dict(message.provider_metadata),
        )

    def to_message(self, policy: AttachmentPolicy | None = None) -> Message:
        """The neutral `Message` a model client receives.

        Args:
            policy: What attachments may refer to; `AttachmentPolicy()` when not given.

        Raises:
            AttachmentError: When `policy` refuses an attachment (see
                `HistoryAttachment.to_attachment`).
            UserError: When an attachment or tool call is malformed.
        """
        return Message(
            role=self.role,
            content=self.content,
            tool_calls=tuple(c.to_tool_call() for c in self.tool_calls),
            tool_call_id=self.tool_call_id,
            name=self.name,
            is_error=self.is_error,
            attachments=tuple(a.to_attachment(policy) for a in self.attachments),
            thinking=self.thinking,
            status=self.status,
            provider_metadata=dict(self.provider_metadata),
            protocol=self.protocol,
            summary_of=self.summary_of,
            pinned=self.pinned,
        )
