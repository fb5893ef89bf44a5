"""Server-sent events: the ``data`` payloads of an ``text/event-stream`` body."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator


async def sse_data(lines: AsyncIterable[str]) -> AsyncIterator[str]:
    """Yield the data of each event in a stream of SSE lines.

    Multi-line data is joined with newlines; comments (``: ...``) and other fields (``event``,
    ``id``, ``retry``) are skipped. An event still open when the stream ends is yielded too.

    Args:
        lines: The body's lines, without line terminators.
    """
    data: list[str] = []
    async for line in lines:
        if not line:
            if data:
                yield "\n".join(data)
                data = []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if name == "data":
            data.append(value[1:] if value.startswith(" ") else value)
    if data:
        yield "\n".join(data)
