"""`OllamaClient` and `LlamaClient`: Ollama's ``/api/chat`` wire, native tools or JSON protocol."""

from __future__ import annotations

import base64
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

from glassagent._core.attachments import AttachmentPolicy
from glassagent._core.client import BaseLLMClient
from glassagent._core.errors import (
    ConfigurationError,
    ProviderError,
    ResponseParseError,
    UserError,
)
from glassagent._core.messages import (
    Attachment,
    LLMResponse,
    Message,
    ModelSettings,
    StopReason,
    StreamPart,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    ToolDefinition,
    ToolProtocol,
    Usage,
)
from glassagent._core.options import OllamaOptions, add_unset, options_for
from glassagent._core.retry import RetryPolicy
from glassagent._providers import json_protocol, shapes
from glassagent._providers.attachments import AttachmentGate
from glassagent._providers.call import Attempt, CallLimits, final_response, with_retries
from glassagent._providers.config import OLLAMA_BASE_URL, resolve
from glassagent._providers.http import mask_key
from glassagent._providers.openai_compat import parse_arguments, wire_tools
from glassagent._providers.transport import HTTPTransport, error_message

if TYPE_CHECKING:
    import httpx

DEFAULT_MODEL = "llama3.1:8b"
"""The model `OllamaClient` and `LlamaClient` use when none is given."""

_NO_SETTINGS = ModelSettings()
_Request = tuple[Sequence[Message], Sequence[ToolDefinition], "str | None", "ModelSettings | None"]
_PROVIDER = "ollama"
_CHAT = "/api/chat"
_SHOW = "/api/show"
_DURATIONS = {
    "total_duration": "total_ms",
    "load_duration": "load_ms",
    "prompt_eval_duration": "prompt_eval_ms",
    "eval_duration": "eval_ms",
}
_START_HINT = (
    "Is Ollama running? Start it with `ollama serve` (install it from https://ollama.com), "
    "or set OLLAMA_API_BASE to its address."
)


def _by_url(attachment: Attachment) -> bool:
    """Ollama takes no attachment by URL: images go as base64, text inline."""
    return False


def _text_attachment(attachment: Attachment) -> str | None:
    mime = attachment.mime_type or ""
    if mime.startswith("text/") or mime == "application/json":
        content = attachment.read_bytes().decode("utf-8", "replace")
        return f"[{attachment.name or 'attachment'}]\n{content}"
    return None


def _wire_message(message: Message) -> dict[str, Any]:
    """One neutral message in Ollama's chat shape."""
    if message.role == "tool":
        return {"role": "tool", "content": message.content, "tool_name": message.name or ""}
    wire: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        wire["tool_calls"] = [
            {"function": {"name": call.name, "arguments": call.input}}
            for call in message.tool_calls
        ]
    texts: list[str] = []
    for attachment in message.attachments:
        if (mime := attachment.mime_type or "").startswith("image/"):
            data = base64.b64encode(attachment.read_bytes()).decode("ascii")
            wire.setdefault("images", []).append(data)
        elif (text := _text_attachment(attachment)) is not None:
            texts.append(text)
        else:
            raise UserError(f"Ollama accepts image and text attachments only, not {mime!r}.")
    if texts:
        wire["content"] = "\n\n".join([message.content, *texts]).strip()
    return wire


_STOP_REASONS: dict[str, StopReason] = {"stop": "end_turn", "length": "max_tokens"}
"""``done_reason`` values and their neutral reading; any other (``load``, ``unload``, ...) is
``other``; none at all (older servers) is ``end_turn``."""


def _tool_call(raw: dict[str, Any]) -> ToolCall:
    where = "a tool call"
    function = shapes.call_function(raw, _PROVIDER)
    call_id = shapes.text_field(raw, "id", _PROVIDER, where) or f"call_{uuid.uuid4().hex[:12]}"
    name = shapes.text_field(function, "name", _PROVIDER, "a tool call function")
    if not name:
        raise shapes.parse_error(_PROVIDER, "a tool call without a name", raw)
    return parse_arguments(call_id, name, function.get("arguments"))


