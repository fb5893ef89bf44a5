"""Walking a path beneath the workspace root through folder descriptors, never by name.

Each component is opened with ``O_NOFOLLOW`` relative to the descriptor of the folder before
it, so that a folder swapped for a symbolic link between two steps cannot redirect the walk.
Symbolic links are followed here, component by component, the way Linux's ``openat2`` does
with ``RESOLVE_BENEATH``: ``..`` never goes above the root, an absolute target must be inside
the root by its text, and at most `MAX_LINKS` links are followed. POSIX systems only.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections import deque
from pathlib import Path

from glassagent._core.errors import ToolError

MAX_LINKS = 40
"""Most symbolic links followed for one path (Linux's limit too)."""

_ATTEMPTS = 3  # tries at a component that changes under the walk (made, then removed, ...)

# A folder descriptor only serves to walk on: O_PATH (Linux) needs no read permission.
FOLDER_FLAGS = (
    getattr(os, "O_PATH", os.O_RDONLY)
    | getattr(os, "O_DIRECTORY", 0)
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
)
# Errors of an O_NOFOLLOW open of a symbolic link: ELOOP (Linux, macOS), EMLINK (FreeBSD),
# EFTYPE (NetBSD); with O_DIRECTORY, Linux says ENOTDIR.
_LINK_ERRNOS = frozenset(
    code
    for code in (errno.ELOOP, errno.EMLINK, errno.ENOTDIR, getattr(errno, "EFTYPE", None))
    if code is not None
)


class Beneath:
    """The descriptors of the folders from the root down to where a walk has come.

    The walk owns its descriptors, the root's included: `close` closes them all. `names`
    are the folders' names from the root, symbolic links resolved.
    """

    __slots__ = ("_aliases", "_fds", "_links", "_shown", "names")

    def __init__(self, root_fd: int, aliases: tuple[Path, ...], shown: str) -> None:
        """Start at the root's descriptor `root_fd`, which the walk now owns.

        `aliases` are the root's absolute spellings (a link's absolute target must start with
        one); `shown` is the path as the model gave it, for messages.
        """
        self._fds = [root_fd]
        self._aliases = aliases
        self._shown = shown
        self._links = 0
        self.names: list[str] = []

    @property
    def folder(self) -> int:
        """The descriptor of the folder the walk is in."""
        return self._fds[-1]

    def relative(self, name: str | None = None) -> str:
        """The path from the root of the walk's folder, or of `name` in it."""
        parts = [*self.names, name] if name is not None else self.names
        return "/".join(parts) or "."

    def close(self) -> None:
        """Close every descriptor of the walk."""
        while self._fds:
            os.close(self._fds.pop())

    def __enter__(self) -> Beneath:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def enter(self, parts: list[str], *, make: bool) -> str | None:
        """Go down the folders of `parts`; return its last name, or `None` if it is a folder.

        `None` means the path ends at the walk's folder itself (it ended with ``..``, or was
        empty). With `make`, missing folders are created. Raises `OSError` for a component
        that is missing or not a folder, `ToolError` for one that leads out.
        """
        pending = deque(parts)
        while pending:
            name = pending.popleft()
            if name == "..":
                self._up()
            elif pending:
                target = self._down(name, make=make)
                if target is not None:
                    pending.extendleft(reversed(self._restart(target)))
            else:
                return name
        return None

    def follow(self, name: str, *, make: bool) -> str | None:
        """Follow `name`, a symbolic link in the walk's folder; return the name it leads to.

        As `enter`, for the link's target. If `name` is no longer a link, it is returned as it
        is, to be looked at again (every call counts as a link, so this ends).
        """
        target = self.read_link(name)
        if target is None:
            return name
        return self.enter(self._restart(target), make=make)

    def read_link(self, name: str) -> str | None:
        """The target of the link `name`, counted; `None` when `name` is not a link."""
        self._links += 1
        if self._links > MAX_LINKS:
            raise ToolError(
                f"{self._shown!r} cannot be resolved: more than {MAX_LINKS} symbolic links on "
                "the way (a loop?)."
            )
        try:
            return os.readlink(name, dir_fd=self.folder)
        except OSError as exc:
            if exc.errno in (errno.EINVAL, errno.ENOENT):  # not a link, or gone
                return None
            raise

    def _down(self, name: str, *, make: bool) -> str | None:
        """Enter the folder `name`; return a symbolic link's target instead of entering it."""
        for _ in range(_ATTEMPTS):
            try:
                fd = os.open(name, FOLDER_FLAGS, dir_fd=self.folder)
            except FileNotFoundError:
                if not make:
                    raise
                with contextlib.suppress(FileExistsError):  # made meanwhile, or a link
                    os.mkdir(name, dir_fd=self.folder)
                continue
            except OSError as exc:
                if exc.errno not in _LINK_ERRNOS:
                    raise
                target = self.read_link(name)
                if target is not None:
                    return target
                if exc.errno == errno.ENOTDIR and self._in_the_way(name):
                    raise
                continue  # a link or a folder now: look again
            self._fds.append(fd)
            self.names.append(name)
            return None
        raise ToolError(f"{self._shown!r} kept changing while it was opened; try again.")

    def _in_the_way(self, name: str) -> bool:
        """Whether `name` is neither a folder nor a link (a file in the way)."""
        try:
            mode = os.stat(name, dir_fd=self.folder, follow_symlinks=False).st_mode
        except OSError:
            return True
        return not (stat.S_ISDIR(mode) or stat.S_ISLNK(mode))

    def _up(self) -> None:
        if len(self._fds) == 1:
            raise self._outside()
        os.close(self._fds.pop())
        self.names.pop()

    def _restart(self, target: str) -> list[str]:
        """The components to walk for a link's `target`; an absolute one starts at the root."""
        if not os.path.isabs(target):
            return split(target)
        lexical = Path(os.path.normpath(target))
        for alias in self._aliases:
            if lexical == alias or alias in lexical.parents:
                while len(self._fds) > 1:
                    os.close(self._fds.pop())
                self.names.clear()
                return split(lexical.relative_to(alias).as_posix())
        raise self._outside()

    def _outside(self) -> ToolError:
        return ToolError(
            f"{self._shown!r} is outside the workspace (a symbolic link on the way leads out "
            "of it); use paths inside it."
        )


def split(path: str) -> list[str]:
    """The components of a relative path, without empty and ``.`` ones."""
    return [part for part in path.split("/") if part not in ("", ".")]
