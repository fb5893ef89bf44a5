"""Tools cannot take the run or the host down: `BaseException`s, interrupts and hung threads."""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import os
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

import pytest

from glassagent import Agent, LLMResponse, ToolCall, ToolContext, tool
from glassagent._tools.execute import _call_async, _Workers
from glassagent.agent import AgentRun
from glassagent.errors import RunAborted, RunError
from glassagent.testing import FunctionClient, ScriptedClient


class CustomBaseException(BaseException):
    """Neither an `Exception` nor one of asyncio's."""


def answer_after(*calls: ToolCall, text: str = "") -> ScriptedClient:
    return ScriptedClient([LLMResponse(text, calls), "done"])


def make_tool(raiser: Callable[[], None], *, is_async: bool) -> Any:
    if is_async:

        async def explode() -> str:
            """Raises."""
            raiser()
            return "never"

    else:

        def explode() -> str:
            """Raises."""
            raiser()
            return "never"

    return tool(explode)


def _sys_exit() -> None:
    sys.exit(3)


def _generator_exit() -> None:
    raise GeneratorExit("closed")


def _custom() -> None:
    raise CustomBaseException("odd")


def _keyboard_interrupt() -> None:
    raise KeyboardInterrupt


RAISERS = {"SystemExit": _sys_exit, "GeneratorExit": _generator_exit}
RAISERS["CustomBaseException"] = _custom


@pytest.mark.parametrize("is_async", [True, False], ids=["async", "sync"])
@pytest.mark.parametrize("raised", list(RAISERS))
async def test_a_base_exception_from_a_tool_is_an_error_result_and_the_loop_keeps_running(
    raised: str, is_async: bool
) -> None:
    async def neighbour() -> str:
        await asyncio.sleep(0.05)
        return "still here"

    other = asyncio.create_task(neighbour())  # another run on the same loop, say
    explode = make_tool(RAISERS[raised], is_async=is_async)
    run = Agent(answer_after(ToolCall("c1", "explode", {})), [explode]).run("go")
    result = await asyncio.wait_for(run, 5)
    assert result.stop_reason == "end_turn"
    assert [e.type for e in result.events][-1] == "complete"
    [tool_message] = [m for m in result.new_messages if m.role == "tool"]
    assert tool_message.is_error
    assert tool_message.content.startswith(f"Error: tool 'explode' raised {raised}")
    assert await asyncio.wait_for(other, 5) == "still here"


def _main_loop_survives(coroutine_function: Callable[[], Any]) -> Any:
    """Run on a fresh loop; a `KeyboardInterrupt` escaping the loop fails the test."""
    try:
        return asyncio.run(coroutine_function())
    except KeyboardInterrupt:
        pytest.fail("the KeyboardInterrupt escaped the event loop")


@tool
async def lingering(ctx: ToolContext) -> str:
    """Runs until the run is aborted."""
    await asyncio.wait_for(ctx.abort_event.wait(), 5)
    await asyncio.sleep(30)  # ignores the abort: it gets cancelled after the grace
    return "never"


def interrupting_run(is_async: bool) -> AgentRun:
    explode = make_tool(_keyboard_interrupt, is_async=is_async)
    client = answer_after(
        ToolCall("c1", "lingering", {}), ToolCall("c2", "explode", {}), text="Working on it."
    )
    return Agent(client, [lingering, explode]).run("go")


def check_interrupted(run: AgentRun) -> None:
    result = run.result
    assert result is not None
    assert result.stop_reason == "aborted"
    types = [e.type for e in result.events]
    assert types[-1] == "aborted"
    assert types.count("aborted") == 1
    assert "KeyboardInterrupt" in result.events[-1].reason
    assert "'explode'" in result.events[-1].reason
    completes = {
        e.execution.call_id: e.execution
        for e in result.events
        if e.type == "function_execution_complete"
    }
    assert set(completes) == {"c1", "c2"}
    assert all(execution.is_error for execution in completes.values())
    assert "interrupted (KeyboardInterrupt)" in completes["c2"].result
    assert completes["c1"].result.startswith("Error: tool call aborted (interrupted")
    # The partial turn is kept: the answer that asked for tools and both results.
    assert [m.role for m in result.new_messages] == ["user", "assistant", "tool", "tool"]
    assert result.new_messages[1].content == "Working on it."


