"""`PerLoop`: one connection pool per event loop, closed with its loop.

An ``httpx.AsyncClient`` keeps its kept-alive connections bound to the event loop that opened
them; reused on another loop they fail with "Event loop is closed" or hang. A client object
outlives loops (``run_sync`` runs on a background loop, scripts call ``asyncio.run`` twice,
notebooks mix both), so the built-in clients keep one pool per loop. Each pool is closed when
its loop shuts down (``asyncio.run`` and ``loop.shutdown_asyncgens()`` close it through a
parked async generator) or by the client's ``aclose()``, from any loop or thread.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any, Generic, TypeVar

_T = TypeVar("_T")


async def _keeper(
    value: Any,
    close: Callable[[Any], Awaitable[None]],
    owner: weakref.ref[PerLoop[Any]],
    loop: asyncio.AbstractEventLoop,
) -> AsyncGenerator[None, None]:
    """Parked on its loop until the loop shuts down or the pool is closed; then closes.

    It holds its owner weakly: a client dropped without ``aclose`` frees its pools at once
    (the loop then finalises this generator, which closes the value), with no reference
    cycle left for the garbage collector.
    """
    try:
        yield
    finally:
        pool = owner()
        if pool is not None:
            pool._forget(loop, value)
        await close(value)


async def _aclose(keeper: AsyncGenerator[None, None]) -> None:
    await keeper.aclose()


class PerLoop(Generic[_T]):
    """Lazily made values (HTTP clients), one per running event loop."""

    def __init__(self, make: Callable[[], _T], close: Callable[[_T], Awaitable[None]]) -> None:
        """Keep values made by `make`, each closed by `close` when its loop ends.

        Args:
            make: Creates the value for the running loop.
            close: Releases a value (awaited on the value's own loop).
        """
        self._make = make
        self._close = close
        self._values: dict[asyncio.AbstractEventLoop, tuple[_T, AsyncGenerator[None, None]]] = {}
        self._lock = threading.Lock()

    async def get(self) -> _T:
        """The value of the running loop, made on first use."""
        loop = asyncio.get_running_loop()
        entry = self._values.get(loop)
        if entry is not None:
            return entry[0]
        self._forget_closed_loops()
        value = self._make()
        keeper = _keeper(value, self._close, weakref.ref(self), loop)
        await keeper.__anext__()  # the loop now tracks it and closes it at shutdown
        with self._lock:
            self._values[loop] = (value, keeper)
        return value

    def _forget(self, loop: asyncio.AbstractEventLoop, value: _T) -> None:
        with self._lock:
            if self._values.get(loop, (None,))[0] is value:
                del self._values[loop]

    def _forget_closed_loops(self) -> None:
        """Drop the values of loops closed without shutting down (nothing can close them)."""
        with self._lock:
            for loop in [loop for loop in self._values if loop.is_closed()]:
                del self._values[loop]

    async def aclose(self) -> None:
        """Close every value: here directly, on other running loops through their thread."""
        with self._lock:
            entries = list(self._values.items())
        here = asyncio.get_running_loop()
        for loop, (_, keeper) in entries:
            if loop is here:
                await keeper.aclose()
            elif loop.is_running():
                done = asyncio.run_coroutine_threadsafe(_aclose(keeper), loop)
                await asyncio.wrap_future(done)
            else:  # a loop that stopped without shutting down: nothing can close it now
                with self._lock:
                    self._values.pop(loop, None)
