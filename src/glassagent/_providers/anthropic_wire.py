"""Pure translation between neutral types and Anthropic's Messages API (no I/O).

Requests: the system prompt goes to the top-level ``system``; tool results become
``tool_result`` blocks of a user turn (consecutive ones in one turn); thinking blocks kept in
an assistant message's `Message.provider_metadata` go back unchanged, signatures included.
Responses, complete or streamed, are fed into a `ResponseBuilder`.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from glassagent._core import tool_choice
from glassagent._core.errors import (
    AttachmentError,
    ConfigurationError,
    ProviderError,
    ProviderUnavailableError,
    RateLimitError,
    ResponseParseError,
)
from glassagent._core.messages import (
    Attachment,
    LLMResponse,
    Message,
    ModelSettings,
    StopReason,
    StreamPart,
    ToolDefinition,
    Usage,
)
from glassagent._core.output import OutputSchema
from glassagent._core.request import ModelRequest
from glassagent._providers import shapes
from glassagent._providers.anthropic_cache import add_breakpoints
from glassagent._providers.anthropic_options import AnthropicOptions, add_options
from glassagent._providers.http import redact
from glassagent._providers.portable import add_portable
from glassagent._providers.wire_client import Wire, WireReader

PROVIDER = "anthropic"
PATH = "/v1/messages"
START_HINT = "Check the address (ANTHROPIC_API_BASE) and the network."
API_VERSION = "2023-06-01"
"""The ``anthropic-version`` header sent with every request."""
DEFAULT_MAX_TOKENS = 4096
"""``max_tokens`` when `ModelSettings.max_tokens` is not set (Anthropic requires one); the
thinking budget is added to it when thinking is on."""
THINKING_BLOCKS = "anthropic_thinking"
"""`LLMResponse.provider_metadata` key of the answer's ``thinking`` and ``redacted_thinking``
blocks, exactly as sent (signatures included); they go back with the assistant message."""
_CACHE_FIELDS = ("cache_creation_input_tokens", "cache_read_input_tokens")
STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "refusal": "content_filter",
    "pause_turn": "other",  # a server tool paused the turn; raw_stop_reason says so
}
"""Anthropic's stop reasons and their neutral reading; any other is ``other``."""
_TEXT_MIME_TYPES = ("application/json", "application/xml", "application/x-yaml")
_PDF = "application/pdf"


# ---- request ---------------------------------------------------------------------------


def takes_by_url(attachment: Attachment) -> bool:
    """Whether the Messages API fetches an attachment by URL itself: images and PDFs."""
    mime = attachment.mime_type or ""
    return mime.startswith("image/") or mime == _PDF


def _attachment_block(attachment: Attachment) -> dict[str, Any]:
    """An attachment as an ``image`` or ``document`` block (URL, base64 or text source)."""
    mime = attachment.mime_type or "application/octet-stream"
    kind = "image" if mime.startswith("image/") else "document"
    if attachment.url is not None and takes_by_url(attachment):
        return {"type": kind, "source": {"type": "url", "url": attachment.url}}
    if mime.startswith("image/") or mime == _PDF:
        data = base64.b64encode(attachment.read_bytes()).decode("ascii")
        return {"type": kind, "source": {"type": "base64", "media_type": mime, "data": data}}
    if mime.startswith("text/") or mime in _TEXT_MIME_TYPES:
        text = attachment.read_bytes().decode("utf-8", "replace")
        source = {"type": "text", "media_type": "text/plain", "data": text}
        block: dict[str, Any] = {"type": "document", "source": source}
        if attachment.name:
            block["title"] = attachment.name
        return block
    raise AttachmentError(
        f"Attachment {attachment.name or 'attachment'!r} ({mime}) cannot be sent to Anthropic, "
        "which takes images, PDFs and text files.",
        provider=PROVIDER,
    )


