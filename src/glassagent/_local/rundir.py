"""The warm server's run directory: its state file, its locks, and checks of its process.

The directory is ``$XDG_RUNTIME_DIR/glassagent`` (else ``$XDG_CACHE_HOME/glassagent/run``,
else ``~/.cache/glassagent/run``), created with mode 0700 and used only when the current
user owns it and no one else may write to it. It holds:

- ``server.json``: the running server's pid, start time, port, API key and settings (mode
  0600, replaced atomically);
- ``start.lock``: held exclusively by whoever finds, starts or stops the server, and by the
  server while it decides to exit;
- ``lease``: held shared by every program that uses the server; the server exits only when it
  can hold it exclusively;
- ``last-use.json``: written at every start and end of a use (its time is the last use) with
  the keep-alive that applies from then on;
- ``server.log``: the server's output.

The process checks read Linux's ``/proc``: elsewhere the warm server is not offered.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import stat
import sys
import time
from pathlib import Path
from typing import Any

from glassagent._history.files import write_atomic
from glassagent._local.errors import LocalServerError

STATE = "server.json"
START_LOCK = "start.lock"
LEASE = "lease"
USAGE = "last-use.json"
LOG = "server.log"
WARM_MODULE = "glassagent._local.warm_child"
"""The module the warm server runs as (``python -m``): how its process is recognised."""

_MAX_STATE_BYTES = 1 << 20


class WarmServerUnavailable(LocalServerError):
    """The warm server cannot be used here; the message says why.

    Its run directory is unsafe (not owned by you, or writable by others) or cannot be
    created, the platform is not Linux, or a warm server with other settings is in use by
    another program. The command line then starts a server for the command alone.
    """


def run_dir() -> Path:
    """The warm server's directory, created (mode 0700) when missing and checked.

    Raises:
        WarmServerUnavailable: Not on Linux, or the directory cannot be created, is not a
            directory, is owned by another user or is writable by group or others.
    """
    if not sys.platform.startswith("linux"):
        raise WarmServerUnavailable("keeping the local model warm needs Linux (/proc)")
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if runtime and os.path.isabs(runtime):
        path = Path(runtime) / "glassagent"
    else:
        cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        path = Path(cache) / "glassagent" / "run"
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.lstat(path)
    except OSError as exc:
        raise WarmServerUnavailable(f"cannot create {path}: {exc.strerror}") from exc
    if not stat.S_ISDIR(info.st_mode):
        raise WarmServerUnavailable(f"{path} is not a directory")
    if info.st_uid != os.getuid():
        raise WarmServerUnavailable(f"{path} is owned by another user")
    if info.st_mode & 0o022:
        raise WarmServerUnavailable(f"{path} is writable by group or others (chmod 700 it)")
    return path


# -- files ------------------------------------------------------------------------------------


def open_lock(path: Path) -> int:
    """Open (creating it, mode 0600) a lock file; never follows a symbolic link."""
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)


def try_lock(fd: int, *, exclusive: bool) -> bool:
    """Take a `flock` on `fd` without waiting; whether it was taken."""
    import fcntl

    try:
        fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def lock_within(path: Path, timeout: float) -> int | None:
    """The descriptor of `path`, locked exclusively, waiting at most `timeout` s (else `None`)."""
    fd = open_lock(path)
    deadline = time.monotonic() + timeout
    while not try_lock(fd, exclusive=True):
        if time.monotonic() >= deadline:
            os.close(fd)
            return None
        time.sleep(0.05)
    return fd


def write_private(path: Path, data: dict[str, Any]) -> None:
    """Write `data` as JSON to `path` atomically, readable by the owner only (mode 0600)."""
    write_atomic(path, json.dumps(data).encode("utf-8"))  # a new file of mkstemp's: 0600


def read_private(path: Path) -> dict[str, Any] | None:
    """The JSON object in `path`, or `None` when missing, unreadable or not private to us.

    A file that is a symbolic link, is owned by another user or that others may read or
    write is not trusted.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
            return None
        try:
            data = json.loads(file.read(_MAX_STATE_BYTES))
        except (OSError, ValueError):
            return None
    return data if isinstance(data, dict) else None


def create_log(path: Path) -> int:
    """Create (or empty) the server's log, mode 0600, and return its descriptor."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(path, flags, 0o600)
    os.fchmod(fd, 0o600)
    return fd


# -- processes --------------------------------------------------------------------------------


def process_start(pid: int) -> int | None:
    """When process `pid` started (clock ticks since boot); `None` if gone or a zombie.

    With the pid it names one process for good: a pid reused later has another start time.
    """
    try:
        text = Path(f"/proc/{pid}/stat").read_text("ascii", errors="replace")
    except OSError:
        return None
    fields = text[text.rfind(")") + 2 :].split()  # after the command name, which may hold spaces
    if len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def is_warm_server(pid: int, started: int) -> bool:
    """Whether `pid` is still the warm server process that started at `started`, ours."""
    if pid <= 0 or process_start(pid) != started:
        return False
    try:
        owner = os.stat(f"/proc/{pid}").st_uid
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return owner == os.getuid() and argv[1:-1][-2:] == [b"-m", WARM_MODULE.encode()]


def listens_on(pid: int, host: str, port: int) -> bool:
    """Whether process `pid` itself holds the socket listening on `host`:`port` (TCP, IPv4).

    This is what makes it safe to send the key: no other program can be on that port.
    """
    address = int.from_bytes(socket.inet_aton(host), sys.byteorder)
    local = f"{address:08X}:{port:04X}"
    try:
        lines = Path(f"/proc/{pid}/net/tcp").read_text("ascii").splitlines()[1:]
    except OSError:
        return False
    sockets = {
        f"socket:[{fields[9]}]"
        for fields in (line.split() for line in lines)
        if len(fields) > 9 and fields[1] == local and fields[3] == "0A"  # 0A: LISTEN
    }
    try:
        descriptors = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for name in descriptors:
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{pid}/fd/{name}") in sockets:
                return True
    return False


def wait_gone(pid: int, started: int, timeout: float) -> bool:
    """Wait at most `timeout` s for the process to end; whether it did."""
    deadline = time.monotonic() + timeout
    while process_start(pid) == started:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def stop_process(pid: int, started: int, grace: float) -> None:
    """Terminate the warm server process, kill it after `grace` s; returns once it is gone."""
    import signal

    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, grace)):
        if not is_warm_server(pid, started):
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        if wait_gone(pid, started, wait):
            return
    raise LocalServerError(f"the warm local model server (pid {pid}) did not stop")
