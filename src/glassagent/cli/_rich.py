"""Colour on terminals, with rich (the ``cli`` extra); plain text without it."""

from __future__ import annotations

import importlib.util
from typing import TextIO

from glassagent.cli._view import PLAIN_MARKS, HumanView, Marks, PlainWriter, Writer

INSTALL_HINT = "for colours, install the cli extra: pip install 'glassagent[cli]'"
"""What a terminal session without rich is told once."""


def rich_installed() -> bool:
    """Whether rich can be imported."""
    return importlib.util.find_spec("rich") is not None


class RichWriter:
    """Styled text on a terminal, through a rich `Console` (markup in the text is not read)."""

    def __init__(self, stream: TextIO) -> None:
        from rich.console import Console

        self.console = Console(
            file=stream, highlight=False, soft_wrap=True, emoji=False, markup=False
        )

    def write(self, text: str, style: str | None = None) -> None:
        """Write `text` in `style` now."""
        from rich.text import Text

        self.console.print(Text(text, style=style or ""), end="")
        self.console.file.flush()

    def control(self, codes: str) -> None:
        """Write terminal control codes as they are (rich would strip them from text)."""
        self.console.file.write(codes)
        self.console.file.flush()


def human_view(stream: TextIO, *, colour: bool) -> HumanView:
    """A human view of `stream`: in colour when asked for and rich is installed, else plain.

    Plain views of streams that are not terminals draw with ASCII marks.
    """
    writer: Writer
    if colour and rich_installed():
        writer = RichWriter(stream)
        return HumanView(writer, Marks(), live=_is_terminal(stream))
    writer = PlainWriter(stream)
    terminal = _is_terminal(stream)
    return HumanView(writer, Marks() if terminal else PLAIN_MARKS, live=terminal)


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # closed, or not a real stream
        return False