def _thinking_blocks(message: Message) -> list[dict[str, Any]]:
    """The thinking blocks an assistant message carries back, as they were sent."""
    blocks = message.provider_metadata.get(THINKING_BLOCKS)
    if not isinstance(blocks, list):
        return []
    kinds = ("thinking", "redacted_thinking")
    return [dict(b) for b in blocks if isinstance(b, dict) and b.get("type") in kinds]


def _assistant_blocks(message: Message) -> list[dict[str, Any]]:
    blocks = _thinking_blocks(message)
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": call.input})
    return blocks


def _tool_result_block(message: Message) -> dict[str, Any]:
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": message.tool_call_id or "",
        "content": message.content,
    }
    if message.is_error:
        block["is_error"] = True
    return block


def _user_blocks(message: Message) -> list[dict[str, Any]]:
    blocks = [{"type": "text", "text": message.content}] if message.content else []
    return blocks + [_attachment_block(a) for a in message.attachments]


def wire_messages(messages: Sequence[Message]) -> tuple[list[dict[str, Any]], list[str]]:
    """The ``messages`` array, and the text of any ``system`` messages in the conversation.

    Consecutive turns of one role are merged into one (Anthropic alternates user and
    assistant turns), so the results of parallel tool calls share one user turn. Messages
    with nothing to send (an empty aborted answer) are left out.
    """
    turns: list[dict[str, Any]] = []
    system: list[str] = []
    for message in messages:
        if message.role == "system":
            if message.content:
                system.append(message.content)
            continue
        if message.role == "assistant":
            role, blocks = "assistant", _assistant_blocks(message)
        elif message.role == "tool":
            role, blocks = "user", [_tool_result_block(message)]
        else:
            role, blocks = "user", _user_blocks(message)
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return turns, system


