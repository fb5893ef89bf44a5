"""A worker process for the model-queue tests (`tests.support.durable_queue.start_queue_worker`).

Its settings come as JSON in ``DURABLE_TEST`` (`tests.support.durable.worker_env`). It enters
the durable agent, writes ``<label>.ready``, waits for a line on its stdin, starts all its runs
at once and writes ``<label>.json``: for each run its text, its text chunks, and for each of
its queued model calls the worker that ran it. It leaves once no model call waits or runs
(those of the other worker's runs too), so that it never stops one it runs for the other.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from glassagent.durable import DurableAgent
from tests.support.durable import PROMPT, make_agent

SETTINGS: dict[str, Any] = json.loads(os.environ["DURABLE_TEST"])
FOLDER = Path(SETTINGS["folder"])


async def one_run(durable: DurableAgent[Any], run_id: str) -> dict[str, Any]:
    run = durable.run(PROMPT, run_id=run_id)
    chunks = [event.text async for event in run if event.type == "text_chunk"]
    result = await run
    return {"text": result.text, "chunks": chunks, "iterations": result.iterations}


async def calls_of(run_ids: list[str]) -> dict[str, str | None]:
    """The worker (executor id) that ran each queued model call of these runs."""
    from dbos import DBOS

    from glassagent._durable.model_queue import QUEUED_WORKFLOW

    calls = await DBOS.list_workflows_async(name=QUEUED_WORKFLOW, load_input=False)
    return {
        call.workflow_id: call.executor_id for call in calls if call.parent_workflow_id in run_ids
    }


async def drained() -> None:
    """Wait until no model call of the database waits on its queue or runs."""
    from dbos import DBOS

    from glassagent._durable.model_queue import QUEUED_WORKFLOW

    for _ in range(600):  # a minute at most
        busy = await DBOS.list_workflows_async(
            name=QUEUED_WORKFLOW, status=["ENQUEUED", "PENDING"], load_input=False
        )
        if not busy:
            return
        await asyncio.sleep(0.1)


async def main() -> None:
    label = SETTINGS["label"]
    agent = make_agent(SETTINGS["base_url"], FOLDER / f"effects-{label}.jsonl")
    options = SETTINGS.get("options", {})
    durable = DurableAgent(agent, name="durable-test", database_url=SETTINGS["database"], **options)
    run_ids: list[str] = SETTINGS["run_ids"]
    async with durable:
        ready = FOLDER / f"{label}.ready"
        await asyncio.to_thread(ready.write_text, str(os.getpid()), encoding="utf-8")
        await asyncio.to_thread(sys.stdin.readline)
        results = await asyncio.gather(*(one_run(durable, run_id) for run_id in run_ids))
        out = {
            "executor_id": durable.executor_id,
            "runs": dict(zip(run_ids, results, strict=True)),
            "calls": await calls_of(run_ids),
        }
        await drained()
    (FOLDER / f"{label}.json").write_text(json.dumps(out), encoding="utf-8")


if __name__ == "__main__":
    asyncio.run(main())
