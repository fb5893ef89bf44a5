"""Helpers shared by the server tests: an httpx client on the ASGI app, SSE, histories, and
``glassagent serve`` as a process with its launch token."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx

from glassagent import LLMResponse, Message
from glassagent.history import History
from glassagent.testing import FunctionClient

INVOKE = "/api/ai/invoke"


@asynccontextmanager
async def http(app: Any, token: str | None = None) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client talking to `app` in-process, with a bearer token if given.

    Its requests name a loopback host (``Host: 127.0.0.1:8000``), as the app requires.
    """
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(
        transport=transport, base_url="http://127.0.0.1:8000", headers=headers
    ) as client:
        yield client


def sse_events(body: str) -> list[dict[str, Any]]:
    """The JSON payloads of an SSE body; every non-empty line must be one ``data:`` line."""
    events = []
    for block in body.split("\n\n"):
        if not block:
            continue
        assert block.startswith("data: "), block
        assert "\n" not in block, block
        events.append(json.loads(block[len("data: ") :]))
    return events


def document(*turns: tuple[str, str], version: str = "2.0") -> dict[str, Any]:
    """A standard history holding one chain of (role, text) messages."""
    history = History(title="posted")
    for role, text in turns:
        history.append(Message(role=role, content=text))  # type: ignore[arg-type]
    return history.to_dict(version)  # type: ignore[arg-type]


def echo_client(**kwargs: Any) -> FunctionClient:
    """A model answering ``seen: <every message's text, joined by |>``."""

    def answer(messages: Sequence[Message], *_: Any) -> str:
        return "seen: " + "|".join(m.content for m in messages)

    return FunctionClient(answer, model="echo", **kwargs)


def texts(messages: Sequence[Message]) -> list[str]:
    return [m.content for m in messages]


def answer_with(response: LLMResponse | str) -> FunctionClient:
    return FunctionClient(lambda *_: response, model="fixed")


LAUNCH_LINE = re.compile(
    r"open (http://127\.0\.0\.1:(\d+))/\?token=([A-Za-z0-9_-]{43}) in a browser"
)
"""The line ``glassagent serve`` prints once it listens: its address and launch token."""


def launch_token(process: subprocess.Popen[str], lines: int = 20) -> str:
    """The token ``glassagent serve`` made at its start, from the line it prints on stderr.

    Read after uvicorn's start line (`tests.support.process.uvicorn_process`): the line comes
    right after it.
    """
    assert process.stderr is not None
    seen = []
    for _ in range(lines):
        line = process.stderr.readline()
        if not line:
            break
        seen.append(line)
        match = LAUNCH_LINE.search(line)
        if match:
            return match.group(3)
    raise AssertionError(f"no token line: {''.join(seen)}")


@contextmanager
def served_with_token(
    arguments: Sequence[str], cwd: Path, env: Mapping[str, str]
) -> Iterator[tuple[str, str, subprocess.Popen[str]]]:
    """``glassagent serve ARGUMENTS`` (without --tokens) as a process: address, token, process.

    Its access log (standard output) goes to ``access.log`` in `cwd`. Killed on the way out
    if still running.
    """
    command = [sys.executable, "-m", "glassagent", "serve", *arguments]
    with (cwd / "access.log").open("w") as log:
        process = subprocess.Popen(
            command, cwd=cwd, env=env, stdout=log, stderr=subprocess.PIPE, text=True
        )
        try:
            assert process.stderr is not None
            seen = []
            match = None
            for line in process.stderr:  # until the line with the address and the token
                seen.append(line)
                match = LAUNCH_LINE.search(line)
                if match is not None:
                    break
            assert match is not None, "".join(seen)
            assert "Uvicorn running on " + match.group(1) in "".join(seen)
            yield match.group(1), match.group(3), process
        finally:
            if process.poll() is None:
                process.kill()
            process.wait(15)
            assert process.stderr is not None
            process.stderr.close()
