"""JSON text from untrusted sources: decoding that reports deep nesting, snippets for messages."""

from __future__ import annotations

import json
from typing import Any

_SNIPPET = 500


def loads(text: str | bytes) -> Any:
    """`json.loads`, with absurdly deep nesting reported as the `ValueError` it is.

    Raises:
        ValueError: When `text` is not JSON, or nests too deeply to decode.
    """
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("the JSON nests too deeply") from None


def snippet(value: Any, limit: int | None = _SNIPPET) -> str:
    """A decoded value as JSON text, cut to `limit` characters, for messages (never raises).

    A value too deeply nested to encode is shown as its type, e.g. ``<list>``.
    """
    try:
        text = json.dumps(value)
    except (TypeError, ValueError, RecursionError):
        text = f"<{type(value).__name__}>"
    return text if limit is None or len(text) <= limit else text[: limit - 3] + "..."
