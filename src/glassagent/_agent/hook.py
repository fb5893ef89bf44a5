"""`EventHook`: calls the agent's ``on_event`` hook with each event a run emits, in order.

A run hands every event to its sinks as it emits it (`record.RunRecording._keep`); the hook
is the first of them. A plain function is called there and then. An ``async`` one (or any
hook returning an awaitable) is awaited by a task of the run's own, one event after the
other in the order they were emitted, and the run waits for it to catch up before it ends:
awaiting the run, `Agent.run_sync` and the end of its event stream come after the hook has
seen the last event. A hook that raises is logged on the ``glassagent`` logger (the first
failure of a run with its traceback) and the run goes on, unchanged.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    from glassagent._core.events import Event

OnEvent: TypeAlias = Callable[["Event"], "Awaitable[Any] | None"]
"""A hook given each event of every run of an agent as it is emitted (``Agent(on_event=...)``):
a plain function, or an ``async`` one, which the run awaits in order before it ends."""

logger = logging.getLogger("glassagent")


class EventHook:
    """One run's caller of the ``on_event`` hook (a sink of the run: it never raises)."""

    def __init__(self, hook: OnEvent) -> None:
        self._hook = hook
        self._pending: deque[tuple[Event, Awaitable[Any]]] = deque()
        self._worker: asyncio.Task[None] | None = None
        self._failures = 0

    def __call__(self, event: Event) -> None:
        try:
            outcome = self._hook(event)
        except Exception:
            self._failed(event)
            return
        if outcome is not None and inspect.isawaitable(outcome):
            self._pending.append((event, outcome))
            if self._worker is None:
                self._worker = asyncio.get_running_loop().create_task(self._work())

    async def _work(self) -> None:
        try:
            while self._pending:
                event, awaitable = self._pending.popleft()
                try:
                    await awaitable
                except asyncio.CancelledError:
                    raise
                except BaseException:  # in a task of its own: nothing may escape to the loop
                    self._failed(event)
        finally:
            self._worker = None

    async def drain(self) -> None:
        """Wait until the hook has seen every event emitted so far (an async hook's task)."""
        while (worker := self._worker) is not None:
            await asyncio.wait({worker})  # a cancelled wait leaves the hook's task running

    def _failed(self, event: Event) -> None:
        self._failures += 1
        where = f"the on_event hook failed on event {event.seq} ({event.type}) of run "
        if self._failures == 1:
            logger.warning(where + "%s; the run goes on", event.run_id, exc_info=True)
        else:
            logger.debug(where + "%s again", event.run_id, exc_info=True)
