"""Runs as JSON Lines: a header line per run, then one standard event dict per line.

```text
{"type": "recording", "format": 1, "glassagent": "0.1.0", "run_id": "...", "provider": ...,
 "model": ..., "tools": [{"name": ..., "description": ..., "parameters": {...}}], "timestamp": ...}
{"type": "llm_request", "run_id": "...", "seq": 0, "timestamp": ..., ...}
...
```
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from glassagent._core.errors import UserError
from glassagent._core.events import BaseEvent, LLMRequestEvent, parse_event, to_jsonable
from glassagent._core.record.redact import Redact, redacted
from glassagent._version import __version__

if TYPE_CHECKING:
    from glassagent._core.events import Event
    from glassagent._core.messages import ToolDefinition

FORMAT = 1
"""The version of the recording format; a reader refuses newer ones."""

HEADER_TYPE = "recording"
"""The ``type`` of a header line."""

TERMINAL = frozenset({"complete", "aborted", "error", "budget_exceeded"})
"""The types of the events that end a run."""

Path = str | os.PathLike[str]

_TOO_DEEP = "its lists and objects are nested too deeply to read."


def header(
    run_id: str | None,
    provider: str | None,
    model: str | None,
    tools: Sequence[ToolDefinition],
) -> dict[str, Any]:
    """The header line of one run's recording."""
    return {
        "type": HEADER_TYPE,
        "format": FORMAT,
        "glassagent": __version__,
        "run_id": run_id,
        "provider": provider,
        "model": model,
        "tools": to_jsonable(tuple(tools)),
        "timestamp": time.time(),
    }


def header_of(events: Sequence[Event]) -> dict[str, Any]:
    """The header of a run recorded after the fact: its first model request tells the rest."""
    request = next((e for e in events if isinstance(e, LLMRequestEvent) and not e.depth), None)
    run_id = next((e.run_id for e in events if not e.depth), events[0].run_id if events else None)
    if request is None:
        return header(run_id, None, None, ())
    return header(run_id, request.provider, request.model, request.tools)


def line(data: dict[str, Any]) -> str:
    """One JSON line (values JSON cannot hold become their ``repr``)."""
    return json.dumps(data, ensure_ascii=False, default=repr) + "\n"


def save_events(
    path: Path,
    events: Iterable[Event],
    *,
    redact: Redact | None = None,
    append: bool = False,
) -> None:
    """Write events as JSON Lines: a header line before each run's events, then one per line.

    Events of several runs (one after the other) get a header each, so a file can hold a whole
    conversation; `load_events` reads them all back. The events of a sub-agent's run (an
    agent used as a tool) stay where they came, inside their top-level run, under its header.

    Args:
        path: The file to write (created or replaced; see `append`).
        events: The events, e.g. ``result.events`` or ``[*first.events, *second.events]``.
        redact: A hook every line passes through first (`Redact`), header lines too.
        append: Add to the end of an existing file instead of replacing it.

    Raises:
        UserError: When the file cannot be written, or the hook fails.
    """
    runs: dict[str, list[Event]] = {}
    roots: dict[str, str] = {}  # run id -> the id of the top-level run it is nested in
    for event in events:
        root = event.run_id
        if event.depth and event.parent_run_id is not None:
            root = roots.get(event.parent_run_id, event.parent_run_id)
        roots.setdefault(event.run_id, root)
        runs.setdefault(roots[event.run_id], []).append(event)
    text = "".join(
        line(redacted(header_of(run), redact)) + "".join(line(redacted(e, redact)) for e in run)
        for run in runs.values()
    )
    write(path, text, append=append)


def write(path: Path, text: str, *, append: bool) -> None:
    """Write (or append) `text` to `path`, as UTF-8.

    Raises:
        UserError: When the file cannot be written.
    """
    try:
        with open(path, "a" if append else "w", encoding="utf-8") as file:
            file.write(text)
    except OSError as exc:
        raise UserError(f"Cannot write the events to {os.fspath(path)!r}: {exc}") from None


def load_events(path: Path) -> tuple[Event, ...]:
    """Read the events of a file written by `save_events` (header lines are checked, skipped).

    A file of bare event lines (no header), such as ``glassagent run --json`` prints, reads
    too.

    Args:
        path: The JSON Lines file.

    Raises:
        UserError: When the file cannot be read, a line is not an event, or the file was
            written in a newer format; the message names the line.
    """
    return tuple(event for event, _ in recorded(path))


def recorded(source: Iterable[Event | dict[str, Any]] | Path) -> list[tuple[Event, dict[str, Any]]]:
    """Each event of a file, or of events and event dicts, with its dict as recorded.

    Header dicts are checked and skipped.

    Raises:
        UserError: When the file or an item is not events.
    """
    if isinstance(source, (str, os.PathLike)):
        items: Iterable[tuple[str, Any]] = _read_lines(source)
    else:
        items = ((f"item {number}", item) for number, item in enumerate(source, 1))
    pairs: list[tuple[Event, dict[str, Any]]] = []
    for where, item in items:
        if isinstance(item, BaseEvent):
            event: Event = item  # type: ignore[assignment]  # every BaseEvent is an Event
            pairs.append((event, event.to_dict()))
            continue
        if not isinstance(item, dict):
            raise UserError(f"{where} is not an event: {type(item).__name__}.")
        if item.get("type") == HEADER_TYPE:
            _check_header(item, where)
            continue
        try:
            pairs.append((parse_event(item), item))
        except UserError as exc:
            raise UserError(f"{where}: {exc}") from None
        except RecursionError:
            raise UserError(f"{where} is not an event: {_TOO_DEEP}") from None
    return pairs


def _read_lines(path: Path) -> list[tuple[str, Any]]:
    try:
        with open(path, encoding="utf-8") as file:
            lines = file.read().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"Cannot read the events of {os.fspath(path)!r}: {exc}") from None
    items: list[tuple[str, Any]] = []
    for number, text in enumerate(lines, 1):
        if not text.strip():
            continue
        where = f"{os.fspath(path)}, line {number}"
        try:
            items.append((where, json.loads(text)))
        except ValueError as exc:
            raise UserError(f"{where} is not JSON: {exc}") from None
        except RecursionError:
            raise UserError(f"{where} is not an event: {_TOO_DEEP}") from None
    return items


def _check_header(data: dict[str, Any], where: str) -> None:
    version = data.get("format")
    if not isinstance(version, int) or version > FORMAT:
        raise UserError(
            f"{where}: recording format {version!r} is not one this glassagent reads (it reads "
            f"up to {FORMAT}); it was written by glassagent {data.get('glassagent')!r}."
        )


class EventWriter:
    """Appends each event of a live run to a file as it is emitted (one open per line).

    The file is never held open between events, so nothing leaks when a run is dropped.
    """

    def __init__(self, path: Path, redact: Redact | None) -> None:
        self.path = path
        self.redact = redact

    def __call__(self, event: Event) -> None:
        """Append `event` as one line."""
        write(self.path, line(redacted(event, self.redact)), append=True)
