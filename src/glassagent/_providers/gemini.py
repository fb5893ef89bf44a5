"""`GeminiClient`: Google Gemini through the official google-genai SDK, over our own httpx."""

from __future__ import annotations

import contextvars
import json
import re
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any

from glassagent._core.attachments import AttachmentPolicy
from glassagent._core.client import RequestClient
from glassagent._core.errors import (
    AuthenticationError,
    ConfigurationError,
    GlassAgentError,
    ProviderError,
    ProviderUnavailableError,
    ResponseParseError,
)
from glassagent._core.messages import (
    Attachment,
    LLMResponse,
    Message,
    ModelSettings,
    StreamPart,
)
from glassagent._core.request import ModelRequest
from glassagent._core.retry import RetryPolicy
from glassagent._providers import capture, connection_pool, gemini_cache
from glassagent._providers import gemini_wire as wire
from glassagent._providers.attachments import AttachmentGate
from glassagent._providers.call import (
    IDENTITY,
    CallLimits,
    final_response,
    retrying,
)
from glassagent._providers.config import resolve
from glassagent._providers.http import (
    error_for_status,
    mask_key,
    masked_cause,
    redact,
    retry_after_seconds,
)
from glassagent._providers.pools import PerLoop
from glassagent._providers.shapes import snippet
from glassagent._providers.transport import new_http_client, pool_size, release

if TYPE_CHECKING:
    import httpx

    from glassagent._core.output import OutputMode

ENV_KEY = "GEMINI_API_KEY"
_Sdk = tuple[Any, Any]
"""A google-genai client and its fast route (a `gemini_sdk.Route`, or `None`)."""
_RETRY_DELAY = re.compile(r"^\s*([0-9.]+)s\s*$")


@dataclass(frozen=True)
class _Call:
    """One call's request: sent through google-genai's public methods, or the fast route."""

    generate: Callable[[], Awaitable[Any]]
    """Sends it to ``generateContent``: google-genai's response."""
    generate_stream: Callable[[], Awaitable[Any]]
    """Sends it to ``streamGenerateContent``: google-genai's chunks, the first sending it."""
    cache: gemini_cache.Made | None = None
    """The cached content it names, whose making the first answer counts (`charged`)."""


@dataclass
class _Exchange:
    """One attempt's httpx requests and responses (captured by client hooks), and its limits."""

    limits: CallLimits
    record: bool = False
    """Whether the bodies received are kept (``record_wire``), in `received`."""
    requests: list[httpx.Request] = field(default_factory=list)
    responses: list[httpx.Response] = field(default_factory=list)
    received: list[list[bytes]] = field(default_factory=list)

    def release(self) -> None:
        """Free the closed responses at once (see `transport.release`)."""
        for response in self.responses:
            if response.is_closed:
                release(response)

    def body(self) -> Any:
        if not self.requests:
            return None
        try:
            return json.loads(self.requests[-1].content)
        except (ValueError, RuntimeError):
            return None


_EXCHANGE: contextvars.ContextVar[_Exchange | None] = contextvars.ContextVar(
    "glassagent_gemini_exchange", default=None
)


async def _on_request(request: httpx.Request) -> None:
    exchange = _EXCHANGE.get()
    if exchange is not None:
        request.headers["Accept-Encoding"] = IDENTITY  # the size limit counts what is held
        exchange.requests.append(request)


async def _on_response(response: httpx.Response) -> None:
    exchange = _EXCHANGE.get()
    if exchange is not None:
        exchange.limits.guard(response)  # before google-genai reads the body
        exchange.responses.append(response)
        if exchange.record:
            exchange.received.append([])
            capture.tee(response, exchange.received[-1])


def _retry_delay(details: Any) -> float | None:
    """Seconds from a ``google.rpc.RetryInfo`` detail (``"retryDelay": "12s"``), if any."""
    error = details.get("error", details) if isinstance(details, dict) else None
    for detail in (error or {}).get("details", []) if isinstance(error, dict) else []:
        if isinstance(detail, dict) and str(detail.get("@type", "")).endswith("RetryInfo"):
            match = _RETRY_DELAY.match(str(detail.get("retryDelay", "")))
            if match:
                return float(match.group(1))
    return None


