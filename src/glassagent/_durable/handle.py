"""`DurableAgentRun`: one durable run, awaitable for its result and iterable for its events.

The events of a run this process executes pass through a `Feed`: the workflow puts each
event in as the run emits it, and any number of readers follow it from the first event. A
run resumed after a crash starts with the events of the steps it replays (marked
``replayed``), then goes on live.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Generator
from typing import TYPE_CHECKING, Any

from glassagent._agent.awaitable import AwaitableRun
from glassagent._core.result import OutputT, RunResult

if TYPE_CHECKING:
    from glassagent._core.events import Event


class Feed:
    """The events of one run in this process, kept until the run ends, for its readers."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.ended = False
        self._changed = asyncio.Event()

    def put(self, event: Event) -> None:
        """Add the run's next event."""
        self.events.append(event)
        self._changed.set()

    def end(self) -> None:
        """The run has ended here: readers stop after the last event."""
        self.ended = True
        self._changed.set()

    async def follow(self) -> AsyncIterator[Event]:
        """Every event from the first, as they come, until the feed ends."""
        seen = 0
        while True:
            while seen < len(self.events):
                seen += 1
                yield self.events[seen - 1]
            if self.ended:
                return
            self._changed.clear()  # nothing is put between the check and the wait
            await self._changed.wait()


class DurableAgentRun(AwaitableRun[RunResult[OutputT]]):
    """One durable run: ``await`` it for its `RunResult`, ``async for`` it for its events.

    `DurableAgent.run` starts one and `DurableAgent.follow` follows one by id. The events are
    those of a run that this process executes (also one it resumed after a crash, whose
    events start with the replayed ones, marked ``event.replayed``); a run that another
    worker executes yields none here. Iterating does not raise the run's error (it is an
    event); awaiting does, after iterating too. Like a coroutine, it can be given to
    ``asyncio.create_task``; nothing starts until it is awaited, iterated or scheduled, and
    cancelling a task that awaits it stops the waiting, not the run.
    """

    _how_to_use = "`await durable.run(...)` or `async for event in durable.run(...)`"

    def __init__(
        self,
        run_id: str,
        feeds: dict[str, Feed],
        outcome: Callable[[], Awaitable[RunResult[OutputT]]],
        waiters: set[asyncio.Future[Any]] | None = None,
    ) -> None:
        self.run_id: str = run_id
        """The run's id (its DBOS workflow id)."""
        self._feeds = feeds
        self._outcome = outcome
        self._waiters = waiters  # the agent's: stopped when it leaves `async with`
        self._task: asyncio.Future[RunResult[OutputT]] | None = None
        self._coroutine: Coroutine[Any, Any, RunResult[OutputT]] | None = None
        self._claimed = False

    def _started(self) -> asyncio.Future[RunResult[OutputT]]:
        self._claimed = True
        if self._task is None:
            self._task = asyncio.ensure_future(self._outcome())
            self._task.add_done_callback(_retrieved)
            if self._waiters is not None:
                self._waiters.add(self._task)
                self._task.add_done_callback(self._waiters.discard)
        return self._task

    async def _wait(self) -> RunResult[OutputT]:
        return await asyncio.shield(self._started())  # a cancelled reader stops reading

    def __await__(self) -> Generator[Any, None, RunResult[OutputT]]:
        return self._wait().__await__()

    def _awaiting(self) -> Coroutine[Any, Any, RunResult[OutputT]]:
        return self._wait()

    def close(self) -> None:
        """Coroutine protocol: stop awaiting (the run itself goes on, durably)."""
        self._claimed = True
        if self._coroutine is not None:
            self._coroutine.close()

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._events()

    async def _events(self) -> AsyncIterator[Event]:
        feed = self._feeds.setdefault(self.run_id, Feed())  # the workflow puts in this one
        task = self._started()

        def ended(_: object) -> None:  # the run ended, here or elsewhere, or never ran here
            feed.end()
            if self._feeds.get(self.run_id) is feed:
                del self._feeds[self.run_id]

        task.add_done_callback(ended)
        async for event in feed.follow():
            yield event

    def __repr__(self) -> str:
        return f"DurableAgentRun(run_id={self.run_id!r})"


def _retrieved(task: asyncio.Future[Any]) -> None:
    """Mark the outcome's error seen: a run only iterated does not warn about it."""
    if not task.cancelled():
        task.exception()
