"""`list_files`: the entries under a folder, bounded, with tool folders left out."""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path

from glassagent._core.errors import ToolError

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


def list_entries(folder: Path, root: Path, pattern: str | None, shown: str) -> str:
    """List the entries under `folder` (recursively) as paths relative to `root`.

    `shown` is the folder as the model named it, for messages.
    """
    if not folder.exists():
        raise ToolError(f"{shown!r} does not exist.")
    if not folder.is_dir():
        raise ToolError(f"{shown!r} is a file, not a folder; read it with read_file.")
    entries, complete = _scan(folder, root, pattern)
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


def _scan(folder: Path, root: Path, pattern: str | None) -> tuple[list[str], bool]:
    """Entries under `folder` matching `pattern`; False when the scan stopped early."""
    entries: list[str] = []
    scanned = 0
    for top, folders, files in os.walk(folder):
        folders[:] = [f for f in folders if f not in SKIPPED_FOLDERS]
        in_root = _prefix(Path(top).relative_to(root))
        in_folder = _prefix(Path(top).relative_to(folder))
        # symbolic links to folders are listed with the folders, but not followed
        for names, mark in ((folders, "/"), (files, "")):
            for name in names:
                if _matches(pattern, name, f"{in_folder}{name}"):
                    entries.append(f"{in_root}{name}{mark}")
        scanned += len(folders) + len(files)
        if scanned > _MAX_SCANNED:
            return entries, False
    return entries, True


def _prefix(relative: Path) -> str:
    text = relative.as_posix()
    return "" if text == "." else f"{text}/"


def _matches(pattern: str | None, name: str, under_folder: str) -> bool:
    """A pattern with a ``/`` matches the path under the listed folder, else the name."""
    if pattern is None:
        return True
    return fnmatch.fnmatchcase(under_folder if "/" in pattern else name, pattern)


def _tree_order(entry: str) -> tuple[str, ...]:
    return tuple(entry.rstrip("/").split("/"))
