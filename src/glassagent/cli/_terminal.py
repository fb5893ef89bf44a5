"""The terminal side of a session: reading lines without blocking, Ctrl-C, asking the user.

Lines are read from standard input by the event loop itself (``add_reader``), not by a
thread, so Ctrl-C can end a wait for input at once and nothing is left blocked in a read.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import signal
from collections.abc import Awaitable, Callable, Iterator
from typing import TextIO

from glassagent.llm import ToolCall

_READ_BYTES = 4096


class LineReader:
    """Reads lines from a file descriptor (standard input) on the running event loop."""

    def __init__(self, fd: int, prompts: TextIO) -> None:
        self.fd = fd
        self.prompts = prompts
        self._buffer = ""
        self._eof = False
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._waiter: asyncio.Future[None] | None = None
        self._interrupted = False

    async def readline(self, prompt: str = "") -> str | None:
        """The next line (without its end), after writing `prompt`.

        Returns `None` at the end of input (Ctrl-D) or when `interrupt` was called.
        """
        if prompt:
            self.prompts.write(prompt)
            self.prompts.flush()
        self._interrupted = False
        while "\n" not in self._buffer and not self._eof:
            await self._fill()
            if self._interrupted:
                return None
        line, newline, rest = self._buffer.partition("\n")
        if not newline and not line:
            return None
        self._buffer = rest
        return line.removesuffix("\r")

    def interrupt(self) -> None:
        """Make the pending `readline` return `None` now (Ctrl-C at a prompt)."""
        self._interrupted = True
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def _fill(self) -> None:
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        try:
            loop.add_reader(self.fd, self._readable, waiter)
        except (NotImplementedError, OSError):  # a regular file, /dev/null, or Windows
            self._take(await asyncio.to_thread(_read, self.fd))
            return
        try:
            await waiter
        finally:
            loop.remove_reader(self.fd)
            self._waiter = None

    def _readable(self, waiter: asyncio.Future[None]) -> None:
        try:
            data = os.read(self.fd, _READ_BYTES)
        except BlockingIOError:
            return
        except OSError:  # e.g. EIO: the terminal went away
            data = b""
        self._take(data)  # kept even if the waiter was cancelled meanwhile
        if not waiter.done():
            waiter.set_result(None)

    def _take(self, data: bytes) -> None:
        if data:
            self._buffer += self._decoder.decode(data)
        else:
            self._buffer += self._decoder.decode(b"", final=True)
            self._eof = True


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, _READ_BYTES)
    except OSError:
        return b""


class Interrupts:
    """Routes Ctrl-C (SIGINT) to what the session is doing: `handler` is called for each."""

    def __init__(self) -> None:
        self.handler: Callable[[], object] | None = None
        self.count = 0

    def _on_signal(self) -> None:
        self.count += 1
        if self.handler is not None:
            self.handler()

    @contextlib.contextmanager
    def installed(self, loop: asyncio.AbstractEventLoop) -> Iterator[None]:
        """Catch SIGINT on `loop` while inside (where the platform allows it)."""
        try:
            loop.add_signal_handler(signal.SIGINT, self._on_signal)
        except (NotImplementedError, RuntimeError, ValueError):  # Windows, or not main thread
            yield
            return
        try:
            yield
        finally:
            loop.remove_signal_handler(signal.SIGINT)


def describe(call: ToolCall) -> str:
    """What a change the model asks for does, in a few words, for a yes/no question."""
    args = call.input
    if call.name == "execute_command":
        return f"run the command: {args.get('command', '')}"
    if call.name == "write_file":
        size = len(str(args.get("content", "")).encode())
        return f"write {args.get('path', '?')} ({size:,} bytes)"
    if call.name == "edit_file":
        return f"edit {args.get('path', '?')}"
    return f"{call.name}({', '.join(f'{k}=...' for k in args)})"


def asking(reader: LineReader) -> Callable[[ToolCall], Awaitable[bool]]:
    """Asks about each change on the terminal, one question at a time; no answer is no."""
    lock = asyncio.Lock()

    async def ask(call: ToolCall) -> bool:
        async with lock:
            answer = await reader.readline(f"Allow the agent to {describe(call)}? [y/N] ")
        return answer is not None and answer.strip().lower() in ("y", "yes")

    return ask


def declining(note: Callable[[str], None]) -> Callable[[ToolCall], bool]:
    """Declines every change and says how to allow them."""

    def decline(call: ToolCall) -> bool:
        note(f"declined: {describe(call)} (pass --yes to allow changes)")
        return False

    return decline
