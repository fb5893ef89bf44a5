"""Server-sent events: the payloads of a ``text/event-stream`` body."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator


async def sse_events(lines: AsyncIterable[str]) -> AsyncIterator[tuple[str, str]]:
    """Yield ``(event, data)`` for each event in a stream of SSE lines.

    ``event`` is the event's name (``message`` unless an ``event:`` field names it). Multi-line
    data is joined with newlines; comments (``: ...``), ``id`` and ``retry`` are skipped; an
    event still open when the stream ends is yielded too. llama.cpp's server reports a failure
    mid-stream as a bare ``error: {...}`` line, which is yielded as ``("error", "{...}")``.

    Args:
        lines: The body's lines, without line terminators.
    """
    event = "message"
    data: list[str] = []
    async for line in lines:
        if not line:
            if data:
                yield event, "\n".join(data)
            event, data = "message", []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value
        elif name == "error":
            event, data = "error", [value]
    if data:
        yield event, "\n".join(data)
