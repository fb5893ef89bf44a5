"""Helpers shared by the tests that run the invoke API as a real process: start, wait, stop."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

STARTUP_SECONDS = 60
STOP_SECONDS = 15
_LISTENING = re.compile(r"Uvicorn running on (http://127\.0\.0\.1:\d+)")


@contextmanager
def uvicorn_process(
    command: Sequence[str], *, cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """Run `command` (a server that logs uvicorn's start line); yield its address and process.

    The server is stopped on the way out as a service manager does: SIGTERM, then SIGKILL
    if it lingers.
    """
    process = subprocess.Popen(
        list(command),
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
    )
    try:
        yield _wait_for_address(process), process
    finally:
        _stop(process)


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:  # pragma: no cover - uvicorn stops on SIGTERM
            process.kill()
            process.wait(STOP_SECONDS)
    assert process.stderr is not None
    process.stderr.close()


def _wait_for_address(process: subprocess.Popen[str]) -> str:
    assert process.stderr is not None
    deadline = time.monotonic() + STARTUP_SECONDS
    seen = []
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if not line:
            break  # the process ended
        seen.append(line)
        match = _LISTENING.search(line)
        if match:
            return match.group(1)
    raise AssertionError(f"the server did not start: {''.join(seen)}")
