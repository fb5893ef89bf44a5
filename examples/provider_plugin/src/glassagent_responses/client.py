"""`ResponsesClient`: a glassagent client for OpenAI's Responses API."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from glassagent.errors import ConfigurationError
from glassagent.llm import AttachmentPolicy, ModelSettings, OutputMode, RetryPolicy
from glassagent.providers import WireClient
from glassagent_responses.wire import ResponsesWire

if TYPE_CHECKING:
    import httpx

OPENAI_URL = "https://api.openai.com/v1"


class ResponsesClient(WireClient):
    """A client for OpenAI's Responses API (``POST /v1/responses``).

    Args:
        model: The model name, e.g. ``"gpt-5-mini"``.
        api_key: Sent as a bearer token. It defaults to ``OPENAI_API_KEY`` for OpenAI's own
            URL only, and is required there; a ``base_url`` of another server gets no key
            unless one is passed with it, so an OpenAI key never leaves for another server.
        base_url: The API root, ending in ``/v1``; OpenAI's own by default.
        http_client: An ``httpx.AsyncClient`` to use; the caller keeps ownership.
        max_connections: Connections the client's own pool opens at most (default 256).
        retry: How failed calls are retried (`ModelSettings.retry` overrides it per call).
        attachment_policy: Which local files attachments may read, and whether remote ones
            are passed on (images) or downloaded.
        record_wire: Attach each call's bodies to its answer (`LLMResponse.wire`).

    Raises:
        ConfigurationError: When OpenAI's own URL is used without a key.
    """

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
        base = (base_url or OPENAI_URL).rstrip("/")
        if api_key is None and base == OPENAI_URL:
            api_key = os.environ.get("OPENAI_API_KEY")
        key = (api_key or "").strip() or None
        if base == OPENAI_URL and key is None:
            raise ConfigurationError(
                "The Responses API needs an API key: pass api_key=... or set OPENAI_API_KEY."
            )
        super().__init__(
            model,
            ResponsesWire(),
            base_url=base,
            headers={"Authorization": f"Bearer {key}"} if key else {},
            secret=key,
            http_client=http_client,
            max_connections=max_connections,
            retry=retry,
            attachment_policy=attachment_policy,
            record_wire=record_wire,
        )

    def output_mode(self, *, tools: bool, settings: ModelSettings) -> OutputMode:
        """``native``: a structured answer goes as ``text.format``, with tools or without."""
        return "native"
