"""Pure translation between neutral types and the chat-completions wire (OpenAI and kin).

No I/O: request bodies are built from neutral messages, tools and settings, and bodies or
stream chunks are read into a `ResponseBuilder`.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

from glassagent._core import json_protocol, tool_choice
from glassagent._core.errors import ConfigurationError, ProviderError, ToolCallFormatError
from glassagent._core.messages import (
    Attachment,
    LLMResponse,
    Message,
    ModelSettings,
    StopReason,
    StreamPart,
    ToolCall,
    ToolDefinition,
    Usage,
)
from glassagent._core.options import add_unset
from glassagent._core.output import OutputSchema
from glassagent._core.request import ModelRequest
from glassagent._providers import caching, shapes
from glassagent._providers.http import redact
from glassagent._providers.openai_options import OpenAIOptions
from glassagent._providers.portable import add_portable
from glassagent._providers.transport import StatusHook, error_message
from glassagent._providers.wire_client import Wire, WireReader

PATH = "/chat/completions"
STOP_REASONS: dict[str, StopReason] = {
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
UNREADABLE_OUTPUT = "The model produced output that does not match the expected"
"""How llama.cpp's server begins its error for a reply that does not match the chat
template's tool-call format (the message ends with the format's name, e.g.
``peg-native format``)."""
CACHE_KEY_PROVIDERS = frozenset({"openai"})
"""Providers sent a ``prompt_cache_key`` by the automatic rule: OpenAI's own URL."""
EXPLICIT_CACHE_KEY_PROVIDERS = frozenset({"openai", "azure_openai"})
"""Providers sent a ``prompt_cache_key`` when `ModelSettings.prompt_cache` is set."""
CACHE_MINIMUM_TOKENS = 1024
"""The shortest prompt OpenAI caches, in tokens."""
START_HINT = (
    "Is the server running? Start one (e.g. `llama-server -m model.gguf --port 8080`, then "
    "base_url='http://127.0.0.1:8080/v1') or set OPENAI_API_BASE to its address."
)


# ---- request ---------------------------------------------------------------------------


def takes_by_url(attachment: Attachment) -> bool:
    """Whether the wire takes a remote attachment by URL: images only (``image_url``)."""
    return (attachment.mime_type or "").startswith("image/")


def _attachment_part(attachment: Attachment) -> dict[str, Any]:
    """An attachment as a content part: images as URLs, text inline, others as files."""
    mime = attachment.mime_type or "application/octet-stream"
    if attachment.url is not None and takes_by_url(attachment):
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


def _usage(raw: Any) -> Usage:
    """The token counts of a ``usage`` object; malformed counts count as 0.

    ``prompt_tokens_details.cached_tokens`` (counted in ``prompt_tokens``) are the prompt
    tokens read from the prompt cache.
    """
    if not isinstance(raw, dict):
        return Usage()
    details = raw.get("completion_tokens_details")
    details = details if isinstance(details, dict) else {}
    output = shapes.token_count(raw.get("completion_tokens"))
    reasoning = min(shapes.token_count(details.get("reasoning_tokens")), output)
    prompt = shapes.token_count(raw.get("prompt_tokens"))
    cached = raw.get("prompt_tokens_details")
    cached = shapes.token_count(cached.get("cached_tokens")) if isinstance(cached, dict) else 0
    return Usage(prompt, output - reasoning, reasoning, cache_read_tokens=min(cached, prompt))


def _timings(raw: Any) -> dict[str, float]:
    """The durations in llama-server's ``timings`` object (``prompt_ms``, ``predicted_ms``)."""
    if not isinstance(raw, dict):
        return {}
    durations = {k: shapes.duration(raw.get(k)) for k in _LLAMA_TIMINGS}
    return {k: v for k, v in durations.items() if v is not None}


