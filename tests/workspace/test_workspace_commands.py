"""execute_command with real subprocesses, and the confirm hook, through real agent runs."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import time
from pathlib import Path

import pytest

from glassagent import Agent, LLMResponse, ToolCall
from glassagent.events import (
    ApprovalAnsweredEvent,
    ApprovalRequiredEvent,
    FunctionExecutionCompleteEvent,
    ToolProgressEvent,
)
from glassagent.testing import ScriptedClient
from glassagent.workspace import SandboxMode, Workspace
from tests.support.workspace import call, context, executions, run_calls, run_one, tools

SPAWNS_A_CHILD = "sh -c 'sleep 100 & echo $!; wait'"
# The tests that watch a command's processes by their pid run it without the sandbox: in it,
# a pid the command prints is one of its own PID namespace (tests/workspace/test_sandbox.py watches
# sandboxed commands another way).
OFF = "off"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie left for a container's init to reap counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


async def gone(pid: int, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


def first_pid(text: str) -> int:
    found = re.search(r"^(\d+)$", text, re.MULTILINE)
    assert found, text
    return int(found.group(1))


# ---- the tool ---------------------------------------------------------------------------


async def test_execute_command_is_absent_unless_commands_are_allowed(root: Path) -> None:
    names = ["list_files", "read_file", "write_file", "edit_file"]
    assert [t.name for t in Workspace(root).tools] == names
    allowed = Workspace(root, allow_commands=True)
    assert [t.name for t in allowed.tools] == [*names, "execute_command"]
    (root / "x").write_text("")
    outcome = await run_one(Workspace(root), "execute_command", command="rm x")
    assert outcome.is_error
    assert "unknown tool 'execute_command'" in outcome.result
    assert (root / "x").exists()


async def test_output_stderr_and_exit_code_come_back(root: Path) -> None:
    ws = Workspace(root, allow_commands=True)
    outcome = await run_one(ws, "execute_command", command="echo out; echo err >&2; exit 3")
    assert (outcome.is_error, outcome.result) == (False, "out\nerr\n[exit code 3]")
    where = await run_one(ws, "execute_command", command="pwd; cat")  # no input: cat ends
    assert where.result == f"{ws.root}\n[exit code 0]"
    quiet = await run_one(ws, "execute_command", command="true")
    assert quiet.result == "(no output)\n[exit code 0]"


async def test_output_is_cut_in_the_middle_at_max_output_bytes(root: Path) -> None:
    ws = Workspace(root, allow_commands=True, max_output_bytes=1_000)
    command = "echo START; head -c 100000 /dev/zero | tr '\\0' a; echo; echo END"
    outcome = await run_one(ws, "execute_command", command=command)
    assert outcome.result.startswith("START\naaa")
    assert "[... 99011 bytes of output cut here ...]" in outcome.result
    assert outcome.result.endswith("aaa\nEND\n[exit code 0]")
    assert len(outcome.result) < 1_100


async def test_a_timeout_kills_the_command_and_its_children(root: Path) -> None:
    ws = Workspace(root, allow_commands=True, sandbox=OFF)
    outcome = await run_one(ws, "execute_command", command=SPAWNS_A_CHILD, timeout=1)
    assert outcome.is_error
    assert outcome.result.startswith("Error: the command did not finish within 1 s")
    assert await gone(first_pid(outcome.result))


async def test_timeouts_are_capped(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("glassagent._workspace.workspace.MAX_COMMAND_SECONDS", 1.0)
    ws = Workspace(root, allow_commands=True, sandbox=OFF)
    outcome = await run_one(ws, "execute_command", command=SPAWNS_A_CHILD, timeout=10_000)
    assert outcome.result.startswith("Error: the command did not finish within 1 s")
    assert await gone(first_pid(outcome.result))
    invalid = await run_one(ws, "execute_command", command="true", timeout=0)
    assert invalid.is_error
    assert "invalid arguments" in invalid.result


async def test_background_processes_are_stopped_when_the_command_ends(root: Path) -> None:
    ws = Workspace(root, allow_commands=True, sandbox=OFF)
    outcome = await run_one(ws, "execute_command", command="sleep 100 & echo $!")
    assert outcome.result.endswith("[exit code 0]")
    assert await gone(first_pid(outcome.result))


async def test_cancelling_the_call_kills_the_group(root: Path) -> None:
    progress: list[str] = []
    reported = asyncio.Event()

    def on_progress(message: str) -> None:
        progress.append(message)
        reported.set()

    execute = tools(Workspace(root, allow_commands=True, sandbox=OFF))["execute_command"]
    task = asyncio.create_task(execute(SPAWNS_A_CHILD, ctx=context("execute_command", on_progress)))
    await asyncio.wait_for(reported.wait(), 10)
    pid = first_pid(progress[0])
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await gone(pid)


async def test_the_agents_tool_timeout_and_an_abort_kill_the_group(root: Path) -> None:
    ws = Workspace(root, allow_commands=True, sandbox=OFF)
    client = ScriptedClient(
        [LLMResponse(tool_calls=[call("execute_command", command=SPAWNS_A_CHILD)]), "ok"]
    )
    result = await Agent(client, ws.tools, tool_timeout=1).run("go")
    [execution] = executions(result).values()
    assert execution.result == "Error: tool 'execute_command' timed out after 1 s."
    progress = [e.message for e in result.events if isinstance(e, ToolProgressEvent)]
    assert await gone(first_pid(progress[0]))

    client = ScriptedClient(
        [LLMResponse(tool_calls=[call("execute_command", command=SPAWNS_A_CHILD)])]
    )
    run = Agent(client, ws.tools).run("go")
    pids = []
    async for event in run:
        if isinstance(event, ToolProgressEvent):
            pids.append(int(event.message))
            run.abort("stop")
    assert run.result is not None
    assert run.result.stop_reason == "aborted"
    assert await gone(pids[0])


async def test_output_lines_stream_as_tool_progress_events_while_the_command_runs(
    root: Path,
) -> None:
    # The command waits for a file the test creates only on seeing the first line: without
    # live streaming it would time out.
    command = "echo first; while [ ! -e go ]; do sleep 0.05; done; echo second; echo third >&2"
    client = ScriptedClient(
        [LLMResponse(tool_calls=[call("execute_command", "x1", command=command, timeout=30)]), "ok"]
    )
    run = Agent(client, Workspace(root, allow_commands=True).tools).run("go")
    progress = []
    async for event in run:
        if isinstance(event, ToolProgressEvent):
            progress.append((event.tool, event.call_id, event.message))
            if event.message == "first":
                (root / "go").touch()
        if isinstance(event, FunctionExecutionCompleteEvent):
            assert event.execution.result == "first\nsecond\nthird\n[exit code 0]"
    assert progress == [
        ("execute_command", "x1", "first"),
        ("execute_command", "x1", "second"),
        ("execute_command", "x1", "third"),
    ]


@pytest.mark.parametrize("sandbox", ["auto", "off"])
async def test_commands_get_an_allow_listed_environment(
    root: Path, monkeypatch: pytest.MonkeyPatch, sandbox: SandboxMode
) -> None:
    # Secrets under names no deny-list would catch stay out; env= passes what it names.
    monkeypatch.setenv("GLASSAGENT_TEST_API_KEY", "sk-do-not-show")
    monkeypatch.setenv("DATABASE_URL", "postgresql://app:pw-do-not-show@db/app")
    monkeypatch.setenv("GH_PAT", "ghp-do-not-show")
    monkeypatch.setenv("LC_TIME", "C")
    ws = Workspace(root, allow_commands=True, sandbox=sandbox, env={"GIVEN": "given-value"})
    outcome = await run_one(ws, "execute_command", command="env")
    assert "do-not-show" not in outcome.result
    names = {line.split("=", 1)[0] for line in outcome.result.splitlines() if "=" in line}
    assert {"PATH", "TMPDIR", "GIVEN", "LC_TIME"} <= names
    assert "GIVEN=given-value" in outcome.result
    allowed = {"PATH", "HOME", "LANG", "TERM", "USER", "LOGNAME", "SHELL", "TZ", "TMPDIR"}
    allowed |= {"GIVEN", "PWD", "OLDPWD", "SHLVL", "_"}  # passed by env=; set by the shell
    assert names - allowed <= {n for n in names if n.startswith("LC_")}


# ---- confirm ----------------------------------------------------------------------------


async def test_a_sync_confirm_sees_each_change_and_a_no_reaches_the_model(root: Path) -> None:
    asked: list[ToolCall] = []

    def confirm(request: ToolCall) -> bool:
        asked.append(request)
        return request.name == "edit_file"

    (root / "f.txt").write_text("old\n")
    ws = Workspace(root, allow_commands=True, confirm=confirm)
    result = await run_calls(
        ws,
        call("write_file", "c1", path="new.txt", content="x"),
        call("edit_file", "c2", path="f.txt", old="old", new="new"),
        call("execute_command", "c3", command="touch ran"),
        call("read_file", "c4", path="f.txt"),
        call("list_files", "c5"),
    )
    assert sorted(asked, key=lambda request: request.id) == [  # the calls run concurrently
        ToolCall("c1", "write_file", {"path": "new.txt", "content": "x"}),
        ToolCall("c2", "edit_file", {"path": "f.txt", "old": "old", "new": "new"}),
        ToolCall("c3", "execute_command", {"command": "touch ran", "timeout": 60}),
    ]
    done = executions(result)
    for declined in ("c1", "c3"):
        assert done[declined].is_error
        assert done[declined].result.startswith("Error: the user declined this ")
        assert done[declined].ui_info == {"declined": True}
    assert not done["c2"].is_error
    assert done["c2"].ui_info is None
    assert not (root / "new.txt").exists()
    assert not (root / "ran").exists()
    assert (root / "f.txt").read_text() == "new\n"
    tool_messages = [m for m in result.new_messages if m.role == "tool"]
    assert "the user declined this write_file call" in tool_messages[0].content


async def test_an_async_confirm_is_awaited(root: Path) -> None:
    answers = {"write_file": True, "execute_command": False}

    async def confirm(request: ToolCall) -> bool:
        await asyncio.sleep(0)
        return answers[request.name]

    ws = Workspace(root, allow_commands=True, confirm=confirm)
    written = await run_one(ws, "write_file", path="a.txt", content="yes")
    assert (written.is_error, (root / "a.txt").read_text()) == (False, "yes")
    refused = await run_one(ws, "execute_command", command="touch ran")
    assert refused.is_error
    assert refused.ui_info == {"declined": True}
    assert not (root / "ran").exists()


async def test_confirm_is_not_asked_for_calls_that_would_fail(root: Path) -> None:
    asked: list[ToolCall] = []
    ws = Workspace(root, confirm=lambda request: asked.append(request) or True)
    (root / "f.txt").write_text("a a\n")
    outside = await run_one(ws, "write_file", path="../x.txt", content="x")
    ambiguous = await run_one(ws, "edit_file", path="f.txt", old="a", new="b")
    assert outside.is_error
    assert ambiguous.is_error
    assert asked == []


async def test_a_confirm_that_raises_stops_the_change(root: Path) -> None:
    def confirm(request: ToolCall) -> bool:
        raise RuntimeError("no terminal")

    outcome = await run_one(Workspace(root, confirm=confirm), "write_file", path="a", content="")
    assert outcome.is_error
    assert "RuntimeError: no terminal" in outcome.result
    assert not (root / "a").exists()


async def test_the_time_confirm_takes_is_not_part_of_the_tool_timeout(root: Path) -> None:
    async def slow_person(request: ToolCall) -> bool:
        if request.name == "execute_command":  # the command's own time stays well within it,
            await asyncio.sleep(1.6)  # also on a busy machine; the answer takes longer than it
        return True

    ws = Workspace(root, allow_commands=True, confirm=slow_person)
    client = ScriptedClient(
        [
            LLMResponse(
                tool_calls=[
                    call("write_file", "c1", path="a.txt", content="yes"),
                    call("execute_command", "c2", command="echo hi"),
                ]
            ),
            "done",
        ]
    )
    result = await Agent(client, ws.tools, tool_timeout=1.5).run("go")
    done = executions(result)
    assert (done["c1"].is_error, done["c1"].result) == (False, "Created 'a.txt': 3 bytes, 1 line.")
    assert not done["c2"].is_error
    assert done["c2"].result.startswith("hi\n")
    assert (root / "a.txt").read_text() == "yes"


async def test_confirm_answers_through_the_approval_events(root: Path) -> None:
    ws = Workspace(root, confirm=lambda request: False)
    result = await run_calls(ws, call("write_file", "c1", path="a.txt", content="x"))
    required = [e for e in result.events if isinstance(e, ApprovalRequiredEvent)]
    answered = [e for e in result.events if isinstance(e, ApprovalAnsweredEvent)]
    assert [e.call.id for e in required] == ["c1"]
    assert [(e.call_id, e.approved) for e in answered] == [("c1", False)]
    assert not (root / "a.txt").exists()


async def test_the_run_can_answer_before_confirm_does(root: Path) -> None:
    never = asyncio.Event()

    async def waits_forever(request: ToolCall) -> bool:
        await never.wait()
        return False

    ws = Workspace(root, confirm=waits_forever)
    client = ScriptedClient(
        [LLMResponse(tool_calls=[call("write_file", "c1", path="a.txt", content="x")]), "done"]
    )
    run = Agent(client, ws.tools).run("go")
    async for event in run:
        if isinstance(event, ApprovalRequiredEvent):
            assert run.approve(event.call.id)
    assert (root / "a.txt").read_text() == "x"


async def test_changes_can_need_approval_without_confirm_and_be_deferred(root: Path) -> None:
    ws = Workspace(root, requires_approval=True)
    client = ScriptedClient(
        [
            LLMResponse(
                tool_calls=[
                    call("write_file", "c1", path="a.txt", content="x"),
                    call("list_files", "c2"),
                ]
            ),
            "Written.",
        ]
    )
    agent = Agent(client, ws.tools)
    first = await agent.run("go", defer_approval=True)
    assert first.stop_reason == "awaiting_approval"
    assert [c.id for c in first.pending_approvals] == ["c1"]
    assert not (root / "a.txt").exists()
    second = await agent.resume(first, {"c1": True})
    assert second.text == "Written."
    assert (root / "a.txt").read_text() == "x"


@pytest.mark.skipif(shutil.which("setsid") is None, reason="needs setsid")
async def test_a_process_that_left_the_group_does_not_hold_the_call(root: Path) -> None:
    # It escapes the group kill and keeps the output pipe open; the call ends all the same.
    ws = Workspace(root, allow_commands=True, sandbox=OFF)
    outcome = await run_one(ws, "execute_command", command="setsid sleep 30 & echo $!")
    pid = first_pid(outcome.result)
    try:
        assert outcome.result.endswith("[exit code 0]")
        assert outcome.duration_ms < 20_000
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
