"""`run_coroutine_sync`: run a coroutine from plain code on one long-lived background loop.

Every synchronous call (``Agent.run_sync``) runs on the same event loop, in a daemon thread
of its own, so a client's kept-alive connections, bound to the loop that opened them, stay
usable from one call to the next. The caller's thread only waits; Ctrl-C there cancels the
coroutine (a run aborts and keeps its partial answer) and is then raised to the caller.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from glassagent._core.errors import UserError

_T = TypeVar("_T")
_STOP_WAIT_SECONDS = 5.0

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def _background_loop() -> asyncio.AbstractEventLoop:
    """The loop of synchronous calls, started on first use in a daemon thread."""
    global _loop
    with _lock:
        if _loop is None:
            loop = asyncio.new_event_loop()
            thread = threading.Thread(
                target=loop.run_forever, name="glassagent-sync-loop", daemon=True
            )
            thread.start()
            _loop = loop
        return _loop


def submit(coro: Coroutine[Any, Any, _T]) -> concurrent.futures.Future[_T]:
    """Start `coro` on the background loop; its future can be waited for, or cancelled."""
    return asyncio.run_coroutine_threadsafe(coro, _background_loop())


def _forget_after_fork() -> None:
    """A forked child has the loop object but not its thread: start a new one when needed."""
    global _loop, _lock
    _loop = None
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


async def _captured(coro: Coroutine[Any, Any, _T], ended: threading.Event) -> tuple[bool, Any]:
    """Await `coro`, returning its outcome: a BaseException must not escape into the loop."""
    try:
        return True, await coro
    except asyncio.CancelledError:
        raise
    except BaseException as exc:  # KeyboardInterrupt, SystemExit: the caller's to raise
        return False, exc
    finally:
        ended.set()


def run_coroutine_sync(coro: Coroutine[Any, Any, _T]) -> _T:
    """Run `coro` to completion from synchronous code, even inside a running event loop.

    Raises:
        UserError: When called from the background loop itself (an async tool calling
            ``run_sync``): that would wait for itself forever; use ``await`` there.
    """
    loop = _background_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        coro.close()
        raise UserError("run_sync was called from inside a running run; use `await` there.")
    ended = threading.Event()
    future = asyncio.run_coroutine_threadsafe(_captured(coro, ended), loop)
    try:
        ok, value = future.result()
    except KeyboardInterrupt:
        future.cancel()  # cancels the task: a run aborts, keeping its partial answer
        ended.wait(_STOP_WAIT_SECONDS)
        raise
    if ok:
        return value  # type: ignore[no-any-return]
    raise value
