"""Message content in the shapes of the GenAI semantic conventions, from event dicts.

Built from the standard event dicts (`BaseEvent.to_dict`) after the user's ``redact`` hook,
so whatever the hook removed never reaches a span. Each value is a JSON string, as the
conventions ask where spans cannot hold structured attributes. Attachments are described
(kind, type, name, URL), their bytes are never exported.
"""

from __future__ import annotations

import json
from typing import Any

from glassagent._otel import attributes as names

_MODALITIES = ("image", "audio", "video")


def to_json(value: Any) -> str:
    """Serialise an attribute's structured value."""
    return json.dumps(value, ensure_ascii=False, default=str)


def as_text(value: Any) -> str:
    """A tool's result as the model read it: text stays text, anything else becomes JSON."""
    return value if isinstance(value, str) else to_json(value)


def request_content(data: dict[str, Any]) -> dict[str, str]:
    """Input messages, system instructions and tool definitions of an ``llm_request``."""
    messages = [_message(m) for m in _list(data.get("messages")) if isinstance(m, dict)]
    content = {names.INPUT_MESSAGES: to_json(messages)}
    system = data.get("system")
    if isinstance(system, str) and system:
        content[names.SYSTEM_INSTRUCTIONS] = to_json([{"type": "text", "content": system}])
    tools = [
        {
            "type": "function",
            "name": tool.get("name"),
            "description": tool.get("description"),
            "parameters": tool.get("parameters"),
        }
        for tool in _list(data.get("tools"))
        if isinstance(tool, dict)
    ]
    if tools:
        content[names.TOOL_DEFINITIONS] = to_json(tools)
    return content


def response_content(data: dict[str, Any]) -> dict[str, str]:
    """The output message of an ``llm_response``: reasoning, text and tool calls."""
    parts = _answer_parts(data.get("thinking"), data.get("text"), data.get("tool_calls"))
    return {names.OUTPUT_MESSAGES: to_json([{"role": "assistant", "parts": parts}])}


def _message(message: dict[str, Any]) -> dict[str, Any]:
    role = message.get("role")
    content = message.get("content")
    if role == "tool":
        response = {"type": "tool_call_response", "id": message.get("tool_call_id")}
        return {"role": role, "parts": [{**response, "response": content}]}
    parts = _answer_parts(message.get("thinking"), content, message.get("tool_calls"))
    parts += [_attachment(a) for a in _list(message.get("attachments")) if isinstance(a, dict)]
    return {"role": role, "parts": parts}


def _answer_parts(thinking: Any, text: Any, tool_calls: Any) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    if isinstance(thinking, str) and thinking:
        parts.append({"type": "reasoning", "content": thinking})
    if isinstance(text, str) and text:
        parts.append({"type": "text", "content": text})
    for call in _list(tool_calls):
        if isinstance(call, dict):
            parts.append(
                {
                    "type": "tool_call",
                    "id": call.get("id"),
                    "name": call.get("name"),
                    "arguments": call.get("input"),
                }
            )
    return parts


def _attachment(attachment: dict[str, Any]) -> dict[str, Any]:
    mime_type = attachment.get("mime_type")
    kind = str(mime_type or "").partition("/")[0]
    modality = kind if kind in _MODALITIES else "document"
    url = attachment.get("url")
    if isinstance(url, str) and url:
        return {"type": "uri", "modality": modality, "mime_type": mime_type, "uri": url}
    # A generic part: the bytes stay out of telemetry.
    return {
        "type": "attachment",
        "modality": modality,
        "mime_type": mime_type,
        "name": attachment.get("name"),
    }


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else []
