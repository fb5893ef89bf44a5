"""`AnthropicClient`: Anthropic's Messages API on raw httpx (no vendor SDK)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import aclosing
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from glassagent._core.attachments import AttachmentPolicy
from glassagent._core.client import BaseLLMClient
from glassagent._core.errors import ConfigurationError
from glassagent._core.messages import (
    LLMResponse,
    Message,
    ModelSettings,
    StreamPart,
    ToolDefinition,
)
from glassagent._core.retry import RetryPolicy
from glassagent._providers import anthropic_wire as wire
from glassagent._providers import capture, shapes
from glassagent._providers.attachments import AttachmentGate
from glassagent._providers.call import CallLimits, final_response, retrying
from glassagent._providers.config import ANTHROPIC_API_BASE, resolve
from glassagent._providers.http import mask_key
from glassagent._providers.sse import event_batches
from glassagent._providers.transport import HTTPTransport

if TYPE_CHECKING:
    import httpx

    from glassagent._core.output import OutputMode

_PATH = "/v1/messages"
_START_HINT = "Check the address (ANTHROPIC_API_BASE) and the network."


class AnthropicClient(BaseLLMClient):
    """A client for Anthropic's Messages API (``POST /v1/messages``), with raw httpx.

    Tools, streaming, extended thinking (`ModelSettings.thinking_budget`; the signed thinking
    blocks round-trip in the assistant message's ``provider_metadata``), images and PDFs
    (by URL or as base64), text files, prompt-cache token counts, and `AnthropicOptions`
    (``top_k``, ``metadata``, prompt-cache breakpoints, further body fields) in
    `ModelSettings.provider_options`.

    Args:
        model: The model name, e.g. ``"claude-sonnet-4-5"``.
        api_key: Sent as the ``x-api-key`` header (surrounding white space removed). It
            defaults to ``ANTHROPIC_API_KEY`` for Anthropic's own URL or the one the
            environment names, and is required for Anthropic's own URL.
        base_url: The API root, without ``/v1``. Defaults to ``ANTHROPIC_API_BASE``, then
            ``https://api.anthropic.com``.
        http_client: An ``httpx.AsyncClient`` to use; the caller keeps ownership (it is not
            closed by `aclose`). By default the client creates and owns one.
        max_connections: Connections the client's own pool opens at most and keeps alive,
            per event loop (default 256); more calls at once wait for one. Not with
            ``http_client``, whose own limits apply.
        retry: How failed calls are retried (`ModelSettings.retry` overrides it per call);
            by default `RetryPolicy()`.
        attachment_policy: Which local files attachments may read and whether remote ones are
            passed on or downloaded; `AttachmentPolicy()` when not given. Remote images and
            PDFs go by URL; other remote files need downloads allowed.
        record_wire: Attach each call's request and response bodies to its answer
            (`LLMResponse.wire`), so ``llm_response`` events and recordings carry them;
            bodies only, the key masked in them (see `WireRecord`).

    Raises:
        ConfigurationError: When Anthropic's own URL is used without an API key, or for a
            ``max_connections`` that is not a positive integer or comes with an
            ``http_client``.
    """

    provider_name = wire.PROVIDER

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        http_client: httpx.AsyncClient | None = None,
        max_connections: int | None = None,
        retry: RetryPolicy | None = None,
        attachment_policy: AttachmentPolicy | None = None,
        record_wire: bool = False,
    ) -> None:
        config = resolve(wire.PROVIDER, api_key=api_key, base_url=base_url)
        base = config.base_url or ANTHROPIC_API_BASE
        key = config.api_key
        if base == ANTHROPIC_API_BASE and not key:
            raise ConfigurationError(
                "Anthropic needs an API key: pass api_key=... or set ANTHROPIC_API_KEY."
            )
        self.model = model
        self.retry: RetryPolicy | None = retry
        """How failed calls are retried, unless `ModelSettings.retry` says otherwise."""
        self.record_wire: bool = record_wire
        """Whether answers carry their wire bodies (`LLMResponse.wire`)."""
        self._secret = key or None
        self._attachments = AttachmentGate(attachment_policy, wire.PROVIDER, wire.takes_by_url)
        headers = {"anthropic-version": wire.API_VERSION}
        if key:
            headers["x-api-key"] = key
        self._transport = HTTPTransport(
            provider=wire.PROVIDER,
            base_url=base,
            headers=headers,
            http_client=http_client,
            secret=key or None,
            start_hint=_START_HINT,
            max_connections=max_connections,
        )

    def get_masked_api_key(self) -> str:
        """The API key's only printable form, e.g. ``sk-a...x9Qk`` (``<none>`` without one)."""
        return mask_key(self._secret)

    def __repr__(self) -> str:
        return f"AnthropicClient(model={self.model!r}, base_url={self.base_url!r})"

    @property
    def base_url(self) -> str:
        """The API root requests go to."""
        return self._transport.base_url

    async def aclose(self) -> None:
        """Close the HTTP client this instance created (a supplied one stays open)."""
        await self._transport.aclose()

    def _finish(self, reader: wire.Reader, body: dict[str, Any], raw: Any) -> LLMResponse:
        response = reader.builder.build(
            stop_reasons=wire.STOP_REASONS, model=self.model, raw_response=raw, raw_request=body
        )
        if reader.output_tool and response.stop_reason == "tool_use" and not response.tool_calls:
            response = replace(response, stop_reason="end_turn")  # the forced output tool
        response = shapes.check_blocked(response, wire.PROVIDER)
        if self.record_wire:
            response = capture.attach(response, secret=self._secret, streamed=isinstance(raw, list))
        return response

    def output_mode(self, *, tools: bool, settings: ModelSettings) -> OutputMode:
        """``native`` (a forced tool call) without tools or thinking, else ``tool``.

        Args:
            tools: Whether the run offers tools of its own.
            settings: The run's settings.
        """
        return "tool" if tools or settings.thinking_budget else "native"

    async def chat(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        system: str | None = None,
        *,
        settings: ModelSettings | None = None,
    ) -> LLMResponse:
        """Send the conversation and return the complete answer (one HTTP request).

        Args:
            messages: The conversation so far, oldest first.
            tools: Tools the model may call.
            system: The system instructions, if any.
            settings: Temperature, max tokens, thinking budget, stop sequences, time and
                size limits, retries.
        """
        messages = await self._attachments.prepare(messages)
        body = wire.request_body(self.model, messages, tools, system, settings, stream=False)

        async def attempt(limits: CallLimits) -> AsyncGenerator[StreamPart, None]:
            raw = await self._transport.post_json(_PATH, body, limits)
            if isinstance(raw, dict) and raw.get("type") == "error":
                raise wire.stream_error(raw, self._secret)
            reader = wire.Reader(self._secret, _output_tool(settings))
            reader.message(raw)
            yield self._finish(reader, body, raw)

        return await final_response(retrying(self, attempt, settings, streamed=False))

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        system: str | None = None,
        *,
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[StreamPart]:
        """Stream the answer over SSE: text and thinking deltas, then the `LLMResponse`.

        Closing this generator closes the HTTP response at once.

        Args:
            messages: The conversation so far, oldest first.
            tools: Tools the model may call.
            system: The system instructions, if any.
            settings: Temperature, max tokens, thinking budget, stop sequences, time and
                size limits, retries.

        Yields:
            `ThinkingDelta` and `TextDelta` parts, then exactly one `LLMResponse`.

        Raises:
            ProviderError: For an ``error`` event mid-stream (``overloaded_error`` is a
                `ProviderUnavailableError`).
            ResponseParseError: For a malformed event or a stream that ends before
                ``message_stop``.
        """
        messages = await self._attachments.prepare(messages)
        body = wire.request_body(self.model, messages, tools, system, settings, stream=True)

        def attempt(limits: CallLimits) -> AsyncGenerator[StreamPart, None]:
            return self._stream_once(body, limits, _output_tool(settings))

        async with aclosing(retrying(self, attempt, settings)) as parts:
            async for part in parts:
                yield part

    async def _stream_once(
        self, body: dict[str, Any], limits: CallLimits, output_tool: str | None
    ) -> AsyncGenerator[StreamPart, None]:
        """One streamed attempt: read the SSE body to its end, yielding parts as they come."""
        reader = wire.Reader(self._secret, output_tool)
        events: list[Any] = []
        async with self._transport.stream(_PATH, body, limits) as response:
            async for batch in event_batches(self._transport.line_batches(response, _PATH)):
                for name, data in batch:
                    if reader.stopped:  # read to the end: the connection goes back to the pool
                        continue
                    ok, event = shapes.parse_json(data)
                    if not ok:
                        detail = f"a malformed stream event {data[:200]!r}"
                        raise shapes.parse_error(wire.PROVIDER, detail, secret=self._secret)
                    events.append(event)
                    for part in reader.event(name, event):
                        yield part
        if not reader.stopped:
            detail = "a stream that ended before message_stop"
            raise shapes.parse_error(wire.PROVIDER, detail, secret=self._secret)
        yield self._finish(reader, body, events)


def _output_tool(settings: ModelSettings | None) -> str | None:
    """The name of the forced tool that carries a structured answer, if one is asked for."""
    output = settings.output_schema if settings is not None else None
    return output.name if output is not None else None
