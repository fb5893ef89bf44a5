"""`History`: a conversation kept as a tree of messages, so edits and regenerations branch."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from glassagent._core.attachments import DEFAULT_POLICY, AttachmentPolicy
from glassagent._core.errors import UserError
from glassagent._core.messages import Message
from glassagent._history import formats
from glassagent._history.files import read_bounded, revision_of, write_atomic
from glassagent._history.model import (
    DEFAULT_LIMITS,
    HistoryLimits,
    HistoryMessage,
    Version,
    new_id,
    now_timestamp,
)
from glassagent._history.validate import is_timestamp, parse


class History:
    """A conversation as a tree: every message has one parent; the root has none.

    The *thread* of a message is the path from the root down to it: what the model sees when
    the conversation continues from there. `current_node` marks the thread in use; `append`
    adds below it and moves it. Appending below a message that already has children starts a
    new branch beside them, so an edited question or a regenerated answer keeps the old one.

    Example:
        ```python
        history = History(title="Demo")
        question = history.append(Message(role="user", content="Hi"))
        history.append(Message(role="assistant", content="Hello!"))
        history.branch(question)  # regenerate the answer: the next append is a sibling
        ```
    """

    def __init__(
        self,
        *,
        conversation_id: str | None = None,
        title: str | None = None,
        model: str | None = None,
        platform: str | None = None,
        attachment_policy: AttachmentPolicy | None = None,
    ) -> None:
        """Create an empty history.

        Args:
            conversation_id: The conversation's id; a fresh UUID when not given.
            title: A display title.
            model: The model the conversation is held with.
            platform: The application or provider that keeps it.
            attachment_policy: What attachments may refer to when the history becomes model
                messages; `AttachmentPolicy()` when not given.
        """
        created = now_timestamp()
        self.conversation_id: str = conversation_id or new_id()
        """The conversation's id."""
        self.title: str | None = title
        """A display title."""
        self.model: str | None = model
        """The model the conversation is held with."""
        self.platform: str | None = platform
        """The application or provider that keeps the conversation."""
        self.created_at: str | None = created
        """When the conversation started (ISO 8601)."""
        self.updated_at: str | None = created
        """When a message was last appended (ISO 8601)."""
        self.active_tools: list[Any] = []
        """Tools the application had enabled, as stored (opaque to this library)."""
        self.active_supporters: list[Any] = []
        """Supporting agents the application had enabled, as stored (opaque)."""
        self.extra: dict[str, Any] = {}
        """Top-level fields this library does not know, kept for the round trip."""
        self.revision: str | None = None
        """The stored revision this history was loaded from or last saved as; `None` if new."""
        self.attachment_policy: AttachmentPolicy = attachment_policy or DEFAULT_POLICY
        """What attachments may make `to_messages` (and so an agent run) read or fetch."""
        self._messages: dict[str, HistoryMessage] = {}
        self._children: dict[str, list[str]] = {}
        self._depth: dict[str, int] = {}
        self._thread: list[HistoryMessage] = []  # the last thread extracted, root first
        self._root: str | None = None
        self._current: str | None = None
        self._mapping_extra: dict[str, dict[str, Any]] = {}
        self._run_source: dict[str, str | None] = {}  # tool message -> what its tool run follows
        self._call_ids: dict[str, frozenset[str]] = {}  # assistant message -> its calls' ids

    # ---- reading the tree -------------------------------------------------------------

    @property
    def messages(self) -> Mapping[str, HistoryMessage]:
        """Every message by id, in the order they were added (read-only)."""
        return MappingProxyType(self._messages)

    @property
    def root_id(self) -> str | None:
        """The first message's id; `None` while the history is empty."""
        return self._root

    @property
    def current_node(self) -> str | None:
        """The message the conversation continues from; `None` while empty."""
        return self._current

    def __len__(self) -> int:
        return len(self._messages)

    def __contains__(self, message_id: object) -> bool:
        return message_id in self._messages

    def __getitem__(self, message_id: str) -> HistoryMessage:
        return self._messages[self._require(message_id)]

    def thread(self, node: str | None = None) -> list[HistoryMessage]:
        """The messages from the root down to `node` (default: the current node).

        Walks parent links without recursion. The last thread extracted (after loading: the
        current one) is remembered, so asking again after an append, or for a sibling branch,
        walks only the part that differs.

        Args:
            node: The last message of the thread.

        Raises:
            UserError: When `node` is not in the history.
        """
        messages, cached = self._messages, self._thread
        node_id = self._current if node is None else self._require(node)
        if node_id is None:
            return []
        walked: list[HistoryMessage] = []
        level = self._depth[node_id]  # falls by one with each step up; -1 above the root
        step: str | None = node_id
        add, known = walked.append, len(cached)
        while level >= known:  # below the remembered thread: the plain walk
            message = messages[step]  # type: ignore[index]  # None only when level is -1
            add(message)
            step = message.parent_id
            level -= 1
        while level >= 0 and cached[level].id != step:  # beside it: walk up to where they meet
            message = messages[step]  # type: ignore[index]
            walked.append(message)
            step = message.parent_id
            level -= 1
        walked.reverse()
        shared = level + 1
        if shared < len(cached):
            del cached[shared:]
        cached.extend(walked)
        return cached[:]

    def to_messages(self, node: str | None = None) -> list[Message]:
        """The neutral `Message`s of a thread, ready for a model client.

        Attachments are checked against `attachment_policy` here, before anything could be
        read: a local path outside its roots, or a URL it does not allow, is refused. The
        tool protocol's own traffic of earlier turns is left out: replies marked
        ``unreadable`` and the ``protocol`` corrections that answered them stay in the
        history (see `thread`) but are not sent again. Every other message is returned, also
        the summaries a `Summarize` context policy wrote (``system`` messages with
        `Message.summary_of` set): the agent's context policy is what sends a summary in place
        of the messages it covers (see "Long conversations").

        Args:
            node: The last message of the thread (default: the current node).

        Raises:
            AttachmentError: When the attachment policy refuses an attachment of the thread.
            UserError: When `node` is unknown, or an attachment or tool call is malformed.
        """
        policy = self.attachment_policy
        return [
            message.to_message(policy)
            for message in self.thread(node)
            if not message.protocol and message.status != "unreadable"
        ]

    def children(self, message_id: str) -> tuple[str, ...]:
        """The ids of the messages that follow `message_id`, oldest first.

        Args:
            message_id: A message of this history.
        """
        return tuple(self._children[self._require(message_id)])

    def siblings(self, message_id: str) -> tuple[str, ...]:
        """The other children of `message_id`'s parent (the alternative branches), oldest first.

        Args:
            message_id: A message of this history.
        """
        parent = self._messages[self._require(message_id)].parent_id
        if parent is None:
            return ()
        return tuple(c for c in self._children[parent] if c != message_id)

    def leaves(self) -> tuple[str, ...]:
        """The ids of the messages without children: the ends of every branch."""
        return tuple(i for i, kids in self._children.items() if not kids)

    # ---- changing the tree ------------------------------------------------------------

    def append(self, message: Message | HistoryMessage, parent: str | None = None) -> str:
        """Add a message below `parent` (default: the current node) and make it current.

        A neutral `Message` gets a fresh id and the current time. A `HistoryMessage` keeps
        its id, timestamp and extra fields; its ``parent_id`` is replaced by the parent chosen
        here.

        Args:
            message: The message to add.
            parent: The message it follows; the current node when not given.

        Returns:
            The new message's id.

        Raises:
            UserError: On an unknown parent, a duplicate id, or a tool message that answers
                no call of the assistant message it follows.
        """
        parent_id = self._current if parent is None else self._require(parent)
        if isinstance(message, HistoryMessage):
            if not message.id or message.id in self._messages:
                raise UserError(f"The history already has a message with id {message.id!r}.")
            if not is_timestamp(message.created_at):
                raise UserError(f"{message.created_at!r} is not an ISO 8601 timestamp.")
            stored = replace(message, parent_id=parent_id)
        elif isinstance(message, Message):
            stored = HistoryMessage.from_message(message, parent_id=parent_id)
        else:
            raise UserError(f"Append a Message or HistoryMessage, not {type(message).__name__}.")
        if stored.role == "tool":
            self._run_source[stored.id] = self._check_answers(stored)
        self._messages[stored.id] = stored
        self._children[stored.id] = []
        self._depth[stored.id] = 0 if parent_id is None else self._depth[parent_id] + 1
        if parent_id is None:
            self._root = stored.id
        else:
            self._children[parent_id].append(stored.id)
        self._current = stored.id
        self.updated_at = now_timestamp()
        return stored.id

    def branch(self, from_id: str) -> None:
        """Continue from an earlier message: the next `append` starts a branch below it.

        To edit a question, branch from the question's parent and append the new question;
        to regenerate an answer, branch from its question and run again. Old branches stay.

        Args:
            from_id: The message the new branch follows.
        """
        self._current = self._require(from_id)

    def switch(self, node: str) -> None:
        """Make `node` the current node, e.g. to show another branch's thread.

        Args:
            node: Any message of this history (usually a leaf).
        """
        self._current = self._require(node)

    def _require(self, message_id: str) -> str:
        if message_id not in self._messages:
            raise UserError(f"The history has no message {message_id!r}.")
        return message_id

    def _check_answers(self, message: HistoryMessage) -> str:
        """Check that a tool message answers a call of the message its tool run follows.

        Returns that message's id. Both look-ups are remembered (messages never change), so
        appending n results below one assistant message costs O(n), not O(n²).
        """
        source_id = self._run_source_of(message.parent_id)
        source = self._messages[source_id] if source_id is not None else None
        if (
            message.tool_call_id is None
            or source is None
            or source.role != "assistant"
            or message.tool_call_id not in self._call_ids_of(source)
        ):
            raise UserError(
                f"A tool message answering {message.tool_call_id!r} must follow the assistant "
                "message that made that call (or other results of it)."
            )
        return source.id

    def _run_source_of(self, node: str | None) -> str | None:
        """The first message above `node`, or `node` itself, that is not a tool message."""
        messages, known = self._messages, self._run_source
        walked = []
        while node is not None and node not in known and messages[node].role == "tool":
            walked.append(node)  # a tool run loaded from a file: walked once, then known
            node = messages[node].parent_id
        source = known.get(node, node) if node is not None else None
        for step in walked:
            known[step] = source
        return source

    def _call_ids_of(self, message: HistoryMessage) -> frozenset[str]:
        ids = self._call_ids.get(message.id)
        if ids is None:
            ids = self._call_ids[message.id] = frozenset(c.tool_call_id for c in message.tool_calls)
        return ids

    # ---- documents and files ----------------------------------------------------------

    @classmethod
    def from_dict(
        cls,
        data: Any,
        *,
        limits: HistoryLimits | None = None,
        attachment_policy: AttachmentPolicy | None = None,
    ) -> History:
        """Build a history from a version 1 or 2.0 document, validating everything.

        Args:
            data: The parsed JSON document.
            limits: Bounds on size and shape; `HistoryLimits()` when not given.
            attachment_policy: What its attachments may refer to when it becomes model
                messages; `AttachmentPolicy()` (any local file) when not given. Pass
                `AttachmentPolicy.safe()` for a document from someone else.

        Raises:
            HistoryValidationError: Listing every problem, whatever the input.
        """
        parsed = parse(data, limits or DEFAULT_LIMITS)
        history = cls.__new__(cls)
        for name, value in parsed.meta.items():
            setattr(history, name, value)
        history.extra = parsed.extra
        history.revision = None
        history.attachment_policy = attachment_policy or DEFAULT_POLICY
        history._messages = parsed.messages
        history._children = parsed.children
        history._depth = parsed.depths
        history._thread = []
        history._root = next((i for i, m in parsed.messages.items() if m.parent_id is None), None)
        history._current = parsed.current_node
        history._mapping_extra = parsed.mapping_extra
        history._run_source = {}
        history._call_ids = {}
        history.thread()  # remember the current thread: the context a run asks for first
        return history

    def to_dict(self, version: Version = "2.0") -> dict[str, Any]:
        """The history as a JSON-ready document.

        Args:
            version: ``"2.0"`` (the default) or ``"1"``.
        """
        meta = {
            "conversation_id": self.conversation_id,
            "title": self.title,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "model": self.model,
            "platform": self.platform,
            "active_tools": self.active_tools,
            "active_supporters": self.active_supporters,
        }
        return formats.document(
            version,
            meta=meta,
            messages=self._messages,
            children=self._children,
            current_node=self._current,
            root_id=self._root,
            mapping_extra=self._mapping_extra,
            extra=self.extra,
        )

    def to_json(self, version: Version = "2.0") -> bytes:
        """The history as UTF-8 JSON bytes, as `save` writes them.

        Args:
            version: ``"2.0"`` (the default) or ``"1"``.

        Raises:
            UserError: When metadata or extra fields hold values that are not JSON.
        """
        return formats.encode(self.to_dict(version))

    @classmethod
    def from_json(
        cls,
        raw: bytes | str,
        *,
        limits: HistoryLimits | None = None,
        attachment_policy: AttachmentPolicy | None = None,
    ) -> History:
        """Parse and validate a JSON document of either version.

        Args:
            raw: The document's bytes (UTF-8) or text.
            limits: Bounds on size and shape; `HistoryLimits()` when not given.
            attachment_policy: What its attachments may refer to (see `from_dict`).

        Raises:
            HistoryValidationError: When it is not valid JSON or not a valid history.
        """
        limits = limits or DEFAULT_LIMITS
        data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
        document = formats.decode(data, limits)
        history = cls.from_dict(document, limits=limits, attachment_policy=attachment_policy)
        history.revision = revision_of(data)
        return history

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        *,
        limits: HistoryLimits | None = None,
        attachment_policy: AttachmentPolicy | None = None,
    ) -> History:
        """Read and validate a history file; an oversized file is refused before it is read.

        Args:
            path: The JSON file.
            limits: Bounds on size and shape; `HistoryLimits()` when not given.
            attachment_policy: What its attachments may refer to (see `from_dict`).

        Raises:
            HistoryValidationError: When the file is not a valid history.
            OSError: When the file cannot be read.
        """
        limits = limits or DEFAULT_LIMITS
        raw = read_bounded(Path(path), limits)
        return cls.from_json(raw, limits=limits, attachment_policy=attachment_policy)

    def save(self, path: str | os.PathLike[str], *, version: Version = "2.0") -> None:
        """Write the history atomically: a crash leaves the old file or the new, never half.

        Args:
            path: The JSON file to write.
            version: ``"2.0"`` (the default) or ``"1"``.
        """
        data = self.to_json(version)
        write_atomic(Path(path), data)
        self.revision = revision_of(data)

    def __repr__(self) -> str:
        return (
            f"History(conversation_id={self.conversation_id!r}, messages={len(self)}, "
            f"current_node={self._current!r})"
        )
