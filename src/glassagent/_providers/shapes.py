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


def text_field(
    obj: dict[str, Any], key: str, provider: str, where: str, *, secret: str | None = None
) -> str:
    """Read ``obj[key]`` as text: a string, or ``""`` when it is absent or null.

    Args:
        obj: The decoded object that holds the field.
        key: The field's name.
        provider: The provider name, for the error.
        where: What `obj` is, for the error, e.g. ``"a stream event"``.
        secret: An API key to mask, should the object echo it.

    Returns:
        The string, or ``""``.

    Raises:
        ResponseParseError: When the value is anything else, e.g. ``a stream event whose
            'delta' is a number, not a string``.
    """
    value = obj.get(key)
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    detail = f"{where} whose {key!r} is {kind(value)}, not a string"
    raise parse_error(provider, detail, obj, secret=secret)


def object_field(
    obj: dict[str, Any], key: str, provider: str, where: str, *, secret: str | None = None
) -> dict[str, Any]:
    """Read ``obj[key]`` as an object: the dict, or ``{}`` when it is absent or null.

    Args:
        obj: The decoded object that holds the field.
        key: The field's name.
        provider: The provider name, for the error.
        where: What `obj` is, for the error, e.g. ``"a choice"``.
        secret: An API key to mask, should the object echo it.

    Returns:
        The dict itself (not a copy), or a new empty one.

    Raises:
        ResponseParseError: When the value is anything else.
    """
    value = obj.get(key)
    if value is None:
        return {}
    if isinstance(value, dict):
        return value
    detail = f"{where} whose {key!r} is {kind(value)}, not an object"
    raise parse_error(provider, detail, obj, secret=secret)


def object_list(
    obj: dict[str, Any], key: str, provider: str, where: str, *, secret: str | None = None
) -> list[dict[str, Any]]:
    """Read ``obj[key]`` as a list of objects: the list, or ``[]`` when it is absent or null.

    Args:
        obj: The decoded object that holds the field.
        key: The field's name.
        provider: The provider name, for the error.
        where: What `obj` is, for the error, e.g. ``"a response"``.
        secret: An API key to mask, should the object echo it.

    Returns:
        The list itself (not a copy), or a new empty one.

    Raises:
        ResponseParseError: When the value is not an array, or holds something that is not
            an object.
    """
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        detail = f"{where} whose {key!r} is {kind(value)}, not an array"
        raise parse_error(provider, detail, obj, secret=secret)
    for item in value:
        if not isinstance(item, dict):
            detail = f"{where} whose {key!r} holds {kind(item)}, not an object"
            raise parse_error(provider, detail, obj, secret=secret)
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
    """Read a bookkeeping field that is text, such as a model name or a response id.

    A malformed value is dropped rather than raised: an answer is never lost over it.

    Args:
        value: The decoded value, e.g. ``body.get("model")``.

    Returns:
        `value` if it is a non-empty string, else `None`.
    """
    return value if isinstance(value, str) and value else None


def token_count(value: Any) -> int:
    """Read a token count, for `Usage`; a malformed one counts as 0 instead of raising.

    Args:
        value: The decoded value, e.g. ``usage.get("input_tokens")``.

    Returns:
        `value` as an int if it is a whole number (``12`` or ``12.0``, not ``True``) from 0
        to below ``2**53`` (`MAX_TOKEN_COUNT`), else 0.
    """
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