@pytest.mark.parametrize("is_async", [True, False], ids=["async", "sync"])
def test_a_keyboard_interrupt_from_a_tool_aborts_the_run_then_is_raised_again(
    is_async: bool,
) -> None:
    async def main() -> tuple[AgentRun, str]:
        beside = asyncio.create_task(asyncio.sleep(0.01, result="beside"))
        run = interrupting_run(is_async)
        with pytest.raises(KeyboardInterrupt):
            await run  # directly: raised in another task, it would stop the loop, as it should
        return run, await beside

    run, beside = _main_loop_survives(main)
    assert beside == "beside"
    check_interrupted(run)


def test_iterating_a_run_interrupted_by_a_tool_ends_with_aborted_then_raises() -> None:
    async def main() -> tuple[AgentRun, list[str]]:
        run = interrupting_run(is_async=True)
        seen: list[str] = []
        with pytest.raises(KeyboardInterrupt):  # noqa: PT012
            async for event in run:
                seen.append(event.type)
        return run, seen

    run, seen = _main_loop_survives(main)
    assert seen[-1] == "aborted"
    check_interrupted(run)


def test_a_keyboard_interrupt_from_the_model_client_aborts_then_is_raised_again() -> None:
    def interrupted(*_: object) -> LLMResponse:
        raise KeyboardInterrupt

    async def main() -> AgentRun:
        run = Agent(FunctionClient(interrupted)).run("go")
        with pytest.raises(KeyboardInterrupt):
            await run  # directly: raised in another task, it would stop the loop, as it should
        return run

    run = _main_loop_survives(main)
    assert run.result is not None
    assert run.result.stop_reason == "aborted"
    assert [e.type for e in run.result.events] == ["llm_request", "aborted"]
    assert "KeyboardInterrupt" in run.result.events[-1].reason


async def test_a_system_exit_from_the_model_client_fails_the_run_with_a_typed_error() -> None:
    def exits(*_: object) -> LLMResponse:
        sys.exit("bye")

    run = Agent(FunctionClient(exits)).run("go")
    with pytest.raises(RunError, match="SystemExit: bye") as info:
        await asyncio.wait_for(run, 5)
    assert isinstance(info.value.__cause__, SystemExit)
    assert info.value.result is not None
    assert info.value.result.stop_reason == "error"
    assert [e.type for e in info.value.result.events] == ["llm_request", "error"]


async def test_an_abort_before_the_driver_first_ran_still_ends_the_run() -> None:
    run = Agent(ScriptedClient(["never asked"])).run("question")
    task = asyncio.ensure_future(run)
    await asyncio.sleep(0)  # the awaiting task started the driver, which has not run yet
    run.abort("right away")
    with pytest.raises(RunAborted) as info:
        await asyncio.wait_for(task, 5)
    assert info.value.result is not None
    assert [e.type for e in info.value.result.events] == ["aborted"]


async def test_every_call_cut_short_by_an_abort_gets_its_complete_event() -> None:
    @tool
    async def stubborn() -> str:
        """Ignores the abort."""
        await asyncio.sleep(30)
        return "never"

    @tool(ui_info={"icon": "hourglass"})
    async def reporter(ctx: ToolContext) -> str:
        """Reports, then ignores the abort."""
        await ctx.progress("started")
        await asyncio.sleep(30)
        return "never"

    client = answer_after(ToolCall("c1", "stubborn", {}), ToolCall("c2", "reporter", {}))
    run = Agent(client, [stubborn, reporter]).run("go")
    async for event in run:
        if event.type == "tool_progress":
            run.abort("stop")
    assert run.result is not None
    events = run.result.events
    started = [e.call_id for e in events if e.type == "function_call_start"]
    completes = [e for e in events if e.type == "function_execution_complete"]
    assert sorted(e.execution.call_id for e in completes) == sorted(started) == ["c1", "c2"]
    for complete in completes:
        assert complete.execution.is_error
        assert complete.execution.result == "Error: tool call aborted (stop)."
        assert complete.seq < events[-1].seq
    assert completes[1].execution.ui_info == {"icon": "hourglass"}
    assert events[-1].type == "aborted"