class Reader(WireReader):
    """Reads a complete body or stream chunks into a `ResponseBuilder`.

    Every value is checked where it enters: a wrong type raises `ResponseParseError`.

    Args:
        provider: The provider's name, for errors.
        secret: The API key, kept out of errors.
    """

    def read(self, body: Any) -> None:
        """Read a complete body (the answer of a request without ``stream``)."""
        self.body(body)

    def decode(self, data: str) -> Any:
        """One SSE ``data`` field as a JSON object."""
        return decode_chunk(data, self.provider, self.secret)

    def event(self, name: str | None, data: Any) -> list[StreamPart]:
        """Read one stream event: an error event raises, any other is a chunk."""
        if name == "error" or "error" in data:
            raise stream_error(data, self.provider, self.secret)
        return self.chunk(data)

    def finish(self, response: LLMResponse) -> LLMResponse:
        """The answer; one the server withheld raises `ContentBlockedError`."""
        return shapes.check_blocked(response, self.provider)

    def body(self, raw: Any) -> None:
        """Read a complete body (the answer of a request without ``stream``)."""
        choices = raw.get("choices") if isinstance(raw, dict) else None
        if not isinstance(choices, list) or not choices:
            detail = "a body without choices"
            raise shapes.parse_error(self.provider, detail, raw, secret=self.secret)
        self.meta(raw)
        self.choice(choices[0], "message")

    def chunk(self, chunk: dict[str, Any]) -> list[StreamPart]:
        """Read one stream chunk; return the thinking and text it carried."""
        self.meta(chunk)
        choices = chunk.get("choices")
        if choices is not None and not isinstance(choices, list):
            detail = "a stream chunk whose 'choices' is not an array"
            raise shapes.parse_error(self.provider, detail, chunk, secret=self.secret)
        parts: list[StreamPart] = []
        for choice in choices or []:
            parts += self.choice(choice, "delta")
        return parts

    def meta(self, chunk: dict[str, Any]) -> None:
        """Take model, usage and timings from a body or chunk (malformed ones are ignored)."""
        self.builder.set_model(shapes.optional_text(chunk.get("model")))
        host = chunk.get("x_groq")  # Groq streams usage in its own field
        usage = chunk.get("usage") or (host.get("usage") if isinstance(host, dict) else None)
        if usage:
            self.builder.usage = _usage(usage)
        if chunk.get("timings"):
            self.builder.timings = _timings(chunk["timings"])

    def choice(self, choice: Any, key: str) -> list[StreamPart]:
        """Fold in a choice's ``message`` or ``delta`` (`key`) and its finish reason."""
        if not isinstance(choice, dict):
            detail = f"a choice that is {shapes.kind(choice)}, not an object"
            raise shapes.parse_error(self.provider, detail, choice)
        finish = shapes.text_field(choice, "finish_reason", self.provider, "a choice")
        self.builder.finish(finish)
        return self._delta(shapes.object_field(choice, key, self.provider, "a choice"))

    def _delta(self, delta: dict[str, Any]) -> list[StreamPart]:
        """Fold one message or streamed delta in; return the thinking and text it carried."""
        where = "a message"
        reasoning = shapes.text_field(delta, "reasoning_content", self.provider, where)
        reasoning = reasoning or shapes.text_field(delta, "reasoning", self.provider, where)
        content = shapes.text_field(delta, "content", self.provider, where)
        content = content or shapes.text_field(delta, "refusal", self.provider, where)
        parts = [self.builder.thinking(reasoning), self.builder.text(content)]
        calls = shapes.object_list(delta, "tool_calls", self.provider, where)
        for position, raw in enumerate(calls):
            self._call(position, raw)
        return [part for part in parts if part is not None]

    def _call(self, position: int, raw: dict[str, Any]) -> None:
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
        self.builder.tool_call(index=index, call_id=call_id, name=name, arguments=arguments)


def request_body(
    model: str,
    provider: str,
    request: ModelRequest,
    *,
    json_tools: bool,
    stream: bool,
    named_choice: bool = True,
    json_grammar: bool = False,
) -> dict[str, Any]:
    """The request body; with `json_tools`, tools go by the JSON tool protocol.

    Without `named_choice` (llama.cpp's server reads ``tool_choice`` as a string only), a
    tool choice naming one tool is sent as that tool alone with ``"required"``. With
    `json_grammar`, a JSON-protocol reply is constrained to `json_protocol.reply_schema`
    (``response_format`` of type ``json_schema``), else to any JSON object.
    """
    body: dict[str, Any] = {"model": model}
    system, choice = request.system, request.tool_choice
    if json_tools:
        if request.tools:
            system = json_protocol.system_prompt(system, request.offered, choice)
            body["response_format"] = _reply_format(request.offered, choice, json_grammar)
        history = json_protocol.encode_history(request.messages, tools=bool(request.tools))
        body["messages"] = wire_messages(history, system)
    else:
        body["messages"] = wire_messages(request.messages, system)
        tools: Sequence[ToolDefinition] = request.tools
        if choice is not None and choice not in tool_choice.KEYWORDS and not named_choice:
            tools, choice = request.offered, "required"
        if tools:
            body["tools"] = wire_tools(tools)
        if choice is not None:
            body["tool_choice"] = _wire_choice(choice)
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    _add_cache_key(body, request, provider)
    _add_settings(body, request.settings, provider)
    return body


