"""Durable approval on a real DBOS: a run waits for answers in the database, across restarts.

In one process: answers from `approve` and `deny` (the first counts, strays are dropped),
the waiting run listed as ``awaiting_approval``, and the approval timeout. Across processes:
a run waits and its process is killed, another process approves without running anything,
a third resumes the run and finishes it.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from glassagent import Agent, LLMResponse, ToolCall, ToolContext, tool
from glassagent.errors import ConfigurationError, RunAborted, UserError
from glassagent.testing import ScriptedClient
from tests.support.durable import ANSWER, ROOT, WORKER_SECONDS, effects, model_reply
from tests.support.loopback_server import LoopbackServer

pytest.importorskip("dbos")

from glassagent._durable.approvals import ANSWERS, connected
from glassagent.durable import DurableAgent

pytestmark = pytest.mark.durable


def payments(paid: list[int]) -> Agent[Any, str]:
    @tool(requires_approval=True)
    def pay(amount: int, ctx: ToolContext) -> str:
        """Pay an amount."""
        paid.append(amount)
        return f"paid {amount}"

    calls = (ToolCall("c1", "pay", {"amount": 5}), ToolCall("c2", "pay", {"amount": 700}))
    return Agent(
        ScriptedClient([LLMResponse(tool_calls=calls), "Paid 5; 700 was declined."]), [pay]
    )


async def test_a_run_waits_for_answers_given_by_approve_and_deny(tmp_path: Path) -> None:
    paid: list[int] = []
    database = f"sqlite:///{tmp_path / 'pay.db'}"
    durable = DurableAgent(payments(paid), name="payments", database_url=database)
    async with durable:
        followed = durable.run("Pay 5 and 700", run_id="pay-1")
        events = []
        async for event in followed:
            events.append(event)
            if event.type == "approval_required" and event.call.id == "c2":
                # the events come once the run waits in the database: it takes answers now
                (waiting,) = await durable.runs(status="awaiting_approval")
                assert [call.id for call in waiting.approvals] == ["c1", "c2"]
                assert paid == []  # nothing runs before the answers
                async with connected(database, "payments") as client:  # a stray message
                    await client.send_async("pay-1", {"call_id": "c1", "approved": "yes"}, ANSWERS)
                assert not await durable.approve("pay-1", "c9")  # no such call waits
                assert await durable.deny("pay-1", "c2", "too much")
                assert await durable.approve("pay-1", "c1")
        result = await followed
        (run,) = await durable.runs()
    assert paid == [5]
    tools = [m for m in result.new_messages if m.role == "tool"]
    assert tools[0].content == "paid 5"
    assert "the user declined this pay call" in str(tools[1].content)
    assert "too much" in str(tools[1].content)
    answered = [(e.call_id, e.approved, e.reason) for e in events if e.type == "approval_answered"]
    assert sorted(answered) == [("c1", True, None), ("c2", False, "too much")]
    assert not any(event.replayed for event in events)
    assert (run.status, run.approvals) == ("success", ())
    assert await durable.approvals("pay-1") == ()


async def test_calls_left_unanswered_are_declined_after_the_timeout(tmp_path: Path) -> None:
    paid: list[int] = []
    durable = DurableAgent(
        payments(paid),
        name="payments",
        database_url=f"sqlite:///{tmp_path / 'pay.db'}",
        approval_timeout=0.3,
    )
    async with durable:
        result = await durable.run("Pay 5 and 700", run_id="pay-2")
    assert paid == []
    tools = [str(m.content) for m in result.new_messages if m.role == "tool"]
    assert len(tools) == 2
    assert all("no answer came within the approval timeout of 0.3 s" in t for t in tools)


def start(
    mode: str, *, database: Path, base_url: str, folder: Path
) -> subprocess.CompletedProcess[str]:
    settings = {"mode": mode, "database": f"sqlite:///{database}", "base_url": base_url}
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
        "DURABLE_APPROVAL_TEST": json.dumps({**settings, "folder": str(folder)}),
    }
    return subprocess.run(
        [sys.executable, "-m", "tests.support.durable_approval_worker"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=WORKER_SECONDS,
        check=False,
    )


def read(folder: Path, mode: str) -> Any:
    return json.loads((folder / f"{mode}.json").read_text(encoding="utf-8"))


def test_a_run_waits_across_processes_one_approves_another_finishes(tmp_path: Path) -> None:
    database = tmp_path / "runs.sqlite"
    with LoopbackServer(model_reply) as server:
        waited = start("wait", database=database, base_url=server.url, folder=tmp_path)
        assert waited.returncode == -signal.SIGKILL, waited.stderr
        assert [e["tool"] for e in effects(tmp_path / "effects.jsonl")] == ["first"]
        approved = start("approve", database=database, base_url=server.url, folder=tmp_path)
        assert approved.returncode == 0, approved.stderr
        assert len(server.requests) == 2  # the approving process sent nothing
        finished = start("finish", database=database, base_url=server.url, folder=tmp_path)
        assert finished.returncode == 0, finished.stderr
        seen = collections.Counter(len(r.json()["messages"]) for r in server.requests)
    assert read(tmp_path, "wait")["waiting"] == ["call_second"]
    answer = read(tmp_path, "approve")
    assert [call["id"] for call in answer["waiting"]] == ["call_second"]
    assert [(r["run_id"], r["status"]) for r in answer["runs"]] == [("run-1", "awaiting_approval")]
    assert answer["approved"] is True
    done = read(tmp_path, "finish")
    assert done["text"] == ANSWER
    assert all(count == 1 for count in seen.values())  # no model request sent twice
    assert [(e["tool"], e["pid"]) for e in effects(tmp_path / "effects.jsonl")] == [
        ("first", read(tmp_path, "wait")["pid"]),
        ("second", done["pid"]),
        ("third", done["pid"]),
    ]
    events = done["events"]
    asked = next(e for e in events if e["type"] == "approval_required")
    answered = next(e for e in events if e["type"] == "approval_answered")
    assert asked.get("replayed") is True  # emitted before the crash too
    assert "replayed" not in answered
    assert answered["approved"] is True
    assert [(r["run_id"], r["status"]) for r in done["runs"]] == [("run-1", "success")]


async def test_answers_and_listings_need_no_running_agent_nor_an_existing_database(
    tmp_path: Path,
) -> None:
    agent = payments([])
    missing = tmp_path / "missing.db"
    nothing = DurableAgent(agent, name="nothing", database_url=f"sqlite:///{missing}")
    assert await nothing.runs() == []
    assert await nothing.approvals("pay-1") == ()
    assert await nothing.approve("pay-1", "c1") is False
    assert not missing.exists()  # reading created nothing
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"")
    with pytest.raises(ConfigurationError, match="Could not read the runs at sqlite:///"):
        await DurableAgent(agent, name="junk", database_url=f"sqlite:///{junk}").runs()
    secret = "postgresql://bot:s3cretpw@127.0.0.1:9/db"  # nothing listens on port 9
    with pytest.raises(ConfigurationError) as refused:
        await DurableAgent(agent, name="nowhere", database_url=secret).deny("pay-1", "c1")
    assert "bot:***@127.0.0.1:9" in str(refused.value)
    assert "s3cretpw" not in str(refused.value)
    assert refused.value.__cause__ is None
    assert refused.value.__context__ is None or "s3cretpw" not in str(refused.value.__context__)


async def test_the_wait_for_answers_is_no_part_of_the_run_timeout(tmp_path: Path) -> None:
    paid: list[int] = []
    agent = payments(paid)
    agent.run_timeout = 3.0  # the rest of the run takes well under it, even on a busy machine
    durable = DurableAgent(agent, name="payments", database_url=f"sqlite:///{tmp_path / 'p.db'}")
    async with durable:
        run = durable.run("Pay 5 and 700", run_id="slow-answer")
        async for event in run:
            if event.type == "approval_required" and event.call.id == "c2":
                await asyncio.sleep(3.5)  # longer than the run_timeout
                assert await durable.approve("slow-answer", "c1")
                assert await durable.approve("slow-answer", "c2")
        result = await run
    assert sorted(paid) == [5, 700]  # the two calls ran at once
    assert result.stop_reason == "end_turn"


async def test_a_second_answer_to_a_call_never_answers_a_later_wait(tmp_path: Path) -> None:
    paid: list[int] = []

    @tool(requires_approval=True)
    def pay(amount: int) -> str:
        """Pay an amount."""
        paid.append(amount)
        return f"paid {amount}"

    client = ScriptedClient(
        [
            LLMResponse(tool_calls=[ToolCall("c1", "pay", {"amount": 5})]),
            LLMResponse(tool_calls=[ToolCall("c1", "pay", {"amount": 5000})]),  # the id again
            "Done.",
        ]
    )
    durable = DurableAgent(
        Agent(client, [pay]), name="payments", database_url=f"sqlite:///{tmp_path / 'p.db'}"
    )
    asked = 0
    async with durable:
        run = durable.run("Pay", run_id="twice")
        async for event in run:
            if event.type == "approval_required":
                asked += 1
                if asked == 1:  # a double click: both are sent, the run reads the first
                    assert await durable.approve("twice", "c1")
                    assert await durable.approve("twice", "c1")
                else:  # the second wait is its own: the late answer did not approve it
                    assert await durable.deny("twice", "c1", "too much")
        await run
    assert asked == 2
    assert paid == [5]


async def test_stray_messages_do_not_hold_off_the_approval_timeout(tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path / 'p.db'}"
    durable = DurableAgent(
        payments([]), name="payments", database_url=database, approval_timeout=1.0
    )
    strays = 0
    async with durable:
        task = asyncio.ensure_future(durable.run("Pay 5 and 700", run_id="strays"))
        async with connected(database, "payments") as client:
            while not task.done() and strays < 40:  # 8 s of strays, far past the timeout
                await asyncio.sleep(0.2)
                await client.send_async("strays", {"call_id": "c1", "approved": True}, ANSWERS)
                strays += 1
        result = await task
    assert strays < 40  # the run ended while the strays still came
    tools = [str(m.content) for m in result.new_messages if m.role == "tool"]
    assert all("no answer came within the approval timeout" in t for t in tools)


async def test_what_a_tool_returns_while_its_worker_stops_is_not_its_outcome(
    tmp_path: Path,
) -> None:
    outcomes: list[str] = []
    started = asyncio.Event()

    @tool
    async def polite(ctx: ToolContext) -> str:
        """Stops early when asked to."""
        started.set()
        try:
            await asyncio.wait_for(ctx.abort_event.wait(), 5 if not outcomes else 0.01)
        except TimeoutError:
            outcomes.append("done")
            return "done properly"
        outcomes.append("stopped")
        return "stopped early, nothing done"

    client = ScriptedClient([LLMResponse(tool_calls=[ToolCall("p1", "polite", {})]), "Finished."])
    durable = DurableAgent(
        Agent(client, [polite]), name="polite", database_url=f"sqlite:///{tmp_path / 'p.db'}"
    )
    async with durable:
        running = asyncio.ensure_future(durable.run("Go", run_id="polite-1"))
        await started.wait()
    with pytest.raises(RunAborted):
        await running
    async with durable:  # resumed: the tool runs again, as a call in flight at a crash
        result = await durable.result("polite-1")
    assert outcomes == ["stopped", "done"]
    assert [m.content for m in result.new_messages if m.role == "tool"] == ["done properly"]


async def test_agents_of_two_names_on_one_database_keep_their_run_ids_apart(
    tmp_path: Path,
) -> None:
    database = f"sqlite:///{tmp_path / 'shared.db'}"
    billing = DurableAgent(
        Agent(ScriptedClient(["billed"]), []), name="billing", database_url=database
    )
    support = DurableAgent(
        Agent(ScriptedClient(["helped"]), []), name="support", database_url=database
    )
    async with billing:
        assert (await billing.run("bill", run_id="shared-id")).text == "billed"
    async with support:
        with pytest.raises(UserError, match="a run of the durable agent 'billing'"):
            await support.result("shared-id")
        with pytest.raises(UserError, match="a run of the durable agent 'billing'"):
            await support.run("help", run_id="shared-id")
        assert (await support.run("help", run_id="own-id")).text == "helped"
    for bad in ([], "", None):
        with pytest.raises(UserError, match="must be a non-empty string"):
            await support.approve(bad, "c1")  # type: ignore[arg-type]
        with pytest.raises(UserError, match="must be a non-empty string"):
            await support.deny("r", bad)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="`status` must be one of"):
        await support.runs(status="bogus")  # type: ignore[arg-type]
