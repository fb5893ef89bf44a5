"""Pure translation between neutral types and Ollama's ``/api/chat`` wire (`OllamaWire`).

No I/O: request bodies are built from a `ModelRequest`, and bodies or NDJSON stream lines are
read into a `ResponseBuilder`.
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
from glassagent._core.request import ModelRequest
from glassagent._providers import shapes
from glassagent._providers.http import redact
from glassagent._providers.ollama_options import OllamaOptions
from glassagent._providers.openai_wire import wire_tools
from glassagent._providers.portable import add_portable
from glassagent._providers.transport import error_message
from glassagent._providers.wire_client import Wire, WireReader

PROVIDER = "ollama"
PATH = "/api/chat"
START_HINT = (
    "Is Ollama running? Start it with `ollama serve` (install it from https://ollama.com), "
    "or set OLLAMA_API_BASE to its address."
)
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
    request: ModelRequest,
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
    messages: Sequence[Message] = request.messages
    if encode_history or json_mode:
        messages = json_protocol.encode_history(messages, tools=json_mode or bool(request.tools))
    system, choice = request.system, request.tool_choice
    offered = request.offered if json_mode else ()
    if json_mode:
        system = json_protocol.system_prompt(system, offered, choice)
    wire = [{"role": "system", "content": system}] if system else []
    body: dict[str, Any] = {
        "model": model,
        "messages": wire + [_wire_message(m) for m in messages],
        "stream": stream,
    }
    if request.tools and not json_mode and (tools := _native_tools(request)):
        body["tools"] = wire_tools(tools)
    if json_mode:
        body["format"] = json_protocol.reply_schema(offered, choice) if json_grammar else "json"
    _add_settings(body, request.settings)
    return body


def _native_tools(request: ModelRequest) -> Sequence[ToolDefinition]:
    """The tools sent natively under the request's tool choice: ``"none"`` sends none.

    Raises:
        ConfigurationError: For ``"required"`` or a tool's name: Ollama's chat API has no
            tool choice, so nothing can make the model call a tool.
    """
    choice = request.tool_choice
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
    return request.tools


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


def check(chunk: Any, what: str, secret: str | None = None) -> dict[str, Any]:
    """A body or stream line as an object; an ``error`` in it raises `ProviderError`.

    `secret` (the API key) is masked in the errors, should the server echo it.
    """
    if not isinstance(chunk, dict):
        shown = _masked(chunk, 200, secret)
        raise ResponseParseError(
            f"Ollama answered with {what} that is not a JSON object: {shown}", provider=PROVIDER
        )
    if "error" in chunk:
        error = chunk["error"]
        message = redact(error, secret) if isinstance(error, str) else _masked(error, 500, secret)
        raise ProviderError(
            f"Ollama reported an error: {message[:2000]}",
            body=_masked(chunk, 2000, secret),
            provider=PROVIDER,
        )
    return chunk


def _masked(value: Any, limit: int, secret: str | None) -> str:
    """`shapes.snippet` of `value` with `secret` masked before the cut (no half a key)."""
    text = redact(shapes.snippet(value, None), secret)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _timings(chunk: dict[str, Any]) -> dict[str, float]:
    """Ollama's nanosecond durations, in milliseconds (malformed ones are left out)."""
    durations = {name: shapes.duration(chunk.get(key), 1e-6) for key, name in _DURATIONS.items()}
    return {name: value for name, value in durations.items() if value is not None}


