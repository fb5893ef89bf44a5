"""The invoke API as a real process: uvicorn on 127.0.0.1, a real httpx client, a real stop."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.loopback_server import LoopbackServer, openai_reply
from tests.support.process import uvicorn_process
from tests.support.server import sse_events

TESTS = Path(__file__).resolve().parent


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, LoopbackServer]]:
    """The launcher's base URL, and the scripted model server it talks to."""
    with LoopbackServer(openai_reply("Hello from the loopback model.")) as model:
        launcher = str(TESTS / "server_launcher.py")
        command = [sys.executable, launcher, model.url + "/v1", str(tmp_path)]
        with uvicorn_process(command) as (address, _):
            yield address, model


def test_a_served_process_streams_a_turn_and_stops(
    server: tuple[str, LoopbackServer], tmp_path: Path
) -> None:
    address, model = server
    with httpx.Client(base_url=address, timeout=30) as client:
        assert client.get("/api/ai/health").json() == {"status": "ok"}
        body = {"message": "Hi", "stream": True, "chat_id": "live", "append_to_history": True}
        with client.stream("POST", "/api/ai/invoke", json=body) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            text = "".join(response.iter_text())
        chat = client.get("/api/ai/chats/live").json()
    events = sse_events(text)
    assert events[0]["type"] == "llm_request"
    assert "text_chunk" in [e["type"] for e in events]
    assert events[-1]["type"] == "complete"
    assert events[-1]["text"] == "Hello from the loopback model."
    assert [m["content"] for m in chat["messages"]] == ["Hi", "Hello from the loopback model."]
    sent = json.loads(model.requests[0].body)
    assert sent["stream"] is True
    assert sent["messages"][-1]["content"] == "Hi"


@pytest.mark.slow
def test_the_invoke_benchmark_runs() -> None:
    bench = TESTS.parents[1] / "bench" / "invoke_bench.py"
    args = ["--requests", "20", "--single-requests", "10", "--concurrency", "4", "--rounds", "1"]
    out = subprocess.run(
        [sys.executable, str(bench), *args, "--model-ms", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "the model answers after 1 ms" in out.stdout
    table, added = out.stdout.split("What HTTP adds over invoke():")
    rows = [line for line in table.splitlines() if line.startswith("| ")]
    modes = [row.split("|")[1].strip() for row in rows[1:]]
    assert modes == [
        m
        for m in ("agent.run", "invoke()", "ASGI app", "uvicorn alone", "HTTP (uvicorn)")
        for _ in "12"
    ]
    clients = [line.split("|")[1].strip() for line in added.splitlines() if line.startswith("| ")]
    assert clients == ["clients", "1", "4"]
