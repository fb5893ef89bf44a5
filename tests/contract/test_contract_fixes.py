"""Regressions found running the design's client contract against the real embedded model.

- A forced tool choice (``tool_choice="required"`` or a tool's name) held for every
  follow-up of ``handle_function_calls``, so the model was made to call tools again and
  again until ``max_tool_rounds`` instead of answering with the results (as `Agent` does:
  after tools ran, the choice is ``"auto"``).
- An abort was checked only when no chunk (or tool progress) came for 50 ms: a model that
  streams faster than that, or a tool that reports progress faster, could not be aborted.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from glassagent import LLMResponse, ToolCall, ToolContext, tool
from glassagent.contract import ContractClient
from glassagent.llm import BaseLLMClient, Message, ModelSettings, TextDelta, ToolDefinition
from glassagent.testing import ScriptedClient


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first addend.
        b: The second addend.
    """
    return a + b


ADD_CALL = ToolCall("call_1", "add", {"a": 17, "b": 25})


@pytest.mark.parametrize("choice", ["required", "add"])
def test_a_forced_tool_choice_is_auto_after_the_tools_ran(choice: str) -> None:
    scripted = ScriptedClient([LLMResponse(tool_calls=(ADD_CALL,)), "42"])
    client = ContractClient(scripted, max_tool_rounds=1)
    response = client.send_request("", {}, "17 + 25?", [], tools=[add], tool_choice=choice)
    final, executions = client.handle_function_calls(response, "", {}, {})
    assert (final.text, [e["result"] for e in executions]) == ("42", ["42"])
    sent = [r.settings.tool_choice if r.settings else None for r in scripted.requests]
    assert sent == [choice, "auto"]


def test_the_streamed_follow_up_is_not_forced_either() -> None:
    scripted = ScriptedClient([LLMResponse(tool_calls=(ADD_CALL,)), "42"])
    client = ContractClient(scripted)
    stream = client.send_request_stream("", {}, "17 + 25?", [], tools=[add], tool_choice="required")
    events = list(client.handle_function_calls_stream(stream, "", {}, {}))
    assert events[-1] == {"type": "complete", "text": "42"}
    assert [r.settings.tool_choice if r.settings else None for r in scripted.requests] == [
        "required",
        "auto",
    ]


class FastStream(BaseLLMClient):
    """Streams 2,000 one-word chunks 2 ms apart (4 s in all): faster than the abort's poll."""

    provider_name = "fast"
    model = "fast"

    async def chat(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        system: str | None = None,
        *,
        settings: ModelSettings | None = None,
    ) -> LLMResponse:
        return LLMResponse("w " * 2000)

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        system: str | None = None,
        *,
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[TextDelta | LLMResponse]:
        for _ in range(2000):
            await asyncio.sleep(0.002)
            yield TextDelta("w ")
        yield LLMResponse("w " * 2000)


def test_an_abort_stops_a_stream_whose_chunks_come_faster_than_the_poll() -> None:
    client = ContractClient(FastStream())
    signal = threading.Event()
    stream = client.send_request_stream("", {}, "talk", [], abort_signal=signal)
    first = next(stream)
    signal.set()
    started = time.monotonic()
    rest = list(stream)
    assert time.monotonic() - started < 1.0
    assert rest == [{"type": "aborted", "text": first["text"], "reason": "user_abort"}]


def test_an_abort_stops_a_tool_whose_progress_comes_faster_than_the_poll() -> None:
    finished = threading.Event()

    @tool
    async def chatty(ctx: ToolContext) -> str:
        """Report progress every 2 ms for 4 s."""
        for i in range(2000):
            await ctx.progress(f"step {i}")
            await asyncio.sleep(0.002)
        finished.set()
        return "done"

    call = ToolCall("call_1", "chatty", {})
    client = ContractClient(ScriptedClient([LLMResponse(tool_calls=(call,)), "ok"]))
    stop = threading.Event()
    context: dict[str, Any] = {"abort_event": stop}
    stream = client.send_request_stream("", {}, "go", [], tools=[chatty])
    events = client.handle_function_calls_stream(stream, "", {}, context)
    for event in events:
        if event["type"] == "tool_progress":
            stop.set()
            break
    started = time.monotonic()
    rest = list(events)
    assert time.monotonic() - started < 1.0
    assert rest == [{"type": "aborted", "text": "", "reason": "user_abort"}]
    assert not finished.is_set()
