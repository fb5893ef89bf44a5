"""`HistoryStore`: chats as JSON files in one directory, saved atomically, with conflict checks."""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import hashlib
import os
import re
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from time import monotonic, time
from typing import Any

from glassagent._core.attachments import DEFAULT_POLICY, AttachmentPolicy
from glassagent._core.errors import HistoryConflictError, UserError
from glassagent._history.files import read_bounded, revision_of, write_atomic
from glassagent._history.helpers import get_conversation_thread
from glassagent._history.merging import merge_into, unmergeable
from glassagent._history.model import DEFAULT_LIMITS, HistoryLimits, HistoryMessage, Version
from glassagent._history.tree import History

MAX_CHAT_ID_LENGTH = 128
"""The longest chat id a `HistoryStore` accepts."""

_CHAT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_NOT_IN_USER_ID = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")  # controls, lone surrogates
_SUFFIX = ".json"
_LOCK_NAME = ".glassagent-store.lock"
_TEMP_NAME = re.compile(r"\.(.+)\.json\.[a-z0-9_]{8}\.tmp")  # write_atomic's mkstemp names
_STALE_AFTER = 600.0  # seconds; an older temporary file is taken to belong to no save under way


def check_user_id(user: object) -> str:
    r"""Return `user` if every chat store can keep it as a user id.

    A user id is any string without control characters (``\x00``-``\x1f``,
    ``\x7f``-``\x9f``: NUL, newlines, escapes) and without lone surrogates, which no
    database column (nor a UTF-8 file) can hold; ``""`` is the default user.

    Raises:
        UserError: For anything else.
    """
    if not isinstance(user, str):
        raise UserError(f"A user id must be a string, got {type(user).__name__}.")
    if _NOT_IN_USER_ID.search(user):
        raise UserError(
            f"Invalid user id {user!r}: it must not contain control characters (such as NUL "
            "or a newline) or lone surrogates."
        )
    return user


def check_store_options(limits: object, attachment_policy: object) -> None:
    """Refuse `limits` and `attachment_policy` of the wrong type (each may be `None`).

    Raises:
        UserError: When one is neither `None` nor of its type.
    """
    if limits is not None and not isinstance(limits, HistoryLimits):
        raise UserError(f"`limits` must be a HistoryLimits or None, got {type(limits).__name__}.")
    if attachment_policy is not None and not isinstance(attachment_policy, AttachmentPolicy):
        raise UserError(
            "`attachment_policy` must be an AttachmentPolicy or None, "
            f"got {type(attachment_policy).__name__}."
        )


def user_directory(root: str | os.PathLike[str], user: str) -> Path:
    """Where `user`'s chats live under a store directory (`HistoryStore.for_user`).

    ``<root>/users/<the first 32 hex digits of the SHA-256 of the user id>``: any user id
    makes a safe directory name, and a user's chats are found only under their own id.

    Raises:
        UserError: For a user id with control characters (`check_user_id`).
    """
    digest = hashlib.sha256(check_user_id(user).encode("utf-8")).hexdigest()[:32]
    return Path(root) / "users" / digest


def conversation_thread(
    history: History | Mapping[str, Any],
    node: str | None,
    limits: HistoryLimits,
    attachment_policy: AttachmentPolicy,
) -> list[HistoryMessage]:
    """The thread of `history` at `node` (a `History`, or a standard dict read within `limits`).

    What `HistoryStore.get_conversation_thread` and `SQLHistoryStore`'s do.

    Raises:
        HistoryValidationError: For a dict that is not a valid history within `limits`.
        UserError: For anything else than a `History` or a dict, or an unknown `node`.
    """
    if isinstance(history, Mapping):
        history = History.from_dict(history, limits=limits, attachment_policy=attachment_policy)
    return get_conversation_thread(history, node)


