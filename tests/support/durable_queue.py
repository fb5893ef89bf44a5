"""The model-queue tests' helpers: a slow scripted model that counts its calls, and workers.

`SlowModel` answers as `tests.support.durable.model_reply` does, after a delay, and counts the
requests in flight (the most at once is `SlowModel.most`). `start_queue_worker` starts
`tests.support.durable_queue_worker` in the background: it enters its durable agent, writes
``<label>.ready`` (`tests.support.durable.wait_ready`), waits for a line on its stdin
(`tests.support.durable.go`), then starts all its runs at once. `two_workers_share_the_cap` is
the scenario of two such workers on one database (SQLite or PostgreSQL).
"""

from __future__ import annotations

import collections
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.support.durable import ANSWER, go, model_reply, output, stop, wait_ready, worker_env
from tests.support.loopback_server import LoopbackServer, Reply, Request

CAP = 2
"""The cap on model calls at once of `two_workers_share_the_cap`."""
STREAMED = "Now first.Now second.Now third." + ANSWER
"""A run's text chunks, joined."""


class SlowModel:
    """The scripted model, `delay` seconds per answer; counts the requests in flight."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.now = 0
        self.most = 0
        self._lock = threading.Lock()

    def __call__(self, request: Request) -> Reply:
        with self._lock:
            self.now += 1
            self.most = max(self.most, self.now)
        try:
            time.sleep(self.delay)
            return model_reply(request)
        finally:  # before the reply is sent: a count on the safe side
            with self._lock:
                self.now -= 1


def start_queue_worker(
    label: str,
    *,
    database: Path | None = None,
    database_url: str | None = None,
    base_url: str,
    folder: Path,
    run_ids: Sequence[str],
    options: Mapping[str, Any] | None = None,
) -> subprocess.Popen[str]:
    """Start a queue worker in the background (its stderr in ``folder/<label>.err``).

    Its database is the SQLite file `database` or `database_url`.

    Once told to go, it starts the runs `run_ids` at once, waits for them, and writes
    ``folder/<label>.json``: each run's text and text chunks, and where its model calls ran.
    """
    env = worker_env(
        "queue",
        database=database,
        base_url=base_url,
        folder=folder,
        run_ids=run_ids,
        kill=False,
        guard=False,
        database_url=database_url,
        label=label,
        options=options,
    )
    with (folder / f"{label}.err").open("w", encoding="utf-8") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.support.durable_queue_worker"],
            cwd=folder,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=err,
            text=True,
        )


def two_workers_share_the_cap(
    folder: Path, *, database: Path | None = None, database_url: str | None = None
) -> None:
    """Two worker processes start three runs each at once, with a cap of `CAP` model calls.

    The slow model never has more than `CAP` requests in flight, and has that many at some
    point; every run ends with the answer, its text streamed; some calls of one worker's
    runs ran in the other.
    """
    model = SlowModel(0.3)
    run_ids = {"a": ["a-1", "a-2", "a-3"], "b": ["b-1", "b-2", "b-3"]}
    with LoopbackServer(model) as server:
        workers = {}
        try:
            for label, ids in run_ids.items():  # one after the other: one makes the tables
                options = {"executor_id": f"worker-{label}", "max_model_calls": CAP}
                workers[label] = start_queue_worker(
                    label,
                    database=database,
                    database_url=database_url,
                    base_url=server.url,
                    folder=folder,
                    run_ids=ids,
                    options=options,
                )
                wait_ready(workers[label], folder, label)
            for worker in workers.values():
                go(worker)
            for label, worker in workers.items():
                code = worker.wait(timeout=60)
                assert code == 0, (folder / f"{label}.err").read_text(encoding="utf-8")[-3000:]
        finally:
            for worker in workers.values():
                stop(worker)
        assert len(server.requests) == 6 * 4  # six runs of four model calls each
    assert model.most == CAP  # six runs at once: the cap was reached, never passed
    ran_by: collections.Counter[tuple[str, str]] = collections.Counter()
    for label, ids in run_ids.items():
        out = output(folder, label)
        assert sorted(out["runs"]) == sorted(ids)
        for run in out["runs"].values():
            assert run["text"] == ANSWER
            assert run["iterations"] == 4
            assert "".join(run["chunks"]) == STREAMED
        assert len(out["calls"]) == 3 * 4
        for executor in out["calls"].values():
            ran_by[(out["executor_id"], executor)] += 1
    assert {executor for _, executor in ran_by} <= {"worker-a", "worker-b"}
    assert sum(ran_by.values()) == 24
    # calls of one worker's runs ran in the other (their deltas came through the database)
    assert sum(n for (worker, executor), n in ran_by.items() if worker != executor) > 0
