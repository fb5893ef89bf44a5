"""Human approval of tool calls: inline answers, denials, policies, deferral and resuming."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from glassagent import Agent, AgentRun, LLMResponse, Message, Tool, ToolCall, tool
from glassagent.agent import RunResult
from glassagent.errors import RunAborted, RunTimeoutError, UserError
from glassagent.events import (
    ApprovalAnsweredEvent,
    ApprovalRequiredEvent,
    AwaitingApprovalEvent,
    Event,
    FunctionExecutionCompleteEvent,
    ToolExecution,
    parse_event,
)
from glassagent.history import History
from glassagent.testing import ScriptedClient

SRC = Path(__file__).resolve().parents[2] / "src"
ran: list[str] = []


@pytest.fixture(autouse=True)
def _forget_calls() -> None:
    ran.clear()


@tool(requires_approval=True)
def delete(path: str) -> str:
    """Delete a file.

    Args:
        path: The file.
    """
    ran.append(f"delete {path}")
    return f"deleted {path}"


@tool
def look(path: str) -> str:
    """Look at a file.

    Args:
        path: The file.
    """
    ran.append(f"look {path}")
    return f"{path} looks fine"


def calls(*made: tuple[str, str, dict[str, Any]]) -> LLMResponse:
    return LLMResponse(tool_calls=[ToolCall(i, name, args) for i, name, args in made])


def executions(events: tuple[Event, ...] | list[Event]) -> dict[str, ToolExecution]:
    return {
        e.execution.call_id: e.execution
        for e in events
        if isinstance(e, FunctionExecutionCompleteEvent)
    }


def types(events: tuple[Event, ...] | list[Event]) -> list[str]:
    return [e.type for e in events]


def round_trips(events: tuple[Event, ...]) -> None:
    for event in events:
        assert parse_event(json.loads(json.dumps(event.to_dict()))) == event


async def wait_for_pending(run: AgentRun, count: int = 1) -> tuple[ToolCall, ...]:
    for _ in range(10_000):
        if len(run.pending_approvals) >= count:
            return run.pending_approvals
        await asyncio.sleep(0.001)
    raise AssertionError("no call came to wait for approval")


# ---- inline approval ----------------------------------------------------------------------


async def test_an_approved_call_runs_only_after_the_approval() -> None:
    client = ScriptedClient([calls(("c1", "delete", {"path": "a.txt"})), "Deleted."])
    run = Agent(client, [delete]).run("Delete a.txt")
    seen: list[Event] = []
    async for event in run:
        seen.append(event)
        if isinstance(event, ApprovalRequiredEvent):
            assert ran == []  # nothing ran before the answer
            assert event.call == ToolCall("c1", "delete", {"path": "a.txt"})
            assert event.tool_name == "delete"
            assert run.pending_approvals == (event.call,)
            assert run.approve(event.call.id)
    assert ran == ["delete a.txt"]
    assert types(seen)[2:9] == [
        "function_call_start",
        "approval_required",
        "function_execution_start",
        "approval_answered",
        "function_execution_complete",
        "sending_function_response",
        "llm_request",
    ]
    answered = next(e for e in seen if isinstance(e, ApprovalAnsweredEvent))
    assert (answered.call_id, answered.approved, answered.reason) == ("c1", True, None)
    assert executions(seen)["c1"].result == "deleted a.txt"
    assert run.result is not None
    assert run.result.text == "Deleted."
    assert run.pending_approvals == ()
    round_trips(run.result.events)


async def test_a_declined_call_never_runs_and_the_model_reads_why() -> None:
    client = ScriptedClient([calls(("c1", "delete", {"path": "a.txt"})), "Understood."])
    run = Agent(client, [delete]).run("Delete a.txt")
    async for event in run:
        if isinstance(event, ApprovalRequiredEvent):
            assert run.deny(event.call.id, "keep it, it is the only copy")
    assert ran == []
    assert run.result is not None
    execution = executions(run.result.events)["c1"]
    assert execution.is_error
    assert execution.ui_info == {"declined": True, "reason": "keep it, it is the only copy"}
    answered = next(e for e in run.result.events if isinstance(e, ApprovalAnsweredEvent))
    assert (answered.approved, answered.reason) == (False, "keep it, it is the only copy")
    sent = client.requests[1].messages[-1]
    assert (sent.role, sent.tool_call_id, sent.is_error) == ("tool", "c1", True)
    assert sent.content.startswith("Error: the user declined this delete call")
    assert "Their reason: keep it, it is the only copy." in sent.content
    assert run.result.text == "Understood."


async def test_another_task_answers_a_run_that_is_only_awaited() -> None:
    client = ScriptedClient([calls(("c1", "delete", {"path": "a.txt"})), "Done."])
    run = Agent(client, [delete]).run("Delete a.txt")
    task = asyncio.create_task(run)

    async def person() -> None:
        (call,) = await wait_for_pending(run)
        assert run.approve(call.id)

    await asyncio.gather(task, person())
    assert task.result().text == "Done."
    assert ran == ["delete a.txt"]


async def test_answers_that_do_not_apply_are_not_taken() -> None:
    client = ScriptedClient([calls(("c1", "delete", {"path": "a.txt"})), "Done."])
    run = Agent(client, [delete]).run("Delete a.txt")
    assert not run.approve("c1")  # not waiting yet
    async for event in run:
        if isinstance(event, ApprovalRequiredEvent):
            assert not run.approve("no-such-call")
            assert run.deny("c1")
            assert not run.approve("c1")  # the first answer counts
    assert ran == []
    assert not run.deny("c1")  # the run has ended


async def test_parallel_calls_run_at_once_and_the_guarded_one_waits() -> None:
    answer = calls(
        ("c1", "look", {"path": "a"}),
        ("c2", "delete", {"path": "b"}),
        ("c3", "look", {"path": "c"}),
    )
    client = ScriptedClient([answer, "All done."])
    run = Agent(client, [look, delete]).run("Tidy up")
    finished: list[str] = []
    async for event in run:
        if isinstance(event, FunctionExecutionCompleteEvent):
            finished.append(event.execution.call_id)
            if sorted(finished) == ["c1", "c3"]:  # the free calls did not wait
                assert ran == ["look a", "look c"]
                assert [c.id for c in run.pending_approvals] == ["c2"]
                assert run.approve("c2")
    assert finished == ["c1", "c3", "c2"]
    results = [m.tool_call_id for m in client.requests[1].messages if m.role == "tool"]
    assert results == ["c1", "c2", "c3"]  # back to the model in call order


async def test_calls_that_would_fail_are_not_asked_about() -> None:
    answer = calls(("c1", "delete", {"file": "a"}), ("c2", "remove", {"path": "a"}))
    client = ScriptedClient([answer, "Sorry."])
    result = await Agent(client, [delete], requires_approval=True).run("Delete a")
    assert "approval_required" not in types(result.events)
    done = executions(result.events)
    assert "invalid arguments" in done["c1"].result
    assert "unknown tool" in done["c2"].result


# ---- abort and time limits ------------------------------------------------------------------


async def test_an_abort_while_waiting_ends_the_run_and_the_call() -> None:
    client = ScriptedClient([calls(("c1", "delete", {"path": "a.txt"})), "never"])
    run = Agent(client, [delete]).run("Delete a.txt")
    task = asyncio.create_task(run)
    await wait_for_pending(run)
    run.abort("the user left")
    with pytest.raises(RunAborted) as caught:
        await task
    result = caught.value.result  # type: ignore[attr-defined]
    assert result.stop_reason == "aborted"
    assert ran == []
    execution = executions(result.events)["c1"]
    assert execution.is_error
    assert "aborted (the user left)" in execution.result
    assert types(result.events)[-1] == "aborted"
    assert len(client.requests) == 1


async def test_the_run_timeout_covers_the_wait() -> None:
    client = ScriptedClient([calls(("c1", "delete", {"path": "a.txt"})), "never"])
    agent = Agent(client, [delete], run_timeout=0.3)
    with pytest.raises(RunTimeoutError) as caught:
        await agent.run("Delete a.txt")
    assert ran == []
    assert caught.value.result.stop_reason == "error"  # type: ignore[attr-defined]


async def test_the_wait_for_approval_is_not_part_of_the_tool_timeout() -> None:
    @tool(requires_approval=True, timeout=0.2)
    async def deploy(ctx_free: str) -> str:
        """Deploy.

        Args:
            ctx_free: What to deploy.
        """
        return f"deployed {ctx_free}"

    client = ScriptedClient([calls(("c1", "deploy", {"ctx_free": "v2"})), "Deployed."])
    run = Agent(client, [deploy], tool_timeout=0.2).run("Deploy v2")
    async for event in run:
        if isinstance(event, ApprovalRequiredEvent):
            await asyncio.sleep(0.6)  # a person thinking it over, longer than the timeouts
            run.approve(event.call.id)
    assert run.result is not None
    execution = executions(run.result.events)["c1"]
    assert (execution.is_error, execution.result) == (False, "deployed v2")
    assert execution.duration_ms < 600  # the tool's own time, not the wait


# ---- policies and approvers ----------------------------------------------------------------


async def test_an_agent_policy_decides_call_by_call() -> None:
    asked: list[ToolCall] = []

    async def outside_tmp(call: ToolCall) -> bool:
        asked.append(call)
        await asyncio.sleep(0)
        return not str(call.input.get("path", "")).startswith("/tmp/")

    answer = calls(("c1", "look", {"path": "/tmp/x"}), ("c2", "look", {"path": "/etc/passwd"}))
    client = ScriptedClient([answer, "Done."])
    run = Agent(client, [look], requires_approval=outside_tmp).run("Look")
    required: list[str] = []
    async for event in run:
        if isinstance(event, ApprovalRequiredEvent):
            required.append(event.call.id)
            run.deny(event.call.id)
    assert [c.id for c in asked] == ["c1", "c2"]
    assert required == ["c2"]
    assert ran == ["look /tmp/x"]
    assert run.result is not None
    assert executions(run.result.events)["c2"].ui_info == {"declined": True}


async def test_a_tool_rule_cannot_be_waived_by_the_agent_policy() -> None:
    client = ScriptedClient([calls(("c1", "delete", {"path": "a"})), "Done."])
    run = Agent(client, [delete], requires_approval=lambda call: False).run("Delete a")
    async for event in run:
        if isinstance(event, ApprovalRequiredEvent):
            run.approve(event.call.id)
    assert run.result is not None
    assert "approval_required" in types(run.result.events)


async def test_a_policy_that_raises_stops_the_call() -> None:
    def broken(call: ToolCall) -> bool:
        raise LookupError("no rules loaded")

    client = ScriptedClient([calls(("c1", "look", {"path": "a"})), "Done."])
    result = await Agent(client, [look], requires_approval=broken).run("Look")
    assert ran == []
    execution = executions(result.events)["c1"]
    assert execution.is_error
    assert "LookupError: no rules loaded" in execution.result
    assert "approval_required" not in types(result.events)


async def test_a_tool_approver_answers_and_a_string_declines_with_a_reason() -> None:
    async def reviewer(call: ToolCall) -> bool | str:
        await asyncio.sleep(0)
        return True if call.input["path"] == "tmp.log" else "only logs may go"

    guarded = Tool(delete.function, name="delete", requires_approval=True, approver=reviewer)
    answer = calls(("c1", "delete", {"path": "tmp.log"}), ("c2", "delete", {"path": "db"}))
    client = ScriptedClient([answer, "Done."])
    result = await Agent(client, [guarded]).run("Clean")
    assert ran == ["delete tmp.log"]
    answered = {e.call_id: e for e in result.events if isinstance(e, ApprovalAnsweredEvent)}
    assert answered["c1"].approved
    assert (answered["c2"].approved, answered["c2"].reason) == (False, "only logs may go")


async def test_an_approver_that_raises_declines_the_call() -> None:
    def no_terminal(call: ToolCall) -> bool:
        raise OSError("no terminal")

    guarded = Tool(delete.function, name="delete", requires_approval=True, approver=no_terminal)
    client = ScriptedClient([calls(("c1", "delete", {"path": "a"})), "Done."])
    result = await Agent(client, [guarded]).run("Delete a")
    assert ran == []
    execution = executions(result.events)["c1"]
    assert execution.is_error
    assert "asking for approval failed: OSError: no terminal" in execution.result


def test_approval_options_are_checked() -> None:
    with pytest.raises(UserError, match="requires_approval"):
        Tool(delete.function, requires_approval="yes")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="approver"):
        Tool(delete.function, approver=True)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="requires_approval"):
        Agent(ScriptedClient([]), requires_approval=1)  # type: ignore[arg-type]
    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    made = Tool.from_schema("rm", "Remove.", schema, delete.function, requires_approval=True)
    assert made.requires_approval is True
    assert made.approver is None


# ---- deferred approval ---------------------------------------------------------------------


async def deferred_run(history: History) -> RunResult:
    answer = calls(
        ("c1", "look", {"path": "a"}),
        ("c2", "delete", {"path": "b"}),
        ("c3", "delete", {"path": "c"}),
    )
    client = ScriptedClient([answer, "never asked"])
    agent = Agent(client, [look, delete], system="Tidy.")
    result = await agent.run(
        "Tidy up", history=history, append_to_history=True, defer_approval=True
    )
    assert len(client.requests) == 1
    return result


async def test_a_deferred_run_ends_awaiting_approval_with_the_pending_calls() -> None:
    history = History()
    result = await deferred_run(history)
    assert result.stop_reason == "awaiting_approval"
    assert [c.id for c in result.pending_approvals] == ["c2", "c3"]
    assert ran == ["look a"]  # the free call ran
    last = result.events[-1]
    assert isinstance(last, AwaitingApprovalEvent)
    assert last.pending == result.pending_approvals
    assert types(result.events).count("approval_required") == 2
    assert "sending_function_response" not in types(result.events)
    assert [m.role for m in history.to_messages()] == ["user", "assistant", "tool"]
    round_trips(result.events)


async def test_a_deferred_run_resumes_from_its_history_after_a_json_round_trip() -> None:
    history = History()
    await deferred_run(history)
    saved = history.to_json()
    ran.clear()

    loaded = History.from_json(saved)  # a fresh object graph: nothing of the first run
    client = ScriptedClient(["Deleted b; kept c."])
    agent = Agent(client, [look, delete], system="Tidy.")
    result = await agent.resume(
        loaded, {"c2": True, "c3": "c is still needed"}, append_to_history=True
    )
    assert result.stop_reason == "end_turn"
    assert result.text == "Deleted b; kept c."
    assert ran == ["delete b"]
    assert types(result.events)[:4] == [
        "function_call_start",
        "function_call_start",
        "function_execution_start",
        "approval_answered",
    ]
    assert "approval_required" not in types(result.events)
    sent = client.requests[0].messages
    assert [m.tool_call_id for m in sent if m.role == "tool"] == ["c1", "c2", "c3"]
    assert "Their reason: c is still needed." in sent[-1].content
    assert [m.role for m in loaded.to_messages()] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "tool",
        "assistant",
    ]
    assert [m.role for m in result.new_messages] == ["tool", "tool", "assistant"]
    round_trips(result.events)


RESUME_SCRIPT = """
import asyncio, json, sys
from glassagent import Agent, tool
from glassagent.history import History
from glassagent.testing import ScriptedClient

