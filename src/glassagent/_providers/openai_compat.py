"""`OpenAICompatibleClient`: the chat-completions wire of OpenAI, llama-server, vLLM, LM Studio."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import aclosing
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote

from glassagent._core.attachments import AttachmentPolicy
from glassagent._core.client import BaseLLMClient
from glassagent._core.errors import ConfigurationError, ProviderError, ResponseParseError
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
    Usage,
)
from glassagent._core.options import OpenAIOptions, add_unset, options_for
from glassagent._core.retry import RetryPolicy
from glassagent._providers import json_protocol, shapes
from glassagent._providers.attachments import AttachmentGate
from glassagent._providers.call import Attempt, CallLimits, final_response, with_retries
from glassagent._providers.config import OPENAI_API_BASE, resolve
from glassagent._providers.http import mask_key, redact
from glassagent._providers.sse import sse_events
from glassagent._providers.transport import HTTPTransport

if TYPE_CHECKING:
    import httpx

_PATH = "/chat/completions"
_STOP_REASONS: dict[str, StopReason] = {
    "stop": "end_turn",
    "eos": "end_turn",  # TGI and some llama.cpp builds
    "eos_token": "end_turn",
    "stop_sequence": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "model_length": "max_tokens",  # Mistral: the context window is full
    "content_filter": "content_filter",
}
"""Finish reasons and their neutral reading; any other is ``other``, a missing one ``end_turn``."""
_LLAMA_TIMINGS = ("prompt_ms", "predicted_ms")
_TEXT_MIME_TYPES = ("application/json", "application/xml", "application/x-yaml")
_START_HINT = (
    "Is the server running? Start one (e.g. `llama-server -m model.gguf --port 8080`, then "
    "base_url='http://127.0.0.1:8080/v1') or set OPENAI_API_BASE to its address."
)


# ---- request ---------------------------------------------------------------------------


def _takes_by_url(attachment: Attachment) -> bool:
    """Whether the wire takes a remote attachment by URL: images only (``image_url``)."""
    return (attachment.mime_type or "").startswith("image/")


def _attachment_part(attachment: Attachment) -> dict[str, Any]:
    """An attachment as a content part: images as URLs, text inline, others as files."""
    mime = attachment.mime_type or "application/octet-stream"
    if attachment.url is not None and _takes_by_url(attachment):
        return {"type": "image_url", "image_url": {"url": attachment.url}}
    data = attachment.read_bytes()
    if mime.startswith("text/") or mime in _TEXT_MIME_TYPES:
        text = data.decode("utf-8", "replace")
        return {"type": "text", "text": f"[{attachment.name or 'attachment'}]\n{text}"}
    url = f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"
    if mime.startswith("image/"):
        return {"type": "image_url", "image_url": {"url": url}}
    return {"type": "file", "file": {"filename": attachment.name or "file", "file_data": url}}


def _wire_tool_call(call: ToolCall) -> dict[str, Any]:
    arguments = json.dumps(call.input)
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": arguments},
    }


def _wire_message(message: Message) -> dict[str, Any]:
    """One neutral message in the chat-completions shape."""
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    if message.role == "assistant":
        wire: dict[str, Any] = {"role": "assistant", "content": message.content}
        if message.tool_calls:
            wire["content"] = message.content or None
            wire["tool_calls"] = [_wire_tool_call(call) for call in message.tool_calls]
        return wire
    if message.attachments:
        parts = [{"type": "text", "text": message.content}] if message.content else []
        parts += [_attachment_part(a) for a in message.attachments]
        return {"role": message.role, "content": parts}
    return {"role": message.role, "content": message.content}


def wire_messages(messages: Sequence[Message], system: str | None) -> list[dict[str, Any]]:
    """The ``messages`` array: the system prompt first, then the conversation."""
    wire = [{"role": "system", "content": system}] if system else []
    return wire + [_wire_message(m) for m in messages]


def wire_tools(tools: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
    """Tool definitions in the chat-completions ``tools`` shape."""
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in tools
    ]


# ---- response --------------------------------------------------------------------------


def parse_arguments(call_id: str, name: str, arguments: Any) -> ToolCall:
    """A `ToolCall` from wire arguments (an object, JSON text, or null for none).

    Arguments that are not a JSON object (invalid JSON, an array, a number...) set the call's
    `arguments_error`, so the agent tells the model instead of running the tool.
    """
    if isinstance(arguments, dict):
        return ToolCall(call_id, name, arguments)
    if arguments is not None and not isinstance(arguments, str):
        problem = f"the arguments must be a JSON object, got {shapes.snippet(arguments)}"
        return ToolCall(call_id, name, {}, arguments_error=problem)
    text = arguments or ""
    try:
        value = shapes.loads(text) if text.strip() else {}
    except ValueError as exc:
        problem = f"the arguments are not valid JSON ({exc}): {text[:500]!r}"
        return ToolCall(call_id, name, {}, arguments_error=problem)
    if not isinstance(value, dict):
        problem = f"the arguments must be a JSON object, got {text[:500]!r}"
        return ToolCall(call_id, name, {}, arguments_error=problem)
    return ToolCall(call_id, name, value)


def _usage(raw: Any) -> Usage:
    """The token counts of a ``usage`` object; malformed counts count as 0."""
    if not isinstance(raw, dict):
        return Usage()
    details = raw.get("completion_tokens_details")
    details = details if isinstance(details, dict) else {}
    output = shapes.token_count(raw.get("completion_tokens"))
    reasoning = min(shapes.token_count(details.get("reasoning_tokens")), output)
    return Usage(shapes.token_count(raw.get("prompt_tokens")), output - reasoning, reasoning)


def _timings(raw: Any) -> dict[str, float]:
    """The durations in llama-server's ``timings`` object (``prompt_ms``, ``predicted_ms``)."""
    if not isinstance(raw, dict):
        return {}
    durations = {k: shapes.duration(raw.get(k)) for k in _LLAMA_TIMINGS}
    return {k: v for k, v in durations.items() if v is not None}


