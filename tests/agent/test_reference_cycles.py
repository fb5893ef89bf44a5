"""Model calls and agent steps leave no reference cycles behind: refcounting frees them.

Objects caught in a reference cycle live until the cycle collector runs, and every one of
them brings that run closer; with many runs at once those collections cost more than the
framework itself. httpx's response and its body stream refer to each other (about forty
objects a call), and so did a tool call's context and its progress callback. These tests
run real calls against a real HTTP server on 127.0.0.1 with the collector paused, then ask
it what it would have had to free.
"""

from __future__ import annotations

import gc
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from glassagent import Agent, Message, tool
from glassagent.llm import (
    AnthropicClient,
    GeminiClient,
    OllamaClient,
    OpenAICompatibleClient,
)
from tests.support.loopback_server import LoopbackServer, Reply, Request, sse

HI = [Message(role="user", content="Hi")]
KEY = "test-key-not-secret-0000"


@contextmanager
def cycles() -> Iterator[list[str]]:
    """Collect the types of the objects that only the cycle collector would free."""
    found: list[str] = []
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    gc.freeze()  # the objects from before: the collection below looks at the new ones alone
    try:
        yield found
    finally:
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            gc.collect()
            found += [f"{type(o).__module__}.{type(o).__qualname__}" for o in gc.garbage]
        finally:
            gc.garbage.clear()
            gc.set_debug(0)
            gc.unfreeze()
            if enabled:
                gc.enable()


def ours(types: list[str]) -> list[str]:
    """The types of glassagent and of the HTTP stack under it."""
    return sorted({t for t in types if t.startswith(("glassagent", "httpx", "httpcore"))})


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: First addend.
        b: Second addend.
    """
    return a + b


@tool
async def add_async(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: First addend.
        b: Second addend.
    """
    return a + b


def openai_server(request: Request) -> Reply:
    """Two tool calls of whichever tool is offered, then an answer; streamed when asked."""
    body = request.json()
    done = sum(1 for m in body["messages"] if m["role"] == "tool")
    name = body["tools"][0]["function"]["name"] if body.get("tools") else None
    if name is not None and done < 2:
        arguments = json.dumps({"a": done, "b": 1})
        call = {"id": f"call_{done}", "type": "function"}
        if body.get("stream"):
            call |= {"index": 0, "function": {"name": name, "arguments": arguments}}
            delta: dict[str, Any] = {"role": "assistant", "tool_calls": [call]}
            finish = "tool_calls"
        else:
            call["function"] = {"name": name, "arguments": arguments}
            message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
            finish = "tool_calls"
    else:
        delta = {"role": "assistant", "content": "done"}
        message = {"role": "assistant", "content": "done"}
        finish = "stop"
    usage = {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
    if body.get("stream"):
        chunk = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return Reply.body(
            sse(chunk, {"choices": [], "usage": usage}), Content_Type="text/event-stream"
        )
    answer = {
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage,
    }
    return Reply.body(json.dumps(answer).encode(), Content_Type="application/json")


def ollama_server(request: Request) -> Reply:
    line = {"message": {"role": "assistant", "content": "hi"}, "done": True, "done_reason": "stop"}
    return Reply.body(json.dumps(line).encode() + b"\n", Content_Type="application/x-ndjson")


def anthropic_server(request: Request) -> Reply:
    usage = {"input_tokens": 5, "output_tokens": 1}
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [{"type": "text", "text": "hi"}],
        "stop_reason": "end_turn",
        "usage": usage,
    }
    if not request.json().get("stream"):
        return Reply.body(json.dumps(message).encode(), Content_Type="application/json")
    events = [
        ("message_start", {"type": "message_start", "message": message | {"content": []}}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "hi"},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": usage},
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    text = "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events)
    return Reply.body(text.encode(), Content_Type="text/event-stream")


def gemini_server(request: Request) -> Reply:
    answer = {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": "hi"}]}, "finishReason": "STOP"}
        ],
        "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 1, "totalTokenCount": 6},
    }
    if "alt=sse" in request.path:
        return Reply.body(
            f"data: {json.dumps(answer)}\n\n".encode(), Content_Type="text/event-stream"
        )
    return Reply.body(json.dumps(answer).encode(), Content_Type="application/json")


async def collect(parts: AsyncIterator[Any]) -> list[Any]:
    return [part async for part in parts]


CLIENTS: dict[str, tuple[Callable[[Request], Reply], Callable[[str], Any]]] = {
    "openai": (openai_server, lambda url: OpenAICompatibleClient("m", base_url=f"{url}/v1")),
    "ollama": (ollama_server, lambda url: OllamaClient("m", base_url=url)),
    "anthropic": (anthropic_server, lambda url: AnthropicClient("m", api_key=KEY, base_url=url)),
    "gemini": (
        gemini_server,
        lambda url: GeminiClient("gemini-2.5-flash", api_key=KEY, base_url=url),
    ),
}


@pytest.mark.parametrize("streamed", [False, True], ids=["chat", "stream"])
@pytest.mark.parametrize("wire", sorted(CLIENTS))
async def test_a_model_call_leaves_no_cycles(wire: str, streamed: bool) -> None:
    if wire == "gemini":
        pytest.importorskip("google.genai")
    handler, make = CLIENTS[wire]
    with LoopbackServer(handler) as server:
        async with make(server.url) as client:

            def call() -> Awaitable[Any]:
                return collect(client.stream(HI)) if streamed else client.chat(HI)

            await call()  # the first call builds the pool and lazy caches, which stay
            with cycles() as found:
                answer = await call()
                del answer
    assert ours(found) == []


@pytest.mark.parametrize("sync", [True, False], ids=["sync tool", "async tool"])
async def test_an_agent_step_with_tool_calls_leaves_no_cycles(sync: bool) -> None:
    adder = add if sync else add_async
    with LoopbackServer(openai_server) as server:
        async with OpenAICompatibleClient("m", base_url=f"{server.url}/v1") as client:
            agent = Agent(client, [adder])
            first = await agent.run("add twice")
            assert first.text == "done"
            with cycles() as found:
                result = await agent.run("add twice")
                assert [
                    e.execution.result
                    for e in result.events
                    if e.type == "function_execution_complete"
                ] == ["1", "2"]
                del result
    assert ours(found) == []
