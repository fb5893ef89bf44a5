"""`OpenAICompatibleClient`: the chat-completions wire of OpenAI, llama-server, vLLM, LM Studio."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote

from glassagent._core import json_protocol
from glassagent._core.attachments import AttachmentPolicy
from glassagent._core.client import BaseLLMClient
from glassagent._core.errors import ConfigurationError
from glassagent._core.json_stream import ReplyStream, final_deltas, streamed_deltas
from glassagent._core.messages import (
    LLMResponse,
    Message,
    ModelSettings,
    StreamPart,
    TextDelta,
    ToolDefinition,
)
from glassagent._core.retry import RetryPolicy
from glassagent._providers import capture, shapes
from glassagent._providers import openai_wire as wire
from glassagent._providers.attachments import AttachmentGate
from glassagent._providers.builder import parse_arguments
from glassagent._providers.call import CallLimits, final_response, retrying
from glassagent._providers.config import OPENAI_API_BASE, resolve
from glassagent._providers.http import mask_key
from glassagent._providers.openai_wire import wire_messages, wire_tools
from glassagent._providers.sse import event_batches
from glassagent._providers.transport import HTTPTransport, StatusHook

if TYPE_CHECKING:
    import httpx

    from glassagent._core.output import OutputMode

# Kept importable from here: older code and plugins import them from this module.
__all__ = ["OpenAICompatibleClient", "parse_arguments", "wire_messages", "wire_tools"]


@dataclass(frozen=True, repr=False)  # no repr: the headers carry the key
class Connection:
    """Where and how a chat-completions client sends its requests."""

    provider: str
    base_url: str
    path: str
    """The path of ``POST`` requests under `base_url`, with its query (``?api-version=``)."""
    headers: dict[str, str]
    secret: str | None
    """The key, masked wherever the client shows text (errors, recorded bodies)."""
    start_hint: str = wire.START_HINT
    status_hook: StatusHook | None = None
    """Maps error statuses to typed errors; by default llama.cpp's parse failure."""
    transport: Callable[..., HTTPTransport] = field(default=HTTPTransport)