def _add_cache_key(body: dict[str, Any], request: ModelRequest, provider: str) -> None:
    """Send ``prompt_cache_key`` where it is documented (see `CACHE_KEY_PROVIDERS`).

    OpenAI caches prompt prefixes of 1024 tokens or more by itself; the key routes requests
    of one prefix to one cache. It goes to OpenAI's own URL when `ModelSettings.prompt_cache`
    asks for caching (automatically: for prompts of `CACHE_MINIMUM_TOKENS` or more), and to
    Azure OpenAI only when it is set (``True`` or a `PromptCache`), as older API versions
    refuse the field. Other servers (llama.cpp, vLLM, Ollama...) never get it. An automatic
    key gives way to one in `OpenAIOptions.extra_body`.
    """
    settings = request.settings
    asked = settings.prompt_cache is not None
    if provider not in (EXPLICIT_CACHE_KEY_PROVIDERS if asked else CACHE_KEY_PROVIDERS):
        return
    options = OpenAIOptions.from_settings(settings, provider)
    if not asked and options is not None and "prompt_cache_key" in (options.extra_body or {}):
        return
    policy = caching.wanted(
        settings,
        CACHE_MINIMUM_TOKENS,
        lambda enough: caching.estimate_tokens(
            request.messages, request.tools, request.system, enough
        ),
    )
    if policy is not None:
        body["prompt_cache_key"] = policy.key or caching.default_key(request.system, request.tools)


def _wire_choice(choice: str) -> str | dict[str, Any]:
    """A checked tool choice in the chat-completions ``tool_choice`` shape."""
    if choice in tool_choice.KEYWORDS:
        return choice
    return {"type": "function", "function": {"name": choice}}


def response_format(output: OutputSchema) -> dict[str, Any]:
    """The ``response_format`` of a structured answer (OpenAI and llama.cpp's server)."""
    json_schema: dict[str, Any] = {"name": output.name, "schema": dict(output.schema)}
    if output.description:
        json_schema["description"] = output.description
    json_schema["strict"] = output.strict
    return {"type": "json_schema", "json_schema": json_schema}


def _reply_format(
    tools: Sequence[ToolDefinition], choice: str | None, grammar: bool
) -> dict[str, Any]:
    """The ``response_format`` of a JSON-protocol request (any object without a grammar)."""
    if not grammar:
        return {"type": "json_object"}
    schema = json_protocol.reply_schema(tools, choice)
    return {"type": "json_schema", "json_schema": {"name": "tool_protocol_reply", "schema": schema}}


def _add_settings(body: dict[str, Any], settings: ModelSettings, provider: str) -> None:
    """Put `settings` into `body`, refusing what this API cannot honour."""
    if settings.thinking_budget is not None:
        raise ConfigurationError(
            f"{provider} cannot honour ModelSettings.thinking_budget: the OpenAI Chat API "
            "takes no reasoning budget in tokens. Use OpenAIOptions(reasoning_effort=...) "
            "or your server's own field in OpenAIOptions(extra_body=...)."
        )
    add_portable(body, settings, max_tokens="max_tokens", stop="stop")
    if settings.output_schema is not None:
        output = {"response_format": response_format(settings.output_schema)}
        add_unset(body, output, "ModelSettings.output_schema", provider)
    options = OpenAIOptions.from_settings(settings, provider)
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


