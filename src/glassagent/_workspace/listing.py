"""`list_files`: the entries under a folder, bounded, with tool folders left out."""

from __future__ import annotations

import contextlib
import fnmatch
import os
from collections import deque
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TypeAlias

from glassagent._workspace.paths import READ_FLAGS, Confinement

MAX_ENTRIES = 500
"""Most entries one listing shows."""

_MAX_SCANNED = 100_000  # entries looked at before the count of those left out becomes a bound

SKIPPED_FOLDERS = frozenset(
    {
        ".bzr",
        ".git",
        ".hg",
        ".mypy_cache",
        ".nox",
        ".pytest_cache",
        ".ruff_cache",
        ".svn",
        ".tox",
        ".venv",
        "__pycache__",
        "node_modules",
        "venv",
    }
)
"""Folders a listing does not go into: version control, caches, environments, packages."""

_FOLDER_FLAGS = READ_FLAGS | getattr(os, "O_DIRECTORY", 0)  # a folder to scan, not a link


def list_entries(confinement: Confinement, shown: str, pattern: str | None) -> str:
    """List the entries under the folder `shown` (recursively) as paths from the root.

    `shown` is the folder as the model named it.
    """
    with confinement.folder(shown) as (relative, where):
        tree = _tree(where) if isinstance(where, int) else _tree_by_path(where)
        with contextlib.closing(tree):
            entries, complete = _scan(tree, _prefix(relative), pattern)
    if not entries:
        if pattern is None:
            return f"{shown!r} is empty."
        return f"Nothing under {shown!r} matches {pattern!r}."
    if len(entries) <= MAX_ENTRIES:
        return "\n".join(sorted(entries, key=_tree_order))
    # The shallowest entries first, so that a cut listing still shows the overview.
    kept = sorted(entries, key=lambda e: (e.rstrip("/").count("/"), _tree_order(e)))
    kept = sorted(kept[:MAX_ENTRIES], key=_tree_order)
    left_out = len(entries) - MAX_ENTRIES
    count = f"{left_out}" if complete else f"at least {left_out}"
    note = (
        f"[{count} more entries not shown (the deepest ones); list a subfolder or use a "
        "pattern to see them]"
    )
    return "\n".join([*kept, note])


# (the path under the listed folder, ending with "/" or empty; its folders; its other entries)
# The consumer may remove folders from the list: they are not gone into.
Level: TypeAlias = tuple[str, list[str], list[str]]


def _scan(tree: Iterator[Level], base: str, pattern: str | None) -> tuple[list[str], bool]:
    """Entries of `tree` matching `pattern`, as `base` + their path; False when cut short."""
    entries: list[str] = []
    scanned = 0
    for under, folders, files in tree:
        folders[:] = [f for f in folders if f not in SKIPPED_FOLDERS]
        # symbolic links to folders are listed with the folders, but not followed
        for names, mark in ((folders, "/"), (files, "")):
            for name in names:
                if _matches(pattern, name, f"{under}{name}"):
                    entries.append(f"{base}{under}{name}{mark}")
        scanned += len(folders) + len(files)
        if scanned > _MAX_SCANNED:
            return entries, False
    return entries, True


def _tree(top: int) -> Generator[Level, None, None]:
    """The levels under the folder descriptor `top`, each folder opened through its parent's.

    A folder is opened with ``O_NOFOLLOW``: a symbolic link (or a folder swapped for one) is
    never gone through. As many descriptors are open as the walk is deep.
    """
    stack: list[tuple[int, str, deque[str]]] = []
    try:
        fd, under = top, ""
        while fd >= 0:
            folders, files = _read_folder(fd)
            pending: deque[str] = deque()
            stack.append((fd, under, pending))
            yield under, folders, files
            pending.extend(folders)
            fd = -1
            while stack and fd < 0:
                parent, parent_under, names = stack[-1]
                if not names:
                    stack.pop()
                    if parent != top:
                        os.close(parent)
                    continue
                name = names.popleft()
                with contextlib.suppress(OSError):  # a link, gone, or not readable: skipped
                    fd = os.open(name, _FOLDER_FLAGS, dir_fd=parent)
                    under = f"{parent_under}{name}/"
    finally:
        for fd, _, _ in stack:
            if fd != top:
                os.close(fd)


def _read_folder(fd: int) -> tuple[list[str], list[str]]:
    """The folders (symbolic links to folders included) and other entries of a folder."""
    folders: list[str] = []
    files: list[str] = []
    with contextlib.suppress(OSError), os.scandir(fd) as found:
        for entry in found:
            try:
                is_folder = entry.is_dir()
            except OSError:
                is_folder = False
            (folders if is_folder else files).append(entry.name)
    return folders, files


def _tree_by_path(folder: Path) -> Generator[Level, None, None]:
    """The levels under `folder` by name, where there are no folder descriptors."""
    for top, folders, files in os.walk(folder):
        yield _prefix(Path(top).relative_to(folder).as_posix()), folders, files


def _prefix(relative: str) -> str:
    return "" if relative == "." else f"{relative}/"


def _matches(pattern: str | None, name: str, under_folder: str) -> bool:
    """A pattern with a ``/`` matches the path under the listed folder, else the name."""
    if pattern is None:
        return True
    return fnmatch.fnmatchcase(under_folder if "/" in pattern else name, pattern)


def _tree_order(entry: str) -> tuple[str, ...]:
    return tuple(entry.rstrip("/").split("/"))
