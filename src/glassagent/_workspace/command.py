"""`execute_command`: a shell command in its own process group, bounded in time and output.

In the sandbox (`glassagent._workspace.sandbox`) the process started is the sandbox's
launcher, which runs the command in namespaces of its own; killing the group kills the
launcher and the namespace's PID 1, and with it everything the command started.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from glassagent._core.errors import UserError
from glassagent._workspace.sandbox import launcher_argv, launcher_input

MAX_COMMAND_SECONDS = 600.0
"""Longest timeout a command may ask for; longer ones are cut to it."""

_LINE_BYTES = 2000  # a longer line is streamed in pieces of this size
_STREAMED_LINES = 2000  # lines streamed as progress per command; the rest is in the result only
_GRACE_SECONDS = 2.0  # for the killed group to die and its last output to be read
PASSED_VARIABLES = ("PATH", "HOME", "LANG", "TERM", "USER", "LOGNAME", "SHELL", "TZ")
"""The variables of the agent's environment a command gets (and every ``LC_*`` one)."""

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


def command_environment(extra: Mapping[str, str], tmp: str) -> dict[str, str]:
    """A command's environment: `PASSED_VARIABLES` and ``LC_*``, ``TMPDIR``, then `extra`.

    An allow-list: nothing else of the agent's environment (API keys, database URLs, tokens
    under any name) reaches the command unless `extra` passes it.
    """
    env = {
        name: value
        for name, value in os.environ.items()
        if name in PASSED_VARIABLES or name.startswith("LC_")
    }
    env["TMPDIR"] = tmp
    env.update(extra)
    return env


def checked_env(env: Mapping[str, str] | None) -> Mapping[str, str]:
    """A read-only copy of `env`, the variables to pass to commands.

    Raises:
        UserError: When it is not a mapping of names to text, or a name cannot be one.
    """
    if env is None:
        return MappingProxyType({})
    if not isinstance(env, Mapping):
        raise UserError(f"`env` must map variable names to values, got {env!r}.")
    for name, value in env.items():
        if not isinstance(name, str) or not name or "=" in name or "\0" in name:
            raise UserError(f"`env` has an invalid variable name: {name!r}.")
        if not isinstance(value, str) or "\0" in value:
            raise UserError(f"`env`: the value of {name} must be text without NUL characters.")
    return MappingProxyType(dict(env))


@dataclass(frozen=True)
class CommandSetup:
    """How commands run: their extra environment, and the sandbox."""

    env: Mapping[str, str]
    """Variables added to (or replacing) the allowed ones."""
    sandboxed: bool
    """Whether the command runs in the sandbox."""
    network: bool
    """Whether a sandboxed command may use the network."""


async def run_command(
    command: str,
    *,
    cwd: Path,
    timeout: float,
    max_output_bytes: int,
    on_line: Callable[[str], None],
    abort: asyncio.Event,
    setup: CommandSetup,
) -> CommandOutcome:
    """Run `command` with ``sh`` in a new process group; the group is killed when it ends.

    Whatever the command started is killed too when it exits, times out, the run is aborted
    (`abort`) or this coroutine is cancelled: nothing outlives the call (outside the sandbox,
    only what stayed in the process group). ``TMPDIR`` is a new folder, removed afterwards.
    """
    tmp = await asyncio.to_thread(_new_folder)
    try:
        return await _run(command, cwd, tmp, timeout, max_output_bytes, on_line, abort, setup)
    finally:
        await asyncio.to_thread(_remove, tmp)


async def _run(
    command: str,
    cwd: Path,
    tmp: str,
    timeout: float,
    max_output_bytes: int,
    on_line: Callable[[str], None],
    abort: asyncio.Event,
    setup: CommandSetup,
) -> CommandOutcome:
    loop = asyncio.get_running_loop()
    output, lines = _Output(max_output_bytes), _Lines(on_line)
    env = command_environment(setup.env, tmp)
    # Our own pipe, not the subprocess's: waiting for the shell's exit does not wait for
    # every process that holds the pipe open, and we can close our end when we give up.
    read_fd, write_fd = os.pipe()
    pipe = os.fdopen(read_fd, "rb", buffering=0)
    try:
        if setup.sandboxed:
            process = await asyncio.create_subprocess_exec(
                *launcher_argv(cwd),
                cwd="/",  # nothing of the workspace on the launcher's import path
                env={},
                stdin=asyncio.subprocess.PIPE,  # its source and settings
                stdout=write_fd,
                stderr=write_fd,
                start_new_session=True,
            )
        else:
            process = await asyncio.create_subprocess_shell(
                command,
                cwd=cwd,
                env=env,
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
    feeding = None
    if setup.sandboxed:
        settings = launcher_input(command, cwd=cwd, tmp=tmp, env=env, network=setup.network)
        feeding = asyncio.ensure_future(_feed(process, settings))
    try:
        ending = await _wait(process, timeout, abort)
    finally:
        if feeding is not None:
            feeding.cancel()
        _kill_group(process.pid)
        await _settle(process, collector.closed, transport)
    lines.flush()
    return CommandOutcome(output.text(), process.returncode, ending)


async def _feed(process: asyncio.subprocess.Process, data: bytes) -> None:
    """Write the launcher's input and close it (a launcher that died early reads none)."""
    stdin = process.stdin
    assert stdin is not None
    with contextlib.suppress(ConnectionError):
        stdin.write(data)
        await stdin.drain()
    stdin.close()


def _new_folder() -> str:
    return os.path.realpath(tempfile.mkdtemp(prefix="glassagent-"))


def _remove(folder: str) -> None:
    """Remove a command's temporary folder, whatever modes it left on what is inside."""

    def unlock(function: Callable[[str], object], path: str, _: object) -> None:
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(path), 0o700)
            function(path)

    shutil.rmtree(folder, onerror=unlock)


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
