"""`HTTPTransport`: the JSON-over-HTTP plumbing the raw-httpx clients share.

It owns one ``httpx.AsyncClient`` per event loop (or borrows yours), posts JSON bodies, opens
streamed responses bounded by the call's `CallLimits`, and turns every transport failure and
error status into the typed error tree, with any key masked also in the chained cause. httpx
is imported only when a request is made, so importing a client module stays cheap.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import cache, partial
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from glassagent._core.errors import (
    ConfigurationError,
    ProviderError,
    ProviderUnavailableError,
    ResponseParseError,
)
from glassagent._providers import connection_pool, shapes
from glassagent._providers.call import IDENTITY, CallLimits
from glassagent._providers.config import ca_locations
from glassagent._providers.http import (
    error_for_status,
    is_loopback,
    masked_cause,
    redact,
    retry_after_seconds,
)
from glassagent._providers.pools import PerLoop
from glassagent._providers.sse import LineSplitter

if TYPE_CHECKING:
    import ssl

    import httpx

CONNECT_TIMEOUT_SECONDS = 10.0
"""Connect timeout of an owned client (reads are bounded per call by `CallLimits`)."""

MAX_CONNECTIONS = 256
"""Connections an owned client opens at most, per event loop, and keeps alive between
requests, unless the client's ``max_connections`` says otherwise; more requests at once wait
for one. httpx's default of 100, with 20 kept alive, made agents running many calls at once
open a new connection for most requests."""

StatusHook = Callable[[int, str], "ProviderError | None"]
"""Maps an error status and body to a provider-specific error, or `None` for the default."""


def error_message(body: str) -> str | None:
    """The message of a JSON error body, or `None` when the body has none.

    Handles ``{"error": {"message": ...}}`` (OpenAI, llama-server) and ``{"error": "..."}``
    (Ollama).
    """
    _, data = shapes.parse_json(body)
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        message = error.get("message")
        return message if isinstance(message, str) else None
    return error if isinstance(error, str) else None


class HTTPTransport:
    """Posts JSON to one base URL and maps failures onto `glassagent.errors`.

    `post_json` sends a body and returns the parsed answer; `stream` opens a streamed answer
    and `line_batches` reads its lines. Every read is bounded by the call's `CallLimits`;
    error statuses become typed errors (`error_for_status`, or the `status_hook`'s own), and
    transport failures `ProviderUnavailableError`, always with the key masked, also in the
    chained cause. A `WireClient` makes one; a provider rarely needs it directly.

    Args:
        provider: The provider's name, for errors.
        base_url: The API root; request paths are appended to it.
        headers: Headers of every request (the key's among them).
        http_client: An ``httpx.AsyncClient`` to borrow (never closed here); by default one
            is made and owned per event loop.
        secret: The key, masked in every error.
        start_hint: Added to the error of a connection that could not be made.
        status_hook: Maps an error status and body to a provider-specific error, or `None`
            for the standard one.
        max_connections: Connections the owned pool opens at most (default 256).
        fast_pool: Let the owned pool hand out connections without rescanning them all
            (glassagent's `connection_pool`, on httpcore internals that are checked at
            start); `False` keeps httpcore's own assignment, `None` follows
            ``GLASSAGENT_FAST_POOL`` (on unless ``0``).
    """

    def __init__(
        self,
        *,
        provider: str,
        base_url: str,
        headers: dict[str, str],
        http_client: httpx.AsyncClient | None,
        secret: str | None,
        start_hint: str,
        status_hook: StatusHook | None = None,
        max_connections: int | None = None,
        fast_pool: bool | None = None,
    ) -> None:
        size = pool_size(max_connections, http_client)
        # the owned pools' assignment: the cheaper one unless turned off (here or by env)
        fast = connection_pool.enabled(fast_pool)
        self.provider = provider
        self.base_url = base_url.rstrip("/")
        # every request asks for an uncompressed answer: the size limit counts it all
        self._headers = {"Accept-Encoding": IDENTITY, **headers}
        self._borrowed = http_client
        # a proxy from the environment never sees what goes to this machine itself
        direct = is_loopback(urlsplit(self.base_url).hostname or "")
        self._pools: PerLoop[httpx.AsyncClient] = PerLoop(
            partial(new_http_client, size, trust_env=not direct, fast_pool=fast),
            close_http_client,
        )
        self._secret = secret
        self._start_hint = start_hint
        self._status_hook = status_hook

    def __repr__(self) -> str:
        return f"HTTPTransport(provider={self.provider!r}, base_url={self.base_url!r})"

    async def _client(self) -> httpx.AsyncClient:
        """The borrowed client, or the owned one of the running event loop."""
        if self._borrowed is not None:
            return self._borrowed
        return await self._pools.get()

    async def aclose(self) -> None:
        """Close the owned HTTP clients (of every loop); a borrowed one is left to its owner."""
        await self._pools.aclose()

    async def post_json(self, path: str, body: dict[str, Any], limits: CallLimits) -> Any:
        """POST `body` to `path` and return the parsed JSON answer.

        Raises:
            ProviderError: Or a subclass, for error statuses and transport failures.
            ResponseParseError: When the answer is not JSON.
        """
        async with self.stream(path, body, limits) as response:
            content = await self._read(response, path)
        ok, value = shapes.parse_json(content)
        if not ok:
            snippet = redact(content.decode("utf-8", "replace"), self._secret)[:200]
            raise ResponseParseError(
                f"{self.provider} answered with a body that is not JSON: {snippet!r}",
                body=snippet,
                provider=self.provider,
            )
        return value

    async def _read(self, response: httpx.Response, path: str) -> bytes:
        """The whole body of `response`; a lost connection raises a typed error."""
        try:
            return await response.aread()
        except Exception as exc:
            failure = self._failure(exc, path)
        raise failure  # outside the handler, so the original is not its __context__

    @asynccontextmanager
    async def stream(
        self, path: str, body: dict[str, Any], limits: CallLimits
    ) -> AsyncIterator[httpx.Response]:
        """POST `body` and yield the open response; it is closed when the block exits.

        Error statuses raise before the block is entered. Use `line_batches` to read a
        streamed body, so that a connection lost mid-stream raises a typed error too.
        Waiting for the answer and each read of its body are bounded by `limits`, and so is
        the body's size.
        """
        client = await self._client()
        url = self.base_url + path
        request = client.build_request("POST", url, json=body, headers=self._headers)
        failure: ProviderError | None = None
        try:
            response = await limits.wait(self._send(client, request))
        except Exception as exc:
            failure = self._failure(exc, path)
        if failure is not None:
            raise failure  # outside the handler, so the original is not its __context__
        limits.guard(response)
        try:
            if response.status_code >= 400:
                await self._raise_for_status(response, path)
            yield response
        finally:
            await response.aclose()
            release(response)

    @staticmethod
    async def _send(client: httpx.AsyncClient, request: httpx.Request) -> httpx.Response:
        """Send `request`; retry once on a new connection when a kept-alive one was dropped.

        Servers may close an idle kept-alive connection just as a request goes out on it
        (llama.cpp's server does so now and then after a streamed answer); the request then
        fails before any response arrived, so sending it again is safe.
        """
        import httpx

        try:
            return await client.send(request, stream=True)
        except httpx.RemoteProtocolError as exc:
            if "without sending a response" not in str(exc):
                raise
        return await client.send(request, stream=True)

    async def line_batches(self, response: httpx.Response, path: str) -> AsyncIterator[list[str]]:
        """The lines of a streamed body, a list per network piece that completes any.

        Lines end as in ``str.splitlines`` (as httpx's ``aiter_lines``); a lost connection
        raises `ProviderUnavailableError`.
        """
        iterator = response.aiter_text()
        splitter = LineSplitter()
        failure: ProviderError | None = None
        while failure is None:
            try:
                text = await iterator.__anext__()
            except StopAsyncIteration:
                if last := splitter.end():
                    yield last
                return
            except Exception as exc:
                failure = self._failure(exc, path)
                break
            if lines := splitter.feed(text):
                yield lines
        raise failure  # outside the handler, so the original is not its __context__

    async def _raise_for_status(self, response: httpx.Response, path: str) -> None:
        text = (await self._read(response, path)).decode("utf-8", "replace")
        status = response.status_code
        if self._status_hook is not None and (custom := self._status_hook(status, text)):
            raise custom
        raise error_for_status(
            status,
            text,
            provider=self.provider,
            message=error_message(text),
            retry_after=retry_after_seconds(response.headers),
            secret=self._secret,
        )

    def _failure(self, exc: Exception, path: str) -> ProviderError:
        """The typed error for `exc`, caused by a key-free stand-in for it (never `exc`)."""
        if isinstance(exc, ProviderError):  # ours already, e.g. a limit of the call
            return exc
        error = self._transport_error(exc, path)
        error.__cause__ = masked_cause(exc, self._secret)
        error.__suppress_context__ = True
        return error

    def _transport_error(self, exc: Exception, path: str) -> ProviderError:
        """The typed error for an httpx failure (other exceptions are wrapped as-is)."""
        import httpx

        url = self.base_url + path
        detail = redact(f"{type(exc).__name__}: {exc}", self._secret)
        if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
            message = f"Could not connect to {self.provider} at {url} ({detail}). "
            return ProviderUnavailableError(message + self._start_hint, provider=self.provider)
        if isinstance(exc, httpx.TimeoutException):
            message = f"{self.provider} at {url} did not answer in time ({detail})."
            return ProviderUnavailableError(message, provider=self.provider)
        if isinstance(exc, httpx.TransportError):
            message = f"The connection to {self.provider} at {url} was lost ({detail})."
            return ProviderUnavailableError(message, provider=self.provider)
        return ProviderError(f"{self.provider} request failed: {detail}", provider=self.provider)


def release(response: httpx.Response) -> None:
    """Drop a closed response's body stream, which refers back to the response.

    httpx's response and its bound stream form a reference cycle that holds the request,
    headers and connection objects (about forty) until the cycle collector runs; under many
    concurrent runs those collections cost more than the framework. Broken here, everything
    is freed as soon as the response is dropped.
    """
    response.stream = _closed_body()


@cache
def _closed_body() -> httpx.ByteStream:
    """The empty body a released response keeps (made on first use: httpx is lazy)."""
    import httpx

    return httpx.ByteStream(b"")


def pool_size(max_connections: int | None, http_client: object | None) -> int:
    """The connections an owned pool holds: `max_connections`, or `MAX_CONNECTIONS`.

    Raises:
        ConfigurationError: When `max_connections` is not a positive integer, or is given
            with an ``http_client`` (whose own limits then apply).
    """
    if max_connections is None:
        return MAX_CONNECTIONS
    if http_client is not None:
        raise ConfigurationError(
            "Pass max_connections or http_client, not both: a supplied http_client keeps "
            "its own connection limits (httpx.Limits)."
        )
    if isinstance(max_connections, bool) or not isinstance(max_connections, int):
        raise ConfigurationError(f"max_connections must be an integer, not {max_connections!r}.")
    if max_connections < 1:
        raise ConfigurationError(f"max_connections must be at least 1, not {max_connections}.")
    return max_connections


def new_http_client(
    max_connections: int = MAX_CONNECTIONS,
    *,
    trust_env: bool = True,
    fast_pool: bool | None = None,
) -> httpx.AsyncClient:
    """An owned ``httpx.AsyncClient``: connect timeout only, reads bounded per call.

    Its pool holds up to `max_connections` connections and keeps them all alive between
    requests, so concurrent agent runs reuse connections instead of opening new ones; it
    hands them out without rescanning them all (`connection_pool.speed_up`), unless
    `fast_pool` is False (`None`: unless ``GLASSAGENT_FAST_POOL=0``). Without `trust_env` it
    ignores proxy settings of the environment (``HTTP_PROXY``, ...): for a server on this
    machine, whose requests carry its key.

    Raises:
        ConfigurationError: When `fast_pool` is `None` and ``$GLASSAGENT_FAST_POOL`` holds
            neither on nor off.
    """
    import httpx

    client = httpx.AsyncClient(
        timeout=httpx.Timeout(None, connect=CONNECT_TIMEOUT_SECONDS),
        limits=httpx.Limits(
            max_connections=max_connections, max_keepalive_connections=max_connections
        ),
        trust_env=trust_env,
        verify=_ssl_context(*(ca_locations() if trust_env else (None, None))),
    )
    return connection_pool.speed_up(client, fast_pool)


@cache
def _ssl_context(cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    """One verifying TLS context per CA location, shared by the owned clients.

    httpx loads the CA bundle afresh for each client (tens of milliseconds). This one is made
    as httpx makes it: from ``SSL_CERT_FILE`` or ``SSL_CERT_DIR`` when the client trusts the
    environment and they are set, else from certifi's bundle. Sharing it is safe because the
    owned clients all speak HTTP/1.1 without client certificates: httpcore sets the same
    ALPN protocols on it for each connection, and nothing else changes it. It is made once
    per process and CA location, so a bundle edited later is not read again (a client given
    ``http_client=`` makes its own choices).
    """
    import ssl

    import httpx

    if cert_file:
        return ssl.create_default_context(cafile=cert_file)
    if cert_dir:
        return ssl.create_default_context(capath=cert_dir)
    return httpx.create_ssl_context(trust_env=False)


async def close_http_client(client: httpx.AsyncClient) -> None:
    """Close an owned ``httpx.AsyncClient``."""
    await client.aclose()
