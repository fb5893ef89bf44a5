"""`RunTimer`: a run's ``run_timeout``, which a durable run's approval wait pauses."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator


class RunTimer:
    """Calls `expire` once `seconds` of the run have passed (never, for `None`)."""

    def __init__(self, seconds: float | None, expire: Callable[[], None]) -> None:
        self._seconds = seconds
        self._expire: Callable[[], None] | None = expire  # dropped at the end: no cycle left
        self._handle: asyncio.TimerHandle | None = None

    def start(self, seconds: float | None = None) -> None:
        """Start counting: the whole time, or the `seconds` left."""
        if self._seconds is not None and self._expire is not None:
            left = self._seconds if seconds is None else seconds
            self._handle = asyncio.get_running_loop().call_later(left, self._expire)

    def stop(self) -> None:
        """The run has ended: never expire."""
        self._expire = None
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Stop counting meanwhile, then go on with the time that was left."""
        handle, self._handle = self._handle, None
        if handle is None:
            yield
            return
        left = handle.when() - asyncio.get_running_loop().time()
        handle.cancel()
        try:
            yield
        finally:
            self.start(max(left, 0.0))
