"""Confinement: every path the model gives is resolved inside the workspace root, or refused.

Where the system opens files relative to a folder descriptor (POSIX: ``os.open`` in
``os.supports_dir_fd``), a path is walked from a descriptor of the root, one component at a
time, never by its name: see `glassagent._workspace.beneath`. Elsewhere (Windows) a path is
checked, then used by name; that is not race-free.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from glassagent._core.errors import ToolError, UserError
from glassagent._workspace.beneath import FOLDER_FLAGS, Beneath, split

DESCRIPTORS: bool = (
    {os.open, os.stat, os.mkdir, os.readlink, os.rename, os.unlink} <= os.supports_dir_fd
    and os.stat in os.supports_follow_symlinks
    and hasattr(os, "O_NOFOLLOW")
    and hasattr(os, "O_DIRECTORY")
)
"""Whether paths are walked through folder descriptors (race-free) on this system."""

READ_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)
"""How a file is opened: without following a last link, and without waiting (a FIFO)."""
_TEMP_FLAGS = (
    os.O_WRONLY
    | os.O_CREAT
    | os.O_EXCL
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)


class FileEntry(Protocol):
    """A file the model named, its path resolved inside the workspace.

    Every method may raise `OSError` (`IsADirectoryError` when the path names a folder) and
    `ToolError` (a symbolic link met on the way leads out).
    """

    def stat(self) -> os.stat_result | None:
        """The file's status, symbolic links followed; `None` when it does not exist."""

    def open(self) -> int:
        """A descriptor to read the file (or folder), opened without waiting."""

    def replace(self, data: bytes, mode: int | None) -> None:
        """Replace the file with `data` atomically; `mode`: the new file's permissions."""


class Confinement:
    """Resolves the model's paths against a root folder and refuses those that leave it.

    A path is refused when it leads out of the root by its text (``..``, an absolute path
    elsewhere) or once symbolic links are followed (a link inside pointing outside, or a link
    in one of its folders). Symbolic links that stay inside are followed.
    """

    __slots__ = ("_aliases", "_identity", "root")

    def __init__(self, root: str | os.PathLike[str]) -> None:
        """Confine paths to `root`, an existing folder.

        Raises:
            UserError: When `root` is not a path (a str or an `os.PathLike` of one), or not an
                existing folder.
        """
        text = os.fspath(root) if isinstance(root, (str, os.PathLike)) else None
        if not isinstance(text, str):
            raise UserError(
                f"The workspace root must be a path (a str or a pathlib.Path), got {root!r}."
            )
        given = Path(os.path.abspath(text))
        if not given.is_dir():
            raise UserError(f"The workspace root {text!r} is not an existing folder.")
        self.root: Path = given.resolve()
        # The root as given and as resolved: an absolute path spelt either way is inside.
        self._aliases = (self.root, given)
        info = self.root.stat()
        self._identity = (info.st_dev, info.st_ino)

    def resolve(self, path: str) -> Path:
        """Return `path` (relative to the root, or absolute) resolved, symbolic links followed.

        The path need not exist. Raises `ToolError` (for the model) when it leads outside.
        This checks the path once; using it by name afterwards is not race-free.
        """
        given = self._check_text(path)
        full = given if given.is_absolute() else self.root / given
        try:
            resolved = full.resolve()
        except (OSError, RuntimeError, ValueError) as exc:  # a symbolic link loop, ...
            raise ToolError(f"{path!r} cannot be resolved: {exc}") from None
        if not _within(resolved, self.root):
            raise ToolError(
                f"{path!r} is outside the workspace (a symbolic link on the way leads out of "
                "it); use paths inside it."
            )
        return resolved

    def relative(self, resolved: Path) -> str:
        """The path of `resolved` (inside the root) as the model should write it."""
        if resolved == self.root:
            return "."
        return resolved.relative_to(self.root).as_posix()

    @contextlib.contextmanager
    def file(self, path: str, *, make_folders: bool = False) -> Iterator[FileEntry]:
        """The file `path` names; with `make_folders`, its missing folders are created.

        Raises `ToolError` (for the model) when the path leads outside or a folder on the
        way is missing (without `make_folders`) or cannot be opened.
        """
        if not DESCRIPTORS:
            yield _PathEntry(self.resolve(path))
            return
        with self._entry(path, make_folders=make_folders) as entry:
            yield entry

    @contextlib.contextmanager
    def _entry(self, path: str, *, make_folders: bool) -> Iterator[_DescriptorEntry]:
        parts = self._parts(path)
        with self._walk(path) as walk:
            try:
                name = walk.enter(parts, make=make_folders)
            except FileNotFoundError:
                if make_folders:
                    raise ToolError(
                        f"{path!r} cannot be written: a folder on the way is gone."
                    ) from None
                raise ToolError(f"{path!r} does not exist.") from None
            except OSError as exc:
                verb = "written" if make_folders else "read"
                raise ToolError(f"{path!r} cannot be {verb}: {exc.strerror or exc}.") from None
            yield _DescriptorEntry(walk, name, make=make_folders)

    @contextlib.contextmanager
    def folder(self, path: str) -> Iterator[tuple[str, int | Path]]:
        """The folder `path` names: its path from the root, and a descriptor or its path.

        The descriptor is readable (`os.scandir`) and closed afterwards; the path is given
        where there are no folder descriptors. Raises `ToolError` when `path` leads outside,
        is missing, or is not a folder.
        """
        if not DESCRIPTORS:
            resolved = self.resolve(path)
            if not resolved.exists():
                raise ToolError(f"{path!r} does not exist.")
            if not resolved.is_dir():
                raise _not_a_folder(path)
            yield self.relative(resolved), resolved
            return
        with self._entry(path, make_folders=False) as entry:
            try:
                fd = entry.open()
            except FileNotFoundError:
                raise ToolError(f"{path!r} does not exist.") from None
            except OSError as exc:
                raise ToolError(f"{path!r} cannot be listed: {exc.strerror or exc}.") from None
            try:
                if not stat.S_ISDIR(os.fstat(fd).st_mode):
                    raise _not_a_folder(path)
                yield entry.relative(), fd
            finally:
                os.close(fd)

    def check(self, path: str) -> None:
        """Raise `ToolError` if writing to `path` would lead outside; create nothing.

        Other failures (a file in the way, ...) are left for the write to report.
        """
        if not DESCRIPTORS:
            self.resolve(path)
            return
        parts = self._parts(path)
        with self._walk(path) as walk, contextlib.suppress(OSError):
            _DescriptorEntry(walk, walk.enter(parts, make=False), make=False).stat()

    def _check_text(self, path: str) -> Path:
        """`path` as a `Path`, refused when it leaves the root by its text."""
        if "\0" in path:
            raise ToolError(f"{path!r} is not a valid path (it contains a NUL character).")
        given = Path(path)
        full = given if given.is_absolute() else self.root / given
        lexical = Path(os.path.normpath(full))
        if not any(_within(lexical, alias) for alias in self._aliases):
            how = "it is an absolute path" if given.is_absolute() else "'..' leads out of it"
            raise ToolError(f"{path!r} is outside the workspace ({how}); use paths inside it.")
        return given

    def _parts(self, path: str) -> list[str]:
        """The components of `path` to walk from the root, once its text is checked.

        An absolute path loses its root prefix (spelt either way); ``..`` in a relative one
        is walked, so that it goes back through a symbolic link as the system would.
        """
        given = self._check_text(path)
        if not given.is_absolute():
            return split(path)
        lexical = Path(os.path.normpath(given))
        alias = next(a for a in self._aliases if _within(lexical, a))
        return split(lexical.relative_to(alias).as_posix())

    def _walk(self, path: str) -> Beneath:
        """A walk from a fresh descriptor of the root, which must still be the same folder."""
        try:  # followed if it became a link: the folder it leads to is checked below
            fd = os.open(self.root, FOLDER_FLAGS & ~getattr(os, "O_NOFOLLOW", 0))
        except OSError as exc:
            raise ToolError(
                f"The workspace folder cannot be opened ({exc.strerror or exc}); it may have "
                "been moved or removed."
            ) from None
        info = os.fstat(fd)
        if (info.st_dev, info.st_ino) != self._identity:
            os.close(fd)
            raise ToolError(
                "The workspace folder was moved or replaced since the workspace was made; "
                "its files cannot be used."
            )
        return Beneath(fd, self._aliases, path)


