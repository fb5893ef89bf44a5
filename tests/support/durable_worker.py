"""A durable-run worker process for the tests (`tests.support.durable.start_worker`).

Its settings come as JSON in ``DURABLE_TEST``. With ``guard``, an audit hook installed before
anything else refuses every connection and name lookup but the model server's address (and
a PostgreSQL database's), and the worker writes what it refused to ``blocked-<label>.json``
(the label is the mode unless given); a probe it makes itself shows that the guard works.
In ``serve`` mode it writes ``<label>.ready`` once entered, waits for a line on its stdin, then
waits for the runs' results (wherever they run) and lists the runs.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any
from urllib.parse import urlsplit

SETTINGS: dict[str, Any] = json.loads(os.environ["DURABLE_TEST"])
BLOCKED: list[list[Any]] = []
_MODEL = urlsplit(SETTINGS["base_url"])
_DATABASE = urlsplit(SETTINGS["database"])  # a PostgreSQL server's port may be reached too
_ALLOWED = {("127.0.0.1", port) for port in (_MODEL.port, _DATABASE.port) if port}
PROBE = ("127.0.0.1", 9)  # the discard port: the guard must refuse it


class Blocked(PermissionError):
    """A connection the guard refused."""


def _guard(event: str, args: tuple[Any, ...]) -> None:
    if event == "socket.connect":
        address = args[1]
        if isinstance(address, tuple) and tuple(address[:2]) not in _ALLOWED:
            BLOCKED.append([event, repr(address)])
            raise Blocked(f"connection refused by the test's guard: {address!r}")
    elif event in ("socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyname_ex"):
        host = args[0]
        if host not in (None, "127.0.0.1", b"127.0.0.1"):
            BLOCKED.append([event, repr(host)])
            raise Blocked(f"name lookup refused by the test's guard: {host!r}")


if SETTINGS["guard"]:
    sys.addaudithook(_guard)

import asyncio  # noqa: E402 - after the guard: nothing may connect before it
import socket  # noqa: E402
from pathlib import Path  # noqa: E402

from glassagent._core.events import to_jsonable  # noqa: E402
from glassagent.durable import DurableAgent  # noqa: E402
from glassagent.errors import GlassAgentError  # noqa: E402
from tests.support.durable import PROMPT, make_agent  # noqa: E402

FOLDER = Path(SETTINGS["folder"])


def result_json(result: Any) -> dict[str, Any]:
    return {
        "text": result.text,
        "messages": to_jsonable(result.all_messages),
        "new": len(result.new_messages),
        "usage": to_jsonable(result.usage),
        "cost": to_jsonable(result.cost),
        "iterations": result.iterations,
        "stop_reason": result.stop_reason,
        "events": [event.type for event in result.events],
        "event_run_ids": sorted({event.run_id for event in result.events}),
    }


def error_json(error: GlassAgentError) -> dict[str, Any]:
    partial = error.result
    return {
        "error": type(error).__name__,
        "message": str(error),
        "module": type(error).__module__,
        "result": result_json(partial) if partial is not None else None,
    }


def prompt_of(run_id: str) -> str:
    return "FAIL now." if "fail" in run_id else PROMPT


def probe() -> str:
    """Connect where the guard must refuse: what happened."""
    try:
        socket.create_connection(PROBE, timeout=1).close()
    except Blocked:
        return "blocked"
    except OSError as exc:
        return f"not blocked: {exc!r}"
    return "not blocked: connected"


async def wait_for_go(label: str) -> None:
    """Serving: say so with ``<label>.ready``, then wait for a line (or the end) on stdin."""
    ready = FOLDER / f"{label}.ready"
    await asyncio.to_thread(ready.write_text, str(os.getpid()), encoding="utf-8")
    await asyncio.to_thread(sys.stdin.readline)


async def main() -> None:
    mode = SETTINGS["mode"]
    label = SETTINGS.get("label") or mode
    kill = FOLDER / "killed" if SETTINGS["kill"] else None
    agent = make_agent(SETTINGS["base_url"], FOLDER / "effects.jsonl", kill)
    options = SETTINGS.get("options", {})  # more DurableAgent arguments (executor_id, ...)
    durable = DurableAgent(agent, name="durable-test", database_url=SETTINGS["database"], **options)
    out: dict[str, Any] = {"pid": os.getpid()}
    async with durable:
        if mode == "serve":
            await wait_for_go(label)
        for run_id in SETTINGS["run_ids"]:
            try:
                if mode == "run":
                    result = await durable.run(prompt_of(run_id), run_id=run_id)
                elif mode == "serve":  # run here or by another worker: its result
                    result = await durable.result(run_id)
                else:  # follow the run (resumed here): its events, then its result
                    followed = durable.follow(run_id)
                    out[f"events:{run_id}"] = [event.to_dict() async for event in followed]
                    result = await followed
                out[run_id] = result_json(result)
            except GlassAgentError as exc:
                out[run_id] = error_json(exc)
        if mode == "serve":
            out["taken"] = list(durable._workers.taken)  # what it resumed for gone workers
        if mode in ("list", "serve"):
            runs = await durable.runs()
            out["runs"] = [to_jsonable(run) for run in runs]
            out["pending"] = [run.run_id for run in await durable.runs(status="pending")]
        if SETTINGS["guard"]:
            out["probe"] = probe()
    (FOLDER / f"{label}.json").write_text(json.dumps(out), encoding="utf-8")
    if SETTINGS["guard"]:
        blocked = [entry for entry in BLOCKED if entry[1] != repr(PROBE)]
        (FOLDER / f"blocked-{label}.json").write_text(json.dumps(blocked), encoding="utf-8")


asyncio.run(main())
