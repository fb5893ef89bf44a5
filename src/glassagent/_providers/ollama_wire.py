"""Pure translation between neutral types and Ollama's ``/api/chat`` wire.

No I/O: request bodies are built from neutral messages, tools and settings, and bodies or
NDJSON stream lines are read into a `ResponseBuilder`.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

from glassagent._core import json_protocol, tool_choice
from glassagent._core.errors import ProviderError, ResponseParseError, UserError
from glassagent._core.messages import (
    Attachment,
    Message,
    ModelSettings,
    StopReason,
    StreamPart,
    ToolDefinition,
    Usage,
)
from glassagent._core.options import add_unset
from glassagent._providers import shapes
from glassagent._providers.builder import ResponseBuilder
from glassagent._providers.ollama_options import OllamaOptions
from glassagent._providers.openai_wire import wire_tools
from glassagent._providers.portable import add_portable

PROVIDER = "ollama"
STOP_REASONS: dict[str, StopReason] = {"stop": "end_turn", "length": "max_tokens"}
"""``done_reason`` values and their neutral reading; any other (``load``, ``unload``, ...) is
``other``; none at all (older servers) is ``end_turn``."""
_DURATIONS = {
    "total_duration": "total_ms",
    "load_duration": "load_ms",
    "prompt_eval_duration": "prompt_eval_ms",
    "eval_duration": "eval_ms",
}


def takes_by_url(attachment: Attachment) -> bool:
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


def request_body(
    model: str,
    messages: Sequence[Message],
    tools: Sequence[ToolDefinition],
    system: str | None,
    settings: ModelSettings | None,
    *,
    stream: bool,
    json_mode: bool,
    encode_history: bool,
    json_grammar: bool = False,
) -> dict[str, Any]:
    """The request body; `json_mode` sends tools by the JSON tool protocol.

    With `encode_history` (or `json_mode`), earlier tool calls and results go in the
    protocol's text form. In `json_mode` the reply's ``format`` is the protocol's schema
    (`json_protocol.reply_schema`) with `json_grammar`, else any JSON (``"json"``).
    """
    if encode_history or json_mode:
        messages = json_protocol.encode_history(messages)
    choice = settings.tool_choice if settings is not None else None
    offered = (json_protocol.protocol_tools(tools, settings) or ()) if json_mode else ()
    if json_mode:
        system = json_protocol.system_prompt(system, offered, choice)
    wire = [{"role": "system", "content": system}] if system else []
    body: dict[str, Any] = {
        "model": model,
        "messages": wire + [_wire_message(m) for m in messages],
        "stream": stream,
    }
    if tools and not json_mode and (tools := _native_tools(tools, settings)):
        body["tools"] = wire_tools(tools)
    if json_mode:
        body["format"] = json_protocol.reply_schema(offered, choice) if json_grammar else "json"
    if settings is not None:
        _add_settings(body, settings)
    return body


def _native_tools(
    tools: Sequence[ToolDefinition], settings: ModelSettings | None
) -> Sequence[ToolDefinition]:
    """The tools sent natively under ``settings.tool_choice``: ``"none"`` sends none.

    Raises:
        ConfigurationError: For ``"required"`` or a tool's name: Ollama's chat API has no
            tool choice, so nothing can make the model call a tool.
    """
    choice = tool_choice.resolve(settings, tools)
    if choice == "none":
        return ()
    if choice not in (None, "auto"):
        raise tool_choice.refused(
            PROVIDER,
            choice,
            "Ollama's chat API has no tool choice, so it can only offer tools ('auto') or "
            "send none ('none'). Models served with the JSON tool protocol "
            "(OllamaClient(tool_protocol='json')) honour every choice.",
        )
    return tools


def _add_settings(body: dict[str, Any], settings: ModelSettings) -> None:
    """Put `settings` into `body`: the portable ones, then `OllamaOptions` as given."""
    options: dict[str, Any] = {}
    add_portable(options, settings, max_tokens="num_predict", stop="stop")
    if settings.output_schema is not None:
        output = {"format": dict(settings.output_schema.schema)}
        add_unset(body, output, "ModelSettings.output_schema", PROVIDER)
    if settings.thinking_budget is not None:
        # Ollama has no budget: any other than 0 turns thinking on (-1: the model decides).
        body["think"] = settings.thinking_budget != 0
    extra = OllamaOptions.from_settings(settings, PROVIDER)
    if extra is not None:
        add_unset(options, extra.options or {}, "OllamaOptions.options", PROVIDER)
        if extra.keep_alive is not None:
            body["keep_alive"] = extra.keep_alive
        if extra.think is not None:
            body["think"] = extra.think
    if options:
        body["options"] = options


def check(chunk: Any, what: str) -> dict[str, Any]:
    """A body or stream line as an object; an ``error`` in it raises `ProviderError`."""
    if not isinstance(chunk, dict):
        raise ResponseParseError(
            f"Ollama answered with {what} that is not a JSON object: {shapes.snippet(chunk, 200)}",
            provider=PROVIDER,
        )
    if "error" in chunk:
        error = chunk["error"]
        message = error if isinstance(error, str) else shapes.snippet(error)
        raise ProviderError(
            f"Ollama reported an error: {message[:2000]}",
            body=shapes.snippet(chunk, 2000),
            provider=PROVIDER,
        )
    return chunk


def _timings(chunk: dict[str, Any]) -> dict[str, float]:
    """Ollama's nanosecond durations, in milliseconds (malformed ones are left out)."""
    durations = {name: shapes.duration(chunk.get(key), 1e-6) for key, name in _DURATIONS.items()}
    return {name: value for name, value in durations.items() if value is not None}