async def test_sync_tools_see_the_callers_context_variables() -> None:
    user: contextvars.ContextVar[str] = contextvars.ContextVar("user")
    user.set("ada")

    @tool
    def whoami() -> str:
        """Who is asking."""
        return user.get()

    result = await Agent(answer_after(ToolCall("c1", "whoami", {})), [whoami]).run("go")
    assert result.new_messages[2].content == "ada"


def test_a_sync_tool_reporting_after_its_loop_closed_is_dropped_quietly() -> None:
    release = threading.Event()
    outcome: list[str] = []

    @tool(timeout=0.05)
    def late(ctx: ToolContext) -> str:
        """Reports long after its timeout."""
        release.wait(5)
        try:
            ctx.progress_nowait("still working")
            outcome.append("dropped")
        except Exception as exc:  # pragma: no cover - the regression
            outcome.append(repr(exc))
        return "late"

    async def main() -> Any:
        return await Agent(answer_after(ToolCall("c1", "late", {})), [late]).run("go")

    result = asyncio.run(main())
    assert result.new_messages[2].content == "Error: tool 'late' timed out after 0.05 s."
    release.set()
    deadline = time.monotonic() + 5
    while not outcome and time.monotonic() < deadline:
        time.sleep(0.01)
    assert outcome == ["dropped"]
    time.sleep(0.05)  # let the tool's thread return into the closed loop, harmlessly


HUNG_TOOL_SCRIPT = textwrap.dedent(
    """
    import asyncio, time
    from glassagent import Agent, LLMResponse, ToolCall, tool
    from glassagent.testing import ScriptedClient

    @tool(timeout=0.2)
    def hangs() -> str:
        \"\"\"Sleeps far past its timeout.\"\"\"
        time.sleep(60)
        return "late"

    async def main():
        client = ScriptedClient([LLMResponse("", [ToolCall("c1", "hangs", {})]), "gave up"])
        return await Agent(client, [hangs]).run("go")

    started = time.monotonic()
    result = asyncio.run(main())
    print(result.text, result.new_messages[2].content, round(time.monotonic() - started))
    """
)


def test_a_sync_tool_hung_past_its_timeout_does_not_keep_the_program_waiting() -> None:
    started = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-c", HUNG_TOOL_SCRIPT],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert time.monotonic() - started < 10  # the tool sleeps 60 s
    assert out.stdout.startswith("gave up Error: tool 'hangs' timed out after 0.2 s.")


async def test_a_tool_call_closed_while_suspended_closes_instead_of_returning() -> None:
    async def waits() -> None:
        await asyncio.sleep(10)

    coroutine = _call_async(waits)
    coroutine.send(None)  # suspended inside the tool
    coroutine.close()  # as at garbage collection: "coroutine ignored GeneratorExit" if caught
    assert inspect.getcoroutinestate(coroutine) == inspect.CORO_CLOSED


async def test_an_exception_that_cannot_be_printed_is_still_an_error_result() -> None:
    class Unprintable(Exception):
        def __str__(self) -> str:
            raise ValueError("no")

    @tool
    def broken() -> str:
        """Raises an exception whose message fails."""
        raise Unprintable

    result = await Agent(answer_after(ToolCall("c1", "broken", {})), [broken]).run("go")
    assert result.new_messages[2].content == (
        "Error: tool 'broken' raised Unprintable: <unprintable>"
    )


async def test_a_sync_tool_raising_stop_iteration_is_an_error_result() -> None:
    @tool
    def first(items: list[int]) -> int:
        """The first item."""
        return next(iter(items))

    run = Agent(answer_after(ToolCall("c1", "first", {"items": []})), [first]).run("go")
    result = await asyncio.wait_for(run, 5)  # it used to hang forever
    assert result.text == "done"
    assert result.new_messages[2].is_error
    assert "StopIteration" in result.new_messages[2].content


