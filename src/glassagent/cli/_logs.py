"""glassagent's log records at the command line: on standard error, each on a line of its own.

The library only logs (on the ``glassagent`` loggers); the command line shows the records.
A record that comes while the answer streams would start on the answer's line when standard
output and standard error share a screen, so the answer's line is ended first.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from typing import TextIO

from glassagent.cli._view import HumanView

LOGGER = "glassagent"
"""The logger whose records (and its children's) the command line shows."""


def same_screen(out: TextIO, err: TextIO) -> bool:
    """Whether `out` and `err` write to one file (a terminal, a pipe): their lines interleave."""
    if out is err:
        return True
    try:
        return os.path.samestat(os.fstat(out.fileno()), os.fstat(err.fileno()))
    except (AttributeError, OSError, ValueError):  # not a real file (io.UnsupportedOperation)
        return False


class ViewHandler(logging.Handler):
    """Shows each record as a line of the errors view, after the screen's line in progress ends.

    Like Python's last-resort handler, which shows records when logging is not configured,
    it shows warnings and errors, as their message (and traceback) alone.
    """

    def __init__(self, errors: HumanView, screen: HumanView | None) -> None:
        """Show records with `errors`; first end `screen`'s line (a view of the same screen)."""
        super().__init__(logging.WARNING)
        self.errors = errors
        self.screen = screen

    def emit(self, record: logging.LogRecord) -> None:
        """End the screen's line in progress, then write the record on a line of its own."""
        try:
            text = self.format(record)
            if self.screen is not None:
                with contextlib.suppress(OSError, ValueError):  # its own next write says so
                    self.screen.end_line()
            self.errors.note(text, "red" if record.levelno >= logging.ERROR else "yellow")
        except Exception:
            self.handleError(record)


@contextlib.contextmanager
def records_shown(errors: HumanView, screen: HumanView | None) -> Iterator[ViewHandler]:
    """Glassagent's records shown by a `ViewHandler` meanwhile; it is removed afterwards."""
    handler = ViewHandler(errors, screen)
    logger = logging.getLogger(LOGGER)
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
