"""A worker process for the durable approval tests: it waits, or approves, or finishes.

``wait`` starts the run, whose second tool needs approval, and kills itself with SIGKILL
once the database shows the run waiting. ``approve`` answers the call without entering the
durable agent (no DBOS of its own). ``finish`` resumes the run and follows it to its end.
It writes what it saw to ``<folder>/<mode>.json``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path
from typing import Any

from glassagent._core.events import to_jsonable
from glassagent.durable import DurableAgent
from tests.support.durable import PROMPT, make_agent

SETTINGS = json.loads(os.environ["DURABLE_APPROVAL_TEST"])
FOLDER = Path(SETTINGS["folder"])


async def wait_then_die(durable: DurableAgent[Any], out: dict[str, Any]) -> None:
    followed = durable.run(PROMPT, run_id="run-1")
    async for event in followed:
        out.setdefault("events", []).append(event.to_dict())
        if event.type == "approval_required":  # the run waits in the database now
            out["waiting"] = [call.id for call in await durable.approvals("run-1")]
            (FOLDER / "wait.json").write_text(json.dumps(out), encoding="utf-8")
            os.kill(os.getpid(), signal.SIGKILL)


async def main() -> None:
    agent = make_agent(SETTINGS["base_url"], FOLDER / "effects.jsonl")
    agent.requires_approval = lambda call: call.name == "second"
    durable = DurableAgent(agent, name="durable-approval", database_url=SETTINGS["database"])
    mode = SETTINGS["mode"]
    out: dict[str, Any] = {"pid": os.getpid()}
    if mode == "approve":  # no `async with`: this process runs nothing
        out["waiting"] = [to_jsonable(call) for call in await durable.approvals("run-1")]
        out["runs"] = [to_jsonable(run) for run in await durable.runs()]
        out["approved"] = await durable.approve("run-1", "call_second")
        out["again"] = await durable.approve("run-1", "call_second")
    elif mode == "wait":
        async with durable:
            await wait_then_die(durable, out)
    else:
        async with durable:
            followed = durable.follow("run-1")
            out["events"] = [event.to_dict() async for event in followed]
            result = await followed
            out["text"] = result.text
            out["messages"] = to_jsonable(result.all_messages)
            out["runs"] = [to_jsonable(run) for run in await durable.runs()]
    (FOLDER / f"{mode}.json").write_text(json.dumps(out), encoding="utf-8")


asyncio.run(main())