def _stop_reason(finish_reason: str | None) -> StopReason:
    """The neutral reading of a ``finish_reason``: unknown ones are ``other``, never guessed."""
    if finish_reason is None:
        return "end_turn"
    return _STOP_REASONS.get(finish_reason, "other")


class _Assembly:
    """Collects one answer, from a complete body or from streamed chunks.

    Every value is checked where it enters: a wrong type raises `ResponseParseError`.
    """

    def __init__(self, provider: str) -> None:
        self.provider = provider
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage = Usage()
        self.model: str | None = None
        self.timings: dict[str, float] = {}

    def add_call(self, position: int, raw: dict[str, Any]) -> None:
        """Add a tool call, or the next fragment of one (fragments share an ``index``)."""
        where = "a tool call"
        index = raw.get("index", position)
        if isinstance(index, bool) or not isinstance(index, int):
            detail = f"{where} whose 'index' is {shapes.kind(index)}, not an integer"
            raise shapes.parse_error(self.provider, detail, raw)
        function = shapes.call_function(raw, self.provider)
        call_id = shapes.text_field(raw, "id", self.provider, where)
        name = shapes.text_field(function, "name", self.provider, "a tool call function")
        arguments = function.get("arguments")
        if arguments is not None and not isinstance(arguments, str):
            try:  # an object (some servers send one); parse_arguments flags any other value
                arguments = shapes.dumps(arguments)
            except ValueError:
                detail = f"{where} whose arguments nest too deeply"
                raise shapes.parse_error(self.provider, detail) from None
        slot = self.calls.setdefault(index, {"id": "", "name": "", "arguments": []})
        slot["id"] = slot["id"] or call_id
        slot["name"] = slot["name"] or name
        slot["arguments"].append(arguments or "")

    def add_meta(self, chunk: dict[str, Any]) -> None:
        """Take model, usage and timings from a body or chunk (malformed ones are ignored)."""
        self.model = shapes.optional_text(chunk.get("model")) or self.model
        host = chunk.get("x_groq")  # Groq streams usage in its own field
        usage = chunk.get("usage") or (host.get("usage") if isinstance(host, dict) else None)
        if usage:
            self.usage = _usage(usage)
        if chunk.get("timings"):
            self.timings = _timings(chunk["timings"])

    def add_choice(self, choice: Any, key: str) -> list[StreamPart]:
        """Fold in a choice's ``message`` or ``delta`` (`key`) and its finish reason."""
        if not isinstance(choice, dict):
            detail = f"a choice that is {shapes.kind(choice)}, not an object"
            raise shapes.parse_error(self.provider, detail, choice)
        finish = shapes.text_field(choice, "finish_reason", self.provider, "a choice")
        self.finish_reason = finish or self.finish_reason
        return self.add_delta(shapes.object_field(choice, key, self.provider, "a choice"))

    def add_delta(self, delta: dict[str, Any]) -> list[StreamPart]:
        """Fold one message or streamed delta in; return the text and thinking it carried."""
        parts: list[StreamPart] = []
        where = "a message"
        reasoning = shapes.text_field(delta, "reasoning_content", self.provider, where)
        reasoning = reasoning or shapes.text_field(delta, "reasoning", self.provider, where)
        if reasoning:
            self.reasoning.append(reasoning)
            parts.append(ThinkingDelta(reasoning))
        content = shapes.text_field(delta, "content", self.provider, where)
        content = content or shapes.text_field(delta, "refusal", self.provider, where)
        if content:
            self.text.append(content)
            parts.append(TextDelta(content))
        calls = shapes.object_list(delta, "tool_calls", self.provider, where)
        for position, raw in enumerate(calls):
            self.add_call(position, raw)
        return parts

    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The assembled tool calls, in index order."""
        calls = []
        for index in sorted(self.calls):
            slot = self.calls[index]
            if not slot["name"]:
                detail = "a tool call without a name"
                raise shapes.parse_error(self.provider, detail, {**slot, "index": index})
            call_id = slot["id"] or f"call_{uuid.uuid4().hex[:12]}"
            calls.append(parse_arguments(call_id, slot["name"], "".join(slot["arguments"])))
        return tuple(calls)


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
        api_version: Sent as the ``api-version`` query parameter (Azure OpenAI and gateways
            that want one); defaults to ``OPENAI_API_VERSION`` under the same rule as the key.
        http_client: An ``httpx.AsyncClient`` to use; the caller keeps ownership (it is not
            closed by `aclose`). By default the client creates and owns one.
        tool_protocol: ``"native"`` sends tools in the ``tools`` field; ``"json"`` uses the
            JSON tool protocol in the system prompt, for models without tool calling.
        retry: How failed calls are retried (`ModelSettings.retry` overrides it per call);
            by default `RetryPolicy()`.
        attachment_policy: Which local files attachments may read and whether remote ones are
            passed on or downloaded; `AttachmentPolicy()` when not given. Remote images go as
            ``image_url`` URLs; other remote files need downloads allowed.

    Raises:
        ConfigurationError: When OpenAI's own URL is used without an API key, or for an
            unknown tool protocol.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        organization: str | None = None,
        api_version: str | None = None,
        http_client: httpx.AsyncClient | None = None,
        tool_protocol: Literal["native", "json"] = "native",
        retry: RetryPolicy | None = None,
        attachment_policy: AttachmentPolicy | None = None,
    ) -> None:
        if tool_protocol not in ("native", "json"):
            raise ConfigurationError(
                f"Unknown tool_protocol {tool_protocol!r}; use 'native' or 'json'."
            )
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
        self.model = model
        self.provider_name = "openai" if is_openai else "openai_compatible"
        self.tool_protocol = tool_protocol
        self.retry: RetryPolicy | None = retry
        """How failed calls are retried, unless `ModelSettings.retry` says otherwise."""
        self._secret = key or None
        self._path = _PATH
        if config.api_version:
            self._path += "?api-version=" + quote(config.api_version, safe="")
        self._attachments = AttachmentGate(attachment_policy, self.provider_name, _takes_by_url)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        if config.organization:
            headers["OpenAI-Organization"] = config.organization
        self._transport = HTTPTransport(
            provider=self.provider_name,
            base_url=base,
            headers=headers,
            http_client=http_client,
            secret=key or None,
            start_hint=_START_HINT,
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
        body: dict[str, Any] = {"model": self.model}
        if self.tool_protocol == "json":
            if tools:
                system = json_protocol.system_prompt(system, tools)
                body["response_format"] = {"type": "json_object"}
            body["messages"] = wire_messages(json_protocol.encode_history(messages), system)
        else:
            body["messages"] = wire_messages(messages, system)
            if tools:
                body["tools"] = wire_tools(tools)
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        if settings is not None:
            self._add_settings(body, settings)
        return body

    def _add_settings(self, body: dict[str, Any], settings: ModelSettings) -> None:
        """Put `settings` into `body`, refusing what this API cannot honour."""
        provider = self.provider_name
        if settings.thinking_budget is not None:
            raise ConfigurationError(
                f"{provider} cannot honour ModelSettings.thinking_budget: the OpenAI Chat API "
                "takes no reasoning budget in tokens. Use OpenAIOptions(reasoning_effort=...) "
                "or your server's own field in OpenAIOptions(extra_body=...)."
            )
        if settings.temperature is not None:
            body["temperature"] = settings.temperature
        if settings.max_tokens is not None:
            body["max_tokens"] = settings.max_tokens
        if settings.stop_sequences:
            body["stop"] = list(settings.stop_sequences)
        options = options_for(settings.provider_options, OpenAIOptions, provider)
        if options is None:
            return
        fields = {
            "top_p": options.top_p,
            "seed": options.seed,
            "presence_penalty": options.presence_penalty,
            "frequency_penalty": options.frequency_penalty,
            "reasoning_effort": options.reasoning_effort,
            "response_format": options.response_format,
        }
        given = {k: v for k, v in fields.items() if v is not None}
        add_unset(body, given, "OpenAIOptions", provider)
        add_unset(body, options.extra_body or {}, "OpenAIOptions.extra_body", provider)

    def _finish(
        self, assembly: _Assembly, body: dict[str, Any], raw: Any, json_mode: bool
    ) -> LLMResponse:
        response = LLMResponse(
            text="".join(assembly.text),
            tool_calls=assembly.tool_calls(),
            stop_reason=_stop_reason(assembly.finish_reason),
            raw_stop_reason=assembly.finish_reason,
            thinking="".join(assembly.reasoning) or None,
            usage=assembly.usage,
            model=assembly.model or self.model,
            raw_response=raw,
            raw_request=body,
            timings=assembly.timings,
        )
        response = shapes.check_blocked(response, self.provider_name)
        return json_protocol.read_response(response) if json_mode else response

    def _parse_error(self, detail: str, raw: Any) -> ResponseParseError:
        return shapes.parse_error(self.provider_name, detail, raw, secret=self._secret)

    def _decode_chunk(self, data: str) -> dict[str, Any]:
        ok, chunk = shapes.parse_json(data)
        if not ok:
            raise self._parse_error(f"a malformed stream chunk {data[:200]!r}", None)
        if not isinstance(chunk, dict):
            raise self._parse_error(f"a stream chunk that is not an object {data[:200]!r}", None)
        return chunk

    def _stream_error(self, chunk: dict[str, Any]) -> ProviderError:
        secret = self._secret
        error = chunk.get("error")
        message = error.get("message") if isinstance(error, dict) else error
        if not isinstance(message, str):
            message = shapes.optional_text(chunk.get("message")) or "no details"
        return ProviderError(
            redact(
                f"{self.provider_name} reported an error mid-stream: {message[:500]}", self._secret
            ),
            body=redact(shapes.snippet(chunk), secret),
            provider=self.provider_name,
        )

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
        json_mode = self.tool_protocol == "json" and bool(tools)
        body = self._body(messages, tools, system, settings, stream=False)

        async def attempt(limits: CallLimits) -> AsyncGenerator[StreamPart, None]:
            raw = await self._transport.post_json(self._path, body, limits)
            choices = raw.get("choices") if isinstance(raw, dict) else None
            if not isinstance(choices, list) or not choices:
                raise self._parse_error("a body without choices", raw)
            assembly = _Assembly(self.provider_name)
            assembly.add_meta(raw)
            assembly.add_choice(choices[0], "message")
            yield self._finish(assembly, body, raw, json_mode)

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
        """Stream the answer over SSE: text and thinking deltas, then the `LLMResponse`.

        With the JSON tool protocol the reply is JSON, so no text deltas are streamed; the
        thought and the answer follow as one delta each once the reply is complete. Closing
        this generator closes the HTTP response at once.

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
        json_mode = self.tool_protocol == "json" and bool(tools)
        body = self._body(messages, tools, system, settings, stream=True)

        def attempt(limits: CallLimits) -> AsyncGenerator[StreamPart, None]:
            return self._stream_once(body, json_mode, limits)

        async with aclosing(self._retrying(attempt, settings)) as parts:
            async for part in parts:
                yield part

    async def _stream_once(
        self, body: dict[str, Any], json_mode: bool, limits: CallLimits
    ) -> AsyncGenerator[StreamPart, None]:
        """One streamed attempt: read the SSE body to its end, yielding parts as they come."""
        assembly = _Assembly(self.provider_name)
        chunks: list[Any] = []
        done = False
        async with self._transport.stream(self._path, body, limits) as response:
            async for event, data in sse_events(self._transport.lines(response, self._path)):
                if done:  # read to the end, so the connection goes back to the pool
                    continue
                if data.strip() == "[DONE]":
                    done = True
                    continue
                chunk = self._decode_chunk(data)
                chunks.append(chunk)
                if event == "error" or "error" in chunk:
                    raise self._stream_error(chunk)
                assembly.add_meta(chunk)
                choices = chunk.get("choices")
                if choices is not None and not isinstance(choices, list):
                    raise self._parse_error("a stream chunk whose 'choices' is not an array", chunk)
                for choice in choices or []:
                    for part in assembly.add_choice(choice, "delta"):
                        if not (json_mode and isinstance(part, TextDelta)):
                            yield part
        if not done and assembly.finish_reason is None:
            raise self._parse_error("a stream that ended before the answer was complete", None)
        final = self._finish(assembly, body, chunks, json_mode)
        if json_mode:
            for part in json_protocol.final_deltas(final, "".join(assembly.reasoning)):
                yield part
        yield final
