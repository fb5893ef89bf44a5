"""`WireClient`: a full HTTP client made from a `Wire` (how one provider speaks JSON over HTTP).

A wire says what only its provider knows: the request body, how an answer or a stream event
is read (`WireReader`), the stop-reason map, the path, the stream's framing and any error it
maps itself. `WireClient` does the rest the same way for every provider: attachments, the
transport with its deadline, stall timeout, size limit and retries, key masking, recorded
bodies, and the JSON tool protocol for models without native tool calling.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Callable,
    Iterable,
    Iterator,
    Mapping,
)
from contextlib import aclosing, contextmanager
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from glassagent._core import json_protocol
from glassagent._core.client import RequestClient
from glassagent._core.errors import GlassAgentError, ProviderError, ResponseParseError
from glassagent._core.json_stream import ReplyStream, final_deltas, streamed_deltas
from glassagent._core.messages import (
    Attachment,
    LLMResponse,
    StopReason,
    StreamPart,
    TextDelta,
)
from glassagent._core.request import ModelRequest
from glassagent._providers import capture, shapes
from glassagent._providers.attachments import AttachmentGate
from glassagent._providers.builder import ResponseBuilder
from glassagent._providers.call import CallLimits, final_response, retrying
from glassagent._providers.http import mask_key, redact
from glassagent._providers.sse import event_batches
from glassagent._providers.transport import HTTPTransport

if TYPE_CHECKING:
    import httpx

    from glassagent._core.attachments import AttachmentPolicy
    from glassagent._core.retry import RetryPolicy


_Event = tuple["str | None", str]
"""One event of a stream: its SSE name (`None` for an NDJSON line) and its data."""


class WireReader(ABC):
    """Reads one answer of a wire, a whole body or stream events, into a `ResponseBuilder`.

    A reader is made per attempt (`Wire.reader`). Check every value where it enters and
    raise `ResponseParseError` (`parse_error`) for a wrong shape.

    Args:
        provider: The provider's name, for errors.
        secret: The API key, kept out of errors.
    """

    def __init__(self, provider: str, secret: str | None = None) -> None:
        self.provider = provider
        self.secret = secret
        self.builder = ResponseBuilder(provider)
        """Collects the answer's text, thinking, tool calls, usage and stop reason."""

    @abstractmethod
    def read(self, body: Any) -> None:
        """Read the whole JSON body of a request sent without streaming."""

    @abstractmethod
    def event(self, name: str | None, data: Any) -> Iterable[StreamPart]:
        """Read one stream event and return the deltas it carried.

        Args:
            name: The SSE event name (``"message"`` when the event names none); `None`
                for an NDJSON line.
            data: The event's data (or the line), parsed as JSON.
        """

    def decode(self, data: str) -> Any:
        """Parse one event's data (or one NDJSON line); a malformed one raises."""
        ok, value = shapes.parse_json(data)
        if not ok:
            detail = f"a malformed stream event {data[:200]!r}"
            raise shapes.parse_error(self.provider, detail, secret=self.secret)
        return value

    @property
    def ended(self) -> bool:
        """Whether the stream's last event was read; later ones are read and dropped."""
        return False

    def complete(self) -> bool:
        """Whether the answer is whole once the stream ends (else `incomplete` is raised)."""
        return self.ended or self.builder.finished

    def incomplete(self) -> ResponseParseError:
        """The error of a stream that ended before the answer was complete."""
        detail = "a stream that ended before the answer was complete"
        return shapes.parse_error(self.provider, detail, secret=self.secret)

    def finish(self, response: LLMResponse) -> LLMResponse:
        """The built answer as the client returns it (by default unchanged)."""
        return response


