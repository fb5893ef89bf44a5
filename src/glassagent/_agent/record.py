"""`RunRecording`: what an `AgentRun` keeps and shows of itself (mixed into `AgentRun`).

Each event the run emits passes `_keep`, which stores it and hands it to the run's live sinks:
a file being recorded (`save_events`), a notebook display (`display`).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncio

    from typing_extensions import Self

    from glassagent._agent.config import RunConfig
    from glassagent._agent.hook import EventHook
    from glassagent._core.events import Event
    from glassagent._core.record.redact import Redact
    from glassagent._core.result import RunResult


class RunRecording:
    """Recording and notebook views of a run; `AgentRun` inherits them."""

    _sinks: tuple[Callable[[Event], None], ...] = ()
    _hook: EventHook | None = None

    if TYPE_CHECKING:
        run_id: str
        _config: RunConfig
        _events: list[Event]
        _result: RunResult[Any] | None
        _producer: asyncio.Task[None] | None

        def _output_redact(self, *, live: bool = False) -> Redact | None: ...

    def _keep(self, event: Event) -> None:
        """Store an emitted event and hand it to the live sinks.

        A sink that fails (a full disk, a failing redact hook) is detached with a warning;
        the run goes on.
        """
        self._events.append(event)
        for sink in self._sinks:
            try:
                sink(event)
            except Exception as exc:
                self._sinks = tuple(s for s in self._sinks if s is not sink)
                warnings.warn(
                    f"Stopped recording or showing run {self.run_id}: {exc}",
                    RuntimeWarning,
                    stacklevel=3,
                )

    def _attach_hook(self) -> None:
        """Make the agent's ``on_event`` hook the first sink of the run, if it has one."""
        if self._config.on_event is not None:
            from glassagent._agent.hook import EventHook

            self._hook = EventHook(self._config.on_event)
            self._sinks = (self._hook,)

    async def _hook_caught_up(self) -> None:
        """Wait until an async ``on_event`` hook has seen every event so far."""
        if self._hook is not None:
            await self._hook.drain()

    def _dicts(self) -> list[dict[str, Any]]:
        from glassagent._core.record.redact import redacted

        redact = self._output_redact()
        return [redacted(event, redact) for event in self._events]

    def save_events(self, path: str | os.PathLike[str], *, append: bool = False) -> Self:
        """Record the run to a JSON Lines file: a header, then one event per line, as they come.

        The events so far are written now; each later one is appended the moment the run
        emits it, so the file is complete when the run ends, and holds every step up to a
        crash. Call it before awaiting or iterating the run to record all of it:
        ``result = await agent.run("...").save_events("run.jsonl")``. Every line passes the
        agent's `redact` hook. Read the file back with `glassagent.events.load_events`, or
        replay it with `glassagent.testing.ReplayClient`.

        Args:
            path: The file (created or replaced; see `append`).
            append: Add to the end of an existing file (e.g. the turns of one conversation).

        Returns:
            The run itself, to await or iterate.

        Raises:
            UserError: When the file cannot be written, or the redact hook fails.
        """
        from glassagent._core.record import jsonl
        from glassagent._core.record.redact import redacted

        config, redact = self._config, self._output_redact(live=self._result is None)
        client = config.client
        head = jsonl.header(self.run_id, client.provider_name, client.model, config.definitions)
        text = jsonl.line(redacted(head, config.redact))
        text += "".join(jsonl.line(data) for data in self._dicts())
        jsonl.write(path, text, append=append)
        if self._result is None:
            self._sinks += (jsonl.EventWriter(path, redact),)
        return self

    def display(self) -> Self:
        """Show the run's timeline in a notebook, updated in place while the run streams.

        ``result = await agent.run("...").display()`` shows each step as it happens (needs
        IPython, i.e. a Jupyter notebook). A run that has ended is shown once.

        Returns:
            The run itself, to await or iterate.

        Raises:
            UserError: Without IPython, or outside a notebook.
        """
        from glassagent._core.record.live import LiveDisplay

        live = LiveDisplay(self._repr_html_)
        if self._result is None:
            self._sinks += (live,)
        return self

    def _status(self) -> str | None:
        return "not started" if self._producer is None and not self._events else None

    def _repr_html_(self) -> str:
        from glassagent._core.record.render import html_timeline

        return html_timeline(self._dicts(), status=self._status())

    def _repr_markdown_(self) -> str:
        from glassagent._core.record.render import markdown_timeline

        return markdown_timeline(self._dicts(), status=self._status())
