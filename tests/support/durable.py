"""The durable-run tests' application: a scripted OpenAI-compatible model, three tools, workers.

The model server (`model_reply`, served by a `LoopbackServer`) answers by how many tool
results the request carries: it asks for ``first``, then ``second``, then ``third``, then
answers. Each tool appends a line to a side-effect log (`effects`); ``second`` kills its
own process with SIGKILL the first time it runs (when the kill marker is absent). A worker
(`start_worker`) runs `tests.support.durable_worker` in a fresh interpreter on a database;
`serve_worker` starts one that stays up, for several workers on one database.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from glassagent import Agent
from glassagent.llm import OpenAICompatibleClient
from glassagent.tools import ToolContext, tool
from tests.support.loopback_server import Reply, Request, sse

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "Run the three steps for order 42."
ANSWER = "All three steps are done: 2, 4 and 8."
MODEL = "gpt-4o-mini"  # priced by its profile: the runs have a cost
API_KEY = "sk-durable-test-SECRET-0123456789"
TOOLS = ("first", "second", "third")
WORKER_SECONDS = 90


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def model_reply(request: Request) -> Reply:
    """The scripted model: the next tool by the results so far, then the answer."""
    messages = request.json()["messages"]
    if any("FAIL" in str(m.get("content")) for m in messages if m.get("role") == "user"):
        error = {"error": {"message": "this request fails", "type": "invalid_request_error"}}
        return Reply.body(json.dumps(error).encode(), 400, Content_Type="application/json")
    done = sum(1 for m in messages if m.get("role") == "tool")
    usage = {"choices": [], "usage": {"prompt_tokens": 100 + 10 * done, "completion_tokens": 7}}
    if done < len(TOOLS):
        name = TOOLS[done]
        call = {
            "index": 0,
            "id": f"call_{name}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps({"n": 2**done})},
        }
        body = sse(
            _chunk({"role": "assistant", "content": f"Now {name}."}),
            _chunk({"tool_calls": [call]}),
            _chunk({}, "tool_calls"),
            usage,
        )
    else:
        words = ANSWER.split(" ")
        parts = [" ".join(words[:4]) + " ", " ".join(words[4:])]
        body = sse(*(_chunk({"content": p}) for p in parts), _chunk({}, "stop"), usage)
    return Reply.body(body)


def effects(log: Path) -> list[dict[str, Any]]:
    """The side effects the tools had, in order: ``{"tool", "pid", "key", "run_id"}``."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


def make_agent(base_url: str, log: Path, kill_marker: Path | None = None) -> Agent:
    """The agent: the scripted model at `base_url`, and the three tools logging to `log`."""

    def effect(name: str, n: int, ctx: ToolContext) -> None:
        line = {"tool": name, "n": n, "pid": os.getpid(), "key": ctx.idempotency_key}
        with log.open("a", encoding="utf-8") as out:
            out.write(json.dumps({**line, "run_id": ctx.run_id}) + "\n")

    @tool
    def first(n: int, ctx: ToolContext) -> str:
        """Step one."""
        effect("first", n, ctx)
        return f"first: {n * 2}"

    @tool
    def second(n: int, ctx: ToolContext) -> str:
        """Step two."""
        effect("second", n, ctx)
        if kill_marker is not None and not kill_marker.exists():
            kill_marker.write_text(str(os.getpid()), encoding="utf-8")
            os.kill(os.getpid(), signal.SIGKILL)
        return f"second: {n * 2}"

    @tool
    async def third(n: int, ctx: ToolContext) -> str:
        """Step three."""
        effect("third", n, ctx)
        return f"third: {n * 2}"

    client = OpenAICompatibleClient(MODEL, base_url=f"{base_url}/v1", api_key=API_KEY)
    return Agent(client, [first, second, third], system="Do the steps one by one.")


