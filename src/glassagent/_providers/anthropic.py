"""`AnthropicClient`: Anthropic's Messages API on raw httpx (no vendor SDK)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from glassagent._core.attachments import AttachmentPolicy
from glassagent._core.errors import ConfigurationError
from glassagent._core.messages import ModelSettings
from glassagent._core.retry import RetryPolicy
from glassagent._providers import anthropic_wire as wire
from glassagent._providers.config import ANTHROPIC_API_BASE, resolve
from glassagent._providers.wire_client import WireClient

if TYPE_CHECKING:
    import httpx

    from glassagent._core.output import OutputMode


class AnthropicClient(WireClient):
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
        fast_pool: Assign the owned pool's connections the cheaper way (`None`: yes unless
            ``GLASSAGENT_FAST_POOL=0``); see `HTTPTransport`.

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
        fast_pool: bool | None = None,
    ) -> None:
        config = resolve(wire.PROVIDER, api_key=api_key, base_url=base_url)
        base = config.base_url or ANTHROPIC_API_BASE
        key = config.api_key
        if base == ANTHROPIC_API_BASE and not key:
            raise ConfigurationError(
                "Anthropic needs an API key: pass api_key=... or set ANTHROPIC_API_KEY."
            )
        headers = {"anthropic-version": wire.API_VERSION}
        if key:
            headers["x-api-key"] = key
        super().__init__(
            model,
            wire.AnthropicWire(),
            base_url=base,
            headers=headers,
            secret=key,
            http_client=http_client,
            max_connections=max_connections,
            retry=retry,
            attachment_policy=attachment_policy,
            record_wire=record_wire,
            fast_pool=fast_pool,
        )

    def __repr__(self) -> str:
        return f"AnthropicClient(model={self.model!r}, base_url={self.base_url!r})"

    def output_mode(self, *, tools: bool, settings: ModelSettings) -> OutputMode:
        """``native`` (a forced tool call) without tools or thinking, else ``tool``.

        Args:
            tools: Whether the run offers tools of its own.
            settings: The run's settings.
        """
        return "tool" if tools or settings.thinking_budget else "native"
