"""File tools' work: bounded reads with line numbers, atomic writes, exact edits."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from typing import BinaryIO

from glassagent._core.errors import ToolError
from glassagent._workspace.paths import Confinement, FileEntry

_SNIFF_BYTES = 8192  # a NUL byte among the first ones marks a binary file
_CHUNK = 1 << 16
MAX_EDIT_BYTES = 10_000_000
"""Largest file `edit_file` changes (it holds the whole file in memory)."""


@contextlib.contextmanager
def _opened(entry: FileEntry, shown: str, verb: str) -> Iterator[tuple[BinaryIO, os.stat_result]]:
    """The file open for reading, and its status; refused unless it is a lone regular file.

    `verb` says what would be done with it ("read", "edited"), for the hard-link message.
    """
    try:
        fd = entry.open()
    except FileNotFoundError:
        raise ToolError(f"{shown!r} does not exist.") from None
    except IsADirectoryError:
        raise _a_folder(shown) from None
    except OSError as exc:
        raise ToolError(f"{shown!r} cannot be read: {exc.strerror or exc}.") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise _a_folder(shown)
        if not stat.S_ISREG(info.st_mode):
            raise ToolError(f"{shown!r} is not a regular file.")
        _refuse_hard_links(info, shown, verb)
        f = open(fd, "rb")  # noqa: SIM115 (closed below)
    except BaseException:
        os.close(fd)
        raise
    with f:
        yield f, info


def _a_folder(shown: str) -> ToolError:
    return ToolError(f"{shown!r} is a folder, not a file; see its entries with list_files.")


def _refuse_hard_links(info: os.stat_result, shown: str, verb: str) -> None:
    """Refuse a regular file with several names: one of them may be outside the workspace."""
    if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
        raise ToolError(
            f"{shown!r} has {info.st_nlink} hard links (names of the same file); one may be "
            f"outside the workspace, so it is not {verb}."
        )


def read_lines(
    confinement: Confinement, shown: str, offset: int | None, limit: int | None, max_bytes: int
) -> str:
    """Lines of a text file, numbered from 1, reading at most `max_bytes` of it after `offset`.

    `shown` is the path as the model gave it.
    """
    start = offset or 1
    with confinement.file(shown) as entry, _opened(entry, shown, "read") as (f, info):
        size = info.st_size
        try:
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


def write_text(confinement: Confinement, shown: str, content: str) -> str:
    """Replace (or create) the file `shown` with `content`, atomically; folders are made."""
    data = _encoded(content, "content")
    with confinement.file(shown, make_folders=True) as entry:
        try:
            info = entry.stat()
        except IsADirectoryError:
            raise _a_folder_to_write(shown) from None
        except OSError as exc:
            raise ToolError(f"{shown!r} cannot be written: {exc.strerror or exc}.") from None
        if info is not None:
            if stat.S_ISDIR(info.st_mode):
                raise _a_folder_to_write(shown)
            _refuse_hard_links(info, shown, "replaced")
        _replace(entry, shown, data, None if info is None else stat.S_IMODE(info.st_mode))
    verb = "Created" if info is None else "Replaced"
    return f"{verb} {shown!r}: {len(data)} bytes, {_lines(count_lines(content))}."


def _a_folder_to_write(shown: str) -> ToolError:
    return ToolError(f"{shown!r} is a folder; give the path of a file.")


def _encoded(text: str, argument: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise ToolError(
            f"`{argument}` is not valid Unicode text (it has a lone surrogate)."
        ) from None


def _replace(entry: FileEntry, shown: str, data: bytes, mode: int | None) -> None:
    """Write `data` to a temporary file next to the entry's, then rename it over it.

    A reader sees the old file or the new one, never a part. The new file keeps the mode of
    the one it replaces, `mode` (a script stays executable); a new file gets the usual mode
    (0o666 less the umask). On any failure the temporary file is removed.
    """
    try:
        entry.replace(data, mode)
    except OSError as exc:
        raise ToolError(f"{shown!r} cannot be written: {exc.strerror or exc}.") from None


def count_lines(text: str) -> int:
    """How many lines `text` has; a last line without a newline counts."""
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def apply_edit(confinement: Confinement, shown: str, old: str, new: str) -> str:
    """Replace the one occurrence of `old` in the file `shown` with `new`, atomically."""
    _check_edit(old, new)
    with confinement.file(shown) as entry:
        text, line, mode = _edited(entry, shown, old, new)
        _replace(entry, shown, _encoded(text, "new"), mode)
    return (
        f"Edited {shown!r} at line {line}: {_lines(count_lines(old))} replaced by "
        f"{_lines(count_lines(new))}."
    )


def edited(confinement: Confinement, shown: str, old: str, new: str) -> tuple[str, int]:
    """The file's text with its one occurrence of `old` replaced, and the line where it was.

    Raises `ToolError` unless `old` occurs exactly once in a UTF-8 text file.
    """
    _check_edit(old, new)
    with confinement.file(shown) as entry:
        text, line, _ = _edited(entry, shown, old, new)
    return text, line


def _check_edit(old: str, new: str) -> None:
    if not old:
        raise ToolError("`old` is empty; give the exact text to replace.")
    if old == new:
        raise ToolError("`old` and `new` are the same; there is nothing to change.")


def _edited(entry: FileEntry, shown: str, old: str, new: str) -> tuple[str, int, int]:
    """The edited text, the line of the change and the file's mode."""
    text, mode = _read_text(entry, shown)
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
    return text[:at] + new + text[at + len(old) :], text.count("\n", 0, at) + 1, mode


def _read_text(entry: FileEntry, shown: str) -> tuple[str, int]:
    """The whole file as UTF-8 text, and its mode; large, binary, non-UTF-8 files refused."""
    with _opened(entry, shown, "edited") as (f, info):
        size = info.st_size
        if size > MAX_EDIT_BYTES:
            raise ToolError(
                f"{shown!r} is too large to edit ({size} bytes, the limit is {MAX_EDIT_BYTES})."
            )
        try:
            data = f.read(MAX_EDIT_BYTES + 1)
        except OSError as exc:
            raise ToolError(f"{shown!r} cannot be read: {exc.strerror or exc}.") from None
        mode = stat.S_IMODE(info.st_mode)
    if b"\0" in data[:_SNIFF_BYTES]:
        raise ToolError(f"{shown!r} is a binary file; it cannot be edited as text.")
    try:
        return data.decode("utf-8"), mode
    except UnicodeDecodeError:
        raise ToolError(f"{shown!r} is not UTF-8 text; it cannot be edited.") from None