@tool(requires_approval=True)
def delete(path: str) -> str:
    '''Delete a file.'''
    return f"deleted {path}"

@tool
def look(path: str) -> str:
    '''Look at a file.'''
    return f"{path} looks fine"

async def main() -> None:
    history = History.load(sys.argv[1])
    agent = Agent(ScriptedClient(["Deleted both."]), [look, delete], system="Tidy.")
    result = await agent.resume(history, {"c2": True, "c3": True}, append_to_history=True)
    history.save(sys.argv[1])
    print(json.dumps([event.to_dict() for event in result.events]))

asyncio.run(main())
"""


async def test_a_deferred_run_resumes_in_another_process(tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    history = History()
    first = await deferred_run(history)
    history.save(path)
    script = tmp_path / "resume.py"
    script.write_text(textwrap.dedent(RESUME_SCRIPT))
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, str(script), str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    events = [parse_event(item) for item in json.loads(done.stdout)]
    assert events[-1].type == "complete"
    assert executions(events)["c2"].result == "deleted b"
    assert executions(events)["c3"].result == "deleted c"
    again = History.load(path)
    thread = again.to_messages()
    assert thread[-1].content == "Deleted both."
    assert [m.content for m in thread[2:5]] == ["a looks fine", "deleted b", "deleted c"]
    assert first.pending_approvals[0].id == "c2"


async def test_unanswered_calls_wait_again_when_resumed() -> None:
    result = await deferred_run(History())
    client = ScriptedClient(["Done."])
    agent = Agent(client, [look, delete])
    again = await agent.resume(result, {"c2": True}, defer_approval=True)
    assert again.stop_reason == "awaiting_approval"
    assert [c.id for c in again.pending_approvals] == ["c3"]
    assert client.requests == []
    run = agent.resume(again.all_messages)
    async for event in run:
        if isinstance(event, ApprovalRequiredEvent):
            assert event.call.id == "c3"
            run.approve("c3")
    assert run.result is not None
    assert run.result.text == "Done."
    assert ran == ["look a", "delete b", "delete c"]


async def test_resume_refuses_what_it_cannot_continue() -> None:
    agent = Agent(ScriptedClient([]), [look, delete])
    finished = [Message(role="user", content="hi"), Message(role="assistant", content="hello")]
    with pytest.raises(UserError, match="Nothing to resume"):
        agent.resume(finished)
    result = await deferred_run(History())
    with pytest.raises(UserError, match="No call 'c9' awaits approval"):
        agent.resume(result, {"c9": True})
    with pytest.raises(UserError, match="True, False or a reason"):
        agent.resume(result, {"c2": 1})  # type: ignore[dict-item]
    with pytest.raises(UserError, match="History"):
        agent.resume(result, {"c2": True}, append_to_history=True)


def test_a_synchronous_run_can_defer() -> None:
    client = ScriptedClient([calls(("c1", "delete", {"path": "a"})), "unused"])
    result = Agent(client, [delete]).run_sync("Delete a", defer_approval=True)
    assert result.stop_reason == "awaiting_approval"
    assert ran == []
