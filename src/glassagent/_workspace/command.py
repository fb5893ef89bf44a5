"""`execute_command`: a shell command in its own process group, bounded in time and output."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

MAX_COMMAND_SECONDS = 600.0
"""Longest timeout a command may ask for; longer ones are cut to it."""

_LINE_BYTES = 2000  # a longer line is streamed in pieces of this size
_STREAMED_LINES = 2000  # lines streamed as progress per command; the rest is in the result only
_GRACE_SECONDS = 2.0  # for the killed group to die and its last output to be read
_SECRET_MARKS = ("API_KEY", "SECRET", "TOKEN", "PASSWORD", "CREDENTIAL")

Ending = Literal["exited", "timed_out", "aborted"]


@dataclass(frozen=True)
class CommandOutcome:
    """What a finished (or stopped) command produced."""

    output: str
    """Standard output and error, interleaved, cut in the middle when too long."""
    exit_code: int | None
    """The shell's exit code; negative when a signal ended it; `None` if it did not end."""
    ending: Ending
    """Whether the command exited by itself, ran out of time, or the run was aborted."""


class _Output:
    """Keeps the start and the end of a stream, at most `max_bytes` of it in all."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.tail_bytes = max_bytes // 2
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.max_bytes - len(self.head)
        if room > 0:
            self.head += chunk[:room]
        if self.tail_bytes:
            self.tail += chunk
            if len(self.tail) > 2 * self.tail_bytes:
                del self.tail[: -self.tail_bytes]

    def text(self) -> str:
        if self.total <= self.max_bytes:
            return self.head.decode("utf-8", errors="replace")
        kept_head = self.head[: self.max_bytes - self.tail_bytes]
        kept_tail = self.tail[-self.tail_bytes :] if self.tail_bytes else b""
        cut = self.total - len(kept_head) - len(kept_tail)
        note = f"\n[... {cut} bytes of output cut here ...]\n"
        return kept_head.decode("utf-8", "replace") + note + kept_tail.decode("utf-8", "replace")


class _Lines:
    """Passes each complete line of a stream on, as text, up to a number of lines."""

    def __init__(self, emit: Callable[[str], None]) -> None:
        self.emit = emit
        self.pending = bytearray()
        self.sent = 0

    def add(self, chunk: bytes) -> None:
        self.pending += chunk
        while True:
            end = self.pending.find(b"\n", 0, _LINE_BYTES)
            if end >= 0:
                self._send(bytes(self.pending[:end]))
                del self.pending[: end + 1]
            elif len(self.pending) >= _LINE_BYTES:  # a long line goes in pieces
                self._send(bytes(self.pending[:_LINE_BYTES]))
                del self.pending[:_LINE_BYTES]
            else:
                return

    def flush(self) -> None:
        if self.pending:
            self._send(bytes(self.pending))
            self.pending.clear()

    def _send(self, line: bytes) -> None:
        if self.sent < _STREAMED_LINES:
            self.emit(line.decode("utf-8", errors="replace").rstrip("\r"))
        elif self.sent == _STREAMED_LINES:
            self.emit(f"[more than {_STREAMED_LINES} lines: the rest is not streamed]")
        self.sent += 1


def command_environment() -> dict[str, str]:
    """This process's environment less the variables that look like secrets (API keys...)."""
    return {
        name: value
        for name, value in os.environ.items()
        if not any(mark in name.upper() for mark in _SECRET_MARKS)
    }


async def run_command(
    command: str,
    *,
    cwd: Path,
    timeout: float,
    max_output_bytes: int,
    on_line: Callable[[str], None],
    abort: asyncio.Event,
) -> CommandOutcome:
    """Run `command` with ``sh`` in a new process group; the group is killed when it ends.

    Whatever the command started is killed too when it exits, times out, the run is aborted
    (`abort`) or this coroutine is cancelled: nothing outlives the call.
    """
    loop = asyncio.get_running_loop()
    output, lines = _Output(max_output_bytes), _Lines(on_line)
    # Our own pipe, not the subprocess's: waiting for the shell's exit does not wait for
    # every process that holds the pipe open, and we can close our end when we give up.
    read_fd, write_fd = os.pipe()
    pipe = os.fdopen(read_fd, "rb", buffering=0)
    try:
        process = await asyncio.create_subprocess_shell(
            command,
            cwd=cwd,
            env=command_environment(),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=write_fd,
            stderr=write_fd,
            start_new_session=True,  # its own process group: one signal reaches all of it
        )
    except BaseException:
        pipe.close()
        raise
    finally:
        os.close(write_fd)
    collector = _Collector(output, lines, loop.create_future())
    transport, _ = await loop.connect_read_pipe(lambda: collector, pipe)
    try:
        ending = await _wait(process, timeout, abort)
    finally:
        _kill_group(process.pid)
        await _settle(process, collector.closed, transport)
    lines.flush()
    return CommandOutcome(output.text(), process.returncode, ending)


class _Collector(asyncio.Protocol):
    """Receives the command's output from the pipe."""

    def __init__(self, output: _Output, lines: _Lines, closed: asyncio.Future[None]) -> None:
        self.output = output
        self.lines = lines
        self.closed = closed

    def data_received(self, data: bytes) -> None:
        self.output.add(data)
        self.lines.add(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


async def _wait(
    process: asyncio.subprocess.Process, timeout: float, abort: asyncio.Event
) -> Ending:
    exited = asyncio.ensure_future(process.wait())
    aborted = asyncio.ensure_future(abort.wait())
    try:
        done, _ = await asyncio.wait(
            {exited, aborted}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        for waiter in (exited, aborted):
            waiter.cancel()
    if exited in done:
        return "exited"
    return "aborted" if aborted in done else "timed_out"


def _kill_group(group: int) -> None:
    # Gone already (ProcessLookupError), or the number now names a group of someone else.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signal.SIGKILL)


async def _settle(
    process: asyncio.subprocess.Process,
    closed: asyncio.Future[None],
    transport: asyncio.ReadTransport,
) -> None:
    """Reap the killed shell and read what is left in the pipe, for a bounded time.

    A process that left the group (``setsid``) may keep the pipe open: our end is closed
    after the grace period then.
    """
    exited = asyncio.ensure_future(process.wait())
    both: set[asyncio.Future[Any]] = {exited, closed}
    await asyncio.wait(both, timeout=_GRACE_SECONDS)
    transport.close()
    if not exited.done():
        exited.cancel()
    await asyncio.wait(both)
