"""Deadlines, stall timeouts and size limits of a model call, and the agent's run_timeout."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from glassagent import Agent, tool
from glassagent._agent.act import ABORT_GRACE_SECONDS
from glassagent.errors import ProviderTimeoutError, ResponseParseError, RunTimeoutError, UserError
from glassagent.llm import (
    GeminiClient,
    Message,
    ModelSettings,
    OllamaClient,
    OpenAICompatibleClient,
    RetryNotice,
    RetryPolicy,
    ToolDefinition,
)
from glassagent.testing import FunctionClient
from tests.support import virtual_clock
from tests.support.loopback_server import LoopbackServer, Reply, Request, openai_answer

HI = [Message(role="user", content="hi")]
NO_RETRY = RetryPolicy(max_retries=0)
KEY = "AIzaSyD-fake-key-for-tests-0123456789"


def openai_delta(text: str) -> bytes:
    chunk = {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
    return f"data: {json.dumps(chunk)}\n\n".encode()


def ollama_delta(text: str) -> bytes:
    return (json.dumps({"message": {"content": text}, "done": False}) + "\n").encode()


def gemini_delta(text: str) -> bytes:
    chunk = {"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}}]}
    return f"data: {json.dumps(chunk)}\n\n".encode()


def openai_client(url: str) -> OpenAICompatibleClient:
    return OpenAICompatibleClient("m", base_url=url + "/v1", api_key="")


WIRES = {
    "openai": (openai_delta, openai_client),
    "ollama": (ollama_delta, lambda url: OllamaClient("m", base_url=url, tool_protocol="native")),
    "gemini": (gemini_delta, lambda url: GeminiClient(api_key=KEY, base_url=url)),
}


def dribbling(delta, pieces: int = 200, every: float = 0.1) -> Reply:
    """A streamed answer: a small piece at once, then one every `every` seconds for long."""
    return Reply(chunks=[(0, delta("x"))] + [(every, delta("x")) for _ in range(pieces)])


async def stream_all(client, settings: ModelSettings, seen: list[object]) -> None:
    async for part in client.stream(HI, settings=settings):
        seen.append(part)


@pytest.mark.parametrize("wire", sorted(WIRES))
async def test_a_dribbling_server_cannot_outlast_the_deadline(wire: str) -> None:
    delta, make = WIRES[wire]
    with LoopbackServer(lambda request: dribbling(delta)) as server:
        async with make(server.url) as client:
            seen: list[object] = []
            started = time.monotonic()
            # the first piece comes at once: it is read well before the deadline
            settings = ModelSettings(timeout=1.0, retry=NO_RETRY)
            with pytest.raises(ProviderTimeoutError) as info:
                await stream_all(client, settings, seen)
            elapsed = time.monotonic() - started
    assert info.value.kind == "deadline"
    assert info.value.seconds == 1.0
    assert elapsed < 10  # one piece every 0.1 s would go on for 20 s
    assert seen  # what streamed before the deadline was passed on


async def test_a_stall_before_any_text_is_retried() -> None:
    def handle(request: Request) -> Reply:
        if len(server.requests) == 1:
            return Reply(chunks=[(5, openai_answer("late"))])
        return Reply.body(openai_answer("hi"))

    with LoopbackServer(handle) as server:
        async with OpenAICompatibleClient("m", base_url=server.url + "/v1", api_key="") as client:
            policy = RetryPolicy(initial_delay=0.01)
            parts = [
                p
                async for p in client.stream(
                    HI, settings=ModelSettings(stall_timeout=0.5, retry=policy)
                )
            ]
    assert [p.error_type for p in parts if isinstance(p, RetryNotice)] == ["ProviderTimeoutError"]
    assert parts[-1].text == "hi"


async def test_the_deadline_holds_for_a_plain_chat_call_too() -> None:
    late = Reply(chunks=[(10, b"{}")], headers={"Content-Type": "application/json"})
    with LoopbackServer(lambda request: late) as server:
        async with OpenAICompatibleClient("m", base_url=server.url + "/v1", api_key="") as client:
            started = time.monotonic()
            with pytest.raises(ProviderTimeoutError, match=r"within 0\.5 s"):
                await client.chat(HI, settings=ModelSettings(timeout=0.5))
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("wire", sorted(WIRES))
async def test_an_oversized_answer_fails_fast(wire: str) -> None:
    delta, make = WIRES[wire]
    piece = delta("y" * 60_000)
    huge = Reply(chunks=[(0, piece) for _ in range(100)])  # about 6 MB
    with LoopbackServer(lambda request: huge) as server:
        async with make(server.url) as client:
            settings = ModelSettings(max_response_bytes=1_000_000, retry=NO_RETRY)
            with pytest.raises(ResponseParseError, match="larger than 1000000 bytes"):
                await stream_all(client, settings, [])


async def test_a_long_line_without_a_newline_is_not_buffered_past_the_limit() -> None:
    line = Reply(chunks=[(0, b"data: " + b"z" * 65_536) for _ in range(200)])  # 13 MB, one line
    with LoopbackServer(lambda request: line) as server:
        async with OpenAICompatibleClient("m", base_url=server.url + "/v1", api_key="") as client:
            settings = ModelSettings(max_response_bytes=2_000_000, retry=NO_RETRY)
            with pytest.raises(ResponseParseError, match="larger than"):
                await stream_all(client, settings, [])


async def test_the_default_size_limit_stops_a_50_mb_answer() -> None:
    piece = openai_delta("w" * 1_000_000)
    huge = Reply(chunks=[(0, piece) for _ in range(50)])
    with LoopbackServer(lambda request: huge) as server:
        async with OpenAICompatibleClient("m", base_url=server.url + "/v1", api_key="") as client:
            with pytest.raises(ResponseParseError, match="max_response_bytes"):
                await stream_all(client, ModelSettings(retry=NO_RETRY), [])


def test_limits_must_be_positive() -> None:
    for bad in ({"timeout": 0}, {"stall_timeout": -1}, {"max_response_bytes": 0}):
        with pytest.raises(UserError):
            ModelSettings(**bad)
    with pytest.raises(UserError):
        Agent(FunctionClient(lambda *request: "x"), run_timeout=0)


@tool
async def slow_lookup(topic: str) -> str:
    """Look something up, slowly.

    Args:
        topic: What to look up.
    """
    await asyncio.sleep(30)
    return "found"


def test_run_timeout_ends_the_run_with_a_typed_error_keeping_what_it_made() -> None:
    def model(messages, tools, system, settings):
        from glassagent.llm import LLMResponse, ToolCall

        return LLMResponse(
            text="Let me look.", tool_calls=(ToolCall("c1", "slow_lookup", {"topic": "x"}),)
        )

    async def run_it() -> tuple[RunTimeoutError, float]:
        agent = Agent(FunctionClient(model), [slow_lookup], run_timeout=0.5)
        loop = asyncio.get_running_loop()
        with pytest.raises(RunTimeoutError) as info:
            await agent.run("look it up")
        return info.value, loop.time()

    error, ended = virtual_clock.run(run_it())  # the tool's 30 s take no real time
    assert ended == pytest.approx(0.5 + ABORT_GRACE_SECONDS)  # not the tool's 30 s
    result = error.result
    assert result is not None
    assert result.stop_reason == "error"
    assert result.text == "Let me look."
    assert error.seconds == 0.5
    types = [e.type for e in result.events]
    assert types[-1] == "error"
    assert result.events[-1].error_type == "RunTimeoutError"
    assert "function_execution_complete" in types  # the cut call still reports its end
    assert [m.role for m in result.new_messages] == ["user", "assistant", "tool"]


async def test_a_call_past_its_deadline_ends_the_run_keeping_the_partial_answer() -> None:
    with LoopbackServer(lambda request: dribbling(openai_delta, every=0.2)) as server:
        async with OpenAICompatibleClient("m", base_url=server.url + "/v1", api_key="") as client:
            agent = Agent(client, settings=ModelSettings(timeout=1.0))
            with pytest.raises(ProviderTimeoutError) as info:
                await agent.run("tell me")
    result = info.value.result
    assert result is not None
    assert result.text.startswith("x")
    assert result.new_messages[-1].role == "assistant"
    assert result.new_messages[-1].status == "aborted"
    assert result.new_messages[-1].content == result.text
    assert result.events[-1].type == "error"


async def test_a_stalled_plain_call_is_not_retried() -> None:
    late = Reply(chunks=[(3, b"{}")], headers={"Content-Type": "application/json"})
    with LoopbackServer(lambda request: late) as server:
        async with openai_client(server.url) as client:
            settings = ModelSettings(stall_timeout=0.5, retry=RetryPolicy(initial_delay=0.01))
            with pytest.raises(ProviderTimeoutError, match="stall_timeout"):
                await client.chat(HI, settings=settings)
    assert len(server.requests) == 1  # still generating, most likely: trying again costs as much


async def test_ollamas_capability_lookup_counts_against_the_deadline() -> None:
    def handle(request: Request) -> Reply:
        if request.path == "/api/show":
            return Reply(chunks=[(4, b"{}")], headers={"Content-Type": "application/json"})
        return Reply.body(ollama_delta("never"))

    tool_definition = ToolDefinition("add", "Add.", {"type": "object", "properties": {}})
    with LoopbackServer(handle) as server:
        async with OllamaClient("m", base_url=server.url) as client:  # tool_protocol="auto"
            started = time.monotonic()
            with pytest.raises(ProviderTimeoutError):
                await client.chat(HI, [tool_definition], settings=ModelSettings(timeout=0.5))
    assert time.monotonic() - started < 3


def test_one_timer_bounds_every_read_expires_completes_and_passes_cancellation_on() -> None:
    virtual_clock.run(one_timer_bounds_every_read())  # exact times, whatever the machine's load


async def one_timer_bounds_every_read() -> None:
    from glassagent._providers.call import CallLimits

    loop = asyncio.get_running_loop()
    settings = ModelSettings(stall_timeout=1.0)
    limits = CallLimits.first(settings, "p")
    for _ in range(3):  # each read may take almost the stall timeout: the end moves on
        assert await limits.wait(asyncio.sleep(0.6, "read")) == "read"
    assert loop.time() == pytest.approx(1.8)
    with pytest.raises(ProviderTimeoutError, match=r"sent nothing for 1 s"):
        await limits.wait(asyncio.sleep(5))
    assert loop.time() == pytest.approx(2.8)  # one stall timeout after the last read
    task = asyncio.current_task()
    assert task is not None
    if hasattr(task, "cancelling"):  # Python 3.11+
        assert task.cancelling() == 0  # our own cancellation was taken back
    assert await limits.wait(asyncio.sleep(0, "done")) == "done"

    inner = CallLimits.first(ModelSettings(timeout=0.2, stall_timeout=5), "p")
    with pytest.raises(ProviderTimeoutError, match=r"within 0\.2 s"):  # a wait within a wait
        await inner.wait(inner.wait(asyncio.sleep(5)))
    assert loop.time() == pytest.approx(3.0)
    limits.release()

    async def cancelled_from_outside() -> None:
        await CallLimits.first(settings, "p").wait(asyncio.sleep(5))

    cancelled = asyncio.create_task(cancelled_from_outside())
    await asyncio.sleep(0.01)
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled


def test_a_cancellation_arriving_as_the_stall_timer_fires_is_not_a_timeout() -> None:
    virtual_clock.run(a_cancellation_arriving_as_the_stall_timer_fires())


async def a_cancellation_arriving_as_the_stall_timer_fires() -> None:
    from glassagent._providers.call import CallLimits

    loop = asyncio.get_running_loop()
    limits = CallLimits.first(ModelSettings(stall_timeout=0.2), "p")
    never: asyncio.Future[None] = loop.create_future()
    reading = asyncio.create_task(limits.wait(never))
    await asyncio.sleep(0)  # the read armed the shared timer
    waiting = limits._waiting
    assert waiting is not None
    loop.call_at(waiting.end, reading.cancel)  # an abort at the very moment it fires
    with pytest.raises(asyncio.CancelledError):
        await reading