def worker_env(
    mode: str,
    *,
    database: Path | None,
    base_url: str,
    folder: Path,
    run_ids: Sequence[str],
    kill: bool,
    guard: bool,
    database_url: str | None = None,
    label: str | None = None,
    options: Mapping[str, Any] | None = None,
) -> dict[str, str]:
    """The environment of a worker process (see `start_worker`)."""
    if (database is None) == (database_url is None):
        raise ValueError("give a worker either a SQLite `database` file or a `database_url`")
    settings: dict[str, Any] = {
        "mode": mode,
        "database": database_url or f"sqlite:///{database}",
        "base_url": base_url,
        "folder": str(folder),
        "run_ids": list(run_ids),
        "kill": kill,
        "guard": guard,
    }
    if label is not None:
        settings["label"] = label
    if options:
        settings["options"] = dict(options)
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
        "DURABLE_TEST": json.dumps(settings),
    }


def start_worker(
    mode: str,
    *,
    database: Path | None = None,
    base_url: str,
    folder: Path,
    run_ids: Sequence[str] = ("run-1",),
    kill: bool = False,
    guard: bool = True,
    database_url: str | None = None,
    label: str | None = None,
    options: Mapping[str, Any] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a worker process to its end: ``run`` runs, ``result`` waits, ``list`` lists.

    It writes what it got to ``folder/<label>.json`` (the label is the mode unless given);
    with `guard`, every connection but the model server's (and a PostgreSQL
    `database_url`'s) is refused and written to ``folder/blocked-<label>.json``. The
    database is the SQLite file `database` or `database_url`; `options` are more
    `DurableAgent` arguments (``executor_id``, ``takeover_after``...).
    """
    env = worker_env(
        mode,
        database=database,
        base_url=base_url,
        folder=folder,
        run_ids=run_ids,
        kill=kill,
        guard=guard,
        database_url=database_url,
        label=label,
        options=options,
    )
    return subprocess.run(
        [sys.executable, "-m", "tests.support.durable_worker"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=WORKER_SECONDS,
        check=False,
    )


def serve_worker(
    label: str,
    *,
    database_url: str,
    base_url: str,
    folder: Path,
    run_ids: Sequence[str] = ("run-1",),
    options: Mapping[str, Any] | None = None,
) -> subprocess.Popen[str]:
    """Start a worker in ``serve`` mode, in the background; the caller stops it.

    It writes ``folder/<label>.ready`` once entered (`wait_ready`), then waits for a line on
    its stdin (`go`); then it waits for the results of `run_ids`, wherever they run, lists
    the runs and the runs it took over, writes them to ``folder/<label>.json`` and ends.
    Its stderr goes to ``folder/<label>.err``.
    """
    env = worker_env(
        "serve",
        database=None,
        base_url=base_url,
        folder=folder,
        run_ids=run_ids,
        kill=False,
        guard=True,
        database_url=database_url,
        label=label,
        options=options,
    )
    with (folder / f"{label}.err").open("w", encoding="utf-8") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.support.durable_worker"],
            cwd=folder,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=err,
            text=True,
        )


def wait_ready(worker: subprocess.Popen[str], folder: Path, label: str) -> None:
    """Wait until the serving worker `label` is entered (or fail with its stderr)."""
    deadline = time.monotonic() + WORKER_SECONDS
    while not (folder / f"{label}.ready").exists():
        if worker.poll() is not None or time.monotonic() > deadline:
            error = (folder / f"{label}.err").read_text(encoding="utf-8")
            raise AssertionError(f"the worker {label} did not start: {error[-3000:]}")
        time.sleep(0.05)


def go(worker: subprocess.Popen[str]) -> None:
    """Tell a serving worker to collect the results and end."""
    assert worker.stdin is not None
    worker.stdin.write("go\n")
    worker.stdin.close()


def stop(worker: subprocess.Popen[str]) -> None:
    """End a worker still running (by its own handle) and reap it."""
    if worker.poll() is None:
        worker.kill()
    worker.wait(timeout=WORKER_SECONDS)
    if worker.stdin is not None and not worker.stdin.closed:
        worker.stdin.close()


def output(folder: Path, mode: str) -> Any:
    """What the worker of `mode` wrote."""
    return json.loads((folder / f"{mode}.json").read_text(encoding="utf-8"))