def check_chat_id(chat_id: object) -> str:
    """Return `chat_id` if it can only name a file inside the store's directory.

    A chat id is 1 to 128 characters of letters, digits, ``.``, ``_`` and ``-``, starts with
    a letter or digit and never contains ``..``; so no separator, no NUL and no parent
    reference can reach outside the directory.

    Raises:
        UserError: For any other id.
    """
    if (
        not isinstance(chat_id, str)
        or len(chat_id) > MAX_CHAT_ID_LENGTH
        or not _CHAT_ID.fullmatch(chat_id)
        or ".." in chat_id
    ):
        raise UserError(
            f"Invalid chat id {chat_id!r}: use 1-{MAX_CHAT_ID_LENGTH} letters, digits, '.', '_' "
            "or '-', starting with a letter or digit, without '..'."
        )
    return chat_id


class HistoryStore:
    """Chats kept as ``<chat_id>.json`` files (version 2.0) in one directory.

    Saves are atomic (temporary file, fsync, rename), so a crash never leaves a half-written
    chat. Saves are also checked: a history remembers the revision it was loaded from, and
    saving it over a chat that another writer changed since raises `HistoryConflictError`
    instead of silently dropping that writer's turn. Reload, re-apply, and save again.

    Its methods block; their coroutine forms (`aload`, `asave`, `alist`, `adelete`, run in a
    worker thread) and `for_user` make it a `ChatStore`, as the invoke server uses it.

    A save killed mid-write (SIGKILL, power loss) leaves its temporary file,
    ``.<chat_id>.json.<random>.tmp``, behind. The store removes such files when it is opened,
    and when it saves (at most every ten minutes): only files of that name, only those older
    than ten minutes, and only while it holds the store's lock, so the temporary file of a
    save under way in another thread or process is never touched.

    Example:
        ```python
        store = HistoryStore("chats")
        history = store.load("team-standup") if "team-standup" in store else History()
        await agent.run("Summarise", history=history, append_to_history=True)
        store.save("team-standup", history)
        ```
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        limits: HistoryLimits | None = None,
        attachment_policy: AttachmentPolicy | None = None,
    ) -> None:
        """Open (and create if needed) a store directory.

        Args:
            directory: Where the chat files live.
            limits: Bounds applied when loading; `HistoryLimits()` when not given.
            attachment_policy: Given to every history loaded; `AttachmentPolicy()` when not
                given. Pass `AttachmentPolicy.safe()` when others can write the chats.

        Raises:
            UserError: When `directory` is not a path, or is a file or cannot be created, or
                `limits` or `attachment_policy` is of the wrong type.
        """
        if not isinstance(directory, str | os.PathLike):
            raise UserError(f"HistoryStore needs a directory path, got {type(directory).__name__}.")
        check_store_options(limits, attachment_policy)
        self.directory = Path(directory)
        """The directory holding the chat files."""
        self.limits = limits or DEFAULT_LIMITS
        """Bounds applied when loading."""
        self.attachment_policy = attachment_policy or DEFAULT_POLICY
        """The attachment policy given to every history loaded."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except (OSError, ValueError) as exc:  # a file there; no permission; a NUL in the path
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            if isinstance(exc, FileExistsError):
                reason = "it is a file, not a directory"
            raise UserError(
                f"Cannot use {str(self.directory)!r} as a chat store directory: {reason}."
            ) from None
        self._next_sweep = 0.0
        with contextlib.suppress(OSError), self._locked(wait=False) as held:
            if held:  # else a save is under way: the next save sweeps
                self._remove_stale_temp_files()

    def path(self, chat_id: str) -> Path:
        """The file that holds `chat_id`.

        Args:
            chat_id: A valid chat id.

        Raises:
            UserError: For an invalid chat id.
        """
        return self.directory / (check_chat_id(chat_id) + _SUFFIX)

    def __contains__(self, chat_id: object) -> bool:
        return self.path(check_chat_id(chat_id)).is_file()

    def list(self) -> list[str]:
        """The ids of every stored chat, sorted."""
        ids = []
        for entry in self.directory.iterdir():
            name = entry.name
            if name.endswith(_SUFFIX) and entry.is_file():
                with contextlib.suppress(UserError):
                    ids.append(check_chat_id(name[: -len(_SUFFIX)]))
        return sorted(ids)

    def load(self, chat_id: str) -> History:
        """Load and validate a chat; the history remembers its revision for `save`.

        Args:
            chat_id: The chat to load.

        Raises:
            UserError: For an invalid chat id, or when there is no such chat.
            HistoryValidationError: When the file is not a valid history.
        """
        history = self._load_if_any(chat_id)
        if history is None:
            raise UserError(f"There is no chat {chat_id!r} in {self.directory}.")
        return history

    def _load_if_any(self, chat_id: str) -> History | None:
        path = self.path(chat_id)
        try:
            data = read_bounded(path, self.limits)
        except FileNotFoundError:
            return None
        return History.from_json(data, limits=self.limits, attachment_policy=self.attachment_policy)

    def save(
        self, chat_id: str, history: History, *, version: Version = "2.0", merge: bool = False
    ) -> str:
        """Save a chat atomically, refusing to overwrite changes made since it was loaded.

        A history that was never stored (``revision`` `None`) may only create a new chat.
        With `merge`, a chat that changed is not a conflict: the messages of `history` it
        lacks are added to it instead (see `ChatStore.asave`).

        Args:
            chat_id: The chat to write.
            history: The conversation.
            version: ``"2.0"`` (the default) or ``"1"``.
            merge: Add the new messages to a chat that changed, rather than refuse.

        Returns:
            The new revision (also set on ``history.revision``, unless it was merged).

        Raises:
            HistoryConflictError: When the stored chat is not the revision `history` came from
                (with `merge`: when it lacks the message the new ones follow).
            HistoryValidationError: With `merge`, when the stored chat is not valid.
            UserError: For an invalid chat id.
        """
        path = self.path(chat_id)
        data = history.to_json(version)
        merged = False
        with self._locked():
            current = self._revision(path)
            if current != history.revision:
                if not merge:
                    raise HistoryConflictError(
                        f"Chat {chat_id!r} changed since this history was loaded (expected "
                        f"revision {_short(history.revision)}, found {_short(current)}); reload "
                        "it and apply the change again.",
                        chat_id=chat_id,
                        expected_revision=history.revision,
                        actual_revision=current,
                    )
                data, merged = self._merged(chat_id, history, current).to_json(version), True
            write_atomic(path, data)
            if monotonic() >= self._next_sweep:
                self._remove_stale_temp_files()
        revision = revision_of(data)
        if not merged:
            history.revision = revision
        return revision

    def _merged(self, chat_id: str, history: History, current: str | None) -> History:
        """The stored chat with `history`'s new messages added; call it holding the lock."""
        stored = self._load_if_any(chat_id)
        if stored is None:
            raise unmergeable(chat_id, history.revision, current)
        merge_into(stored, history, chat_id)
        return stored

    def delete(self, chat_id: str) -> None:
        """Delete a chat; deleting a chat that does not exist does nothing.

        Args:
            chat_id: The chat to delete.

        Raises:
            UserError: For an invalid chat id.
        """
        path = self.path(chat_id)
        with self._locked(), contextlib.suppress(FileNotFoundError):
            path.unlink()

    def get_conversation_thread(
        self, history: History | Mapping[str, Any], node: str | None = None
    ) -> builtins.list[HistoryMessage]:
        """The messages from the root to `node` (default: the current node) of `history`.

        The design documents' ``chat_manager.get_conversation_thread(history)``, for tools
        given this store as ``ctx.chat_manager``: the same as
        `glassagent.history.get_conversation_thread`, which this calls.

        Args:
            history: A `History`, or a standard history dict (version 1 or 2.0), which is
                validated within this store's limits first.
            node: The last message of the thread.

        Raises:
            HistoryValidationError: For a dict that is not a valid history.
            UserError: For anything else than a `History` or a dict, or an unknown `node`.
        """
        return conversation_thread(history, node, self.limits, self.attachment_policy)

    async def aload(self, chat_id: str, *, thread: bool = False) -> History | None:
        """Load and validate a chat in a worker thread; `None` when there is none.

        Args:
            chat_id: The chat to load.
            thread: Accepted for `ChatStore`: a file holds the whole chat, which is read.

        Raises:
            UserError: For an invalid chat id.
            HistoryValidationError: When the file is not a valid history.
        """
        return await asyncio.to_thread(self._load_if_any, chat_id)

    async def asave(
        self, chat_id: str, history: History, *, merge: bool = False, version: Version = "2.0"
    ) -> str:
        """`save` in a worker thread.

        Args:
            chat_id: The chat to write.
            history: The conversation.
            merge: Add the new messages to a chat that changed, rather than refuse.
            version: ``"2.0"`` (the default) or ``"1"``.

        Returns:
            The new revision (also set on ``history.revision``, unless it was merged).

        Raises:
            HistoryConflictError: When the stored chat is not the revision `history` came from
                (with `merge`: when it lacks the message the new ones follow).
            HistoryValidationError: With `merge`, when the stored chat is not valid.
            UserError: For an invalid chat id.
        """
        return await asyncio.to_thread(self.save, chat_id, history, version=version, merge=merge)

    async def alist(self) -> builtins.list[str]:
        """`list` in a worker thread: the ids of every stored chat, sorted."""
        return await asyncio.to_thread(self.list)

    async def adelete(self, chat_id: str) -> None:
        """`delete` in a worker thread.

        Args:
            chat_id: The chat to delete.

        Raises:
            UserError: For an invalid chat id.
        """
        await asyncio.to_thread(self.delete, chat_id)

    def for_user(
        self, user: str, *, attachment_policy: AttachmentPolicy | None = None
    ) -> HistoryStore:
        """The store of `user`'s chats: the directory `user_directory` names under this one.

        Args:
            user: Any user id without control characters.
            attachment_policy: Given to every history loaded; this store's when not given.

        Raises:
            UserError: For a user id with control characters (`check_user_id`).
        """
        return HistoryStore(
            user_directory(self.directory, user),
            limits=self.limits,
            attachment_policy=attachment_policy or self.attachment_policy,
        )

    def _revision(self, path: Path) -> str | None:
        try:
            with path.open("rb") as f:
                return revision_of(f.read())
        except FileNotFoundError:
            return None

    def _remove_stale_temp_files(self) -> None:
        """Remove what killed saves left behind; call it holding the lock. Never raises."""
        self._next_sweep = monotonic() + _STALE_AFTER
        oldest = time() - _STALE_AFTER
        with contextlib.suppress(OSError), os.scandir(self.directory) as entries:
            for entry in entries:
                match = _TEMP_NAME.fullmatch(entry.name)
                if match is None or not _is_chat_id(match[1]):
                    continue
                with contextlib.suppress(OSError):
                    if (
                        entry.is_file(follow_symlinks=False)
                        and entry.stat(follow_symlinks=False).st_mtime < oldest
                    ):
                        os.unlink(entry.path)

    @contextlib.contextmanager
    def _locked(self, *, wait: bool = True) -> Iterator[bool]:
        """Serialise check-and-write across threads and processes (POSIX advisory lock).

        Yields whether the lock is held: always when waiting; without waiting, `False` when
        another thread or process holds it.
        """
        fd = os.open(self.directory / _LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            if sys.platform != "win32":
                import fcntl

                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
                except BlockingIOError:
                    yield False
                    return
            yield True
        finally:
            os.close(fd)  # closing releases the lock

    def __repr__(self) -> str:
        return f"HistoryStore({str(self.directory)!r})"


def _is_chat_id(name: str) -> bool:
    try:
        check_chat_id(name)
    except UserError:
        return False
    return True


def _short(revision: str | None) -> str:
    return "none (a new chat)" if revision is None else revision[:12]
