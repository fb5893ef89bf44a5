"""Wire capture (``record_wire=True``): a call's bodies, key masked, as a `WireRecord`.

The raw-httpx clients keep the JSON they send and read anyway (`LLMResponse.raw_request`
and ``raw_response``); `attach` turns them into the answer's `WireRecord`. `GeminiClient`
reads through google-genai, so its answer body is captured under google-genai by `tee`
and read back by `read_body`. Nothing here runs unless the client records: a client that
does not pays nothing. Only bodies are kept, never headers; a key inside a body (a server
echoing it back) is masked with `http.redact`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace
from functools import cache
from typing import TYPE_CHECKING, Any, cast

from glassagent._core.messages import LLMResponse, WireRecord
from glassagent._providers.http import redact
from glassagent._providers.sse import SSEReader

if TYPE_CHECKING:
    import httpx


def masked(value: Any, secret: str | None) -> Any:
    """The JSON value `value` with `secret` masked in every string (keys too).

    A value that does not hold the secret is returned as it is (one ``json.dumps`` tells);
    otherwise a masked copy.
    """
    if not secret:
        return value
    if '"' not in secret and "\\" not in secret:  # as written in JSON text: a plain search
        try:
            text = json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError):
            text = None
        if text is not None and secret.strip() not in text:
            return value
    return _masked(value, secret)


def _masked(value: Any, secret: str) -> Any:
    if isinstance(value, str):
        return redact(value, secret)
    if isinstance(value, dict):
        return {
            (redact(k, secret) if isinstance(k, str) else k): _masked(v, secret)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_masked(v, secret) for v in value]
    return value


def record(request: Any, response: Any, *, secret: str | None, streamed: bool) -> WireRecord:
    """The `WireRecord` of a call's bodies, `secret` masked in both."""
    return WireRecord(
        request=masked(request, secret), response=masked(response, secret), streamed=streamed
    )


def attach(response: LLMResponse, *, secret: str | None, streamed: bool) -> LLMResponse:
    """`response` with the `WireRecord` of its ``raw_request`` and ``raw_response``."""
    wire = record(response.raw_request, response.raw_response, secret=secret, streamed=streamed)
    return replace(response, wire=wire)


def read_body(content: bytes, *, streamed: bool) -> Any:
    """A captured body as JSON: the parsed body, or the JSON payloads of an SSE stream.

    A payload that is not JSON is kept as its text.
    """
    text = content.decode("utf-8", "replace")
    if not streamed:
        return _json_or_text(text)
    reader = SSEReader()
    events = reader.feed(text.splitlines()) + reader.end()
    return [_json_or_text(data) for _, data in events]


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def tee(response: httpx.Response, sink: list[bytes]) -> None:
    """Copy each piece of `response`'s body into `sink` as whoever reads it reads it."""
    inner = cast("httpx.AsyncByteStream", response.stream)
    response.stream = _tee_stream()(inner, sink)  # type: ignore[call-arg]


@cache
def _tee_stream() -> type[httpx.AsyncByteStream]:
    """The class of teed bodies (made on first use: httpx is imported lazily)."""
    import httpx

    class TeeStream(httpx.AsyncByteStream):
        """An httpx byte stream that keeps a copy of what is read from it."""

        def __init__(self, inner: httpx.AsyncByteStream, sink: list[bytes]) -> None:
            self._inner = inner
            self._sink = sink

        async def __aiter__(self) -> AsyncIterator[bytes]:
            async for chunk in self._inner:
                self._sink.append(chunk)
                yield chunk

        async def aclose(self) -> None:
            await self._inner.aclose()

    return TeeStream
