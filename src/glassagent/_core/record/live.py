"""`LiveDisplay`: a run's timeline in a notebook, updated in place while the run streams."""

from __future__ import annotations

import asyncio
import importlib
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from glassagent._core.errors import UserError
from glassagent._core.record.jsonl import TERMINAL

if TYPE_CHECKING:
    from glassagent._core.events import Event

INTERVAL = 0.2
"""Seconds between two updates at most as frequent (chunks arrive much faster)."""


def _ipython() -> tuple[Callable[..., Any], Callable[[str], Any]]:
    """IPython's `display` and `HTML`, when a notebook (an IPython shell) is running.

    Raises:
        UserError: Without IPython, or outside an IPython session.
    """
    try:  # imported by name: IPython is optional, and its types are not checked here
        shell = importlib.import_module("IPython.core.interactiveshell").InteractiveShell
        ipython_display = importlib.import_module("IPython.display")
    except ImportError:
        raise UserError(
            "run.display() shows the run in a Jupyter notebook and needs IPython "
            "(pip install ipykernel, or run it in Jupyter); elsewhere, iterate the run's "
            "events or print its result."
        ) from None
    if not shell.initialized():
        raise UserError(
            "run.display() needs a running notebook (an IPython session); elsewhere, iterate "
            "the run's events or print its result."
        )
    return ipython_display.display, ipython_display.HTML


class LiveDisplay:
    """Shows HTML from `render` and shows it again on each event (at most every `INTERVAL` s).

    The last event of the run is shown at once.
    """

    def __init__(self, render: Callable[[], str]) -> None:
        """Show the first rendering.

        Raises:
            UserError: Without IPython, or outside an IPython session.
        """
        display, self._html = _ipython()
        self._render = render
        self._handle = display(self._html(render()), display_id=True)
        self._pending: asyncio.TimerHandle | None = None
        self._shown = time.monotonic()

    def __call__(self, event: Event) -> None:
        """Update the display for `event`: now, or soon when it was updated just now."""
        if event.type in TERMINAL and not event.depth:  # not a sub-agent's run's end
            if self._pending is not None:
                self._pending.cancel()
                self._pending = None
            self._update()
            return
        if self._pending is not None:
            return
        wait = INTERVAL - (time.monotonic() - self._shown)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if wait <= 0 or loop is None:
            self._update()
        else:
            self._pending = loop.call_later(wait, self._flush)

    def _flush(self) -> None:
        self._pending = None
        try:
            self._update()
        except Exception:  # e.g. the redact hook failed: show nothing more of the run
            self._handle = None

    def _update(self) -> None:
        self._shown = time.monotonic()
        if self._handle is not None:
            self._handle.update(self._html(self._render()))
