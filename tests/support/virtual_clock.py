"""An asyncio event loop whose clock jumps to the next timer instead of waiting for it.

For tests of timing logic with no real I/O (timers, `asyncio.sleep`, `call_later`, task
cancellation): ``virtual_clock.run(main())`` runs `main` on such a loop, so a 30 s timeout
takes no real time, and timers fire in exactly the order and at exactly the `loop.time()` a
real clock would give them, however loaded the machine is. Code under test that reads
``loop.time()`` (`CallLimits`, `run_timeout`, `asyncio.timeout`) sees the virtual time.

Not for tests that wait on sockets, processes or threads: while nothing is ready the clock
jumps, so a timeout would fire before a real answer could arrive.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Coroutine
from typing import Any, TypeVar

_T = TypeVar("_T")


class _JumpingSelector(selectors.DefaultSelector):  # type: ignore[misc,valid-type]
    """A selector that, with nothing ready, moves the clock on instead of sleeping."""

    def __init__(self, loop_clock: list[float]) -> None:
        super().__init__()
        self._clock = loop_clock

    def select(self, timeout: float | None = None) -> list[Any]:
        events: list[Any] = super().select(0)
        if events or timeout is None or timeout <= 0:
            # nothing scheduled (timeout None): only I/O can wake the loop, so wait for it
            return events if events or timeout is not None else super().select(None)
        self._clock[0] += timeout
        return []


class VirtualClockLoop(asyncio.SelectorEventLoop):
    """A selector event loop on a virtual clock that starts at 0."""

    def __init__(self) -> None:
        self._virtual_now = [0.0]
        super().__init__(_JumpingSelector(self._virtual_now))

    def time(self) -> float:
        return self._virtual_now[0]


def run(main: Coroutine[Any, Any, _T]) -> _T:
    """Run `main` on a new `VirtualClockLoop`; cancel what it left running, then close it."""
    loop = VirtualClockLoop()
    try:
        return loop.run_until_complete(main)
    finally:
        try:
            left = [task for task in asyncio.all_tasks(loop) if not task.done()]
            for task in left:
                task.cancel()
            if left:
                loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()
