"""Reading untrusted response bodies: shape checks shared by the raw-httpx clients.

A server may send any JSON value in any position. Fields that carry the answer (choices,
messages, text, tool calls, finish reasons) must have the documented type, or the client
raises `ResponseParseError` saying which field was wrong. Bookkeeping fields (token counts,
durations, the model name) that are malformed are dropped instead: an answer is never lost
because its statistics are odd.
"""

from __future__ import annotations

import json
import math
from typing import Any

from glassagent._core.errors import ContentBlockedError, ResponseParseError
from glassagent._core.jsontext import loads as loads
from glassagent._core.jsontext import snippet as snippet
from glassagent._core.messages import LLMResponse
from glassagent._providers.http import redact

MAX_TOKEN_COUNT = 2**53
"""Token counts at or above this are not believed (they count as 0)."""


def parse_json(text: str | bytes) -> tuple[bool, Any]:
    """``(True, value)`` for JSON text, else ``(False, None)`` (never raises).

    Callers raise their own error outside any handler, so the body is not kept as the
    ``__context__`` of what they raise (a body may echo a key).
    """
    try:
        return True, loads(text)
    except ValueError:
        return False, None


def dumps(value: Any) -> str:
    """`value` as JSON text.

    Raises:
        ValueError: When `value` nests too deeply to encode.
    """
    try:
        return json.dumps(value)
    except RecursionError:
        raise ValueError("the JSON nests too deeply") from None


def kind(value: Any) -> str:
    """The JSON type of a decoded value, for error messages: ``object``, ``array``..."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    names = {dict: "an object", list: "an array", str: "a string", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def parse_error(
    provider: str, detail: str, raw: Any = None, *, secret: str | None = None
) -> ResponseParseError:
    """The `ResponseParseError` for a body of `provider` that has `detail` (the caller raises).

    Args:
        provider: The provider name, e.g. ``"ollama"``.
        detail: What was wrong, e.g. ``"a tool call whose 'name' is an array"``.
        raw: The decoded value that was wrong (or the body around it), shown shortened.
        secret: An API key to mask, should the body echo it.
    """
    body = None if raw is None else redact(snippet(raw), secret)
    message = redact(f"{provider} answered with {detail}", secret)
    return ResponseParseError(
        message + (f": {body}" if body else "."), body=body, provider=provider
    )


def text_field(obj: dict[str, Any], key: str, provider: str, where: str) -> str:
    """``obj[key]`` as text: a string, or ``""`` when absent or null.

    Raises:
        ResponseParseError: When the value is anything else.
    """
    value = obj.get(key)
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    raise parse_error(provider, f"{where} whose {key!r} is {kind(value)}, not a string", obj)


def object_field(obj: dict[str, Any], key: str, provider: str, where: str) -> dict[str, Any]:
    """``obj[key]`` as an object: the dict, or ``{}`` when absent or null.

    Raises:
        ResponseParseError: When the value is anything else.
    """
    value = obj.get(key)
    if value is None:
        return {}
    if isinstance(value, dict):
        return value
    raise parse_error(provider, f"{where} whose {key!r} is {kind(value)}, not an object", obj)


def object_list(obj: dict[str, Any], key: str, provider: str, where: str) -> list[dict[str, Any]]:
    """``obj[key]`` as a list of objects: ``[]`` when absent or null.

    Raises:
        ResponseParseError: When the value is not an array, or holds something not an object.
    """
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise parse_error(provider, f"{where} whose {key!r} is {kind(value)}, not an array", obj)
    for item in value:
        if not isinstance(item, dict):
            detail = f"{where} whose {key!r} holds {kind(item)}, not an object"
            raise parse_error(provider, detail, obj)
    return value


def call_function(raw: dict[str, Any], provider: str) -> dict[str, Any]:
    """The object holding a wire tool call's ``name`` and ``arguments``.

    That is its ``function`` object; a call without one (as some llama.cpp versions document
    it: ``{"name": ..., "arguments": ...}`` directly) holds them itself.

    Raises:
        ResponseParseError: When ``function`` is there but not an object.
    """
    if raw.get("function") is None:
        return raw
    return object_field(raw, "function", provider, "a tool call")


def check_blocked(response: LLMResponse, provider: str, label: str | None = None) -> LLMResponse:
    """`response`, unless a content filter withheld all of it: then `ContentBlockedError`.

    An answer stopped part-way keeps its text, with ``stop_reason="content_filter"``; one
    with no text at all is not returned as an empty success.

    Args:
        response: The assembled answer.
        provider: The provider name for the error.
        label: How the provider is named in the message (default `provider`).
    """
    if response.stop_reason != "content_filter" or response.text:
        return response
    reason = response.raw_stop_reason or "content_filter"
    raise ContentBlockedError(
        f"{label or provider} withheld the answer (finish reason: {reason}).",
        reason=reason,
        provider=provider,
    )


def optional_text(value: Any) -> str | None:
    """`value` if it is a non-empty string, else `None` (for bookkeeping fields)."""
    return value if isinstance(value, str) and value else None


def token_count(value: Any) -> int:
    """A token count from the wire: a whole number from 0 to `MAX_TOKEN_COUNT`, else 0."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    if isinstance(value, float) and not value.is_integer():
        return 0
    return int(value) if 0 <= value < MAX_TOKEN_COUNT else 0


def duration(value: Any, scale: float = 1.0) -> float | None:
    """A non-negative, finite number from the wire times `scale`, else `None`."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        result = float(value) * scale
    except OverflowError:  # an int too large for a float
        return None
    return result if math.isfinite(result) and result >= 0 else None