class Reader:
    """Reads a complete body or NDJSON stream lines into a `ResponseBuilder`."""

    def __init__(self) -> None:
        self.builder = ResponseBuilder(PROVIDER)
        self.done = False
        """Whether the final (``done``) line or the complete body was read."""
        self._calls = 0

    def body(self, raw: dict[str, Any]) -> None:
        """Read a complete body (the answer of a request without ``stream``)."""
        self._message(shapes.object_field(raw, "message", PROVIDER, "a body"))
        self._last(raw)

    def line(self, chunk: dict[str, Any]) -> list[StreamPart]:
        """Read one stream line; return the thinking and text it carried."""
        parts = self._message(shapes.object_field(chunk, "message", PROVIDER, "a stream line"))
        if chunk.get("done"):
            self._last(chunk)
        return parts

    def _message(self, message: dict[str, Any]) -> list[StreamPart]:
        """The thinking and text of a ``message``; its tool calls go to the builder."""
        where = "a message"
        content = shapes.text_field(message, "content", PROVIDER, where)
        thinking = shapes.text_field(message, "thinking", PROVIDER, where)
        for raw in shapes.object_list(message, "tool_calls", PROVIDER, where):
            self._call(raw)
        parts = [self.builder.thinking(thinking), self.builder.text(content)]
        return [part for part in parts if part is not None]

    def _call(self, raw: dict[str, Any]) -> None:
        """One complete tool call (Ollama never splits one across lines)."""
        function = shapes.call_function(raw, PROVIDER)
        call_id = shapes.text_field(raw, "id", PROVIDER, "a tool call")
        name = shapes.text_field(function, "name", PROVIDER, "a tool call function")
        if not name:
            raise shapes.parse_error(PROVIDER, "a tool call without a name", raw)
        arguments = function.get("arguments")
        self.builder.tool_call(index=self._calls, call_id=call_id, name=name, arguments=arguments)
        self._calls += 1

    def _last(self, last: dict[str, Any]) -> None:
        """The finish reason, token counts, model and durations of the final line."""
        self.builder.finish(shapes.text_field(last, "done_reason", PROVIDER, "a final chunk"))
        self.builder.usage = Usage(
            shapes.token_count(last.get("prompt_eval_count")),
            shapes.token_count(last.get("eval_count")),
        )
        self.builder.set_model(shapes.optional_text(last.get("model")))
        self.builder.timings = _timings(last)
        self.done = True