def wire_tools(tools: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
    """Tool definitions in the Messages API ``tools`` shape."""
    return [
        {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools
    ]


def check_settings(settings: ModelSettings) -> None:
    """Refuse what the Messages API cannot honour, naming the setting.

    Raises:
        ConfigurationError: For provider options other than `AnthropicOptions` or an
            automatic thinking budget (``-1``; Anthropic takes a number of tokens).
    """
    AnthropicOptions.from_settings(settings, PROVIDER)
    output = settings.output_schema
    if output is not None and settings.thinking_budget:
        raise ConfigurationError(
            "anthropic cannot honour ModelSettings.output_schema with a thinking budget: its "
            "structured answer is a forced tool call, which Anthropic refuses with thinking on."
        )
    if settings.thinking_budget is not None and settings.thinking_budget < 0:
        raise ConfigurationError(
            "anthropic cannot honour ModelSettings.thinking_budget=-1 (automatic): give a "
            "number of tokens (Anthropic's minimum is 1024)."
        )


def _wire_choice(choice: str, thinking_budget: int | None) -> dict[str, Any]:
    """A checked tool choice in the Messages API shape; forcing a call excludes thinking.

    Raises:
        ConfigurationError: For ``"required"`` or a tool's name with thinking on (Anthropic
            takes only ``auto`` and ``none`` then).
    """
    if choice in ("auto", "none"):
        return {"type": choice}
    if thinking_budget:
        raise tool_choice.refused(
            PROVIDER,
            choice,
            "with extended thinking (ModelSettings.thinking_budget) Anthropic "
            "takes only 'auto' and 'none'.",
        )
    return {"type": "any"} if choice == "required" else {"type": "tool", "name": choice}


def request_body(model: str, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
    """The JSON body of one ``POST /v1/messages`` (the tool choice is ``request.tool_choice``).

    Raises:
        AttachmentError: For an attachment Anthropic cannot take.
        ConfigurationError: For a setting or option Anthropic cannot honour, or an
            `AnthropicOptions` field or ``extra_body`` key glassagent already sets.

    Prompt-cache breakpoints are placed by `anthropic_cache.add_breakpoints`.
    """
    settings, system, tools = request.settings, request.system, request.tools
    check_settings(settings)
    wire, extra_system = wire_messages(request.messages)
    budget = settings.thinking_budget
    max_tokens = settings.max_tokens
    if max_tokens is None:
        max_tokens = DEFAULT_MAX_TOKENS + (budget or 0)
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "messages": wire}
    prompt = "\n\n".join(([system] if system else []) + extra_system)
    if prompt:
        body["system"] = prompt
    if tools:
        body["tools"] = wire_tools(tools)
    if request.tool_choice is not None:
        body["tool_choice"] = _wire_choice(request.tool_choice, budget)
    if settings.output_schema is not None:
        _force_output_tool(body, settings.output_schema)
    if budget:
        body["thinking"] = {"type": "enabled", "budget_tokens": budget}
    add_portable(body, settings, max_tokens=None, stop="stop_sequences")
    if stream:
        body["stream"] = True
    add_breakpoints(body, model, request)
    add_options(body, AnthropicOptions.from_settings(settings, PROVIDER))
    return body


def _force_output_tool(body: dict[str, Any], output: OutputSchema) -> None:
    """Ask for the structured answer as a forced call of a tool whose input is the schema.

    Raises:
        ConfigurationError: When the request offers tools: a forced call leaves the model no
            choice of them.
    """
    if body.get("tools"):
        raise ConfigurationError(
            "anthropic cannot honour ModelSettings.output_schema in a request with tools: its "
            "structured answer is a forced tool call, which leaves the model no other tool."
        )
    tool = {
        "name": output.name,
        "description": output.description or "The answer.",
        "input_schema": dict(output.schema),
    }
    body["tools"] = [tool]
    body["tool_choice"] = {"type": "tool", "name": output.name}


# ---- response --------------------------------------------------------------------------


def _usage(counts: dict[str, int]) -> Usage:
    """Neutral usage: prompt tokens include the cached ones; thinking is in the output."""
    prompt = counts.get("input_tokens", 0) + sum(counts.get(k, 0) for k in _CACHE_FIELDS)
    return Usage(
        prompt,
        counts.get("output_tokens", 0),
        cache_read_tokens=counts.get("cache_read_input_tokens", 0),
        cache_write_tokens=counts.get("cache_creation_input_tokens", 0),
    )


class Reader(WireReader):
    """Feeds one Anthropic answer, a complete ``message`` or its stream events, to a builder.

    Blocks are tracked by their ``index``; thinking blocks are kept whole (with their
    signatures) for `THINKING_BLOCKS`.

    Args:
        secret: The API key, kept out of errors.
        output_tool: The name of the forced tool that carries a structured answer, if any.
    """

    def __init__(self, secret: str | None = None, output_tool: str | None = None) -> None:
        super().__init__(PROVIDER, secret)
        self.output_tool = output_tool
        """The forced tool of a structured answer: its input is read as the answer's text."""
        self.stopped = False
        """Whether ``message_stop`` arrived (a stream without it is incomplete)."""
        self._blocks: dict[int, dict[str, Any]] = {}
        self._counts: dict[str, int] = {}

    def _error(self, detail: str, raw: Any = None) -> Exception:
        return shapes.parse_error(PROVIDER, detail, raw, secret=self.secret)

    def read(self, body: Any) -> None:
        """Read the body of a request without ``stream``: an ``error`` body raises.

        Raises:
            ProviderError: For an ``error`` body (typed by its error type).
            ResponseParseError: For a body that is not a message.
        """
        if isinstance(body, dict) and body.get("type") == "error":
            raise stream_error(body, self.secret)
        self.message(body)

    @property
    def ended(self) -> bool:
        """Whether ``message_stop`` arrived; later events are read and dropped."""
        return self.stopped

    def complete(self) -> bool:
        """Whether ``message_stop`` arrived: only then is the answer whole."""
        return self.stopped

    def incomplete(self) -> ResponseParseError:
        """The error of a stream that ended before ``message_stop``."""
        detail = "a stream that ended before message_stop"
        return shapes.parse_error(PROVIDER, detail, secret=self.secret)

    def finish(self, response: LLMResponse) -> LLMResponse:
        """The answer, a forced output tool's ``tool_use`` stop read as ``end_turn``.

        Raises:
            ContentBlockedError: For an answer Anthropic withheld whole (a ``refusal`` stop
                with no text).
        """
        if self.output_tool and response.stop_reason == "tool_use" and not response.tool_calls:
            response = replace(response, stop_reason="end_turn")  # the forced output tool
        return shapes.check_blocked(response, PROVIDER)

    def message(self, body: Any) -> None:
        """Read a complete ``message`` body (the answer of a request without ``stream``)."""
        if not isinstance(body, dict) or body.get("type", "message") != "message":
            raise self._error("a body that is not a message", body)
        content = body.get("content")
        if not isinstance(content, list):
            raise self._error("a message whose 'content' is not an array", body)
        self._meta(body)
        for index, block in enumerate(content):
            self._start(index, block)
        self.builder.finish(shapes.text_field(body, "stop_reason", PROVIDER, "a message"))
        self.stopped = True

    def _meta(self, message: dict[str, Any]) -> None:
        self.builder.set_model(shapes.optional_text(message.get("model")))
        self._add_usage(message.get("usage"))

    def _add_usage(self, raw: Any) -> None:
        """Fold in a ``usage`` object: later counts replace earlier ones (they are totals)."""
        if not isinstance(raw, dict):
            return
        for key in ("input_tokens", "output_tokens", *_CACHE_FIELDS):
            if raw.get(key) is not None:
                self._counts[key] = shapes.token_count(raw.get(key))
        self.builder.usage = _usage(self._counts)

    def _start(self, index: int, block: Any) -> list[StreamPart]:
        """A content block, whole or as it starts a stream; return the parts it carried."""
        if not isinstance(block, dict):
            raise self._error(f"a content block that is {shapes.kind(block)}", block)
        kind = shapes.text_field(block, "type", PROVIDER, "a content block")
        self._blocks[index] = block = dict(block)
        if kind == "tool_use" and self.output_tool and block.get("name") == self.output_tool:
            block["type"] = "output"
            arguments = block.get("input")
            text = shapes.dumps(arguments) if isinstance(arguments, dict) and arguments else ""
            answer = self.builder.text(text)
            return [answer] if answer is not None else []
        if kind == "tool_use":
            arguments = block.get("input")
            if not isinstance(arguments, dict) or not arguments:
                arguments = None  # a stream starts with {}; input_json_delta follows
            self.builder.tool_call(
                index=index,
                call_id=shapes.text_field(block, "id", PROVIDER, "a tool_use block"),
                name=shapes.text_field(block, "name", PROVIDER, "a tool_use block"),
                arguments=arguments,
            )
            return []
        if kind in ("thinking", "redacted_thinking"):
            self._keep_thinking(index)
        part: StreamPart | None = None
        if kind == "thinking":
            text = shapes.text_field(block, "thinking", PROVIDER, "a thinking block")
            part = self.builder.thinking(text)
        elif kind == "text":
            part = self.builder.text(shapes.text_field(block, "text", PROVIDER, "a text block"))
        # redacted thinking, server tools...: nothing to show
        return [part] if part is not None else []

    def _keep_thinking(self, index: int) -> None:
        kept = self.builder.metadata.setdefault(THINKING_BLOCKS, [])
        kept.append(self._blocks[index])

    def event(self, name: str | None, data: Any) -> list[StreamPart]:
        """Read one stream event; return the text and thinking it carried.

        Raises:
            ProviderError: For an ``error`` event (typed by its error type).
            ResponseParseError: For a malformed event.
        """
        if not isinstance(data, dict):
            raise self._error(f"a stream event that is {shapes.kind(data)}", data)
        kind = data.get("type", name)
        if name == "error" or kind == "error":
            raise stream_error(data, self.secret)
        if kind == "message_start":
            message = shapes.object_field(data, "message", PROVIDER, "message_start")
            self._meta(message)
        elif kind == "content_block_start":
            block = shapes.object_field(data, "content_block", PROVIDER, "content_block_start")
            return self._start(self._index(data), block)
        elif kind == "content_block_delta":
            return self._delta(self._index(data), data)
        elif kind == "message_delta":
            delta = shapes.object_field(data, "delta", PROVIDER, "message_delta")
            self.builder.finish(shapes.text_field(delta, "stop_reason", PROVIDER, "a delta"))
            self._add_usage(data.get("usage"))
        elif kind == "message_stop":
            self.stopped = True
        return []  # ping, content_block_stop and unknown events carry nothing

    def _index(self, data: dict[str, Any]) -> int:
        index = data.get("index")
        if isinstance(index, bool) or not isinstance(index, int):
            raise self._error(f"an event whose 'index' is {shapes.kind(index)}", data)
        return index

    def _delta(self, index: int, data: dict[str, Any]) -> list[StreamPart]:
        delta = shapes.object_field(data, "delta", PROVIDER, "content_block_delta")
        kind = delta.get("type")
        block = self._blocks.get(index)
        if block is None:
            raise self._error(f"a delta for block {index}, which never started", data)
        part: StreamPart | None = None
        if kind == "text_delta":
            text = shapes.text_field(delta, "text", PROVIDER, "a text_delta")
            block["text"] = block.get("text", "") + text
            part = self.builder.text(text)
        elif kind == "thinking_delta":
            text = shapes.text_field(delta, "thinking", PROVIDER, "a thinking_delta")
            block["thinking"] = block.get("thinking", "") + text
            part = self.builder.thinking(text)
        elif kind == "signature_delta":
            signature = shapes.text_field(delta, "signature", PROVIDER, "a signature_delta")
            block["signature"] = block.get("signature", "") + signature
        elif kind == "input_json_delta":
            text = shapes.text_field(delta, "partial_json", PROVIDER, "an input_json_delta")
            if block.get("type") == "output":  # the structured answer, streamed as text
                part = self.builder.text(text)
            else:
                self.builder.tool_call(index=index, arguments=text)
        return [part] if part is not None else []


def stream_error(data: dict[str, Any], secret: str | None) -> ProviderError:
    """The typed error of an ``error`` event or body (``overloaded_error`` is retryable)."""
    error = data.get("error")
    error = error if isinstance(error, dict) else {}
    kind = shapes.optional_text(error.get("type")) or "error"
    message = shapes.optional_text(error.get("message")) or "no details"
    text = redact(f"{PROVIDER} reported {kind} mid-stream: {message[:500]}", secret)
    body = redact(shapes.snippet(data), secret)
    if kind == "overloaded_error":
        return ProviderUnavailableError(text, status=529, body=body, provider=PROVIDER)
    if kind == "rate_limit_error":
        return RateLimitError(text, body=body, provider=PROVIDER)
    return ProviderError(text, body=body, provider=PROVIDER)


class AnthropicWire(Wire):
    """Anthropic's Messages API (``POST /v1/messages``), for `AnthropicClient`."""

    provider = PROVIDER
    path = PATH
    framing = "sse"
    stop_reasons = STOP_REASONS
    start_hint = START_HINT

    def request_body(self, model: str, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        """The Messages API body of `request`."""
        return request_body(model, request, stream=stream)

    def reader(self, request: ModelRequest, secret: str | None) -> Reader:
        """A reader of one answer; a structured answer's forced tool is read as text."""
        output = request.output_schema
        return Reader(secret, output.name if output is not None else None)

    def takes_by_url(self, attachment: Attachment) -> bool:
        """Remote images and PDFs go by URL."""
        return takes_by_url(attachment)
