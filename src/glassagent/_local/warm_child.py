"""The warm server process (``python -m`` this module): llama.cpp's server, kept running.

It reads its configuration as one line of JSON from standard input (as
`glassagent._local.child` does, so the API key never appears in the process list), then
detaches: it forks, the first process prints the server's pid and exits, and the server
continues in the background with standard input from ``/dev/null`` and its output going to
its log, in its own session (started by the parent), so the program that started it may exit.

It serves until it has been idle for its keep-alive, or its model file has changed or
disappeared, and no program holds the lease; see `glassagent._local.rundir` for the files.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from glassagent._local.child import configure
from glassagent._local.rundir import (
    LEASE,
    START_LOCK,
    STATE,
    USAGE,
    open_lock,
    read_private,
    try_lock,
)

ANNOUNCEMENT = "glassagent: llama.cpp server listening on "
PROMPT_CACHE_MIB = 1024
"""Memory for prompts llama.cpp keeps aside (besides its one slot), in MiB."""
_MAX_POLL_SECONDS = 2.0


def pin_prompt_cache(params: Any) -> Any:
    """Keep one conversation's prompt cached across requests, whatever xllamacpp's defaults.

    One slot (``n_parallel=1``) holds the whole context and the previous request's tokens,
    and ``cache_prompt`` (llama.cpp's default per request) reuses their common prefix: the
    next turn of a conversation (same system prompt, tools and earlier messages) only
    evaluates its new tokens. ``cache_ram_mib`` bounds the memory that llama.cpp uses to
    keep other conversations' prompts for later. Settings a version lacks are left alone.
    """
    for name, value in (
        ("n_parallel", 1),
        ("cache_prompt", True),
        ("cache_ram_mib", PROMPT_CACHE_MIB),
    ):
        if hasattr(params, name):
            setattr(params, name, value)
    return params


@dataclass(kw_only=True)
class Watch:
    """What decides when the server stops."""

    directory: Path
    keep_alive: float
    model_path: Path
    model_stamp: tuple[int, int]
    started: float

    def usage(self) -> tuple[float, float]:
        """The keep-alive in force and the time of the last use (or of the start)."""
        path = self.directory / USAGE
        data = read_private(path) or {}
        keep_alive = data.get("keep_alive", self.keep_alive)
        if not isinstance(keep_alive, (int, float)) or keep_alive <= 0:
            keep_alive = self.keep_alive
        try:
            used = max(self.started, path.stat().st_mtime)
        except OSError:
            used = self.started
        return float(keep_alive), used

    def idle(self) -> bool:
        """Whether the last use is older than the keep-alive."""
        keep_alive, used = self.usage()
        return time.time() - used >= keep_alive

    def model_changed(self) -> bool:
        """Whether the model file has changed or disappeared since the start."""
        try:
            info = self.model_path.stat()
        except OSError:
            return True
        return (info.st_size, info.st_mtime_ns) != self.model_stamp

    def poll_seconds(self) -> float:
        """How long to sleep between checks."""
        return max(0.05, min(_MAX_POLL_SECONDS, self.usage()[0] / 4))


def claim_exit(watch: Watch, *, idle_only: bool) -> bool:
    """Whether the server may exit now: no program is starting, stopping or using it.

    It then holds the start lock and the lease exclusively until it exits, and has removed
    the state file that names it.
    """
    start = open_lock(watch.directory / START_LOCK)
    if not try_lock(start, exclusive=True):
        os.close(start)
        return False
    lease = open_lock(watch.directory / LEASE)
    if try_lock(lease, exclusive=True) and (watch.idle() or not idle_only):
        state = read_private(watch.directory / STATE)
        if state is not None and state.get("pid") == os.getpid():
            with contextlib.suppress(OSError):
                (watch.directory / STATE).unlink()
        return True  # both locks stay held: the process ends with them
    os.close(lease)
    os.close(start)
    return False


def serve_until_idle(watch: Watch) -> None:
    """Return once the server has been idle long enough (or its model changed), unused.

    It also returns when its run folder is gone (removed at logout, say): no program can
    find it or lease it any more.
    """
    while True:
        if not watch.directory.is_dir():
            return
        changed = watch.model_changed()
        try:
            if (changed or watch.idle()) and claim_exit(watch, idle_only=not changed):
                return
        except OSError:  # the folder went away while it was being checked
            if not watch.directory.is_dir():
                return
            raise
        time.sleep(watch.poll_seconds())


def detach(log_path: str) -> None:
    """Fork; the first process prints the second's pid and exits, the second returns.

    The second process reads ``/dev/null`` and writes to the log from then on.
    """
    pid = os.fork()
    if pid:
        sys.stdout.write(f"{pid}\n")
        sys.stdout.flush()
        os._exit(0)
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(null)
    os.close(log)


def main() -> int:
    """Start the server described by the first line of stdin; serve until idle."""
    config: dict[str, Any] = json.loads(sys.stdin.buffer.readline())
    detach(config["log_path"])
    import xllamacpp  # type: ignore[import-not-found,import-untyped,unused-ignore]

    params = pin_prompt_cache(configure(xllamacpp.CommonParams(), config))
    try:
        server = xllamacpp.Server(params)
    except RuntimeError as exc:  # the reason is in llama.cpp's log lines above
        print(f"glassagent: the llama.cpp server failed to start: {exc}", flush=True)
        os._exit(1)
    print(f"{ANNOUNCEMENT}{server.listening_address}", flush=True)
    os.chdir("/")  # hold no folder of the program that started it
    size, mtime_ns = config["model_stamp"]
    watch = Watch(
        directory=Path(config["run_dir"]),
        keep_alive=float(config["keep_alive"]),
        model_path=Path(config["model_path"]),
        model_stamp=(size, mtime_ns),
        started=time.time(),
    )
    try:
        serve_until_idle(watch)
        print("glassagent: idle, stopping", flush=True)
    finally:  # whatever happens, never outlive this: skip the interpreter's teardown, which
        os._exit(0)  # would wait for llama.cpp's threads; the OS releases port, memory, locks


if __name__ == "__main__":
    sys.exit(main())
