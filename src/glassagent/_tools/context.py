"""`ToolContext`: what a running tool may know and do besides its arguments."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import Any, Generic

from typing_extensions import TypeVar

DepsT = TypeVar("DepsT", default=Any)
"""Type of the user object passed to ``agent.run(deps=...)``."""


class ToolContext(Generic[DepsT]):
    """Handed to a tool that declares a parameter annotated ``ToolContext``.

    The agent creates one for each call and injects it; the model never sees the parameter.
    ``ToolContext[MyDeps]`` types ``deps``.

    Example:
        ```python
        @tool
        async def crawl(url: str, ctx: ToolContext) -> str:
            await ctx.progress(f"fetching {url}")
            ...
        ```
    """

    __slots__ = (
        "_abort_event",
        "_loop",
        "_loop_thread",
        "_on_progress",
        "call_id",
        "deps",
        "run_id",
        "tool_name",
        "ui_info",
    )

    def __init__(
        self,
        *,
        call_id: str,
        run_id: str,
        tool_name: str,
        deps: DepsT,
        on_progress: Callable[[str], None],
        ui_info: Any = None,
    ) -> None:
        self.call_id: str = call_id
        """Id of the tool call being executed."""
        self.run_id: str = run_id
        """Id of the agent run."""
        self.tool_name: str = tool_name
        """Name of the tool being executed."""
        self.deps: DepsT = deps
        """The object passed to ``agent.run(deps=...)`` (e.g. a database handle)."""
        self.ui_info: Any = ui_info
        """Display hints for user interfaces; a tool may replace them while it runs."""
        self._on_progress = on_progress
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._abort_event = asyncio.Event()

    async def progress(self, message: str) -> None:
        """Report progress; it reaches the run's consumer as a ``tool_progress`` event at once.

        Args:
            message: A short human-readable progress message.
        """
        self._on_progress(message)
        await asyncio.sleep(0)

    def progress_nowait(self, message: str) -> None:
        """Report progress from a synchronous tool; safe to call from its worker thread.

        A message sent after the run ended (a tool still going past its timeout) is dropped.

        Args:
            message: A short human-readable progress message.
        """
        if threading.get_ident() == self._loop_thread:
            self._on_progress(message)
        else:
            with contextlib.suppress(RuntimeError):  # the loop closed: the run is long over
                self._loop.call_soon_threadsafe(self._on_progress, message)

    @property
    def is_aborted(self) -> bool:
        """True once the run was aborted or this call timed out; a long tool should stop."""
        return self._abort_event.is_set()

    @property
    def abort_event(self) -> asyncio.Event:
        """An event set when the run is aborted or this call times out (for ``await``)."""
        return self._abort_event

    def _abort(self) -> None:
        self._abort_event.set()

    def __repr__(self) -> str:
        return f"ToolContext(tool_name={self.tool_name!r}, call_id={self.call_id!r})"
