"""A fake LLM server on 127.0.0.1 for benchmarks: OpenAI, Ollama and Gemini wires.

Stateless: each answer is decided from the request alone. The model name carries K (for
example ``bench-k10``): while the conversation holds fewer than K tool results, the "model"
calls the ``counter`` tool with ``n`` = the number of results so far; then it answers
``done <K>``. So every client makes exactly K+1 model calls per run.

Run: ``python bench/fake_server.py [--port 0]``; it prints ``PORT <n>`` once listening.
``GET /_stats`` answers ``{"connections": <n>, "cpu_s": <s>}``: the connections accepted
so far, its own included, so bench/run.py can count the connections each driver opens, and
the CPU seconds the server has used, so a driver can tell whether the server kept up.

Answers are cached by request (path and body bytes, which repeat across runs), so the server
spends almost no CPU per request and is not what limits 100 concurrent runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from typing import Any

_K = re.compile(r"k(\d+)")
_GEMINI = re.compile(r"^/v1(?:beta)?/models/([^:/]+):(generateContent|streamGenerateContent)")


def k_of(model: str) -> int:
    match = _K.search(model or "")
    return int(match.group(1)) if match else 1


def final_text(k: int) -> str:
    return f"done {k}"


# ---- OpenAI chat completions -----------------------------------------------------------


def _offers_final_answer(body: dict[str, Any]) -> bool:
    return any(
        tool.get("function", {}).get("name") == "final_answer" for tool in body.get("tools") or []
    )


def _tool_results(messages: list[dict[str, Any]], final_tool: bool) -> int:
    """How many tool results the conversation holds.

    A client that offers a ``final_answer`` tool (smolagents' ToolCallingAgent) sends tool
    results back as ``Observation: ...`` text, not as tool messages, and ends a run by calling
    that tool (served so on the non-streamed wire). Every other client is counted by its tool
    messages and gets a plain text answer.
    """
    if not final_tool:
        return sum(1 for m in messages if m.get("role") == "tool")
    count = 0
    for message in messages:
        content = message.get("content")
        parts = content if isinstance(content, list) else [{"text": content}]
        count += sum(
            1
            for part in parts
            if isinstance(part, dict) and str(part.get("text") or "").startswith("Observation:")
        )
    return count


def openai(body: dict[str, Any]) -> tuple[bytes, str]:
    k = k_of(body.get("model", ""))
    final_tool = _offers_final_answer(body)
    n = _tool_results(body.get("messages", []), final_tool)
    usage = {"prompt_tokens": 10 + n, "completion_tokens": 5, "total_tokens": 15 + n}
    call = {
        "id": f"call_{n}",
        "type": "function",
        "function": {"name": "counter", "arguments": json.dumps({"n": n})},
    }
    if not body.get("stream"):
        message: dict[str, Any] = {"role": "assistant", "content": None}
        if n < k:
            message["tool_calls"] = [call]
        elif final_tool:
            answer = {"answer": final_text(k)}
            function = {"name": "final_answer", "arguments": json.dumps(answer)}
            message["tool_calls"] = [{"id": f"call_{n}", "type": "function", "function": function}]
        else:
            message["content"] = final_text(k)
        choice = {
            "index": 0,
            "message": message,
            "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
        }
        payload = {
            "id": "cmpl",
            "object": "chat.completion",
            "model": body.get("model"),
            "choices": [choice],
            "usage": usage,
        }
        return json.dumps(payload).encode(), "application/json"
    base = {"id": "cmpl", "object": "chat.completion.chunk", "model": body.get("model")}
    chunks: list[dict[str, Any]] = []
    if n < k:
        delta = {"role": "assistant", "tool_calls": [{"index": 0, **call}]}
        chunks.append({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
        finish = "tool_calls"
    else:
        text = final_text(k)
        for piece in (text[:3], text[3:]):
            delta = {"role": "assistant", "content": piece}
            chunks.append(
                {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
            )
        finish = "stop"
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    chunks.append({**base, "choices": [], "usage": usage})
    data = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)
    return data + b"data: [DONE]\n\n", "text/event-stream"


# ---- Ollama /api/chat ------------------------------------------------------------------


def ollama(body: dict[str, Any]) -> tuple[bytes, str]:
    k = k_of(body.get("model", ""))
    n = sum(1 for m in body.get("messages", []) if m.get("role") == "tool")
    message: dict[str, Any] = {"role": "assistant", "content": ""}
    if n < k:
        message["tool_calls"] = [{"function": {"name": "counter", "arguments": {"n": n}}}]
    else:
        message["content"] = final_text(k)
    done = {
        "model": body.get("model"),
        "created_at": "2026-01-01T00:00:00Z",
        "done": True,
        "done_reason": "stop",
        "prompt_eval_count": 10 + n,
        "eval_count": 5,
        "total_duration": 1000,
        "eval_duration": 500,
    }
    if body.get("stream") is False:
        return json.dumps({**done, "message": message}).encode(), "application/json"
    lines = [
        {**done, "done": False, "message": message},
        {**done, "message": {"role": "assistant", "content": ""}},
    ]
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines), "application/x-ndjson"


def ollama_show(body: dict[str, Any]) -> tuple[bytes, str]:
    return json.dumps({"capabilities": ["completion", "tools"]}).encode(), "application/json"


# ---- Gemini generateContent ------------------------------------------------------------


def gemini(model: str, body: dict[str, Any], stream: bool) -> tuple[bytes, str]:
    k = k_of(model)
    n = sum(
        1
        for content in body.get("contents", [])
        for part in content.get("parts", [])
        if "functionResponse" in part or "function_response" in part
    )
    if n < k:
        parts: list[dict[str, Any]] = [{"functionCall": {"name": "counter", "args": {"n": n}}}]
    else:
        parts = [{"text": final_text(k)}]
    payload = {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {
            "promptTokenCount": 10 + n,
            "candidatesTokenCount": 5,
            "totalTokenCount": 15 + n,
        },
        "modelVersion": model,
    }
    if not stream:
        return json.dumps(payload).encode(), "application/json"
    return b"data: " + json.dumps(payload).encode() + b"\r\n\r\n", "text/event-stream"


CONNECTIONS = 0
"""Connections accepted since the server started."""
_CACHE: dict[tuple[str, bytes], bytes] = {}
"""Whole answers (head and body) by request path and body; cleared when it grows large."""
_CACHE_SIZE = 4096
_LENGTH = re.compile(rb"\r\ncontent-length:[ \t]*(\d+)", re.IGNORECASE)
_REASONS = {200: "OK", 404: "Not Found", 500: "Internal Server Error"}


def route(method: str, path: str, body: dict[str, Any]) -> tuple[int, bytes, str]:
    if path == "/_stats":
        stats = {"connections": CONNECTIONS, "cpu_s": time.process_time()}
        return 200, json.dumps(stats).encode(), "application/json"
    if path.startswith("/v1/chat/completions"):
        return (200, *openai(body))
    if path == "/api/chat":
        return (200, *ollama(body))
    if path == "/api/show":
        return (200, *ollama_show(body))
    match = _GEMINI.match(path)
    if match:
        return (200, *gemini(match.group(1), body, match.group(2) == "streamGenerateContent"))
    return 404, b'{"error": "not found"}', "application/json"


class HTTPProtocol(asyncio.Protocol):
    """Just enough HTTP/1.1 (keep-alive, Content-Length bodies) for the clients under test."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        global CONNECTIONS
        CONNECTIONS += 1
        self.transport: asyncio.Transport = transport  # type: ignore[assignment]
        self.buffer = b""

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            head_end = self.buffer.find(b"\r\n\r\n")
            if head_end < 0:
                return
            head = self.buffer[:head_end]
            found = _LENGTH.search(head)
            length = int(found.group(1)) if found else 0
            if len(self.buffer) < head_end + 4 + length:
                return
            body = self.buffer[head_end + 4 : head_end + 4 + length]
            self.buffer = self.buffer[head_end + 4 + length :]
            method, target, _ = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
            self.respond(method, target, body)

    def respond(self, method: str, target: str, raw: bytes) -> None:
        key = (target, raw)
        answer = _CACHE.get(key)
        if answer is None:
            answer = self.answer(method, target, raw)
            if target != "/_stats":
                if len(_CACHE) >= _CACHE_SIZE:
                    _CACHE.clear()
                _CACHE[key] = answer
        self.transport.write(answer)

    @staticmethod
    def answer(method: str, target: str, raw: bytes) -> bytes:
        try:
            status, payload, content_type = route(method, target, json.loads(raw or b"{}"))
        except Exception as exc:  # a bench server: report and go on
            status, payload, content_type = (
                500,
                json.dumps({"error": str(exc)}).encode(),
                "application/json",
            )
        head = (
            f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(payload)}\r\nConnection: keep-alive\r\n\r\n"
        )
        return head.encode() + payload


async def serve(port: int) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(HTTPProtocol, "127.0.0.1", port, backlog=1024)
    print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    try:
        asyncio.run(serve(parser.parse_args().port))
    except KeyboardInterrupt:
        sys.exit(0)