class Wire(ABC):
    """How one provider speaks JSON over HTTP: what `WireClient` needs to be a full client.

    Subclass it, set the class attributes, and implement `request_body` and `reader`.
    """

    provider: str = "custom"
    """The provider's name, shown in events and errors."""
    path: str = "/"
    """The path of ``POST`` requests under the base URL (with its query, if any)."""
    framing: ClassVar[Literal["sse", "ndjson"]] = "sse"
    """How a streamed body is cut into events: server-sent events or JSON lines."""
    end_marker: ClassVar[str | None] = None
    """An SSE data value that ends the stream and is not JSON (OpenAI's ``[DONE]``)."""
    stop_reasons: ClassVar[Mapping[str, StopReason]] = {}
    """The provider's stop reasons mapped to glassagent's (`StopReason`)."""
    start_hint: str = "Check the address and the network."
    """Added to the error of a connection that could not be made."""

    @abstractmethod
    def request_body(self, model: str, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        """The JSON body of `request` (read the choice from ``request.tool_choice``).

        Raises:
            ConfigurationError: For a setting or a tool choice this wire cannot honour.
        """

    @abstractmethod
    def reader(self, request: ModelRequest, secret: str | None) -> WireReader:
        """A new reader for one answer to `request`."""

    def status_error(self, status: int, body: str, secret: str | None) -> ProviderError | None:
        """A provider-specific error for an error status, or `None` for the standard one."""
        return None

    def takes_by_url(self, attachment: Attachment) -> bool:
        """Whether a remote attachment goes to the provider as its URL (else downloaded)."""
        return False


class WireClient(RequestClient):
    """A full client from a `Wire`: deadlines, stall timeout, retries, size limits, keys.

    Args:
        model: The model name the provider knows.
        wire: How the provider speaks.
        base_url: The API root requests go to.
        headers: Headers of every request (the key's among them).
        secret: The API key, masked in every error, repr and recorded body.
        http_client: An ``httpx.AsyncClient`` to use; the caller keeps ownership. By default
            the client creates and owns one per event loop.
        max_connections: Connections the client's own pool opens at most (default 256).
        retry: How failed calls are retried (`ModelSettings.retry` overrides it per call).
        attachment_policy: Which local files attachments may read and whether remote ones
            are passed on or downloaded; `AttachmentPolicy()` when not given.
        record_wire: Attach each call's bodies to its answer (`LLMResponse.wire`).
        fast_pool: Use glassagent's cheaper connection assignment for the owned pool
            (`None`: on unless ``GLASSAGENT_FAST_POOL=0``).
        transport: Makes the transport (a subclass's own, e.g. one that adds a token).
    """

    def __init__(
        self,
        model: str,
        wire: Wire,
        *,
        base_url: str,
        headers: Mapping[str, str] | None = None,
        secret: str | None = None,
        http_client: httpx.AsyncClient | None = None,
        max_connections: int | None = None,
        retry: RetryPolicy | None = None,
        attachment_policy: AttachmentPolicy | None = None,
        record_wire: bool = False,
        fast_pool: bool | None = None,
        transport: Callable[..., HTTPTransport] = HTTPTransport,
    ) -> None:
        self.model = model
        self.provider_name = wire.provider
        self.wire = wire
        """How this client's provider speaks."""
        self.retry: RetryPolicy | None = retry
        """How failed calls are retried, unless `ModelSettings.retry` says otherwise."""
        self.record_wire: bool = record_wire
        """Whether answers carry their wire bodies (`LLMResponse.wire`)."""
        self._secret = secret or None
        self._attachments = AttachmentGate(attachment_policy, wire.provider, wire.takes_by_url)
        self._transport = transport(
            provider=wire.provider,
            base_url=base_url,
            headers=dict(headers or {}),
            http_client=http_client,
            secret=self._secret,
            start_hint=wire.start_hint,
            # the wire's method, not the client's: no cycle keeps a dropped client alive
            status_hook=_status_hook(wire, self._secret),
            max_connections=max_connections,
            fast_pool=fast_pool,
        )

    def get_masked_api_key(self) -> str:
        """The API key's only printable form, e.g. ``sk-p...x9Qk`` (``<none>`` without one)."""
        return mask_key(self._secret)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    @property
    def base_url(self) -> str:
        """The API root requests go to."""
        return self._transport.base_url

    async def aclose(self) -> None:
        """Close the HTTP client this instance created (a supplied one stays open)."""
        await self._transport.aclose()

    async def _body(
        self, request: ModelRequest, *, stream: bool, limits: CallLimits
    ) -> tuple[dict[str, Any], bool]:
        """The body of one attempt, and whether its reply is read by the JSON tool protocol."""
        return self.wire.request_body(self.model, request, stream=stream), False

    def _finish(
        self, reader: WireReader, body: dict[str, Any], raw: Any, json_mode: bool
    ) -> LLMResponse:
        response = reader.builder.build(
            stop_reasons=self.wire.stop_reasons,
            model=self.model,
            raw_response=raw,
            raw_request=body,
        )
        response = reader.finish(response)
        if self.record_wire:
            response = capture.attach(response, secret=self._secret, streamed=isinstance(raw, list))
        return json_protocol.read_response(response) if json_mode else response

    async def send(self, request: ModelRequest) -> LLMResponse:
        """Send one `ModelRequest` and return the complete answer (one HTTP request).

        Args:
            request: The call, built once by `ModelRequest.build`.
        """
        request = request.with_messages(await self._attachments.prepare(request.messages))
        made: list[tuple[dict[str, Any], bool]] = []  # the body, made by the first attempt

        async def attempt(limits: CallLimits) -> AsyncGenerator[StreamPart, None]:
            made[:] = made or [await self._body(request, stream=False, limits=limits)]
            body, json_mode = made[0]
            raw = await self._transport.post_json(self.wire.path, body, limits)
            with masking(self._secret):
                reader = self.wire.reader(request, self._secret)
                reader.read(raw)
                response = self._finish(reader, body, raw, json_mode)
            yield response

        return await final_response(retrying(self, attempt, request.settings, streamed=False))

    async def send_stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        """Stream the answer to one `ModelRequest`.

        Args:
            request: The call, built once by `ModelRequest.build`.
        """
        request = request.with_messages(await self._attachments.prepare(request.messages))
        made: list[tuple[dict[str, Any], bool]] = []  # the body, made by the first attempt

        def attempt(limits: CallLimits) -> AsyncGenerator[StreamPart, None]:
            return self._stream_once(request, limits, made)

        async with aclosing(retrying(self, attempt, request.settings)) as parts:
            async for part in parts:
                yield part

    async def _stream_once(
        self, request: ModelRequest, limits: CallLimits, made: list[tuple[dict[str, Any], bool]]
    ) -> AsyncGenerator[StreamPart, None]:
        """One streamed attempt, with the key masked in any error a reader raises."""
        with masking(self._secret):
            async with aclosing(self._read_stream(request, limits, made)) as parts:
                async for part in parts:
                    yield part

    async def _read_stream(
        self, request: ModelRequest, limits: CallLimits, made: list[tuple[dict[str, Any], bool]]
    ) -> AsyncGenerator[StreamPart, None]:
        """One streamed attempt: read the body to its end, yielding parts as they come."""
        made[:] = made or [await self._body(request, stream=True, limits=limits)]
        body, json_mode = made[0]
        reader = self.wire.reader(request, self._secret)
        replies = ReplyStream() if json_mode else None
        events: list[Any] = []
        marked = False
        async with self._transport.stream(self.wire.path, body, limits) as response:
            async for batch in self._events(response):
                for name, data in batch:
                    if marked or reader.ended:  # read to the end: the connection goes back
                        continue
                    if data.strip() == self.wire.end_marker:
                        marked = True
                        continue
                    value = reader.decode(data)
                    events.append(value)
                    for part in reader.event(name, value):
                        if replies is not None and isinstance(part, TextDelta):
                            for delta in streamed_deltas(replies, part.text):
                                yield delta
                        else:
                            yield part
        if not marked and not reader.complete():
            raise reader.incomplete()
        final = self._finish(reader, body, events, json_mode)
        if json_mode:
            for part in final_deltas(final, reader.builder.thinking_text, replies):
                yield part
        yield final

    async def _events(self, response: httpx.Response) -> AsyncIterator[list[_Event]]:
        """The stream's events, a list per network piece: SSE events or non-empty lines."""
        lines = self._transport.line_batches(response, self.wire.path)
        if self.wire.framing == "sse":
            async for batch in event_batches(lines):
                yield list(batch)
            return
        async for lines_ in lines:
            events: list[_Event] = [(None, line) for line in lines_ if line.strip()]
            if events:
                yield events


@contextmanager
def masking(secret: str | None) -> Iterator[None]:
    """Mask `secret` in the message and body of any glassagent error raised in the block.

    A reader quotes what it could not read, and a server may echo the key back in it.
    """
    try:
        yield
    except GlassAgentError as exc:
        if secret:
            exc.message = redact(exc.message, secret)
            exc.args = (exc.message, *exc.args[1:])
            body = getattr(exc, "body", None)
            if isinstance(body, str):
                exc.body = redact(body, secret)  # type: ignore[attr-defined]
        raise


def _status_hook(wire: Wire, secret: str | None) -> Callable[[int, str], ProviderError | None]:
    """The transport's hook: the wire's own error for a status (a closure: no key in a repr)."""

    def hook(status: int, body: str) -> ProviderError | None:
        return wire.status_error(status, body, secret)

    return hook
