"""Pure translation between neutral types and the Gemini API.

No google-genai import. Requests are built as the dicts google-genai's ``generate_content``
accepts (`to_contents`, `to_config`), and messages also in the REST form google-genai sends
for those dicts (`rest_content`), kept once per message by `RestContents`. Responses are read
through attributes of google-genai's response objects (`Reader`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import weakref
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from glassagent._core.errors import ContentBlockedError, ProviderError, ResponseParseError
from glassagent._core.messages import (
    LLMResponse,
    Message,
    ModelSettings,
    StopReason,
    StreamPart,
    ToolCall,
    Usage,
)
from glassagent._core.options import add_unset
from glassagent._providers.builder import GENERATED_ID, ResponseBuilder
from glassagent._providers.gemini_options import GeminiOptions
from glassagent._providers.portable import add_portable
from glassagent._providers.shapes import check_blocked, parse_error, token_count

if TYPE_CHECKING:
    from glassagent._core.request import ModelRequest

PROVIDER = "gemini"
SIGNATURE = "thought_signature"
"""`provider_metadata` key of a part's thought signature (standard base64 text)."""

_FILTERED = (
    "SAFETY",
    "RECITATION",
    "LANGUAGE",
    "BLOCKLIST",
    "PROHIBITED_CONTENT",
    "SPII",
    "IMAGE_SAFETY",
    "IMAGE_PROHIBITED_CONTENT",
    "IMAGE_RECITATION",
    "MODEL_ARMOR",
    "ESCALATION",
    "PUP_LIMITED_DISABLED",
)
_OTHER = ("OTHER", "IMAGE_OTHER", "NO_IMAGE", "TOO_MANY_TOOL_CALLS", "FINISH_REASON_UNSPECIFIED")
STOP_REASONS: dict[str, StopReason] = {
    "STOP": "end_turn",
    "MAX_TOKENS": "max_tokens",
    "CONTINUATION": "max_tokens",  # the per-request token limit; the answer is unfinished
    **dict.fromkeys(_FILTERED, "content_filter"),
    **dict.fromkeys(_OTHER, "other"),
}
"""Gemini finish reasons read as a stop reason; an unknown one is ``other``, too."""
MALFORMED = frozenset({"MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "MALFORMED_RESPONSE"})
"""Finish reasons that mean Gemini produced no usable answer: `ResponseParseError`."""
MISSING_SIGNATURE = "MISSING_THOUGHT_SIGNATURE"
"""The finish reason for a request whose history lost a thought signature: `ProviderError`."""


def _signature_bytes(metadata: Any) -> bytes | None:
    value = metadata.get(SIGNATURE) if metadata else None
    if not value:
        return None
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError, TypeError):
        return None


def _signed(part: dict[str, Any], metadata: Any) -> dict[str, Any]:
    signature = _signature_bytes(metadata)
    if signature is not None:
        part["thought_signature"] = signature
    return part


def _user_parts(message: Message) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    if message.content:
        parts.append({"text": message.content})
    for attachment in message.attachments:
        if attachment.url is not None:  # Gemini fetches it: a file_data part by URI
            parts.append(
                {"file_data": {"file_uri": attachment.url, "mime_type": attachment.mime_type}}
            )
            continue
        data = attachment.read_bytes()
        parts.append({"inline_data": {"mime_type": attachment.mime_type, "data": data}})
    return parts


def _model_parts(message: Message) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    if message.content:
        parts.append(_signed({"text": message.content}, message.provider_metadata))
    for call in message.tool_calls:
        function_call: dict[str, Any] = {"name": call.name, "args": call.input}
        if not call.provider_metadata.get(GENERATED_ID):
            function_call["id"] = call.id
        parts.append(_signed({"function_call": function_call}, call.provider_metadata))
    return parts


def _response_part(message: Message, call: ToolCall | None) -> dict[str, Any]:
    key = "error" if message.is_error else "result"
    response: dict[str, Any] = {"name": message.name or "", "response": {key: message.content}}
    if call is not None:
        response["name"] = call.name
        if not call.provider_metadata.get(GENERATED_ID):
            response["id"] = call.id
    return {"function_response": response}


def _content(message: Message, call: ToolCall | None) -> dict[str, Any]:
    """A user or assistant message as a google-genai content dict; a tool result as its part."""
    if message.role == "tool":
        return _response_part(message, call)
    if message.role == "assistant":
        return {"role": "model", "parts": _model_parts(message)}
    return {"role": "user", "parts": _user_parts(message)}


Convert = Callable[[Message, ToolCall | None], dict[str, Any]]
"""Makes a message's content (a tool result's part), given the call a tool result answers."""


def _assemble(messages: Sequence[Message], convert: Convert) -> list[dict[str, Any]]:
    """The ``contents`` of a conversation, each message made by `convert`.

    Consecutive tool results become one user turn of ``function_response`` parts, matched to
    their calls by id; system messages and messages without parts are left out.
    """
    contents: list[dict[str, Any]] = []
    calls: dict[str, ToolCall] = {}
    results: list[dict[str, Any]] | None = None  # the parts of the current tool-result turn
    for message in messages:
        role = message.role
        if role == "system":
            continue
        if role == "tool":
            part = convert(message, calls.get(message.tool_call_id or ""))
            if results is None:
                results = []
                contents.append({"parts": results, "role": "user"})
            results.append(part)
            continue
        results = None
        if role == "assistant":
            calls.update((c.id, c) for c in message.tool_calls)
        content = convert(message, None)
        if content["parts"]:
            contents.append(content)
    return contents


def system_texts(messages: Sequence[Message]) -> list[str]:
    """The text of the system messages of a conversation (they join the system instruction)."""
    return [m.content for m in messages if m.role == "system"]


def to_contents(messages: Sequence[Message]) -> tuple[list[dict[str, Any]], list[str]]:
    """Gemini ``contents`` for a conversation, and the text of any system messages in it.

    These are the dicts google-genai's ``generate_content`` takes. Consecutive tool results
    become one user turn of ``function_response`` parts, matched to their calls by id; a call
    id glassagent generated is never sent to Gemini.
    """
    return _assemble(messages, _content), system_texts(messages)


# ---- the REST form: what google-genai sends for these dicts -----------------------------


def _rest_bytes(data: bytes) -> str:
    """Bytes as google-genai writes them into a request body: URL-safe base64."""
    return base64.urlsafe_b64encode(data).decode("ascii")


def _present(fields: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


def _rest_part(part: dict[str, Any]) -> dict[str, Any]:
    """One part of `_content`'s dicts as google-genai sends it (keys in its order)."""
    rest: dict[str, Any]
    if "text" in part:
        rest = {"text": part["text"]}
    elif "function_call" in part:
        call = part["function_call"]
        named = {"id": call["id"]} if "id" in call else {}
        rest = {"functionCall": {**named, "args": call["args"], "name": call["name"]}}
    elif "function_response" in part:
        response = part["function_response"]
        named = {"id": response["id"]} if "id" in response else {}
        rest = {
            "functionResponse": {
                **named,
                "name": response["name"],
                "response": response["response"],
            }
        }
    elif "inline_data" in part:
        blob = part["inline_data"]
        data = {"data": _rest_bytes(blob["data"]), "mime_type": blob["mime_type"]}
        rest = {"inlineData": _present(data)}
    else:
        rest = {"fileData": _present(part["file_data"])}
    signature = part.get("thought_signature")
    if signature is not None:
        rest["thoughtSignature"] = _rest_bytes(signature)
    return rest


def rest_content(message: Message, call: ToolCall | None) -> dict[str, Any]:
    """`message` in the Gemini REST form google-genai would send: a content, or a part.

    A user or assistant message is a whole content (``{"parts": [...], "role": ...}``); a
    tool result is its ``functionResponse`` part, naming `call` (the call it answers).
    """
    content = _content(message, call)
    if message.role == "tool":
        return _rest_part(content)
    return {"parts": [_rest_part(p) for p in content["parts"]], "role": content["role"]}


def _forget(entries: dict[int, Any], key: int, ref: weakref.ref[Message]) -> None:
    entry = entries.get(key)
    if entry is not None and entry[0] is ref:
        del entries[key]


_Entry = tuple[weakref.ref[Message], ToolCall | None, dict[str, Any], bytes]
"""A message's `RestContents` entry: the message, the call it answers, its REST form and its
digest (``b""`` until `RestContents.fingerprint` asks for it)."""


class RestContents:
    """The REST ``contents`` of conversations, each message converted once while it lives.

    An agent sends the whole conversation on every model call; this makes each call convert
    only the messages that are new. Entries are keyed by the message object (messages are
    frozen values) and each one goes when its message is garbage-collected. A tool result's
    entry also names the call it answered, and is made again if that call changes. A message
    with a local attachment (a path or bytes) is converted on every call: its file is read
    when it is sent, as before, and its bytes are not kept.
    """

    def __init__(self) -> None:
        """An empty cache."""
        self._entries: dict[int, _Entry] = {}

    def __len__(self) -> int:
        """The number of messages whose REST form is kept."""
        return len(self._entries)

    def contents(self, messages: Sequence[Message]) -> list[dict[str, Any]]:
        """The REST ``contents`` of `messages` (see `to_contents`), converting only new ones."""
        return _assemble(messages, self._get)

    def fingerprint(self, messages: Sequence[Message]) -> bytes:
        """A SHA-256 digest of `messages` as they are sent, each message hashed once.

        It covers each message's role and REST form (a tool result's naming the call it
        answers, as `contents` pairs them), in order, and the text of system messages: two
        conversations with one fingerprint have the same ``contents``.
        """
        digest = hashlib.sha256()
        calls: dict[str, ToolCall] = {}
        for message in messages:
            role = message.role
            call = None
            if role == "tool":
                call = calls.get(message.tool_call_id or "")
            elif role == "assistant" and message.tool_calls:
                calls.update((c.id, c) for c in message.tool_calls)
            entry = self._entries.get(id(message))
            if entry is not None and entry[3] and entry[0]() is message and entry[1] is call:
                digest.update(entry[3])
            else:
                digest.update(self._digest(message, call))
        return digest.digest()

    def _digest(self, message: Message, call: ToolCall | None) -> bytes:
        if message.role == "system":  # not a content: its text joins the system instruction
            form: Any = message.content
        else:
            form = self._get(message, call)
        # the REST form holds plain values only (text, numbers, lists, dicts): equal reprs are
        # equal forms, and repr is quicker than JSON
        made = hashlib.sha256(repr((message.role, form)).encode("utf-8")).digest()
        key = id(message)
        entry = self._entries.get(key)
        if entry is not None and entry[0]() is message and entry[1] is call:
            self._entries[key] = (entry[0], call, entry[2], made)
        return made

    def _get(self, message: Message, call: ToolCall | None) -> dict[str, Any]:
        key = id(message)
        entry = self._entries.get(key)
        if entry is not None and entry[0]() is message and entry[1] is call:
            return entry[2]
        made = rest_content(message, call)
        if all(a.url is not None for a in message.attachments):
            ref = weakref.ref(message, partial(_forget, self._entries, key))
            self._entries[key] = (ref, call, made, b"")
        return made


def _calling_config(choice: str) -> dict[str, Any]:
    """A checked tool choice as a ``FunctionCallingConfig``: a name is ``ANY`` of that one."""
    modes = {"auto": "AUTO", "required": "ANY", "none": "NONE"}
    if choice in modes:
        return {"mode": modes[choice]}
    return {"mode": "ANY", "allowed_function_names": [choice]}


def to_config(request: ModelRequest, extra_system: Sequence[str]) -> dict[str, Any]:
    """The ``GenerateContentConfig`` (as a dict) of `request`, with `extra_system` texts.

    The tool choice is the request's own (``request.tool_choice``), resolved once when the
    request was built.
    """
    config: dict[str, Any] = {}
    instructions = [s for s in (request.system, *extra_system) if s]
    if instructions:
        config["system_instruction"] = "\n\n".join(instructions)
    if request.tools:
        declarations = [
            {"name": t.name, "description": t.description, "parameters_json_schema": t.parameters}
            for t in request.tools
        ]
        config["tools"] = [{"function_declarations": declarations}]
        config["automatic_function_calling"] = {"disable": True}
    if request.tool_choice is not None:
        config["tool_config"] = {"function_calling_config": _calling_config(request.tool_choice)}
    settings = request.settings
    add_portable(config, settings, max_tokens="max_output_tokens", stop="stop_sequences")
    if settings.thinking_budget is not None:
        config["thinking_config"] = {
            "thinking_budget": settings.thinking_budget,
            "include_thoughts": True,
        }
    if request.output_schema is not None:
        output = {
            "response_mime_type": "application/json",
            "response_json_schema": dict(request.output_schema.schema),
        }
        add_unset(config, output, "ModelSettings.output_schema", PROVIDER)
    _add_options(config, settings)
    return config


def _add_options(config: dict[str, Any], settings: ModelSettings) -> None:
    """Put `GeminiOptions` into `config` as given, refusing keys already set."""
    options = GeminiOptions.from_settings(settings, PROVIDER)
    if options is None:
        return
    if options.thinking_level is not None:
        config["thinking_config"] = {
            "thinking_level": options.thinking_level,
            "include_thoughts": True,
        }
    given = {
        "top_p": options.top_p,
        "top_k": options.top_k,
        "seed": options.seed,
        "presence_penalty": options.presence_penalty,
        "frequency_penalty": options.frequency_penalty,
        "safety_settings": list(options.safety_settings) if options.safety_settings else None,
        "response_mime_type": options.response_mime_type,
        "response_json_schema": options.response_json_schema,
    }
    add_unset(config, {k: v for k, v in given.items() if v is not None}, "GeminiOptions", PROVIDER)
    add_unset(config, options.extra_config or {}, "GeminiOptions.extra_config", PROVIDER)


def _name(value: Any) -> str | None:
    if value is None:
        return None
    return str(getattr(value, "value", value))


def _encode(signature: Any) -> str | None:
    if not signature:
        return None
    if isinstance(signature, str):
        return signature
    return base64.b64encode(signature).decode("ascii")


class Reader:
    """Reads Gemini response chunks (one, or many when streamed) into a `ResponseBuilder`."""

    def __init__(self) -> None:
        self.builder = ResponseBuilder(PROVIDER)
        self._calls = 0

    def add(self, chunk: Any) -> list[StreamPart]:
        """Take one response chunk; return the text and thinking deltas it carried."""
        feedback = getattr(chunk, "prompt_feedback", None)
        block = _name(getattr(feedback, "block_reason", None))
        if block:
            raise ContentBlockedError(
                f"Gemini blocked the prompt (reason: {block}).", reason=block, provider=PROVIDER
            )
        self.builder.set_model(getattr(chunk, "model_version", None))
        metadata = getattr(chunk, "usage_metadata", None)
        if metadata is not None:  # the prompt's count includes the cached tokens
            prompt = token_count(metadata.prompt_token_count)
            cached = token_count(getattr(metadata, "cached_content_token_count", None))
            self.builder.usage = Usage(
                prompt,
                token_count(metadata.candidates_token_count),
                token_count(metadata.thoughts_token_count),
                cache_read_tokens=min(cached, prompt),
            )
        candidates = getattr(chunk, "candidates", None) or []
        if not candidates:
            return []
        candidate = candidates[0]
        self.builder.finish(_name(candidate.finish_reason))
        parts = getattr(candidate.content, "parts", None) or []
        return [delta for part in parts if (delta := self._part(part))]

    def _part(self, part: Any) -> StreamPart | None:
        signature = _encode(getattr(part, "thought_signature", None))
        call = getattr(part, "function_call", None)
        if call is not None:
            if not call.name:
                raise parse_error(PROVIDER, "a function call without a name")
            self.builder.tool_call(
                index=self._calls,
                call_id=call.id or None,
                name=call.name,
                arguments=dict(call.args or {}),
                metadata={SIGNATURE: signature} if signature else None,
            )
            self._calls += 1
            return None
        text = getattr(part, "text", None)
        if getattr(part, "thought", False):
            return self.builder.thinking(text or "")
        if signature:
            self.builder.metadata.setdefault(SIGNATURE, signature)
        return self.builder.text(text or "")

    def _check_finish(self, streamed: bool) -> None:
        reason = self.builder.raw_stop_reason
        if reason is None and streamed:
            raise ResponseParseError(
                "The Gemini stream ended before the answer was finished (no finish reason).",
                provider=PROVIDER,
            )
        if reason in MALFORMED:
            raise ResponseParseError(
                f"Gemini could not produce a valid answer (finish reason: {reason}).",
                provider=PROVIDER,
            )
        if reason == MISSING_SIGNATURE:
            raise ProviderError(
                f"Gemini refused the request (finish reason: {reason}): a model turn of the "
                "history lacks the thought signature Gemini sent with it. Keep each message's "
                "and tool call's provider_metadata when storing or editing a history.",
                provider=PROVIDER,
            )

    def response(self, *, raw_response: Any, raw_request: Any, streamed: bool) -> LLMResponse:
        """The complete answer; raises for withheld, malformed or cut-off answers.

        A finish reason is read by `STOP_REASONS` and kept as `LLMResponse.raw_stop_reason`;
        a complete body without one reads ``end_turn`` (a stream without one is refused).
        """
        self._check_finish(streamed)
        response = self.builder.build(
            stop_reasons=STOP_REASONS, raw_response=raw_response, raw_request=raw_request
        )
        return check_blocked(response, PROVIDER, "Gemini")
