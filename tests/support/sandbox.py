"""Helpers for the sandbox tests: processes watched from the host, sockets, a workspace."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shlex
import signal
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from glassagent.workspace import sandbox_support

SUPPORT = sandbox_support()
needs_sandbox = pytest.mark.skipif(
    not SUPPORT.available, reason=f"this machine cannot make the sandbox: {SUPPORT.reason}"
)
PYTHON = os.path.realpath(sys.executable)


def token() -> str:
    """A sleep duration (300 s and a bit) that names the processes of one test."""
    return f"300.{secrets.randbelow(10**9):09d}"


def running(mark: str) -> list[int]:
    """The host pids of live processes whose command line holds `mark`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if mark.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
    return found


async def none_running(mark: str, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while running(mark):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


def kill_all(mark: str) -> None:
    for pid in running(mark):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def escapes(mark: str, quiet: bool = False) -> str:
    """Shell that starts three processes meant to outlive it: two leave its process group
    (``setsid``, a double fork), one ignores hangups (``nohup``). Unless `quiet`, the first
    two keep the output pipe open."""
    out = " > /dev/null 2>&1" if quiet else ""
    return (
        f"setsid sh -c 'exec sleep {mark}'{out} & "
        f"sh -c '(setsid sleep {mark}{out} &) ; :' ; "
        f"nohup sleep {mark} > /dev/null 2>&1 & "
        "sleep 0.2; echo started"
    )


@contextlib.contextmanager
def listener(family: int = socket.AF_INET, address: object = ("127.0.0.1", 0)) -> Iterator[Any]:
    server = socket.socket(family, socket.SOCK_STREAM)
    try:
        server.bind(address)
        server.listen()
        server.settimeout(5)
        yield server
    finally:
        server.close()


def connect_script(address: object, family: str = "AF_INET") -> str:
    code = (
        "import socket,sys\n"
        f"s=socket.socket(socket.{family})\n"
        "try:\n"
        f"    s.connect({address!r}); print('connected')\n"
        "except OSError as e:\n"
        "    print('refused', e.errno)\n"
    )
    return f"{PYTHON} -I -c {shlex.quote(code)}"
