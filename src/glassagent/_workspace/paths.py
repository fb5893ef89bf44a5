"""Confinement: every path the model gives is resolved inside the workspace root, or refused."""

from __future__ import annotations

import os
from pathlib import Path

from glassagent._core.errors import ToolError, UserError


class Confinement:
    """Resolves the model's paths against a root folder and refuses those that leave it.

    A path is refused when it leads out of the root by its text (``..``, an absolute path
    elsewhere) or once symbolic links are followed (a link inside pointing outside, or a link
    in one of its folders).
    """

    __slots__ = ("_aliases", "root")

    def __init__(self, root: str | os.PathLike[str]) -> None:
        """Confine paths to `root`, an existing folder.

        Raises:
            UserError: When `root` is not an existing folder.
        """
        given = Path(os.path.abspath(os.fspath(root)))
        if not given.is_dir():
            raise UserError(f"The workspace root {os.fspath(root)!r} is not an existing folder.")
        self.root: Path = given.resolve()
        # The root as given and as resolved: an absolute path spelt either way is inside.
        self._aliases = (self.root, given)

    def resolve(self, path: str) -> Path:
        """Return `path` (relative to the root, or absolute) resolved, symbolic links followed.

        The path need not exist. Raises `ToolError` (for the model) when it leads outside.
        """
        if "\0" in path:
            raise ToolError(f"{path!r} is not a valid path (it contains a NUL character).")
        given = Path(path)
        full = given if given.is_absolute() else self.root / given
        lexical = Path(os.path.normpath(full))
        if not any(_within(lexical, alias) for alias in self._aliases):
            how = "it is an absolute path" if given.is_absolute() else "'..' leads out of it"
            raise ToolError(f"{path!r} is outside the workspace ({how}); use paths inside it.")
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


def _within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents
