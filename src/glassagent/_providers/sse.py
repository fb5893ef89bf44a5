"""Server-sent events: the payloads of a ``text/event-stream`` body.

Bodies are read a network piece at a time: `LineSplitter` cuts each piece into lines and
`SSEReader` folds them into events, so a streamed answer costs one step of the async
machinery per piece received rather than several per line.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable

_NEWLINES = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
"""What `str.splitlines` splits on (the line ends httpx's ``aiter_lines`` honours)."""


class LineSplitter:
    """Cuts text arriving in pieces into lines, as ``str.splitlines`` would cut the whole.

    A carriage return at the end of a piece waits for the next piece, which may begin with
    its line feed.
    """

    def __init__(self) -> None:
        self._partial: list[str] = []
        self._trailing_cr = False

    def feed(self, text: str) -> list[str]:
        """The lines `text` completes (without their line ends)."""
        if self._trailing_cr:
            text = "\r" + text
            self._trailing_cr = False
        if text.endswith("\r"):
            self._trailing_cr = True
            text = text[:-1]
        if not text:
            return []
        ends_line = text[-1] in _NEWLINES
        lines = text.splitlines()
        if self._partial:
            lines[0] = "".join(self._partial) + lines[0]
            self._partial = []
        if not ends_line:
            self._partial = [lines.pop()]
        return lines

    def end(self) -> list[str]:
        """The last line, when the text did not end with a line end."""
        if not self._partial and not self._trailing_cr:
            return []
        line = "".join(self._partial)
        self._partial, self._trailing_cr = [], False
        return [line]


class SSEReader:
    """Folds SSE lines into ``(event, data)`` pairs.

    ``event`` is the event's name (``message`` unless an ``event:`` field names it). Multi-line
    data is joined with newlines; comments (``: ...``), ``id`` and ``retry`` are skipped; an
    event still open when the stream ends comes from `end`. llama.cpp's server reports a
    failure mid-stream as a bare ``error: {...}`` line, read as ``("error", "{...}")``.
    """

    def __init__(self) -> None:
        self._event = "message"
        self._data: list[str] = []

    def feed(self, lines: Iterable[str]) -> list[tuple[str, str]]:
        """The events `lines` complete."""
        events: list[tuple[str, str]] = []
        for line in lines:
            if not line:
                if self._data:
                    events.append((self._event, "\n".join(self._data)))
                self._event, self._data = "message", []
                continue
            if line[0] == ":":
                continue
            name, _, value = line.partition(":")
            if value[:1] == " ":
                value = value[1:]
            if name == "data":
                self._data.append(value)
            elif name == "event":
                self._event = value
            elif name == "error":
                self._event, self._data = "error", [value]
        return events

    def end(self) -> list[tuple[str, str]]:
        """The event still open when the stream ended, if any."""
        if not self._data:
            return []
        event = (self._event, "\n".join(self._data))
        self._event, self._data = "message", []
        return [event]


async def event_batches(
    batches: AsyncIterable[list[str]],
) -> AsyncIterator[list[tuple[str, str]]]:
    """The events of a stream of line batches, a list per batch that completes any.

    Args:
        batches: The body's lines, without line terminators, a list per network piece.
    """
    reader = SSEReader()
    async for lines in batches:
        if events := reader.feed(lines):
            yield events
    if events := reader.end():
        yield events
