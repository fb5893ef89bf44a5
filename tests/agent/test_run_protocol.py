"""An `AgentRun` is a coroutine: ``asyncio.run`` and tasks take it; one never used warns."""

from __future__ import annotations

import asyncio
import gc
import warnings

import pytest

from glassagent import Agent, LLMResponse, ToolCall, tool
from glassagent.errors import RunAborted
from glassagent.testing import ScriptedClient


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def adding_agent() -> Agent:
    return Agent(
        ScriptedClient([LLMResponse("", [ToolCall("c1", "add", {"a": 2, "b": 3})]), "5"]), [add]
    )


def test_asyncio_run_takes_a_run_directly() -> None:
    result = asyncio.run(adding_agent().run("2+3?"))
    assert result.text == "5"
    assert result.new_messages[2].content == "5"


async def test_create_task_takes_a_run_and_awaiting_it_again_gives_the_same_result() -> None:
    run = adding_agent().run("2+3?")
    result = await asyncio.create_task(run)
    assert result.text == "5"
    assert await run is result


def drop_an_unused_run() -> None:
    adding_agent().run("2+3?")  # dropped at once: nothing ran
    gc.collect()


def test_a_run_never_awaited_or_iterated_warns() -> None:
    pattern = r"AgentRun\(run_id=.*\) was never awaited or iterated"
    with pytest.warns(RuntimeWarning, match=pattern):
        drop_an_unused_run()


def test_a_closed_or_aborted_run_does_not_warn() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        adding_agent().run("2+3?").close()
        adding_agent().run("2+3?").abort("not needed")
        gc.collect()
    assert [str(w.message) for w in caught] == []


async def test_awaiting_a_closed_run_aborts_it_at_once() -> None:
    client = ScriptedClient(["never asked"])
    run = Agent(client).run("question")
    run.close()
    with pytest.raises(RunAborted, match="the run was closed") as info:
        await run
    assert info.value.result is not None
    assert [e.type for e in info.value.result.events] == ["aborted"]
    assert client.requests == []


async def test_closing_a_finished_run_changes_nothing() -> None:
    run = adding_agent().run("2+3?")
    result = await run
    run.close()
    assert run.result is result
    assert result.stop_reason == "end_turn"


async def test_closing_a_run_suspended_in_its_coroutine_aborts_it() -> None:
    run = Agent(ScriptedClient(["a slow answer"], chunk_delay=0.05)).run("question")
    run.send(None)  # as a task would: the run starts and suspends
    run.close()
    for _ in range(500):
        if run.result is not None:
            break
        await asyncio.sleep(0.01)
    assert run.result is not None
    assert run.result.stop_reason == "aborted"
    assert run.result.events[-1].reason == "the run was closed"