def _read_message(message: dict[str, Any]) -> tuple[str, str, list[ToolCall]]:
    """The text, thinking and tool calls of a ``message`` (wrong types raise)."""
    where = "a message"
    content = shapes.text_field(message, "content", _PROVIDER, where)
    thinking = shapes.text_field(message, "thinking", _PROVIDER, where)
    calls = shapes.object_list(message, "tool_calls", _PROVIDER, where)
    return content, thinking, [_tool_call(raw) for raw in calls]


def _timings(chunk: dict[str, Any]) -> dict[str, float]:
    """Ollama's nanosecond durations, in milliseconds (malformed ones are left out)."""
    durations = {name: shapes.duration(chunk.get(key), 1e-6) for key, name in _DURATIONS.items()}
    return {name: value for name, value in durations.items() if value is not None}


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
        tool_protocol: ``"native"`` sends tools in Ollama's ``tools`` field; ``"json"`` uses the
            JSON tool protocol; ``"auto"`` asks the server once (``POST /api/show``) whether
            the model has the ``tools`` capability and picks ``native`` if so, else ``json``.
        retry: How failed calls are retried (`ModelSettings.retry` overrides it per call);
            by default `RetryPolicy()`.
        attachment_policy: Which local files attachments may read, and whether remote ones
            are downloaded (Ollama takes no URLs: without downloads they are refused);
            `AttachmentPolicy()` when not given.

    Raises:
        ConfigurationError: For an unknown tool protocol.
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
        tool_protocol: ToolProtocol = "auto",
        retry: RetryPolicy | None = None,
        attachment_policy: AttachmentPolicy | None = None,
    ) -> None:
        if tool_protocol not in ("auto", "native", "json"):
            raise ConfigurationError(
                f"Unknown tool_protocol {tool_protocol!r}; use 'auto', 'native' or 'json'."
            )
        self.model = model
        self.retry: RetryPolicy | None = retry
        """How failed calls are retried, unless `ModelSettings.retry` says otherwise."""
        self._configured: ToolProtocol = tool_protocol
        self.tool_protocol = self._configured
        self._capabilities: dict[str, ToolProtocol] = {}
        self._attachments = AttachmentGate(attachment_policy, self.provider_name, _by_url)
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
        json_mode = bool(tools) and await self._resolve(limits) == "json"
        if self._configured == "json" or json_mode:
            messages = json_protocol.encode_history(messages)
        if json_mode:
            system = json_protocol.system_prompt(system, tools)
        wire = [{"role": "system", "content": system}] if system else []
        body: dict[str, Any] = {
            "model": self.model,
            "messages": wire + [_wire_message(m) for m in messages],
            "stream": stream,
        }
        if tools and not json_mode:
            body["tools"] = wire_tools(tools)
        if json_mode:
            body["format"] = "json"
        if settings is not None:
            self._add_settings(body, settings)
        return body, json_mode

    def _add_settings(self, body: dict[str, Any], settings: ModelSettings) -> None:
        """Put `settings` into `body`: the portable ones, then `OllamaOptions` as given."""
        options: dict[str, Any] = {}
        if settings.temperature is not None:
            options["temperature"] = settings.temperature
        if settings.max_tokens is not None:
            options["num_predict"] = settings.max_tokens
        if settings.stop_sequences:
            options["stop"] = list(settings.stop_sequences)
        if settings.thinking_budget is not None:
            # Ollama has no budget: any other than 0 turns thinking on (-1: the model decides).
            body["think"] = settings.thinking_budget != 0
        extra = options_for(settings.provider_options, OllamaOptions, self.provider_name)
        if extra is not None:
            add_unset(options, extra.options or {}, "OllamaOptions.options", self.provider_name)
            if extra.keep_alive is not None:
                body["keep_alive"] = extra.keep_alive
            if extra.think is not None:
                body["think"] = extra.think
        if options:
            body["options"] = options

    def _response(
        self,
        parts: tuple[list[str], list[str], list[ToolCall]],
        last: dict[str, Any],
        body: dict[str, Any],
        raw: Any,
        json_mode: bool,
    ) -> LLMResponse:
        text, thinking, calls = parts
        done_reason = shapes.text_field(last, "done_reason", self.provider_name, "a final chunk")
        response = LLMResponse(
            text="".join(text),
            tool_calls=tuple(calls),
            stop_reason=_STOP_REASONS.get(done_reason, "other") if done_reason else "end_turn",
            raw_stop_reason=done_reason or None,
            thinking="".join(thinking) or None,
            usage=Usage(
                shapes.token_count(last.get("prompt_eval_count")),
                shapes.token_count(last.get("eval_count")),
            ),
            model=shapes.optional_text(last.get("model")) or self.model,
            raw_response=raw,
            raw_request=body,
            timings=_timings(last),
        )
        return json_protocol.read_response(response) if json_mode else response

    def _check(self, chunk: Any, what: str) -> dict[str, Any]:
        if not isinstance(chunk, dict):
            raise ResponseParseError(
                f"Ollama answered with {what} that is not a JSON object: "
                f"{shapes.snippet(chunk, 200)}",
                provider=self.provider_name,
            )
        if "error" in chunk:
            error = chunk["error"]
            message = error if isinstance(error, str) else shapes.snippet(error)
            raise ProviderError(
                f"Ollama reported an error: {message[:2000]}",
                body=shapes.snippet(chunk, 2000),
                provider=self.provider_name,
            )
        return chunk

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
            raw = self._check(await self._transport.post_json(_CHAT, body, limits), "a body")
            message = shapes.object_field(raw, "message", self.provider_name, "a body")
            content, thinking, calls = _read_message(message)
            yield self._response(([content], [thinking], calls), raw, body, raw, json_mode)

        return await final_response(self._retrying(attempt, settings, streamed=False))

    def _retrying(
        self, attempt: Attempt, settings: ModelSettings | None, *, streamed: bool = True
    ) -> AsyncGenerator[StreamPart, None]:
        return with_retries(
            attempt,
            settings=settings,
            policy=self.retry,
            provider=self.provider_name,
            streamed=streamed,
        )

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

        async with aclosing(self._retrying(attempt, settings)) as parts:
            async for part in parts:
                yield part

    async def _stream_once(
        self, request: _Request, limits: CallLimits
    ) -> AsyncGenerator[StreamPart, None]:
        """One streamed attempt: read the NDJSON body to its end, yielding parts as they come."""
        body, json_mode = await self._body(*request, True, limits)
        parts: tuple[list[str], list[str], list[ToolCall]] = ([], [], [])
        chunks: list[Any] = []
        last: dict[str, Any] | None = None
        async with self._transport.stream(_CHAT, body, limits) as response:
            async for line in self._transport.lines(response, _CHAT):
                if last is not None or not line.strip():  # after `done`: read to the end,
                    continue  # so the connection goes back to the pool
                try:
                    chunk = self._check(shapes.loads(line), "a stream line")
                except ValueError:
                    raise ResponseParseError(
                        f"Ollama sent a malformed stream line: {line[:200]!r}",
                        provider=self.provider_name,
                    ) from None
                chunks.append(chunk)
                for delta in self._fold(chunk, parts, json_mode):
                    yield delta
                if chunk.get("done"):
                    last = chunk
        if last is None:
            raise ResponseParseError(
                "Ollama's stream ended before the answer was complete (no 'done' line).",
                provider=self.provider_name,
            )
        final = self._response(parts, last, body, chunks, json_mode)
        if json_mode:
            for delta in json_protocol.final_deltas(final, "".join(parts[1])):
                yield delta
        yield final

    @staticmethod
    def _fold(
        chunk: dict[str, Any],
        parts: tuple[list[str], list[str], list[ToolCall]],
        json_mode: bool,
    ) -> list[StreamPart]:
        """Add one stream line to `parts`; return the deltas to yield."""
        message = shapes.object_field(chunk, "message", _PROVIDER, "a stream line")
        content, thinking, calls = _read_message(message)
        deltas: list[StreamPart] = []
        if thinking:
            parts[1].append(thinking)
            deltas.append(ThinkingDelta(thinking))
        if content:
            parts[0].append(content)
            if not json_mode:
                deltas.append(TextDelta(content))
        parts[2].extend(calls)
        return deltas


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
        attachment_policy: Which local files attachments may read, and whether remote ones
            are downloaded; `AttachmentPolicy()` when not given.
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
        attachment_policy: AttachmentPolicy | None = None,
    ) -> None:
        super().__init__(
            model,
            base_url=base_url,
            api_key=api_key,
            http_client=http_client,
            tool_protocol="json",
            attachment_policy=attachment_policy,
        )