class Reader(WireReader):
    """Reads a complete body or NDJSON stream lines into a `ResponseBuilder`.

    Args:
        provider: The provider's name, for errors.
        secret: The API key, kept out of errors.
    """

    def __init__(self, provider: str = PROVIDER, secret: str | None = None) -> None:
        super().__init__(provider, secret)
        self.done = False
        """Whether the final (``done``) line or the complete body was read."""
        self._calls = 0

    def read(self, body: Any) -> None:
        """Read a complete body; an ``error`` in it raises `ProviderError`."""
        self.body(check(body, "a body", self.secret))

    def event(self, name: str | None, data: Any) -> list[StreamPart]:
        """Read one stream line; an ``error`` line raises `ProviderError`."""
        return self.line(check(data, "a stream line", self.secret))

    def decode(self, data: str) -> Any:
        """One NDJSON line, parsed; a malformed one raises `ResponseParseError`."""
        ok, value = shapes.parse_json(data)
        if ok:
            return value
        shown = redact(data, self.secret)[:200]  # raised outside any handler: no context
        raise ResponseParseError(  # holds the line, key and all
            f"Ollama sent a malformed stream line: {shown!r}", provider=self.provider
        )

    @property
    def ended(self) -> bool:
        """Whether the final (``done``) line was read."""
        return self.done

    def complete(self) -> bool:
        """Whether the final (``done``) line was read."""
        return self.done

    def incomplete(self) -> ResponseParseError:
        """The error of a stream without its ``done`` line."""
        return ResponseParseError(
            "Ollama's stream ended before the answer was complete (no 'done' line).",
            provider=self.provider,
        )

    def body(self, raw: dict[str, Any]) -> None:
        """Read a complete body (the answer of a request without ``stream``)."""
        self._message(shapes.object_field(raw, "message", self.provider, "a body"))
        self._last(raw)

    def line(self, chunk: dict[str, Any]) -> list[StreamPart]:
        """Read one stream line; return the thinking and text it carried."""
        message = shapes.object_field(chunk, "message", self.provider, "a stream line")
        parts = self._message(message)
        if chunk.get("done"):
            self._last(chunk)
        return parts

    def _message(self, message: dict[str, Any]) -> list[StreamPart]:
        """The thinking and text of a ``message``; its tool calls go to the builder."""
        where = "a message"
        content = shapes.text_field(message, "content", self.provider, where)
        thinking = shapes.text_field(message, "thinking", self.provider, where)
        for raw in shapes.object_list(message, "tool_calls", self.provider, where):
            self._call(raw)
        parts = [self.builder.thinking(thinking), self.builder.text(content)]
        return [part for part in parts if part is not None]

    def _call(self, raw: dict[str, Any]) -> None:
        """One complete tool call (Ollama never splits one across lines)."""
        function = shapes.call_function(raw, self.provider)
        call_id = shapes.text_field(raw, "id", self.provider, "a tool call")
        name = shapes.text_field(function, "name", self.provider, "a tool call function")
        if not name:
            detail = "a tool call without a name"
            raise shapes.parse_error(self.provider, detail, raw, secret=self.secret)
        arguments = function.get("arguments")
        self.builder.tool_call(index=self._calls, call_id=call_id, name=name, arguments=arguments)
        self._calls += 1

    def _last(self, last: dict[str, Any]) -> None:
        """The finish reason, token counts, model and durations of the final line."""
        where = "a final chunk"
        self.builder.finish(shapes.text_field(last, "done_reason", self.provider, where))
        self.builder.usage = Usage(
            shapes.token_count(last.get("prompt_eval_count")),
            shapes.token_count(last.get("eval_count")),
        )
        self.builder.set_model(shapes.optional_text(last.get("model")))
        self.builder.timings = _timings(last)
        self.done = True


class OllamaWire(Wire):
    """Ollama's ``/api/chat`` wire (NDJSON streams), for `OllamaClient` and `LlamaClient`.

    Args:
        base_url: The server's address, named in the error of a missing model.
        model: The model named in that error (the client keeps it current).
        encode_history: Send earlier tool calls and results in the JSON tool protocol's text
            form in every request (the client's protocol is ``json``).
        json_grammar: Constrain JSON-protocol replies to the protocol's JSON Schema.
    """

    provider = PROVIDER
    path = PATH
    framing = "ndjson"
    stop_reasons = STOP_REASONS
    start_hint = START_HINT

    def __init__(
        self,
        *,
        base_url: str = "",
        model: str = "",
        encode_history: bool = False,
        json_grammar: bool = False,
    ) -> None:
        self.base_url = base_url
        self.model = model
        self.encode_history = encode_history
        self.json_grammar = json_grammar

    def request_body(
        self, model: str, request: ModelRequest, *, stream: bool, json_mode: bool = False
    ) -> dict[str, Any]:
        """The ``/api/chat`` body of `request`; `json_mode` offers tools by the JSON protocol.

        Raises:
            ConfigurationError: For a tool choice other than ``"auto"`` or ``"none"`` with
                native tools, or a setting Ollama cannot honour.
        """
        return request_body(
            model,
            request,
            stream=stream,
            json_mode=json_mode,
            encode_history=self.encode_history,
            json_grammar=self.json_grammar,
        )

    def reader(self, request: ModelRequest, secret: str | None) -> Reader:
        """A reader of one Ollama answer."""
        return Reader(self.provider, secret)

    def status_error(self, status: int, body: str, secret: str | None) -> ProviderError | None:
        """Ollama's "model not found" as an error that says how to get the model."""
        message = redact(error_message(body) or "", secret)
        if status != 404 or "not found" not in message:
            return None
        body = redact(body, secret)
        return ProviderError(
            f"Ollama at {self.base_url} has no model {self.model!r} ({message}). "
            f"Download it with `ollama pull {self.model}`, or choose another model.",
            status=status,
            body=body[:2000],
            provider=self.provider,
        )

    def takes_by_url(self, attachment: Attachment) -> bool:
        """Ollama takes no attachment by URL (images go as base64, text inline)."""
        return takes_by_url(attachment)
