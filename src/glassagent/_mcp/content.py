"""An MCP tool result as the text a glassagent tool returns to the model.

Text blocks are joined as they are; images, audio and binary resources, which a tool result
cannot carry to the model here, are described in one line each (kind, MIME type, size); an
embedded text resource contributes its text; a resource link its URI. A result with no
content but structured content is that content as JSON.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from typing import Any


def _size(data: str) -> str:
    """The decoded size of base64 `data`, for a description."""
    try:
        return f"{len(base64.b64decode(data, validate=False)):,} bytes"
    except (binascii.Error, ValueError):
        return f"{len(data):,} base64 characters"


def _resource(resource: Any) -> str:
    mime = getattr(resource, "mime_type", None) or "unknown type"
    text = getattr(resource, "text", None)
    if isinstance(text, str):
        return text
    blob = getattr(resource, "blob", "")
    return f"[resource {resource.uri}: {mime}, {_size(blob)}; not shown]"


def block_text(block: Any) -> str:
    """One content block as text."""
    kind = getattr(block, "type", None)
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        return f"[{kind}: {block.mime_type}, {_size(block.data)}; not shown]"
    if kind == "resource":
        return _resource(block.resource)
    if kind == "resource_link":
        described = f": {block.description}" if getattr(block, "description", None) else ""
        return f"[resource link {block.uri} ({block.name}){described}]"
    return f"[{kind or type(block).__name__} content; not shown]"


def result_text(content: Sequence[Any], structured: Any) -> str:
    """The text of a tool result: its blocks joined, or its structured content as JSON."""
    if not content and structured is not None:
        return json.dumps(structured, ensure_ascii=False, default=str)
    return "\n".join(block_text(block) for block in content)
