"""Durable turns on PostgreSQL: two server processes share the turns, and when one dies
in the middle of a turn (a tool kills it), the other takes the turn over and the client,
posting the same ``run_id`` to it, gets the finished turn."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from glassagent.history import HistoryStore
from glassagent.server import ANONYMOUS_USER, user_directory
from tests.support.durable import ANSWER, PROMPT, ROOT, effects, model_reply
from tests.support.loopback_server import LoopbackServer

pytestmark = pytest.mark.postgres
pytest.importorskip("dbos")

TAKEOVER_AFTER = 2.0  # seconds: short, for the test
START_SECONDS = 60


def start_server(
    label: str, *, database: str, base_url: str, folder: Path
) -> subprocess.Popen[str]:
    settings = {
        "database": database,
        "base_url": base_url,
        "folder": str(folder),
        "label": label,
        "worker_id": f"server-{label}",
        "takeover_after": TAKEOVER_AFTER,
    }
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
        "DURABLE_SERVER": json.dumps(settings),
    }
    with (folder / f"{label}.err").open("w", encoding="utf-8") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.support.durable_server"],
            cwd=folder,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
            text=True,
        )


def address(server: subprocess.Popen[str], folder: Path, label: str) -> str:
    deadline = time.monotonic() + START_SECONDS
    where = folder / f"{label}.address"
    while not where.exists():
        if server.poll() is not None or time.monotonic() > deadline:
            error = (folder / f"{label}.err").read_text(encoding="utf-8")
            raise AssertionError(f"the server {label} did not start: {error[-3000:]}")
        time.sleep(0.05)
    return where.read_text(encoding="utf-8")


def test_a_live_server_takes_over_the_turn_of_a_killed_one(
    tmp_path: Path, postgres_url: str
) -> None:
    url = postgres_url.replace("postgresql+asyncpg://", "postgresql://")  # DBOS: psycopg
    turn = {"message": PROMPT, "chat_id": "c", "append_to_history": True, "run_id": "turn-1"}
    with LoopbackServer(model_reply) as model:
        servers = {
            label: start_server(label, database=url, base_url=model.url, folder=tmp_path)
            for label in ("a", "b")
        }
        try:
            a, b = (address(servers[label], tmp_path, label) for label in ("a", "b"))
            with pytest.raises(httpx.TransportError):  # the server died answering
                httpx.post(f"{a}/api/ai/invoke", json=turn, timeout=30)
            assert servers["a"].wait(timeout=10) == -9  # SIGKILL, by the tool
            started = time.monotonic()
            answer = httpx.post(f"{b}/api/ai/invoke", json=turn, timeout=30)
            took = time.monotonic() - started
        finally:
            for server in servers.values():
                if server.poll() is None:
                    server.terminate()
                server.wait(timeout=30)
        requests = len(model.requests)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["status"], body["text"], body["run_id"]) == ("completed", ANSWER, "turn-1")
    assert took < 20
    ran = [(e["tool"], e["pid"] == servers["a"].pid) for e in effects(tmp_path / "effects.jsonl")]
    assert ran == [("first", True), ("second", True), ("second", False), ("third", False)]
    assert requests == 4  # each model call once: the finished ones were not sent again
    chat = HistoryStore(user_directory(tmp_path / "chats", ANONYMOUS_USER)).load("c")
    assert [m.role for m in chat.thread()] == [
        *("user", "assistant", "tool", "assistant", "tool", "assistant", "tool", "assistant")
    ]