class _DescriptorEntry:
    """A file as a name in a folder the walk holds a descriptor of."""

    __slots__ = ("_make", "_walk", "name")

    def __init__(self, walk: Beneath, name: str | None, *, make: bool) -> None:
        self._walk = walk
        self._make = make
        self.name = name  # None: the walk's folder itself

    def relative(self) -> str:
        """The entry's path from the root, symbolic links resolved."""
        return self._walk.relative(self.name)

    def stat(self) -> os.stat_result | None:
        while True:
            if self.name is None:
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
            try:
                info = os.stat(self.name, dir_fd=self._walk.folder, follow_symlinks=False)
            except FileNotFoundError:
                return None
            if not stat.S_ISLNK(info.st_mode):
                return info
            self.name = self._walk.follow(self.name, make=self._make)

    def open(self) -> int:
        while True:
            try:
                return os.open(self.name or ".", READ_FLAGS, dir_fd=self._walk.folder)
            except OSError as exc:
                if self.name is None or exc.errno not in (errno.ELOOP, errno.EMLINK):
                    raise
                self.name = self._walk.follow(self.name, make=self._make)

    def replace(self, data: bytes, mode: int | None) -> None:
        if self.name is None:
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
        folder = self._walk.folder
        temp = _temp_name(self.name)
        fd = os.open(temp, _TEMP_FLAGS, 0o666, dir_fd=folder)
        try:
            _fill(fd, data, mode)
            os.replace(temp, self.name, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=folder)
            raise


class _PathEntry:
    """A file by its resolved path: checked once, then used by name (not race-free)."""

    __slots__ = ("path",)

    def __init__(self, path: Path) -> None:
        self.path = path

    def stat(self) -> os.stat_result | None:
        try:
            return self.path.stat()
        except FileNotFoundError:
            return None

    def open(self) -> int:
        if self.path.is_dir():  # Windows cannot open a folder
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
        return os.open(self.path, READ_FLAGS)

    def replace(self, data: bytes, mode: int | None) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temp = self.path.with_name(_temp_name(self.path.name))
        fd = os.open(temp, _TEMP_FLAGS, 0o666)
        try:
            _fill(fd, data, None)
            if mode is not None:
                os.chmod(temp, mode)
            os.replace(temp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise


def _temp_name(name: str) -> str:
    return f".{name}.{secrets.token_hex(4)}.tmp"


def _fill(fd: int, data: bytes, mode: int | None) -> None:
    """Write `data` to the new file `fd`, flush it to disk, give it `mode`, close it."""
    with open(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(fd)
        if mode is not None:
            os.fchmod(fd, mode)


def _not_a_folder(path: str) -> ToolError:
    return ToolError(f"{path!r} is a file, not a folder; read it with read_file.")


def _within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents
