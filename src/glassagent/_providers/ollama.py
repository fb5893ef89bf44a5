"""`OllamaClient` and `LlamaClient`: Ollama's ``/api/chat`` wire, native tools or JSON protocol."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

from glassagent._core import json_protocol
from glassagent._core.attachments import AttachmentPolicy
from glassagent._core.client import BaseLLMClient
from glassagent._core.errors import (
    ConfigurationError,
    ProviderError,
    ResponseParseError,
)
from glassagent._core.json_stream import ReplyStream, final_deltas, streamed_deltas
from glassagent._core.messages import (
    LLMResponse,
    Message,
    ModelSettings,
    StreamPart,
    TextDelta,
    ToolDefinition,
    ToolProtocol,
)
from glassagent._core.retry import RetryPolicy
from glassagent._providers import capture, shapes
from glassagent._providers import ollama_wire as wire
from glassagent._providers.attachments import AttachmentGate
from glassagent._providers.call import CallLimits, final_response, retrying
from glassagent._providers.config import OLLAMA_BASE_URL, resolve
from glassagent._providers.http import mask_key
from glassagent._providers.transport import HTTPTransport, error_message

if TYPE_CHECKING:
    import httpx

    from glassagent._core.output import OutputMode

DEFAULT_MODEL = "llama3.1:8b"
"""The model `OllamaClient` and `LlamaClient` use when none is given."""

_NO_SETTINGS = ModelSettings()
_Request = tuple[Sequence[Message], Sequence[ToolDefinition], "str | None", "ModelSettings | None"]
_CHAT = "/api/chat"
_SHOW = "/api/show"
_START_HINT = (
    "Is Ollama running? Start it with `ollama serve` (install it from https://ollama.com), "
    "or set OLLAMA_API_BASE to its address."
)


class OllamaClient(BaseLLMClient):
    """A client for an Ollama server (``POST /api/chat``), with raw httpx.

    Args:
        model: The Ollama model tag, e.g. ``"llama3.1:8b"`` or ``"qwen2.5:7b"``.
        base_url: The server's address. Defaults to ``OLLAMA_API_BASE``, then
            ``OLLAMA_BASE_URL``, then ``http://localhost:11434``.
        api_key: Sent as a bearer token, for Ollama's cloud (``https://ollama.com``) or a
            server behind an authenticating proxy. Defaults to ``OLLAMA_API_KEY`` when the
            address is the default or comes from the environment; a ``base_url`` passed here
            gets no key unless one is passed with it.
        http_client: An ``httpx.AsyncClient`` to use; the caller keeps ownership (it is not
            closed by `aclose`). By default the client creates and owns one.
        max_connections: Connections the client's own pool opens at most and keeps alive,
            per event loop (default 256); more calls at once wait for one. Not with
            ``http_client``, whose own limits apply.
        tool_protocol: ``"native"`` sends tools in Ollama's ``tools`` field; ``"json"`` uses the
            JSON tool protocol; ``"auto"`` asks the server once (``POST /api/show``) whether
            the model has the ``tools`` capability and picks ``native`` if so, else ``json``.
        json_grammar: With the JSON tool protocol, constrain replies to the protocol's JSON
            Schema (``format`` set to it; Ollama 0.5 and later), so every reply parses and
            names a tool on offer. With `False`, ``format`` is ``"json"`` (any JSON).
        retry: How failed calls are retried (`ModelSettings.retry` overrides it per call);
            by default `RetryPolicy()`.
        attachment_policy: Which local files attachments may read, and whether remote ones
            are downloaded (Ollama takes no URLs: without downloads they are refused);
            `AttachmentPolicy()` when not given.
        record_wire: Attach each call's request and response bodies to its answer
            (`LLMResponse.wire`), so ``llm_response`` events and recordings carry them;
            bodies only, the key masked in them (see `WireRecord`).

    Raises:
        ConfigurationError: For an unknown tool protocol, or a ``max_connections`` that is
            not a positive integer or comes with an ``http_client``.
    """

    provider_name = "ollama"
    _environment = "ollama"  # its row in the environment table (`_providers.config`)

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        http_client: httpx.AsyncClient | None = None,
        max_connections: int | None = None,
        tool_protocol: ToolProtocol = "auto",
        json_grammar: bool = True,
        retry: RetryPolicy | None = None,
        attachment_policy: AttachmentPolicy | None = None,
        record_wire: bool = False,
    ) -> None:
        if tool_protocol not in ("auto", "native", "json"):
            raise ConfigurationError(
                f"Unknown tool_protocol {tool_protocol!r}; use 'auto', 'native' or 'json'."
            )
        self.model = model
        self.retry: RetryPolicy | None = retry
        """How failed calls are retried, unless `ModelSettings.retry` says otherwise."""
        self.record_wire: bool = record_wire
        """Whether answers carry their wire bodies (`LLMResponse.wire`)."""
        self._configured: ToolProtocol = tool_protocol
        self.tool_protocol = self._configured
        self.json_grammar = json_grammar
        """Whether JSON-protocol replies are constrained to the protocol's JSON Schema."""
        self._capabilities: dict[str, ToolProtocol] = {}
        self._attachments = AttachmentGate(attachment_policy, self.provider_name, wire.takes_by_url)
        config = resolve(self._environment, api_key=api_key, base_url=base_url)
        self._secret = config.api_key or None
        self._transport = HTTPTransport(
            provider=self.provider_name,
            base_url=config.base_url or OLLAMA_BASE_URL,
            headers={"Authorization": f"Bearer {self._secret}"} if self._secret else {},
            http_client=http_client,
            secret=self._secret,
            start_hint=_START_HINT,
            status_hook=self._model_missing,
            max_connections=max_connections,
        )

    @property
    def base_url(self) -> str:
        """The server's address."""
        return self._transport.base_url

    def get_masked_api_key(self) -> str:
        """The API key's only printable form (``<none>`` without one, as for a local server)."""
        return mask_key(self._secret)

    async def aclose(self) -> None:
        """Close the HTTP client this instance created (a supplied one stays open)."""
        await self._transport.aclose()

    def _model_missing(self, status: int, body: str) -> ProviderError | None:
        """Ollama's "model not found" as an error that says how to get the model."""
        message = error_message(body) or ""
        if status != 404 or "not found" not in message:
            return None
        return ProviderError(
            f"Ollama at {self.base_url} has no model {self.model!r} ({message}). "
            f"Download it with `ollama pull {self.model}`, or choose another model.",
            status=status,
            body=body[:2000],
            provider=self.provider_name,
        )

    def output_mode(self, *, tools: bool, settings: ModelSettings) -> OutputMode:
        """``native`` (``format`` set to the schema) unless the run has tools (``tool``).

        A schema in ``format`` constrains every reply, so a run with tools would never get a
        tool call; it gets the final-answer tool instead.

        Args:
            tools: Whether the run offers tools of its own.
            settings: The run's settings.
        """
        return "tool" if tools else "native"

    async def resolve_tool_protocol(self, settings: ModelSettings | None = None) -> ToolProtocol:
        """The protocol used for this model; with ``auto``, asks the server once and caches.

        Once resolved, `tool_protocol` shows the choice (the agent resolves it before its
        first ``llm_request`` event with tools, so every such event shows it).

        Args:
            settings: Bounds the question to the server (its ``timeout``, ``stall_timeout``).

        Returns:
            ``"native"`` when the model lists the ``tools`` capability (or, on servers that
            report no capabilities, when its template mentions tools), else ``"json"``.

        Raises:
            ProviderError: When the server cannot be asked (it is retried with the model call).
        """
        limits = CallLimits.first(settings or _NO_SETTINGS, self.provider_name)
        return await self._resolve(limits)

    async def _resolve(self, limits: CallLimits) -> ToolProtocol:
        """`resolve_tool_protocol` within the limits of the model call that needs it."""
        if self._configured != "auto":
            return self._configured
        if self.model not in self._capabilities:
            info = await self._transport.post_json(_SHOW, {"model": self.model}, limits)
            info = info if isinstance(info, dict) else {}
            capabilities = info.get("capabilities")
            if isinstance(capabilities, list):
                native = "tools" in capabilities
            else:
                template = info.get("template")
                native = isinstance(template, str) and ".Tools" in template
            self._capabilities[self.model] = "native" if native else "json"
        self.tool_protocol = self._capabilities[self.model]
        return self.tool_protocol

    async def _body(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        system: str | None,
        settings: ModelSettings | None,
        stream: bool,
        limits: CallLimits,
    ) -> tuple[dict[str, Any], bool]:
        """The request body, and whether the JSON tool protocol is used for it."""
        messages = await self._attachments.prepare(messages)
        offered = json_protocol.protocol_tools(tools, settings)
        json_mode = offered is not None and await self._resolve(limits) == "json"
        body = wire.request_body(
            self.model,
            messages,
            tools,
            system,
            settings,
            stream=stream,
            json_mode=json_mode,
            encode_history=self._configured == "json",
            json_grammar=self.json_grammar,
        )
        return body, json_mode

    def _response(
        self, reader: wire.Reader, body: dict[str, Any], raw: Any, json_mode: bool
    ) -> LLMResponse:
        response = reader.builder.build(
            stop_reasons=wire.STOP_REASONS, model=self.model, raw_response=raw, raw_request=body
        )
        if self.record_wire:
            response = capture.attach(response, secret=self._secret, streamed=isinstance(raw, list))
        return json_protocol.read_response(response) if json_mode else response

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
            settings: Temperature, max tokens, stop sequences, thinking, limits and retries.
        """

        async def attempt(limits: CallLimits) -> AsyncGenerator[StreamPart, None]:
            body, json_mode = await self._body(messages, tools, system, settings, False, limits)
            raw = wire.check(await self._transport.post_json(_CHAT, body, limits), "a body")
            reader = wire.Reader()
            reader.body(raw)
            yield self._response(reader, body, raw, json_mode)

        return await final_response(retrying(self, attempt, settings, streamed=False))

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        system: str | None = None,
        *,
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[StreamPart]:
        """Stream the answer (NDJSON): text and thinking deltas, then the `LLMResponse`.

        With the JSON tool protocol the reply is JSON, so no text deltas are streamed; the
        thought and the answer follow as one delta each once the reply is complete. Closing
        this generator closes the HTTP response at once.

        Args:
            messages: The conversation so far, oldest first.
            tools: Tools the model may call.
            system: The system instructions, if any.
            settings: Temperature, max tokens, stop sequences, thinking, limits and retries.

        Yields:
            `ThinkingDelta` and `TextDelta` parts, then exactly one `LLMResponse`.

        Raises:
            ResponseParseError: For a malformed line or a stream that ends before ``done``.
        """
        request = (messages, tools, system, settings)

        def attempt(limits: CallLimits) -> AsyncGenerator[StreamPart, None]:
            return self._stream_once(request, limits)

        async with aclosing(retrying(self, attempt, settings)) as parts:
            async for part in parts:
                yield part

    async def _stream_once(
        self, request: _Request, limits: CallLimits
    ) -> AsyncGenerator[StreamPart, None]:
        """One streamed attempt: read the NDJSON body to its end, yielding parts as they come."""
        body, json_mode = await self._body(*request, True, limits)
        reader = wire.Reader()
        replies = ReplyStream() if json_mode else None
        chunks: list[Any] = []
        async with self._transport.stream(_CHAT, body, limits) as response:
            async for lines in self._transport.line_batches(response, _CHAT):
                for line in lines:
                    if reader.done or not line.strip():  # after `done`: read to the end,
                        continue  # so the connection goes back to the pool
                    try:
                        chunk = wire.check(shapes.loads(line), "a stream line")
                    except ValueError:
                        raise ResponseParseError(
                            f"Ollama sent a malformed stream line: {line[:200]!r}",
                            provider=self.provider_name,
                        ) from None
                    chunks.append(chunk)
                    for delta in reader.line(chunk):
                        if replies is not None and isinstance(delta, TextDelta):
                            for part in streamed_deltas(replies, delta.text):
                                yield part
                        else:
                            yield delta
        if not reader.done:
            raise ResponseParseError(
                "Ollama's stream ended before the answer was complete (no 'done' line).",
                provider=self.provider_name,
            )
        final = self._response(reader, body, chunks, json_mode)
        if json_mode:
            for delta in final_deltas(final, reader.builder.thinking_text, replies):
                yield delta
        yield final


class LlamaClient(OllamaClient):
    """An `OllamaClient` for Llama models without native function calling.

    It always uses the JSON tool protocol and defaults to ``llama3.1:8b``.

    Args:
        model: The Ollama model tag.
        base_url: The server's address. Defaults to ``LLAMA_API_BASE``, then the variables
            of `OllamaClient`, then ``http://localhost:11434``.
        api_key: Sent as a bearer token; defaults to ``LLAMA_API_KEY``, then
            ``OLLAMA_API_KEY``, under the rule of `OllamaClient`.
        http_client: An ``httpx.AsyncClient`` to use; the caller keeps ownership.
        max_connections: The size of the client's own pool, as for `OllamaClient`.
        attachment_policy: Which local files attachments may read, and whether remote ones
            are downloaded; `AttachmentPolicy()` when not given.
        retry: How failed calls are retried, as for `OllamaClient`.
        record_wire: Attach each call's wire bodies to its answer, as for `OllamaClient`.
        json_grammar: Constrain replies to the protocol's JSON Schema, as for `OllamaClient`.
    """

    provider_name = "ollama"
    _environment = "llama"

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        http_client: httpx.AsyncClient | None = None,
        max_connections: int | None = None,
        attachment_policy: AttachmentPolicy | None = None,
        retry: RetryPolicy | None = None,
        record_wire: bool = False,
        json_grammar: bool = True,
    ) -> None:
        super().__init__(
            model,
            base_url=base_url,
            api_key=api_key,
            http_client=http_client,
            max_connections=max_connections,
            tool_protocol="json",
            json_grammar=json_grammar,
            attachment_policy=attachment_policy,
            retry=retry,
            record_wire=record_wire,
        )
