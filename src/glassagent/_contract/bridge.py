"""Plain code waiting on glassagent's coroutines, with an abort it checks while it waits.

Coroutines run on the one background loop of synchronous calls (`glassagent._agent.sync`),
so a client's connections stay bound to one loop. The caller's thread waits in short slices
and checks its abort between them: an abort cancels the coroutine within ``POLL_SECONDS``.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import queue
from collections.abc import AsyncIterator, Callable, Coroutine, Generator, Iterator
from typing import Any, TypeVar

from glassagent._agent.sync import submit

_T = TypeVar("_T")
_U = TypeVar("_U")
POLL_SECONDS = 0.05
_CLOSE_SECONDS = 5.0
_END = object()


class Aborted(Exception):
    """The caller's abort was set while it waited."""


def wait(coro: Coroutine[Any, Any, _T], aborted: Callable[[], bool]) -> _T:
    """Run `coro` on the background loop and wait for it; cancel it once `aborted()`.

    Raises:
        Aborted: When `aborted()` became true first (the coroutine is cancelled).
    """
    future = submit(coro)
    try:
        while True:
            try:
                return future.result(timeout=POLL_SECONDS)
            except concurrent.futures.TimeoutError:
                if future.done():
                    return future.result()  # it raised TimeoutError itself
                if aborted():
                    raise Aborted from None
    except BaseException:
        future.cancel()
        raise


def watch(
    coro: Coroutine[Any, Any, _T],
    aborted: Callable[[], bool],
    updates: queue.SimpleQueue[_U],
) -> Generator[_U, None, _T]:
    """Like `wait`, yielding what the coroutine puts in `updates` while it runs.

    Use it with ``result = yield from watch(...)``.

    Raises:
        Aborted: When `aborted()` became true first (the coroutine is cancelled).
    """
    future = submit(coro)
    try:
        while not future.done():
            if aborted():  # also between updates: they may come faster than the poll
                raise Aborted
            with contextlib.suppress(queue.Empty):
                yield updates.get(timeout=POLL_SECONDS)
        while not updates.empty():
            yield updates.get_nowait()
        return future.result()
    except BaseException:
        future.cancel()
        raise


async def _next(iterator: AsyncIterator[_T]) -> Any:
    try:
        return await iterator.__anext__()
    except StopAsyncIteration:
        return _END


async def _close(iterator: AsyncIterator[Any]) -> None:
    close = getattr(iterator, "aclose", None)
    if close is not None:
        await close()


def iterate(iterator: AsyncIterator[_T], aborted: Callable[[], bool]) -> Iterator[_T]:
    """Pull `iterator`'s items from plain code; it is closed however the loop ends.

    Raises:
        Aborted: When `aborted()` became true while waiting for an item.
    """
    try:
        while True:
            if aborted():  # also between items: they may come faster than the poll
                raise Aborted
            item = wait(_next(iterator), aborted)
            if item is _END:
                return
            yield item
    finally:
        with contextlib.suppress(Exception, concurrent.futures.CancelledError):
            submit(_close(iterator)).result(timeout=_CLOSE_SECONDS)