def decode_chunk(data: str, provider: str, secret: str | None) -> dict[str, Any]:
    """One SSE ``data`` field as a JSON object."""
    ok, chunk = shapes.parse_json(data)
    if not ok:
        detail = f"a malformed stream chunk {data[:200]!r}"
        raise shapes.parse_error(provider, detail, None, secret=secret)
    if not isinstance(chunk, dict):
        detail = f"a stream chunk that is not an object {data[:200]!r}"
        raise shapes.parse_error(provider, detail, None, secret=secret)
    return chunk


def unreadable_tool_call(
    message: str | None, body: str, provider: str, secret: str | None, status: int | None
) -> ToolCallFormatError | None:
    """llama.cpp's "could not parse the model's output" error as `ToolCallFormatError`.

    llama.cpp's server sends it (HTTP 500, or an error event mid-stream) when the model's
    reply does not match the tool-call format of its chat template, e.g. a call of a tool
    that does not exist. `None` for any other error.
    """
    if message is None or not message.startswith(UNREADABLE_OUTPUT):
        return None
    return ToolCallFormatError(  # masked before cut: a cut key would stay half visible
        f"{provider} could not read the model's reply: {redact(message, secret)[:500]}",
        status=status,
        body=redact(body, secret)[:2000],
        provider=provider,
    )


def status_hook(provider: str, secret: str | None) -> StatusHook:
    """The transport's hook: a 500 that is llama.cpp's parse failure becomes typed."""

    def hook(status: int, body: str) -> ProviderError | None:
        if status != 500:
            return None
        return unreadable_tool_call(error_message(body), body, provider, secret, status)

    return hook


def stream_error(chunk: dict[str, Any], provider: str, secret: str | None) -> ProviderError:
    """The error a server reported mid-stream, without the key."""
    error = chunk.get("error")
    message = error.get("message") if isinstance(error, dict) else error
    if not isinstance(message, str):
        message = shapes.optional_text(chunk.get("message")) or "no details"
    if unreadable := unreadable_tool_call(message, shapes.snippet(chunk), provider, secret, None):
        return unreadable
    return ProviderError(
        redact(f"{provider} reported an error mid-stream: {message[:500]}", secret),
        body=redact(shapes.snippet(chunk), secret),
        provider=provider,
    )


class OpenAIWire(Wire):
    """The chat-completions wire, for `OpenAICompatibleClient` and its subclasses.

    Args:
        provider: The provider's name (``openai``, ``openai_compatible``, ...).
        path: The path of requests, with any query.
        json_tools: Offer tools by the JSON tool protocol instead of the ``tools`` field.
        json_grammar: Constrain JSON-protocol replies to the protocol's JSON Schema.
        named_choice: Whether the server takes a tool choice naming one tool.
        start_hint: Added to the error of a connection that could not be made.
        status_hook: Maps error statuses to typed errors; by default llama.cpp's parse
            failure.
    """

    framing = "sse"
    end_marker = "[DONE]"
    stop_reasons = STOP_REASONS

    def __init__(
        self,
        provider: str,
        path: str = PATH,
        *,
        json_tools: bool = False,
        json_grammar: bool = False,
        named_choice: bool = True,
        start_hint: str = START_HINT,
        status_hook: StatusHook | None = None,
    ) -> None:
        self.provider = provider
        self.path = path
        self.json_tools = json_tools
        self.json_grammar = json_grammar
        self.named_choice = named_choice
        self.start_hint = start_hint
        self.status_hook = status_hook

    def request_body(self, model: str, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        """The chat-completions body of `request`."""
        return request_body(
            model,
            self.provider,
            request,
            json_tools=self.json_tools,
            stream=stream,
            named_choice=self.named_choice,
            json_grammar=self.json_grammar,
        )

    def reader(self, request: ModelRequest, secret: str | None) -> Reader:
        """A reader of one chat-completions answer."""
        return Reader(self.provider, secret)

    def status_error(self, status: int, body: str, secret: str | None) -> ProviderError | None:
        """The hook's error, else llama.cpp's parse failure as `ToolCallFormatError`."""
        if self.status_hook is not None:
            return self.status_hook(status, body)
        return status_hook(self.provider, secret)(status, body)

    def takes_by_url(self, attachment: Attachment) -> bool:
        """Remote images go by URL."""
        return takes_by_url(attachment)
