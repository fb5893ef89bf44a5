"""File tools' work: bounded reads with line numbers, atomic writes, exact edits."""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path
from typing import BinaryIO

from glassagent._core.errors import ToolError

_SNIFF_BYTES = 8192  # a NUL byte among the first ones marks a binary file
_CHUNK = 1 << 16
MAX_EDIT_BYTES = 10_000_000
"""Largest file `edit_file` changes (it holds the whole file in memory)."""


def _regular(path: Path, shown: str) -> os.stat_result:
    """Stat `path`, refusing what is missing, a folder or not a regular file (a FIFO, ...)."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise ToolError(f"{shown!r} does not exist.") from None
    except OSError as exc:
        raise ToolError(f"{shown!r} cannot be read: {exc.strerror or exc}.") from None
    if stat.S_ISDIR(info.st_mode):
        raise ToolError(f"{shown!r} is a folder, not a file; see its entries with list_files.")
    if not stat.S_ISREG(info.st_mode):
        raise ToolError(f"{shown!r} is not a regular file.")
    return info


def read_lines(
    path: Path, shown: str, offset: int | None, limit: int | None, max_bytes: int
) -> str:
    """Lines of a text file, numbered from 1, reading at most `max_bytes` of it after `offset`."""
    size = _regular(path, shown).st_size
    start = offset or 1
    try:
        with path.open("rb") as f:
            if b"\0" in f.read(_SNIFF_BYTES):
                return f"{shown!r} is a binary file ({size} bytes); its content is not shown."
            f.seek(0)
            before = _skip_lines(f, start - 1)
            data = f.read(max_bytes + 1)
    except OSError as exc:
        raise ToolError(f"{shown!r} cannot be read: {exc.strerror or exc}.") from None
    if not data:
        if size == 0:
            return f"{shown!r} is empty."
        return f"{shown!r} has only {_lines(before)}; there is nothing at offset={start}."
    cut = len(data) > max_bytes
    data = data[:max_bytes]
    last_end = data.rfind(b"\n")
    if cut and last_end >= 0:
        data = data[: last_end + 1]  # end at a line's end, the rest comes with the next read
    lines = data.decode("utf-8", errors="replace").split("\n")
    if data.endswith(b"\n"):
        lines.pop()
    more = cut
    if limit is not None and len(lines) > limit:
        lines, more = lines[:limit], True
    numbered = [f"{start + i:>6}\t{line.rstrip(chr(13))}" for i, line in enumerate(lines)]
    end = start + len(lines) - 1
    if cut and last_end < 0:
        numbered.append(
            f"[line {start} is longer than {max_bytes} bytes: only its start is shown; "
            f"read on with offset={end + 1}]"
        )
    elif more:
        numbered.append(
            f"[shown: lines {start}-{end} of {shown!r} ({size} bytes); the file goes on: "
            f"read on with offset={end + 1}]"
        )
    return "\n".join(numbered)


def _lines(count: int) -> str:
    return f"{count} line" if count == 1 else f"{count} lines"


def _skip_lines(f: BinaryIO, count: int) -> int:
    """Move past `count` lines in chunks (memory stays bounded); return how many there were."""
    skipped = 0
    chunk = b""
    while skipped < count:
        previous, chunk = chunk, f.read(_CHUNK)
        if not chunk:  # the end: a last line without a newline counts too
            return skipped + (1 if previous and not previous.endswith(b"\n") else 0)
        position = -1
        while skipped < count:
            position = chunk.find(b"\n", position + 1)
            if position < 0:
                break
            skipped += 1
        if skipped == count:
            f.seek(position + 1 - len(chunk), os.SEEK_CUR)
    return skipped


def write_text(path: Path, shown: str, content: str) -> str:
    """Replace (or create) the file at `path` with `content`, atomically; folders are made."""
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError:
        raise ToolError("`content` is not valid Unicode text (it has a lone surrogate).") from None
    if path.is_dir():
        raise ToolError(f"{shown!r} is a folder; give the path of a file.")
    existed = path.exists()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, data)
    except OSError as exc:
        raise ToolError(f"{shown!r} cannot be written: {exc.strerror or exc}.") from None
    verb = "Replaced" if existed else "Created"
    return f"{verb} {shown!r}: {len(data)} bytes, {_lines(count_lines(content))}."


def count_lines(text: str) -> int:
    """How many lines `text` has; a last line without a newline counts."""
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to a temporary file next to `path`, then rename it over `path`.

    A reader sees the old file or the new one, never a part. The new file keeps the mode of
    the one it replaces (a script stays executable); a new file gets the usual mode (0o666
    less the umask). On any failure the temporary file is removed.
    """
    mode = stat.S_IMODE(path.stat().st_mode) if path.exists() else None
    temp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if mode is not None:
            os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def apply_edit(path: Path, shown: str, old: str, new: str) -> str:
    """Replace the one occurrence of `old` in the file at `path` with `new`, atomically."""
    text, line = edited(path, shown, old, new)
    try:
        write_atomic(path, text.encode("utf-8"))
    except UnicodeEncodeError:
        raise ToolError("`new` is not valid Unicode text (it has a lone surrogate).") from None
    except OSError as exc:
        raise ToolError(f"{shown!r} cannot be written: {exc.strerror or exc}.") from None
    return (
        f"Edited {shown!r} at line {line}: {_lines(count_lines(old))} replaced by "
        f"{_lines(count_lines(new))}."
    )


def edited(path: Path, shown: str, old: str, new: str) -> tuple[str, int]:
    """The file's text with its one occurrence of `old` replaced, and the line where it was.

    Raises `ToolError` unless `old` occurs exactly once in a UTF-8 text file.
    """
    if not old:
        raise ToolError("`old` is empty; give the exact text to replace.")
    if old == new:
        raise ToolError("`old` and `new` are the same; there is nothing to change.")
    text = _read_text(path, shown)
    count = text.count(old)
    if count == 0:
        raise ToolError(
            f"`old` was not found in {shown!r}; it must match the file exactly, spaces, "
            "indentation and line breaks included (read the file again to copy it)."
        )
    if count > 1:
        raise ToolError(
            f"`old` was found {count} times in {shown!r}; it must occur exactly once: include "
            "more of the surrounding lines to make it unique."
        )
    at = text.index(old)
    return text[:at] + new + text[at + len(old) :], text.count("\n", 0, at) + 1


def _read_text(path: Path, shown: str) -> str:
    """The whole file as UTF-8 text, refusing large, binary and non-UTF-8 files."""
    size = _regular(path, shown).st_size
    if size > MAX_EDIT_BYTES:
        raise ToolError(
            f"{shown!r} is too large to edit ({size} bytes, the limit is {MAX_EDIT_BYTES})."
        )
    try:
        with path.open("rb") as f:
            data = f.read(MAX_EDIT_BYTES + 1)
    except OSError as exc:
        raise ToolError(f"{shown!r} cannot be read: {exc.strerror or exc}.") from None
    if b"\0" in data[:_SNIFF_BYTES]:
        raise ToolError(f"{shown!r} is a binary file; it cannot be edited as text.")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"{shown!r} is not UTF-8 text; it cannot be edited.") from None
