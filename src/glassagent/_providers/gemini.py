"""`GeminiClient`: Google Gemini through the official google-genai SDK, over our own httpx."""

from __future__ import annotations

import contextvars
import json
import os
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from glassagent._core.client import BaseLLMClient
from glassagent._core.errors import (
    AuthenticationError,
    ConfigurationError,
    GlassAgentError,
    ProviderError,
    ProviderUnavailableError,
    ResponseParseError,
)
from glassagent._core.messages import (
    LLMResponse,
    Message,
    ModelSettings,
    StreamPart,
    ToolDefinition,
)
from glassagent._providers import gemini_wire as wire
from glassagent._providers.http import (
    clean_key,
    error_for_status,
    mask_key,
    redact,
    retry_after_seconds,
)
from glassagent._providers.shapes import snippet

if TYPE_CHECKING:
    import httpx

ENV_KEY = "GEMINI_API_KEY"
_RETRY_DELAY = re.compile(r"^\s*([0-9.]+)s\s*$")


@dataclass
class _Exchange:
    """The httpx request and response of one model call, captured by client event hooks."""

    requests: list[httpx.Request] = field(default_factory=list)
    responses: list[httpx.Response] = field(default_factory=list)

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
        exchange.requests.append(request)


async def _on_response(response: httpx.Response) -> None:
    exchange = _EXCHANGE.get()
    if exchange is not None:
        exchange.responses.append(response)


def _retry_delay(details: Any) -> float | None:
    """Seconds from a ``google.rpc.RetryInfo`` detail (``"retryDelay": "12s"``), if any."""
    error = details.get("error", details) if isinstance(details, dict) else None
    for detail in (error or {}).get("details", []) if isinstance(error, dict) else []:
        if isinstance(detail, dict) and str(detail.get("@type", "")).endswith("RetryInfo"):
            match = _RETRY_DELAY.match(str(detail.get("retryDelay", "")))
            if match:
                return float(match.group(1))
    return None


class GeminiClient(BaseLLMClient):
    """Google Gemini on the official ``google-genai`` SDK (install ``glassagent[gemini]``).

    All traffic goes through an ``httpx.AsyncClient`` (ours, or the one you pass), so it can be
    inspected and mocked like any httpx traffic. The API key is never shown: not in ``repr``,
    events, logs or errors; `get_masked_api_key` gives its only printable form.
    """

    provider_name = "gemini"

    def __init__(
        self,
        model: str = "gemini-2.5-flash",
        *,
        api_key: str | None = None,
        http_client: httpx.AsyncClient | None = None,
        base_url: str | None = None,
        streaming: bool = True,
    ) -> None:
        """Create a Gemini client.

        Args:
            model: The Gemini model, e.g. ``"gemini-2.5-flash"``.
            api_key: The API key; defaults to the ``GEMINI_API_KEY`` environment variable.
            http_client: An ``httpx.AsyncClient`` to send requests with. It is not closed by
                `aclose`. glassagent adds two event hooks to it to capture the exact request.
            base_url: Another endpoint for the Gemini API (e.g. a proxy).
            streaming: Use the streaming endpoint in `stream`; when False, `stream` makes one
                ``generateContent`` call and yields its text as one delta.

        Raises:
            ConfigurationError: When no key is given or set, or the extra is not installed.
        """
        key = clean_key(api_key or os.environ.get(ENV_KEY), ENV_KEY)
        if not key:
            raise ConfigurationError(
                f"GeminiClient needs an API key: pass api_key=... or set {ENV_KEY}."
            )
        try:
            from google import genai
            from google.genai import types
        except ImportError as exc:
            raise ConfigurationError(
                'GeminiClient needs google-genai: pip install "glassagent[gemini]"'
            ) from exc
        import httpx

        self.model = model
        self.streaming: bool = streaming
        """Whether `stream` uses the streaming endpoint."""
        self.__key = key
        self._owns_http = http_client is None
        self._http = http_client if http_client is not None else httpx.AsyncClient(timeout=120)
        hooks = self._http.event_hooks
        if _on_request not in hooks["request"]:
            hooks["request"].append(_on_request)
            hooks["response"].append(_on_response)
        self._http.event_hooks = hooks
        options = types.HttpOptions(httpx_async_client=self._http, base_url=base_url)
        self._genai = genai.Client(api_key=key, http_options=options)

    def get_masked_api_key(self) -> str:
        """The API key's only printable form, e.g. ``AIza...x9Qk``."""
        return mask_key(self.__key)

    def __repr__(self) -> str:
        return f"GeminiClient(model={self.model!r}, api_key={self.get_masked_api_key()!r})"

    def _request(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        system: str | None,
        settings: ModelSettings | None,
    ) -> dict[str, Any]:
        contents, extra_system = wire.to_contents(messages)
        config = wire.to_config(tools, system, extra_system, settings)
        return {"model": self.model, "contents": contents, "config": config}

    async def chat(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        system: str | None = None,
        *,
        settings: ModelSettings | None = None,
    ) -> LLMResponse:
        """Call ``generateContent`` and return the complete answer."""
        request = self._request(messages, tools, system, settings)
        exchange = _Exchange()
        token = _EXCHANGE.set(exchange)
        try:
            response = await self._genai.aio.models.generate_content(**request)
            accumulator = wire.Accumulator()
            accumulator.add(response)
            return accumulator.response(
                raw_response=response, raw_request=exchange.body(), streamed=False
            )
        except Exception as exc:
            raise self._error(exc, exchange) from exc
        finally:
            _EXCHANGE.reset(token)

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        system: str | None = None,
        *,
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[StreamPart]:
        """Call ``streamGenerateContent`` (SSE): deltas as they arrive, then the answer."""
        if not self.streaming:
            async for part in super().stream(messages, tools, system, settings=settings):
                yield part
            return
        request = self._request(messages, tools, system, settings)
        exchange = _Exchange()
        chunks: Any = None
        accumulator = wire.Accumulator()
        raw: list[Any] = []
        try:
            token = _EXCHANGE.set(exchange)
            try:  # the request goes out with the first chunk: capture it, then stop capturing
                chunks = await self._genai.aio.models.generate_content_stream(**request)
                raw.append(await chunks.__anext__())
            except StopAsyncIteration:
                pass
            finally:
                _EXCHANGE.reset(token)
            for delta in accumulator.add(raw[0]) if raw else ():
                yield delta
            async for chunk in chunks:
                raw.append(chunk)
                for delta in accumulator.add(chunk):
                    yield delta
            response = accumulator.response(
                raw_response=raw, raw_request=exchange.body(), streamed=True
            )
        except Exception as exc:
            raise self._error(exc, exchange) from exc
        finally:
            await self._close(chunks, exchange)
        yield response

    @staticmethod
    async def _close(chunks: Any, exchange: _Exchange) -> None:
        """Close google-genai's stream and the HTTP response under it (e.g. on abort)."""
        aclose = getattr(chunks, "aclose", None)
        if aclose is not None:
            await aclose()
        for http_response in exchange.responses:
            await http_response.aclose()

    def _error(self, exc: Exception, exchange: _Exchange) -> GlassAgentError:
        """The typed error for anything google-genai or httpx raised; never shows the key.

        Once a response arrived, anything unexpected google-genai raises comes from reading
        it: an error status keeps its status-based error, a success is a `ResponseParseError`.
        """
        if isinstance(exc, GlassAgentError):
            return exc
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
        retry_after = None
        if status == 429:
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
        """Close the HTTP client if this client created it."""
        if self._owns_http:
            await self._http.aclose()
