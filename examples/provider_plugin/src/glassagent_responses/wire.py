"""The OpenAI Responses API wire (``POST /v1/responses``), built on `glassagent.providers`.

`ResponsesWire` writes the request body of a `ModelRequest`; `ResponsesReader` reads a
whole ``response`` object or its stream of server-sent events into a `ResponseBuilder`.
Everything else (deadlines, retries, errors, key masking) is `WireClient`'s.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

from glassagent.errors import (
    ConfigurationError,
    ProviderError,
    ProviderUnavailableError,
    RateLimitError,
)
from glassagent.llm import (
    Attachment,
    Message,
    ModelRequest,
    ModelSettings,
    StopReason,
    StreamPart,
    ToolDefinition,
    Usage,
)
from glassagent.providers import (
    Wire,
    WireReader,
    object_list,
    optional_text,
    parse_error,
    redact,
    text_field,
    token_count,
)
from glassagent_responses.options import RESPONSE_ID, ResponsesOptions

PROVIDER = "openai_responses"
STOP_REASONS: dict[str, StopReason] = {
    "completed": "end_turn",
    "max_output_tokens": "max_tokens",
    "content_filter": "content_filter",
    "refusal": "content_filter",
}
"""A response's ``status``, the ``incomplete_details.reason`` of an incomplete one, or
``refusal`` for a completed one the model refused (as Anthropic's ``refusal`` reads)."""
REASONING = "responses_reasoning"
"""`LLMResponse.provider_metadata` key of the answer's reasoning items, sent back next time."""
_KEPT = ("type", "id", "summary", "encrypted_content")


# ---- request ---------------------------------------------------------------------------------


def input_items(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The conversation as ``input`` items: messages, function calls and their outputs."""
    items: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "tool":  # a tool's attachments make its output a list of parts
            output = input_parts(message) if message.attachments else message.content
            call_output = {"call_id": message.tool_call_id, "output": output}
            items.append({"type": "function_call_output", **call_output})
        elif message.role == "assistant":
            items += [dict(item) for item in message.provider_metadata.get(REASONING, ())]
            if message.content:
                items.append({"role": "assistant", "content": message.content})
            for call in message.tool_calls:
                arguments = json.dumps(call.input)
                call_item = {"call_id": call.id, "name": call.name, "arguments": arguments}
                items.append({"type": "function_call", **call_item})
        elif message.attachments:
            items.append({"role": message.role, "content": input_parts(message)})
        else:
            items.append({"role": message.role, "content": message.content})
    return items


def input_parts(message: Message) -> list[dict[str, Any]]:
    """A message's text and attachments as input parts."""
    text = [{"type": "input_text", "text": message.content}] if message.content else []
    return text + [attachment_part(a) for a in message.attachments]


def attachment_part(attachment: Attachment) -> dict[str, Any]:
    """An attachment as an input part: images by URL or inline, text inline, others as files."""
    mime = attachment.mime_type or "application/octet-stream"
    if attachment.url is not None:  # only images are passed on by URL (`takes_by_url`)
        return {"type": "input_image", "image_url": attachment.url}
    data = attachment.read_bytes()
    if mime.startswith("text/"):
        text = data.decode("utf-8", "replace")
        return {"type": "input_text", "text": f"[{attachment.name or 'attachment'}]\n{text}"}
    url = f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"
    if mime.startswith("image/"):
        return {"type": "input_image", "image_url": url}
    return {"type": "input_file", "filename": attachment.name or "file", "file_data": url}


def function_tool(tool: ToolDefinition) -> dict[str, Any]:
    """A tool in the Responses shape: ``name`` and ``parameters`` at the top level."""
    return {
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": dict(tool.parameters),
        "strict": False,  # left out, it is True: every optional field would become required
    }


def add_settings(body: dict[str, Any], settings: ModelSettings) -> None:
    """Put `settings` into `body`, refusing what the Responses API cannot honour."""
    if settings.stop_sequences:
        raise ConfigurationError(f"{PROVIDER} cannot honour ModelSettings.stop_sequences.")
    if settings.thinking_budget is not None:
        raise ConfigurationError(
            f"{PROVIDER} takes no thinking budget in tokens: use "
            "ResponsesOptions(reasoning_effort=...) instead of ModelSettings.thinking_budget."
        )
    if settings.temperature is not None:
        body["temperature"] = settings.temperature
    if settings.max_tokens is not None:
        body["max_output_tokens"] = settings.max_tokens
    if (schema := settings.output_schema) is not None:
        fmt: dict[str, Any] = {"type": "json_schema", "name": schema.name, "strict": schema.strict}
        fmt["schema"] = dict(schema.schema)
        if schema.description:
            fmt["description"] = schema.description
        body["text"] = {"format": fmt}
    options = ResponsesOptions.from_settings(settings, PROVIDER)
    if options is not None:
        options.add_to(body)


# ---- response --------------------------------------------------------------------------------


class ResponsesReader(WireReader):
    """Reads one answer: a ``response`` object, or the events of its stream."""

    refused = False
    """Whether a refusal was read: it is the answer's text, which stops for ``content_filter``."""

    def read(self, body: Any) -> None:
        """Read the ``response`` object of a request without ``stream``."""
        response = self._object(body, "a body")
        for index, item in enumerate(self._list(response, "output", "a response")):
            self._item(index, item)
        self._end(response)

    def event(self, name: str | None, data: Any) -> list[StreamPart]:
        """Read one stream event; return the text or reasoning it carried."""
        event = self._object(data, "a stream event")
        kind = event.get("type", name)
        where = f"a {kind} event"
        part: StreamPart | None = None
        if kind in ("response.output_text.delta", "response.refusal.delta"):
            self.refused = self.refused or kind == "response.refusal.delta"
            part = self.builder.text(self._text(event, "delta", where))
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            part = self.builder.thinking(self._text(event, "delta", where))
        elif kind == "response.output_item.added":
            item = self._object(event.get("item"), "an output item")
            if item.get("type") == "function_call":
                self._call(self._index(event), item)
        elif kind == "response.function_call_arguments.delta":
            delta = self._text(event, "delta", where)
            self.builder.tool_call(index=self._index(event), arguments=delta)
        elif kind in ("response.completed", "response.incomplete", "response.failed"):
            response = self._object(event.get("response"), where)
            self._end(response, status=kind.removeprefix("response."))
        elif kind == "error":
            raise self._failure(event)
        return [part] if part is not None else []

    def _item(self, index: int, item: dict[str, Any]) -> None:
        """One output item of a whole response: a message, a function call or reasoning."""
        kind, where = item.get("type"), "an output item"
        if kind == "function_call":
            self._call(index, item)
        for part in self._list(item, "content", where) + self._list(item, "summary", where):
            if (part_type := part.get("type")) in ("output_text", "refusal"):
                self.refused = self.refused or part_type == "refusal"
                key = "text" if part_type == "output_text" else "refusal"
                self.builder.text(self._text(part, key, "a content part"))
            elif part.get("type") in ("summary_text", "reasoning_text") and kind == "reasoning":
                self.builder.thinking(self._text(part, "text", "a content part"))

    def _call(self, index: int, item: dict[str, Any]) -> None:
        self.builder.tool_call(
            index=index,
            call_id=self._text(item, "call_id", "a function call"),
            name=self._text(item, "name", "a function call"),
            arguments=self._text(item, "arguments", "a function call"),
        )

    def _end(self, response: dict[str, Any], status: str = "completed") -> None:
        """The last word: status, stop reason, usage, model, id and reasoning to send back."""
        status = self._text(response, "status", "a response") or status
        if status == "failed":
            raise self._failure(self._object(response.get("error") or {}, "an error"))
        details = response.get("incomplete_details")
        reason = optional_text(details.get("reason")) if isinstance(details, dict) else None
        if status == "completed" and self.refused:
            status = "refusal"  # the raw stop reason of a refused answer
        self.builder.finish(reason if status == "incomplete" and reason else status)
        self.builder.usage = _usage(response.get("usage"))
        self.builder.set_model(optional_text(response.get("model")))
        if response_id := optional_text(response.get("id")):
            self.builder.metadata[RESPONSE_ID] = response_id
        items = self._list(response, "output", "a response")
        reasoning = [{k: i[k] for k in _KEPT if i.get(k) is not None} for i in items]
        reasoning = [item for item in reasoning if item.get("type") == "reasoning"]
        if reasoning:
            self.builder.metadata[REASONING] = reasoning

    def _failure(self, error: dict[str, Any]) -> ProviderError:
        """The error a ``response.failed`` or ``error`` event (or a failed body) reports."""
        code, message = error.get("code"), error.get("message")
        text = redact(f"{self.provider} reported an error ({code}): {message}", self.secret)
        kind = {"rate_limit_exceeded": RateLimitError, "server_error": ProviderUnavailableError}
        return kind.get(str(code), ProviderError)(text, provider=self.provider)

    # -- checks: a value of the wrong type raises ResponseParseError, the key kept out --

    def _text(self, obj: dict[str, Any], key: str, where: str) -> str:
        return text_field(obj, key, self.provider, where, secret=self.secret)

    def _list(self, obj: dict[str, Any], key: str, where: str) -> list[dict[str, Any]]:
        return object_list(obj, key, self.provider, where, secret=self.secret)

    def _object(self, value: Any, where: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            detail = f"{where} that is not an object"
            raise parse_error(self.provider, detail, value, secret=self.secret)
        return value

    def _index(self, event: dict[str, Any]) -> int:
        index = event.get("output_index")
        if isinstance(index, bool) or not isinstance(index, int):
            detail = "a stream event whose 'output_index' is not an integer"
            raise parse_error(self.provider, detail, event, secret=self.secret)
        return index


def _usage(raw: Any) -> Usage:
    """Token counts (malformed ones count 0: an answer is never lost over its statistics)."""
    usage = raw if isinstance(raw, dict) else {}

    def count(obj: Any, key: str) -> int:
        return token_count(obj.get(key)) if isinstance(obj, dict) else 0

    output = count(usage, "output_tokens")
    thinking = min(count(usage.get("output_tokens_details"), "reasoning_tokens"), output)
    return Usage(
        input_tokens=count(usage, "input_tokens"),
        output_tokens=output - thinking,
        thinking_tokens=thinking,
        cache_read_tokens=count(usage.get("input_tokens_details"), "cached_tokens"),
    )


# ---- the wire --------------------------------------------------------------------------------


class ResponsesWire(Wire):
    """How the Responses API speaks: what `WireClient` needs to be a full client."""

    provider = PROVIDER
    path = "/responses"
    framing = "sse"
    stop_reasons = STOP_REASONS
    start_hint = "Check the address (base_url) and the network."

    def request_body(self, model: str, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        """The ``POST /responses`` body of `request`."""
        options = ResponsesOptions.from_settings(request.settings, PROVIDER)
        messages = options.unseen(request.messages) if options else request.messages
        body: dict[str, Any] = {"model": model, "input": input_items(messages)}
        if request.system:
            body["instructions"] = request.system
        if request.tools:
            body["tools"] = [function_tool(tool) for tool in request.tools]
        choice = request.tool_choice
        if choice in ("auto", "required", "none"):
            body["tool_choice"] = choice
        elif choice is not None:
            body["tool_choice"] = {"type": "function", "name": choice}
        if stream:
            body["stream"] = True
        add_settings(body, request.settings)
        return body

    def reader(self, request: ModelRequest, secret: str | None) -> ResponsesReader:
        """A new reader for one answer."""
        return ResponsesReader(self.provider, secret)

    def takes_by_url(self, attachment: Attachment) -> bool:
        """Remote images go by URL; other remote files are downloaded first."""
        return (attachment.mime_type or "").startswith("image/")