async def test_a_tool_raising_cancelled_error_is_an_error_result() -> None:
    @tool
    async def waits() -> str:
        """Awaits something that gets cancelled."""
        raise asyncio.CancelledError

    result = await Agent(answer_after(ToolCall("c1", "waits", {})), [waits]).run("go")
    assert result.stop_reason == "end_turn"
    assert result.new_messages[2].content == "Error: tool 'waits' was cancelled from within."
    assert [e.type for e in result.events].count("function_execution_complete") == 1


async def test_a_timed_out_sync_tool_reports_no_progress_after_its_call_ended() -> None:
    release = threading.Event()

    @tool(timeout=0.05)
    def slow(ctx: ToolContext) -> str:
        """Keeps reporting after its timeout."""
        for step in range(3):
            ctx.progress_nowait(f"step {step}")
            release.wait(0.05)
        return "late"

    client = ScriptedClient(
        [LLMResponse("", [ToolCall("c1", "slow", {})]), "done"], chunk_delay=0.05
    )
    result = await Agent(client, [slow]).run("go")
    await asyncio.sleep(0.2)  # let the worker thread finish its reports
    types = [e.type for e in result.events]
    complete = types.index("function_execution_complete")
    assert "tool_progress" not in types[complete:]
    assert types[-1] == "complete"
    release.set()


async def test_a_hung_sync_tool_delays_no_other_call() -> None:
    release = threading.Event()

    def hang() -> str:
        """Waits until released."""
        release.wait(30)
        return "late"

    def where() -> str:
        """Says which thread runs it."""
        return threading.current_thread().name

    calls = [ToolCall("h", "hang", {})] + [ToolCall(f"w{i}", "where", {}) for i in range(3)]
    script = [LLMResponse("", calls[:2]), LLMResponse("", calls[2:3]), LLMResponse("", calls[3:])]
    client = ScriptedClient([*script, "done"])
    try:
        started = time.perf_counter()
        result = await Agent(client, [tool(timeout=0.2)(hang), tool(where)]).run("go")
        assert time.perf_counter() - started < 10
    finally:
        release.set()
    done = [e for e in result.events if e.type == "function_execution_complete"]
    outputs = [e.execution.result for e in done]
    assert outputs.count("glassagent-tool-where") == 3
    assert any("timed out" in o for o in outputs)


def test_worker_threads_are_reused_one_per_running_job() -> None:
    workers = _Workers()
    ran: list[int] = []
    for _ in range(5):  # one after another: the same thread each time
        done = threading.Event()
        workers.submit(lambda done=done: (ran.append(threading.get_ident()), done.set()))
        assert done.wait(10)
        time.sleep(0.01)  # let the thread count itself idle again
    assert len(set(ran)) == 1
    release, other = threading.Event(), threading.Event()
    workers.submit(lambda: release.wait(30))  # holds the idle thread
    workers.submit(other.set)  # so this one gets a new thread and runs at once
    try:
        assert other.wait(10)
    finally:
        release.set()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_runs_sync_tools_on_threads_of_its_own() -> None:
    def where() -> str:
        """Says hello."""
        return "hello"

    def one_run() -> str:
        client = answer_after(ToolCall("c1", "where", {}))
        return asyncio.run(Agent(client, [tool(where)]).run("go")).text

    assert one_run() == "done"
    time.sleep(0.1)  # the parent's worker thread has counted itself idle
    with warnings.catch_warnings():  # Python 3.12+ warns of forking a threaded process
        warnings.simplefilter("ignore", DeprecationWarning)
        child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through its exit status
        code = 1
        try:
            code = 0 if one_run() == "done" else 2
        finally:
            os._exit(code)
    deadline = time.monotonic() + 30
    while (status := os.waitpid(child, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    if status[0] == 0:
        os.kill(child, 9)
        os.waitpid(child, 0)
    assert status[0] == child
    assert os.waitstatus_to_exitcode(status[1]) == 0