class OpenAICompatibleClient(BaseLLMClient):
    """A client for any server with OpenAI's ``POST /chat/completions`` wire.

    It serves OpenAI itself, llama.cpp's ``llama-server``, vLLM, LM Studio and other
    compatible servers, with raw httpx (no vendor SDK).

    Args:
        model: The model name the server knows, e.g. ``"gpt-4o-mini"``.
        base_url: The API root (ending in ``/v1`` for most servers). Defaults to
            ``OPENAI_API_BASE``, then ``OPENAI_BASE_URL``, then OpenAI's own URL.
        api_key: Sent as a bearer token (surrounding white space removed). It defaults to
            ``OPENAI_API_KEY`` for OpenAI's own URL or the one the environment names, and is
            required for OpenAI's own URL; a ``base_url`` passed here gets no key unless one
            is passed with it, so an OpenAI key never leaves for another server.
        organization: Sent as the ``OpenAI-Organization`` header; defaults to
            ``OPENAI_ORG_ID`` under the same rule as the key.
        api_version: Sent as the ``api-version`` query parameter (gateways that want one;
            Azure OpenAI has `AzureOpenAIClient`); defaults to ``OPENAI_API_VERSION`` under
            the same rule as the key.
        http_client: An ``httpx.AsyncClient`` to use; the caller keeps ownership (it is not
            closed by `aclose`). By default the client creates and owns one.
        max_connections: Connections the client's own pool opens at most and keeps alive,
            per event loop (default 256); more calls at once wait for one. Not with
            ``http_client``, whose own limits apply.
        tool_protocol: ``"native"`` sends tools in the ``tools`` field; ``"json"`` uses the
            JSON tool protocol in the system prompt, for models without tool calling.
        json_grammar: With the JSON tool protocol, constrain replies to the protocol's JSON
            Schema (`response_format` of type ``json_schema``; llama.cpp's server, vLLM and
            LM Studio enforce it while decoding), so every reply parses and names a tool on
            offer. Off by default, since not every server enforces a schema: replies are
            then asked to be any JSON object. `LocalServer.client` turns it on.
        retry: How failed calls are retried (`ModelSettings.retry` overrides it per call);
            by default `RetryPolicy()`.
        attachment_policy: Which local files attachments may read and whether remote ones are
            passed on or downloaded; `AttachmentPolicy()` when not given. Remote images go as
            ``image_url`` URLs; other remote files need downloads allowed.
        record_wire: Attach each call's request and response bodies to its answer
            (`LLMResponse.wire`), so ``llm_response`` events and recordings carry them;
            bodies only, the key masked in them (see `WireRecord`).

    Raises:
        ConfigurationError: When OpenAI's own URL is used without an API key, for an
            unknown tool protocol, or for a ``max_connections`` that is not a positive
            integer or comes with an ``http_client``.
    """

    _named_tool_choice = True
    """Whether the server takes a tool choice naming one tool (llama.cpp's does not)."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        organization: str | None = None,
        api_version: str | None = None,
        http_client: httpx.AsyncClient | None = None,
        max_connections: int | None = None,
        tool_protocol: Literal["native", "json"] = "native",
        json_grammar: bool = False,
        retry: RetryPolicy | None = None,
        attachment_policy: AttachmentPolicy | None = None,
        record_wire: bool = False,
    ) -> None:
        config = resolve(
            "openai",
            api_key=api_key,
            base_url=base_url,
            organization=organization,
            api_version=api_version,
        )
        base = config.base_url or OPENAI_API_BASE
        key = config.api_key
        is_openai = base == OPENAI_API_BASE
        if is_openai and not key:
            raise ConfigurationError(
                "OpenAI needs an API key: pass api_key=... or set OPENAI_API_KEY."
            )
        path = wire.PATH
        if config.api_version:
            path += "?api-version=" + quote(config.api_version, safe="")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        if config.organization:
            headers["OpenAI-Organization"] = config.organization
        self._setup(
            model,
            Connection("openai" if is_openai else "openai_compatible", base, path, headers, key),
            http_client=http_client,
            max_connections=max_connections,
            tool_protocol=tool_protocol,
            json_grammar=json_grammar,
            retry=retry,
            attachment_policy=attachment_policy,
            record_wire=record_wire,
        )

    def _setup(
        self,
        model: str,
        connection: Connection,
        *,
        http_client: httpx.AsyncClient | None,
        max_connections: int | None,
        tool_protocol: Literal["native", "json"],
        json_grammar: bool,
        retry: RetryPolicy | None,
        attachment_policy: AttachmentPolicy | None,
        record_wire: bool,
    ) -> None:
        """Set the client up for `connection` (a subclass's ``__init__`` makes its own)."""
        if tool_protocol not in ("native", "json"):
            raise ConfigurationError(
                f"Unknown tool_protocol {tool_protocol!r}; use 'native' or 'json'."
            )
        provider, key = connection.provider, connection.secret or None
        self.model = model
        self.provider_name = provider
        self.tool_protocol = tool_protocol
        self.json_grammar = json_grammar
        """Whether JSON-protocol replies are constrained to the protocol's JSON Schema."""
        self.retry: RetryPolicy | None = retry
        """How failed calls are retried, unless `ModelSettings.retry` says otherwise."""
        self.record_wire: bool = record_wire
        """Whether answers carry their wire bodies (`LLMResponse.wire`)."""
        self._secret = key
        self._path = connection.path
        self._attachments = AttachmentGate(attachment_policy, provider, wire.takes_by_url)
        self._transport = connection.transport(
            provider=provider,
            base_url=connection.base_url,
            headers=connection.headers,
            http_client=http_client,
            secret=key,
            start_hint=connection.start_hint,
            status_hook=connection.status_hook or wire.status_hook(provider, key),
            max_connections=max_connections,
        )

    def get_masked_api_key(self) -> str:
        """The API key's only printable form, e.g. ``sk-p...x9Qk`` (``<none>`` without one)."""
        return mask_key(self._secret)

    @property
    def base_url(self) -> str:
        """The API root requests go to."""
        return self._transport.base_url

    async def aclose(self) -> None:
        """Close the HTTP client this instance created (a supplied one stays open)."""
        await self._transport.aclose()

    def _body(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        system: str | None,
        settings: ModelSettings | None,
        stream: bool,
    ) -> dict[str, Any]:
        json_tools = self.tool_protocol == "json"
        return wire.request_body(
            self.model,
            self.provider_name,
            messages,
            tools,
            system,
            settings,
            json_tools=json_tools,
            stream=stream,
            json_grammar=self.json_grammar,
            named_choice=self._named_tool_choice,
        )

    def _json_mode(self, tools: Sequence[ToolDefinition], settings: ModelSettings | None) -> bool:
        """Whether the reply is read by the JSON tool protocol (it offers tools)."""
        return (
            self.tool_protocol == "json"
            and json_protocol.protocol_tools(tools, settings) is not None
        )

    def output_mode(self, *, tools: bool, settings: ModelSettings) -> OutputMode:
        """``native`` (``response_format`` with a ``json_schema``) unless the run has tools.

        With tools, only OpenAI itself takes the schema too; other servers (llama.cpp's among
        them) and the JSON tool protocol get the final-answer tool (``tool``).

        Args:
            tools: Whether the run offers tools of its own.
            settings: The run's settings.
        """
        if not tools:
            return "native"
        return (
            "native"
            if self.provider_name == "openai" and self.tool_protocol == "native"
            else "tool"
        )

    def _finish(
        self, reader: wire.Reader, body: dict[str, Any], raw: Any, json_mode: bool
    ) -> LLMResponse:
        response = reader.builder.build(
            stop_reasons=wire.STOP_REASONS, model=self.model, raw_response=raw, raw_request=body
        )
        response = shapes.check_blocked(response, self.provider_name)
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
            settings: Temperature, max tokens, stop sequences, time and size limits, retries.
        """
        messages = await self._attachments.prepare(messages)
        json_mode = self._json_mode(tools, settings)
        body = self._body(messages, tools, system, settings, stream=False)

        async def attempt(limits: CallLimits) -> AsyncGenerator[StreamPart, None]:
            raw = await self._transport.post_json(self._path, body, limits)
            reader = wire.Reader(self.provider_name, self._secret)
            reader.body(raw)
            yield self._finish(reader, body, raw, json_mode)

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

        With the JSON tool protocol the reply is JSON: its ``thought`` streams as thinking
        and its ``response`` as text while they are written (`ReplyStream`), a tool call
        once the reply is complete. Closing this generator closes the HTTP response at once.

        Args:
            messages: The conversation so far, oldest first.
            tools: Tools the model may call.
            system: The system instructions, if any.
            settings: Temperature, max tokens, stop sequences, time and size limits, retries.

        Yields:
            `ThinkingDelta` and `TextDelta` parts, then exactly one `LLMResponse`.

        Raises:
            ResponseParseError: For a malformed chunk or a stream that ends before the answer.
        """
        messages = await self._attachments.prepare(messages)
        json_mode = self._json_mode(tools, settings)
        body = self._body(messages, tools, system, settings, stream=True)

        def attempt(limits: CallLimits) -> AsyncGenerator[StreamPart, None]:
            return self._stream_once(body, json_mode, limits)

        async with aclosing(retrying(self, attempt, settings)) as parts:
            async for part in parts:
                yield part

    async def _stream_once(
        self, body: dict[str, Any], json_mode: bool, limits: CallLimits
    ) -> AsyncGenerator[StreamPart, None]:
        """One streamed attempt: read the SSE body to its end, yielding parts as they come."""
        reader = wire.Reader(self.provider_name, self._secret)
        replies = ReplyStream() if json_mode else None
        chunks: list[Any] = []
        done = False
        async with self._transport.stream(self._path, body, limits) as response:
            lines = self._transport.line_batches(response, self._path)
            async for events in event_batches(lines):
                for event, data in events:
                    if done:  # read to the end, so the connection goes back to the pool
                        continue
                    if data.strip() == "[DONE]":
                        done = True
                        continue
                    chunk = wire.decode_chunk(data, self.provider_name, self._secret)
                    chunks.append(chunk)
                    if event == "error" or "error" in chunk:
                        raise wire.stream_error(chunk, self.provider_name, self._secret)
                    for part in reader.chunk(chunk):
                        if replies is not None and isinstance(part, TextDelta):
                            for delta in streamed_deltas(replies, part.text):
                                yield delta
                        else:
                            yield part
        if not done and not reader.builder.finished:
            detail = "a stream that ended before the answer was complete"
            raise shapes.parse_error(self.provider_name, detail, secret=self._secret)
        final = self._finish(reader, body, chunks, json_mode)
        if json_mode:
            for part in final_deltas(final, reader.builder.thinking_text, replies):
                yield part
        yield final
