"""Running the command line as a real subprocess against a scripted OpenAI-compatible server.

`ScriptedModel` answers the n-th chat-completions request with the n-th scripted reply:
text (`say`), tool calls (`call`), or any `Reply`. `run_cli` starts ``python -m glassagent``
with this checkout's sources and returns the finished process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import glassagent
from tests.support.loopback_server import LoopbackServer, Reply, Request

SRC = Path(glassagent.__file__).resolve().parents[1]
TIMEOUT = 120  # seconds; generous: the machine is shared


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def _sse(chunks: Sequence[dict[str, Any]]) -> list[bytes]:
    usage = {"choices": [], "usage": {"prompt_tokens": 50, "completion_tokens": 7}}
    return [f"data: {json.dumps(c)}\n\n".encode() for c in [*chunks, usage]] + [b"data: [DONE]\n\n"]


def say(text: str, *, pieces: int = 3, delay: float = 0.0) -> Reply:
    """A streamed text answer in `pieces`, each after `delay` seconds."""
    size = max(1, -(-len(text) // pieces))
    parts = [text[i : i + size] for i in range(0, len(text), size)]
    chunks = [_chunk({"content": part}) for part in parts] + [_chunk({}, "stop")]
    return Reply(chunks=[(delay, data) for data in _sse(chunks)])


def call(*calls: tuple[str, dict[str, Any]]) -> Reply:
    """A streamed answer that asks for tool calls (ids ``call_1``, ``call_2``, ...)."""
    deltas = [
        _chunk(
            {
                "tool_calls": [
                    {
                        "index": i,
                        "id": f"call_{i + 1}",
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(args)},
                    }
                ]
            }
        )
        for i, (name, args) in enumerate(calls)
    ]
    return Reply(chunks=[(0.0, data) for data in _sse([*deltas, _chunk({}, "tool_calls")])])


class ScriptedModel(LoopbackServer):
    """A loopback server that plays a script of replies, one per chat-completions request."""

    def __init__(self, *replies: Reply) -> None:
        self.script = list(replies)
        self.bodies: list[dict[str, Any]] = []
        self._next = 0
        self._script_lock = threading.Lock()
        super().__init__(self._answer)

    def _answer(self, request: Request) -> Reply:
        with self._script_lock:
            self.bodies.append(request.json())
            index, self._next = self._next, self._next + 1
        if index >= len(self.script):
            return Reply.body(b'{"error": {"message": "the script has ended"}}', status=500)
        return self.script[index]

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def args(self) -> list[str]:
        """The options that point the CLI at this server."""
        return ["--provider", "openai_compatible", "--base-url", self.base_url, "--model", "m"]

    def tool_results(self, request: int) -> list[str]:
        """The tool results the `request`-th request (from 0) sent back to the model."""
        return [m["content"] for m in self.bodies[request]["messages"] if m["role"] == "tool"]


def cli_env(**extra: str) -> dict[str, str]:
    """The environment for the CLI: this one (without keys) plus this checkout's sources."""
    env = {**os.environ, "PYTHONIOENCODING": "utf-8", **extra}
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def run_cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m glassagent ARGS`` to its end and return it (stdin: `input` or nothing)."""
    return subprocess.run(
        [sys.executable, "-m", "glassagent", *args],
        cwd=cwd,
        env=env or cli_env(),
        input=input or "",
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=TIMEOUT,
        check=False,
    )


def events(stdout: str) -> list[dict[str, Any]]:
    """The JSON events of a ``--json`` run's standard output, one per line."""
    return [json.loads(line) for line in stdout.splitlines()]
