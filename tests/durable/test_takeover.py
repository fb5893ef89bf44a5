"""Several workers on one database: the pending runs of a gone worker are taken over.

On PostgreSQL, worker processes share a database; the one running a run is killed with
SIGKILL and a live one finishes the run. On SQLite, in this process: which runs a worker
takes over (gone workers' runs of its name and version only), and the claim that lets one
of several racing workers take a gone worker over.
"""

from __future__ import annotations

import asyncio
import collections
import json
import signal
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from glassagent import Agent, LLMResponse, Message, ToolCall, tool
from glassagent.errors import ConfigurationError, RunAborted, UserError
from glassagent.testing import FunctionClient
from tests.support.durable import (
    ANSWER,
    effects,
    go,
    model_reply,
    output,
    serve_worker,
    start_worker,
    stop,
    wait_ready,
)
from tests.support.loopback_server import LoopbackServer

pytest.importorskip("dbos")

from glassagent._durable.takeover import TABLE, Workers
from glassagent.durable import DurableAgent

TAKEOVER_AFTER = 2.0  # seconds: short, for the tests (a worker beats every third of it)
WAIT_SECONDS = 30  # for a run taken over to end (it takes a few seconds)


def tool_results_in(request: Any) -> int:
    return sum(1 for m in request.json()["messages"] if m.get("role") == "tool")


# ---- PostgreSQL: worker processes ------------------------------------------------------------


@pytest.mark.postgres
def test_a_live_worker_takes_over_the_run_of_a_killed_one(
    tmp_path: Path, postgres_url: str
) -> None:
    url = postgres_url.replace("postgresql+asyncpg://", "postgresql://")  # DBOS: psycopg

    def options(executor_id: str) -> dict[str, Any]:
        return {"executor_id": executor_id, "takeover_after": TAKEOVER_AFTER}

    with LoopbackServer(model_reply) as server:
        workers = {
            label: serve_worker(
                label,
                database_url=url,
                base_url=server.url,
                folder=tmp_path,
                options=options(f"worker-{label}"),
            )
            for label in ("b", "c")  # two live workers race for the run
        }
        try:
            for label, worker in workers.items():
                wait_ready(worker, tmp_path, label)
            crashed = start_worker(
                "run",
                database_url=url,
                base_url=server.url,
                folder=tmp_path,
                kill=True,
                options=options("worker-a"),
            )
            killed = time.monotonic()
            assert crashed.returncode == -signal.SIGKILL, crashed.stderr
            assert [tool_results_in(r) for r in server.requests] == [0, 1]
            for worker in workers.values():
                go(worker)  # they wait for the run's result, then end
            for worker in workers.values():
                worker.wait(timeout=WAIT_SECONDS)
            ended = time.monotonic() - killed
        finally:
            for worker in workers.values():
                stop(worker)
        seen = collections.Counter(tool_results_in(r) for r in server.requests)
    for label, worker in workers.items():
        assert worker.returncode == 0, (tmp_path / f"{label}.err").read_text(encoding="utf-8")
    # each finished model request was sent once: none again after the takeover
    assert seen == {0: 1, 1: 1, 2: 1, 3: 1}
    b, c = output(tmp_path, "b"), output(tmp_path, "c")
    killed_pid = int((tmp_path / "killed").read_text(encoding="utf-8"))
    done = [(e["tool"], e["pid"], e["key"]) for e in effects(tmp_path / "effects.jsonl")]
    taker = done[-1][1]
    assert taker in (b["pid"], c["pid"])
    # finished tools ran once; the one killed in flight twice (same key), in one worker
    assert done == [
        ("first", killed_pid, "run-1:call_first"),
        ("second", killed_pid, "run-1:call_second"),
        ("second", taker, "run-1:call_second"),
        ("third", taker, "run-1:call_third"),
    ]
    assert b["taken"] + c["taken"] == ["run-1"]  # one of the racing workers resumed it
    for found in (b, c):
        result = found["run-1"]
        assert (result["text"], result["iterations"], result["stop_reason"]) == (
            ANSWER,
            4,
            "end_turn",
        )
        assert result == b["run-1"]
        assert found["probe"] == "blocked"
    runner = "worker-b" if taker == b["pid"] else "worker-c"
    runs = [(r["run_id"], r["status"], r["executor_id"]) for r in c["runs"]]
    assert runs == [("run-1", "success", runner)]
    for label in ("b", "c"):
        assert json.loads((tmp_path / f"blocked-{label}.json").read_text()) == []
    print(f"killed -> run finished and both workers ended: {ended:.1f} s")


# ---- SQLite: in this process -----------------------------------------------------------------

NAME = "takeover-app"
V1 = "v1"
HOLD = {"on": True}  # while on, the tool `hold` blocks (its run stays pending at exit)


def holding_agent(started: asyncio.Event) -> Agent:
    @tool
    async def hold() -> str:
        """Wait."""
        if HOLD["on"]:
            started.set()
            await asyncio.sleep(60)
        return "held"

    def answer(messages: Sequence[Message], *_: Any) -> LLMResponse:
        if any(m.role == "tool" for m in messages):
            return LLMResponse("done")
        return LLMResponse(tool_calls=(ToolCall("c1", "hold", {}),))

    return Agent(FunctionClient(answer), [hold])


