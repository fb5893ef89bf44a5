"""``Agent(on_event=...)``: every event of every run, also of runs nobody iterates."""

from __future__ import annotations

import asyncio
import logging

import pytest

from glassagent import Agent, LLMResponse, ToolCall
from glassagent.errors import ConfigurationError, UserError
from glassagent.events import Event
from glassagent.server import InvokeRequest, create_app, invoke
from glassagent.testing import ScriptedClient
from tests.support.server import INVOKE, http, sse_events


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def adding_client() -> ScriptedClient:
    return ScriptedClient(
        [LLMResponse(tool_calls=[ToolCall("c1", "add", {"a": 17, "b": 25})]), "It is 42."]
    )


def test_a_sync_hook_sees_every_event_of_run_sync_in_order() -> None:
    seen: list[Event] = []
    result = Agent(adding_client(), [add], on_event=seen.append).run_sync("17 + 25?")
    assert result.text == "It is 42."
    assert seen == list(result.events)
    assert all(a is b for a, b in zip(seen, result.events, strict=True))  # the events themselves


async def test_an_async_hook_is_awaited_in_order_before_the_run_ends() -> None:
    seen: list[tuple[str, int]] = []

    async def slow(event: Event) -> None:
        await asyncio.sleep(0.01 if event.seq % 2 else 0)  # later events must still wait
        seen.append((event.type, event.seq))

    result = await Agent(adding_client(), [add], on_event=slow).run("17 + 25?")
    assert seen == [(e.type, e.seq) for e in result.events]


def test_an_async_hook_with_run_sync_has_seen_everything_when_it_returns() -> None:
    seen: list[str] = []

    async def hook(event: Event) -> None:
        await asyncio.sleep(0)
        seen.append(event.type)

    result = Agent(adding_client(), [add], on_event=hook).run_sync("17 + 25?")
    assert seen == [e.type for e in result.events]
    assert seen[-1] == "complete"


async def test_a_stream_ends_only_after_an_async_hook_has_seen_the_last_event() -> None:
    seen: list[str] = []

    async def hook(event: Event) -> None:
        await asyncio.sleep(0.01)
        seen.append(event.type)

    streamed = [e.type async for e in Agent(adding_client(), [add], on_event=hook).run("?")]
    assert seen == streamed


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_a_failing_hook_is_logged_once_and_the_run_goes_on(
    asynchronous: bool, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[str] = []

    def broken(event: Event) -> None:
        calls.append(event.type)
        raise RuntimeError("hook bug")

    async def broken_async(event: Event) -> None:
        broken(event)

    agent = Agent(adding_client(), [add], on_event=broken_async if asynchronous else broken)
    with caplog.at_level(logging.DEBUG, logger="glassagent"):
        result = await agent.run("17 + 25?")
    assert result.text == "It is 42."
    assert result.stop_reason == "end_turn"
    assert calls == [e.type for e in result.events]  # called for every event all the same
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "on_event hook failed on event 0 (llm_request)" in warnings[0].getMessage()
    assert warnings[0].exc_info is not None
    assert sum(r.levelno == logging.DEBUG and "hook failed" in r.getMessage()
               for r in caplog.records) == len(calls) - 1  # fmt: skip


async def test_a_hook_sees_the_events_of_an_aborted_run() -> None:
    seen: list[str] = []
    started = asyncio.Event()

    async def slow_tool() -> str:
        """Wait."""
        started.set()
        await asyncio.sleep(30)
        return "never"

    client = ScriptedClient([LLMResponse(tool_calls=[ToolCall("c1", "slow_tool", {})]), "x"])
    run = Agent(client, [slow_tool], on_event=lambda e: seen.append(e.type)).run("go")
    task = asyncio.ensure_future(run)
    await asyncio.wait_for(started.wait(), 10)
    run.abort("enough")
    with pytest.raises(Exception, match="enough"):
        await task
    assert seen[-1] == "aborted"


def test_on_event_must_be_callable() -> None:
    with pytest.raises(UserError, match="on_event"):
        Agent(adding_client(), on_event="print")  # type: ignore[arg-type]


async def test_the_invoke_server_hands_every_event_of_its_runs_to_the_hook() -> None:
    seen: list[Event] = []

    async def hook(event: Event) -> None:
        seen.append(event)

    app = create_app(model=adding_client(), tools=[add], on_event=hook)
    async with http(app) as api:
        plain = await api.post(INVOKE, json={"message": "17 + 25?"})
        assert plain.status_code == 200
        first = [e.type for e in seen]
        streamed = await api.post(INVOKE, json={"message": "again", "stream": True})
    assert first[0] == "llm_request"
    assert first[-1] == "complete"
    runs = {e.run_id for e in seen}
    assert len(runs) == 2
    second = [e.to_dict() for e in seen if e.run_id != seen[0].run_id]
    sent = [e for e in sse_events(streamed.text) if e.get("run_id") == second[0]["run_id"]]
    assert [e["seq"] for e in sent] == [e["seq"] for e in second]


async def test_invoke_takes_the_hook_too() -> None:
    seen: list[str] = []
    result = await invoke(
        InvokeRequest.from_json('{"message": "17 + 25?"}'),
        clients=adding_client(),
        tools=[add],
        on_event=lambda e: seen.append(e.type),
    )
    assert result.status == "completed"
    assert seen[0] == "llm_request"
    assert seen[-1] == "complete"


def test_create_app_refuses_a_hook_that_is_not_callable() -> None:
    with pytest.raises(ConfigurationError, match="on_event"):
        create_app(model=adding_client(), on_event=42)  # type: ignore[arg-type]