def _by_url(attachment: Attachment) -> bool:
    """Gemini takes any remote attachment by URL, as a ``file_data`` part."""
    return True


class GeminiClient(RequestClient):
    """Google Gemini on the official ``google-genai`` SDK (install ``glassagent[gemini]``).

    All traffic goes through an ``httpx.AsyncClient`` (ours, or the one you pass), so it can be
    inspected and mocked like any httpx traffic. The API key is never shown: not in ``repr``,
    events, logs or errors; `get_masked_api_key` gives its only printable form.

    Prompt caching (`ModelSettings.prompt_cache`) makes explicit cached contents and reuses
    them while they live (see "Prompt caching").
    """

    provider_name = "gemini"

    def __init__(
        self,
        model: str = "gemini-2.5-flash",
        *,
        api_key: str | None = None,
        http_client: httpx.AsyncClient | None = None,
        max_connections: int | None = None,
        base_url: str | None = None,
        streaming: bool = True,
        retry: RetryPolicy | None = None,
        attachment_policy: AttachmentPolicy | None = None,
        record_wire: bool = False,
        fast_pool: bool | None = None,
    ) -> None:
        """Create a Gemini client.

        Args:
            model: The Gemini model, e.g. ``"gemini-2.5-flash"``.
            api_key: The API key; defaults to the ``GEMINI_API_KEY`` environment variable.
            http_client: An ``httpx.AsyncClient`` to send requests with. It is not closed by
                `aclose`. glassagent adds two event hooks to it to capture the exact request.
            max_connections: Connections the client's own pool opens at most and keeps
                alive, per event loop (default 256); more calls at once wait for one. Not
                with ``http_client``, whose own limits apply.
            base_url: Another endpoint for the Gemini API (e.g. a proxy); defaults to the
                ``GEMINI_API_BASE`` environment variable, then Google's own.
            streaming: Use the streaming endpoint in `stream`; when False, `stream` makes one
                ``generateContent`` call and yields its text as one delta.
            retry: How failed calls are retried (`ModelSettings.retry` overrides it per
                call); by default `RetryPolicy()`. Gemini's ``RetryInfo`` delay is honoured.
            attachment_policy: Which local files attachments may read, and whether remote ones
                are passed on (as ``file_data`` parts Gemini fetches) or downloaded;
                `AttachmentPolicy()` when not given.
            record_wire: Attach each call's request and response bodies to its answer
                (`LLMResponse.wire`), so ``llm_response`` events and recordings carry them:
                the JSON body google-genai sent and the one Gemini sent back (a stream's SSE
                payloads), the key masked in them (see `WireRecord`).
            fast_pool: Assign the owned pool's connections the cheaper way (`None`: yes unless
                ``GLASSAGENT_FAST_POOL=0``); see `HTTPTransport`.

        Raises:
            ConfigurationError: When no key is given or set, the extra is not installed, or
                ``max_connections`` is not a positive integer or comes with an
                ``http_client``.
        """
        self._pool_size = pool_size(max_connections, http_client)
        self._fast_pool = connection_pool.enabled(fast_pool)
        config = resolve(self.provider_name, api_key=api_key or None, base_url=base_url)
        key = config.api_key
        if not key:
            raise ConfigurationError(
                f"GeminiClient needs an API key: pass api_key=... or set {ENV_KEY}."
            )
        try:
            import google.genai  # noqa: F401
        except ImportError as exc:
            raise ConfigurationError(
                'GeminiClient needs google-genai: pip install "glassagent[gemini]"'
            ) from exc
        self.model = model
        self._attachments = AttachmentGate(attachment_policy, self.provider_name, _by_url)
        self.streaming: bool = streaming
        """Whether `stream` uses the streaming endpoint."""
        self.retry: RetryPolicy | None = retry
        """How failed calls are retried, unless `ModelSettings.retry` says otherwise."""
        self.record_wire: bool = record_wire
        """Whether answers carry their wire bodies (`LLMResponse.wire`)."""
        self.__key = key
        self._base_url = config.base_url
        self._contents = wire.RestContents()
        self._caches = gemini_cache.Caches()
        self._borrowed = None if http_client is None else self._sdk_client(http_client)
        self._pools: PerLoop[tuple[httpx.AsyncClient, _Sdk]] = PerLoop(self._own_sdk_client, _close)

    def _sdk_client(self, http: httpx.AsyncClient) -> _Sdk:
        """A google-genai client sending through `http`, and its fast route (or `None`).

        Two hooks on `http` capture each exchange (see `_on_request`).
        """
        from google import genai
        from google.genai import types

        from glassagent._providers import gemini_sdk

        hooks = http.event_hooks
        if _on_request not in hooks["request"]:
            hooks["request"].append(_on_request)
            hooks["response"].append(_on_response)
        http.event_hooks = hooks
        options = types.HttpOptions(httpx_async_client=http, base_url=self._base_url)
        sdk = genai.Client(api_key=self.__key, http_options=options)
        return sdk, gemini_sdk.route(sdk)

    def _own_sdk_client(self) -> tuple[httpx.AsyncClient, _Sdk]:
        http = new_http_client(self._pool_size, fast_pool=self._fast_pool)
        return http, self._sdk_client(http)

    async def _genai(self) -> _Sdk:
        """The google-genai client of the running loop (or the one on the borrowed client)."""
        if self._borrowed is not None:
            return self._borrowed
        return (await self._pools.get())[1]

    def get_masked_api_key(self) -> str:
        """The API key's only printable form, e.g. ``AIza...x9Qk``."""
        return mask_key(self.__key)

    def __repr__(self) -> str:
        return f"GeminiClient(model={self.model!r}, api_key={self.get_masked_api_key()!r})"

    def output_mode(self, *, tools: bool, settings: ModelSettings) -> OutputMode:
        """``native`` (``response_json_schema``) unless the run has tools (``tool``).

        Gemini models before Gemini 3 refuse a JSON answer format together with function
        calling, so a run with tools gets the final-answer tool.

        Args:
            tools: Whether the run offers tools of its own.
            settings: The run's settings.
        """
        return "tool" if tools else "native"

    async def _request(self, request: ModelRequest) -> _Call:
        from glassagent._providers import gemini_sdk

        messages = await self._attachments.prepare(request.messages)
        config = wire.to_config(request, wire.system_texts(messages))
        sdk, fast = await self._genai()
        messages, config, cache = await self._cached(sdk, request, messages, config)
        converted = None if fast is None else fast.prepare(self.model, config)
        if fast is not None and converted is not None:
            prepared = gemini_sdk.Prepared(self._contents.contents(messages), converted)
            return _Call(
                partial(fast.generate, prepared), partial(fast.generate_stream, prepared), cache
            )
        if request.settings.provider_options is not None:
            gemini_sdk.check_config(config)
        body = {"model": self.model, "contents": wire.to_contents(messages)[0], "config": config}
        models = sdk.aio.models
        return _Call(
            partial(models.generate_content, **body),
            partial(models.generate_content_stream, **body),
            cache,
        )

    async def _cached(
        self, sdk: Any, request: ModelRequest, messages: Sequence[Message], config: dict[str, Any]
    ) -> tuple[Sequence[Message], dict[str, Any], gemini_cache.Made | None]:
        """The messages and config to send, and the cached content they name, if any.

        See `gemini_cache`: the cached prefix leaves the request, which names the cache.
        """
        chosen = gemini_cache.plan(self.model, request, messages, config, self._contents)
        if chosen is None:
            return messages, config, None
        made = await self._caches.get(sdk, self.model, chosen, self.__key)
        if made is None or made.name is None:
            return messages, config, None
        return chosen.rest, gemini_cache.without_moved(config, made.name), made

    async def send(self, request: ModelRequest) -> LLMResponse:
        """Call ``generateContent`` with one `ModelRequest` and return the complete answer.

        Args:
            request: The call, built once by `ModelRequest.build`.
        """
        call = await self._request(request)

        def attempt(limits: CallLimits) -> AsyncGenerator[StreamPart, None]:
            return self._chat_once(call, limits)

        return await final_response(retrying(self, attempt, request.settings, streamed=False))

    async def send_stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        """Call ``streamGenerateContent`` (SSE) with one `ModelRequest`: deltas, then the answer.

        Args:
            request: The call, built once by `ModelRequest.build`.
        """
        call = await self._request(request)

        def attempt(limits: CallLimits) -> AsyncGenerator[StreamPart, None]:
            if not self.streaming:
                return self._chat_once(call, limits, deltas=True)
            return self._stream_once(call, limits)

        parts = retrying(self, attempt, request.settings, streamed=self.streaming)
        async with aclosing(parts):
            async for part in parts:
                yield part

    async def _chat_once(
        self, request: _Call, limits: CallLimits, *, deltas: bool = False
    ) -> AsyncGenerator[StreamPart, None]:
        """One ``generateContent`` attempt; with `deltas`, its thinking and text as deltas."""
        exchange = _Exchange(limits, self.record_wire)
        token = _EXCHANGE.set(exchange)
        failure: GlassAgentError | None = None
        try:
            response = await limits.wait(request.generate())
            accumulator = wire.Reader()
            parts = accumulator.add(response)
            final = accumulator.response(
                raw_response=response, raw_request=exchange.body(), streamed=False
            )
            final = self._with_wire(final, exchange, streamed=False)
            final = gemini_cache.charged(final, request.cache)
        except Exception as exc:
            failure = self._error(exc, exchange)
        finally:
            _EXCHANGE.reset(token)
            exchange.release()
        if failure is not None:
            raise failure  # outside the handler: the original is not chained as context
        for part in parts if deltas else ():
            yield part
        yield final

    async def _stream_once(
        self, request: _Call, limits: CallLimits
    ) -> AsyncGenerator[StreamPart, None]:
        """One ``streamGenerateContent`` attempt: deltas as they arrive, then the answer."""
        exchange = _Exchange(limits, self.record_wire)
        chunks: Any = None
        accumulator = wire.Reader()
        raw: list[Any] = []
        failure: GlassAgentError | None = None
        try:
            token = _EXCHANGE.set(exchange)
            try:  # the request goes out with the first chunk: capture it, then stop capturing
                chunks = await limits.wait(request.generate_stream())
                raw.append(await limits.wait(chunks.__anext__()))
            except StopAsyncIteration:
                pass
            finally:
                _EXCHANGE.reset(token)
            for delta in accumulator.add(raw[0]) if raw else ():
                yield delta
            # the guarded body bounds each later read (see `_on_response`); only the first
            # read above also waits for the request to be sent and answered
            while (chunk := await _next(chunks)) is not None:
                raw.append(chunk)
                for delta in accumulator.add(chunk):
                    yield delta
            response = accumulator.response(
                raw_response=raw, raw_request=exchange.body(), streamed=True
            )
            response = self._with_wire(response, exchange, streamed=True)
            response = gemini_cache.charged(response, request.cache)
        except Exception as exc:
            failure = self._error(exc, exchange)
        finally:
            await _close_stream(chunks, exchange)
        if failure is not None:
            raise failure  # outside the handler: the original is not chained as context
        yield response

    def _with_wire(
        self, response: LLMResponse, exchange: _Exchange, *, streamed: bool
    ) -> LLMResponse:
        """`response` with its `WireRecord` when the exchange was recorded.

        That is the last request google-genai sent and the body of the last response.
        """
        if not exchange.record:
            return response
        received = b"".join(exchange.received[-1]) if exchange.received else b""
        body = capture.read_body(received, streamed=streamed)
        record = capture.record(exchange.body(), body, secret=self.__key, streamed=streamed)
        return replace(response, wire=record)

    def _error(self, exc: Exception, exchange: _Exchange) -> GlassAgentError:
        """The typed error for anything google-genai or httpx raised; never shows the key.

        Once a response arrived, anything unexpected google-genai raises comes from reading
        it: an error status keeps its status-based error, a success is a `ResponseParseError`.
        The error's ``__cause__`` is a key-free stand-in for `exc`, never `exc` itself:
        google-genai's errors keep the response body, which may echo the key.
        """
        if isinstance(exc, GlassAgentError):
            return exc
        error = self._typed_error(exc, exchange)
        error.__cause__ = masked_cause(exc, self.__key)
        return error

    def _typed_error(self, exc: Exception, exchange: _Exchange) -> GlassAgentError:
        import httpx
        from google.genai import errors as genai_errors

        key = self.__key
        if isinstance(exc, genai_errors.APIError):
            return self._api_error(exc)
        if isinstance(exc, httpx.TimeoutException):
            return ProviderUnavailableError("Gemini did not answer in time.", provider="gemini")
        if isinstance(exc, httpx.TransportError):
            text = redact(f"Could not reach Gemini: {type(exc).__name__}: {exc}", key)
            return ProviderUnavailableError(text, provider="gemini")
        answered = exchange.responses[-1] if exchange.responses else None
        if answered is not None and answered.status_code >= 400:
            return self._status_error(answered)
        if isinstance(exc, ValueError | RecursionError) or answered is not None:
            # JSON and pydantic validation errors, or google-genai tripping over a body
            detail = str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"
            text = redact(f"Gemini sent a response that could not be read: {detail}", key)
            return ResponseParseError(text[:2000], provider="gemini")
        text = redact(f"google-genai raised {type(exc).__name__}: {exc}", key)
        return ProviderError(text, provider="gemini")

    def _status_error(self, response: httpx.Response) -> ProviderError:
        """The error for an error status whose body google-genai could not read."""
        try:
            body = response.text
        except Exception:  # a streamed body that was not read
            body = ""
        return error_for_status(
            response.status_code,
            body,
            provider="gemini",
            retry_after=retry_after_seconds(response.headers),
            secret=self.__key,
        )

    def _api_error(self, exc: Any) -> GlassAgentError:
        response = getattr(exc, "response", None)
        code = exc.code  # the HTTP status, or the code of an error chunk in a stream
        if isinstance(code, bool) or not isinstance(code, int) or not 100 <= code < 600:
            code = getattr(response, "status_code", 0)
        status = code if isinstance(code, int) else 0
        try:
            body = response.text if response is not None else snippet(exc.details, None)
        except Exception:
            body = snippet(exc.details, None)
        message = exc.message if isinstance(exc.message, str) else None
        if status == 400 and "API_KEY_INVALID" in body:
            text = redact(f"gemini rejected the API key: {message or body}", self.__key)
            return AuthenticationError(
                text, status=status, body=redact(body, self.__key), provider="gemini"
            )
        headers = response.headers if response is not None else {}
        retry_after = retry_after_seconds(headers)
        if retry_after is None:
            retry_after = _retry_delay(exc.details)
        return error_for_status(
            status,
            body,
            provider="gemini",
            message=message,
            retry_after=retry_after,
            secret=self.__key,
        )

    async def aclose(self) -> None:
        """Close the HTTP clients this client created (a supplied one stays open)."""
        await self._pools.aclose()


async def _next(chunks: Any) -> Any:
    """The next chunk of google-genai's stream, or `None` at its end."""
    try:
        return await chunks.__anext__()
    except StopAsyncIteration:
        return None


async def _close_stream(chunks: Any, exchange: _Exchange) -> None:
    """Close google-genai's stream and the HTTP response under it (e.g. on abort)."""
    aclose = getattr(chunks, "aclose", None)
    if aclose is not None:
        await aclose()
    for http_response in exchange.responses:
        await http_response.aclose()
    exchange.release()


async def _close(pair: tuple[httpx.AsyncClient, _Sdk]) -> None:
    await pair[0].aclose()