async def leave_pending(
    url: str, run_id: str, executor_id: str, *, name: str = NAME, version: str = V1
) -> None:
    """Leave the run `run_id` pending, last run by the worker `executor_id`, which left."""
    started = asyncio.Event()
    durable = DurableAgent(
        holding_agent(started),
        name=name,
        database_url=url,
        executor_id=executor_id,
        version=version,
        takeover_after=None,
    )
    async with durable:
        running = asyncio.create_task(durable.run("go", run_id=run_id))
        await started.wait()
    with pytest.raises(RunAborted):
        await running


async def heartbeat(url: str, executor_id: str, *, version: str = V1, age: float = 0) -> None:
    """Write a row for `executor_id`, as if it beat `age` seconds ago and went silent."""
    import sqlalchemy as sa

    worker = Workers(url, name=NAME, executor_id=executor_id, version=version, takeover_after=None)
    await worker.open()
    await worker.leave(delete=False)

    def older() -> None:
        engine = sa.create_engine(url)
        with engine.begin() as conn:
            conn.execute(
                sa.text(f"UPDATE {TABLE} SET beat_at = beat_at - :age WHERE executor_id = :e"),
                {"age": age, "e": executor_id},
            )
        engine.dispose()

    await asyncio.to_thread(older)


@pytest.mark.durable
async def test_only_gone_workers_runs_of_the_same_name_and_version_are_taken_over(
    tmp_path: Path,
) -> None:
    from dbos import DBOS

    url = f"sqlite:///{tmp_path / 'workers.db'}"
    HOLD["on"] = True
    await leave_pending(url, "own", "me")  # this worker's: DBOS resumes it at launch
    await leave_pending(url, "live", "live")  # a worker beating
    await leave_pending(url, "dead", "dead")  # a worker silent for long
    await leave_pending(url, "ghost", "ghost")  # a worker that left cleanly: no row
    await leave_pending(url, "moved", "moved")  # a worker alive under another version only
    await leave_pending(url, "old-version", "dead", version="v0")  # another version
    # another name (DBOS wants another version too: one version belongs to one name)
    await leave_pending(url, "other-app", "dead", name="other-app", version="v1-other")
    await heartbeat(url, "live", age=5)  # its own lease (30 s, the default) has not run out
    await heartbeat(url, "dead", age=100)
    await heartbeat(url, "moved", version="v2")
    HOLD["on"] = False
    durable = DurableAgent(
        holding_agent(asyncio.Event()),
        name=NAME,
        database_url=url,
        executor_id="me",
        version=V1,
        takeover_after=1.0,
    )
    async with durable:
        for run_id in ("own", "dead", "ghost", "moved"):
            result = await asyncio.wait_for(durable.result(run_id), WAIT_SECONDS)
            assert result.text == "done"
        runs = {run.run_id: (run.status, run.executor_id) for run in await durable.runs()}
        others = await DBOS.list_workflows_async(application_name="other-app")
        taken = sorted(durable._workers.taken)
    assert taken == ["dead", "ghost", "moved"]
    assert runs == {
        "own": ("success", "me"),  # resumed by DBOS at launch, not taken over
        "dead": ("success", "me"),
        "ghost": ("success", "me"),
        "moved": ("success", "me"),
        "live": ("pending", "live"),
        "old-version": ("pending", "dead"),
    }
    assert [(w.workflow_id, w.status, w.executor_id) for w in others] == [
        ("other-app", "PENDING", "dead")
    ]


@pytest.mark.durable
async def test_of_workers_racing_for_a_gone_one_exactly_one_claims_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'race.db'}"
    await heartbeat(url, "gone", age=100)
    await heartbeat(url, "quiet", age=5)  # within its own 30 s lease
    takers = [
        Workers(url, name=NAME, executor_id=f"taker-{n}", version=V1, takeover_after=1.0)
        for n in range(4)
    ]
    for taker in takers:
        await taker.open()
    try:
        everyone = {"gone", "quiet", "missing", "taker-1", "taker-0"}
        assert await takers[0].gone(everyone) == {"gone", "missing"}
        claims = await asyncio.gather(*(t.claim("gone") for t in takers))
        assert sorted(claims) == [False, False, False, True]
        claims = await asyncio.gather(*(t.claim("missing") for t in takers))
        assert sorted(claims) == [False, False, False, True]
        assert await takers[0].gone(everyone) == set()  # claimed: alive for a lease
        assert not await takers[0].claim("quiet")
        assert not await takers[0].claim("taker-0")  # never itself
    finally:
        for taker in takers:
            await taker.leave()


@pytest.mark.durable
async def test_takeover_after_is_checked_and_a_refused_heartbeat_hides_the_password() -> None:
    agent = holding_agent(asyncio.Event())
    for wrong in (0.5, 0, -1, True, "30", float("inf"), float("nan")):
        with pytest.raises(UserError, match="takeover_after"):
            DurableAgent(agent, name="checked", takeover_after=wrong)  # type: ignore[arg-type]
    assert DurableAgent(agent, name="checked", takeover_after=None).takeover_after is None
    assert DurableAgent(agent, name="checked").takeover_after == 30.0
    url = "postgresql://bot:s3cret@127.0.0.1:9/nowhere"  # the discard port: refused
    worker = Workers(url, name=NAME, executor_id="w", version=V1, takeover_after=None)
    with pytest.raises(ConfigurationError, match="heartbeat") as caught:
        await worker.open()
    assert "s3cret" not in str(caught.value)
    assert "bot:***@127.0.0.1:9" in str(caught.value)
