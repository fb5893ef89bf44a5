"""`WarmServer`: the embedded llama.cpp server, kept running between programs that use it.

The first program starts the server in the background (`glassagent._local.warm_child`);
later ones find it through the state file of the run directory (`glassagent._local.rundir`)
and reuse it, with its model loaded and its prompt cache filled. It stops on its own after
its keep-alive without use.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import math
import os
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from glassagent._core.errors import UserError
from glassagent._local.client import LocalServerClient, SlowCallHint, local_client
from glassagent._local.errors import LocalServerError
from glassagent._local.rundir import (
    LEASE,
    LOG,
    START_LOCK,
    STATE,
    USAGE,
    WARM_MODULE,
    WarmServerUnavailable,
    create_log,
    is_warm_server,
    listens_on,
    lock_within,
    open_lock,
    process_start,
    read_private,
    run_dir,
    stop_process,
    try_lock,
    write_private,
)
from glassagent._local.server import (
    CHILD_FOLDER,
    HOST,
    STOP_GRACE_SECONDS,
    LocalServer,
    _log_tail,
    _Plan,
    module_command,
)
from glassagent._version import __version__

if TYPE_CHECKING:
    from typing_extensions import Self

KEEP_ALIVE_ENV = "GLASSAGENT_LOCAL_KEEP_ALIVE"
"""The environment variable with the command line's keep-alive, in seconds (0: none)."""

DEFAULT_KEEP_ALIVE = 600.0
"""How long a warm server keeps running after its last use by default, in seconds."""

_PROTOCOL = 1  # bump when the warm server's process or files change
_POLL_SECONDS = 0.1


def keep_alive_from_env() -> float:
    """The keep-alive from ``$GLASSAGENT_LOCAL_KEEP_ALIVE``, in seconds; 600 when unset.

    ``0`` means: keep no server warm (each command starts and stops its own).

    Raises:
        UserError: The value is not a finite number of seconds, at least 0.
    """
    text = os.environ.get(KEEP_ALIVE_ENV, "").strip()
    if not text:
        return DEFAULT_KEEP_ALIVE
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds < 0:
        raise UserError(f"{KEEP_ALIVE_ENV} must be a number of seconds (0 or more), not {text!r}")
    return seconds


@dataclass(frozen=True, kw_only=True)
class _Record:
    """The state file's content: which server runs, and how to reach it."""

    pid: int
    started: int
    port: int
    api_key: str = field(repr=False)
    alias: str
    threads: int
    settings: dict[str, Any]

    @classmethod
    def read(cls, directory: Path) -> _Record | None:
        """The record of the state file, or `None` when there is none (or it is not usable)."""
        data = read_private(directory / STATE)
        if data is None:
            return None
        try:
            record = cls(**data)
        except TypeError:
            return None
        ints = (record.pid, record.started, record.port, record.threads)
        if not all(type(value) is int for value in ints):
            return None
        if not isinstance(record.api_key, str) or not isinstance(record.settings, dict):
            return None
        return record

    def write(self, directory: Path) -> None:
        """Write the state file (mode 0600, atomically)."""
        write_private(directory / STATE, asdict(self))


def _settings(plan: _Plan) -> dict[str, Any]:
    """What a server must have been started with to be reused for `plan`."""
    info = plan.model_path.stat()
    template = (plan.chat_template or "").encode()
    return {
        "model_path": str(plan.model_path),
        "model_stamp": [info.st_size, info.st_mtime_ns],
        "alias": plan.alias,
        "context_size": plan.context_size,
        "threads": plan.threads,
        "chat_template_sha256": hashlib.sha256(template).hexdigest(),
        "version": __version__,
        "protocol": _PROTOCOL,
    }


class WarmServer:
    """The embedded llama.cpp server, shared by programs and kept running between them.

    Like `LocalServer`, but the server outlives your program: on entry (``async with``) it
    reuses the warm server of this user when one runs with the same settings (model file,
    context size, threads, chat template) and proves to be ours, else it starts one, detached
    (its own session, its output in its log). While open, your program holds a lease on
    it; the server stops itself once no program holds one and it has not been used for
    `keep_alive` seconds. The next program that needs it saves the start (seconds) and, for a
    conversation that goes on, the prompt evaluation of what was said before.

    ```python
    async with WarmServer() as server, server.client() as client:
        print((await Agent(client, [add]).run("What is 17 + 25?")).text)
    ```

    Its state (pid, port, API key, settings) lives in a user-only run directory:
    ``$XDG_RUNTIME_DIR/glassagent``, else ``~/.cache/glassagent/run``. A server found there
    is used only when it is our process (``/proc``), listens on its port itself, answers
    ``/health`` and accepts its key. A server with other settings is stopped and replaced
    when no program uses it. `stop_warm_server` stops it at once. Linux only.

    Args:
        model_path: A GGUF model file; by default the default model (fetched on first use).
        chat_template: A chat template replacing the model's, as for `LocalServer`.
        context_size: The context window, in tokens.
        threads: CPU threads for generation; by default `default_threads()`.
        keep_alive: Seconds the server keeps running after its last use; by default 600.
        startup_timeout: Seconds to wait for a new server to become healthy.

    Raises:
        UserError: For a non-positive `context_size`, `threads`, `keep_alive` or
            `startup_timeout`.
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        chat_template: str | Path | None = None,
        context_size: int = 4096,
        threads: int | None = None,
        keep_alive: float = DEFAULT_KEEP_ALIVE,
        startup_timeout: float = 120.0,
    ) -> None:
        if not (math.isfinite(keep_alive) and keep_alive > 0):
            raise UserError("keep_alive must be a positive number of seconds.")
        self._planner = LocalServer(
            model_path,
            chat_template=chat_template,
            context_size=context_size,
            threads=threads,
            startup_timeout=startup_timeout,
        )
        self._keep_alive = keep_alive
        self._startup_timeout = startup_timeout
        self._record: _Record | None = None
        self._directory: Path | None = None
        self._lease: int | None = None
        self._reused = False
        self._hint = SlowCallHint(self._planner.threads)

    # -- what an open server exposes --------------------------------------------------

    @property
    def reused(self) -> bool:
        """Whether a running server was reused (else this one started it)."""
        self._require()
        return self._reused

    @property
    def pid(self) -> int:
        """The server's process id."""
        return self._require().pid

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL, e.g. ``http://127.0.0.1:43123/v1``."""
        return f"http://{HOST}:{self._require().port}/v1"

    @property
    def model_name(self) -> str:
        """The name the server knows its model by (used in requests)."""
        return self._require().alias

    @property
    def threads(self) -> int:
        """The number of CPU threads the server generates with."""
        return self._planner.threads

    @property
    def keep_alive(self) -> float:
        """Seconds the server keeps running after its last use."""
        return self._keep_alive

    @property
    def api_key(self) -> str:
        """The server's API key; `client` sends it for you. Never shown in reprs or errors."""
        return self._require().api_key

    @property
    def log_path(self) -> Path:
        """The server's log file."""
        self._require()
        assert self._directory is not None
        return self._directory / LOG

    def client(self, **options: Any) -> LocalServerClient:
        """A client for this server that carries its API key, as `LocalServer.client`.

        Args:
            **options: Further keyword arguments for `OpenAICompatibleClient`.
        """
        size = self._planner.context_size
        return local_client(self.base_url, self.model_name, self.api_key, self._hint, options, size)

    # -- enter and leave -----------------------------------------------------------------

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def open(self) -> None:
        """Reuse the warm server or start one, and take a lease on it (`close` gives it back).

        Raises:
            WarmServerUnavailable: The run directory is unsafe, the platform is not Linux,
                or a server with other settings is in use.
            ConfigurationError: The ``local`` extra is not installed, or a bad model file.
            LocalServerError: A new server did not start.
        """
        if self._record is not None:
            raise UserError("The warm server is already open.")
        directory = run_dir()
        plan = await asyncio.to_thread(self._planner._plan)  # checks the extra and the model
        settings = await asyncio.to_thread(_settings, plan)
        lock = await _start_lock(directory, self._startup_timeout)
        try:
            record = await self._find(directory, settings)
            self._reused = record is not None
            if record is None:
                timeout = self._startup_timeout
                record = await _start(directory, plan, settings, self._keep_alive, timeout)
            self._lease = _take_lease(directory, self._keep_alive)
        finally:
            os.close(lock)
        self._record, self._directory = record, directory

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Give the lease back: the keep-alive runs from now."""
        self.close()

    def close(self) -> None:
        """Give the lease back (the server keeps running). Idempotent."""
        lease, self._lease = self._lease, None
        if lease is not None and self._directory is not None:
            with contextlib.suppress(OSError):
                _mark_use(self._directory, self._keep_alive)
            os.close(lease)
        self._record = None

    def __repr__(self) -> str:
        record = self._record
        state = f"pid {record.pid} at http://{HOST}:{record.port}" if record else "not open"
        return f"WarmServer({state})"

    # -- helpers ---------------------------------------------------------------------------

    def _require(self) -> _Record:
        if self._record is None:
            raise UserError("The warm server is not open; use `async with WarmServer()`.")
        return self._record

    async def _find(self, directory: Path, settings: dict[str, Any]) -> _Record | None:
        """The running server to reuse; a stale or unusable one is forgotten or stopped."""
        record = _Record.read(directory)
        if record is None:
            return None
        if not is_warm_server(record.pid, record.started):
            (directory / STATE).unlink(missing_ok=True)  # a dead server, or a reused pid
            return None
        if record.settings != settings:
            why = "was started with other settings"
        elif not await _answers(record):
            why = "does not answer"
        else:
            return record
        await asyncio.to_thread(_replace, directory, record, why)
        return None


async def _start_lock(directory: Path, timeout: float) -> int:
    """The start lock, held exclusively; waits while another program starts a server."""
    path = directory / START_LOCK
    fd = open_lock(path)
    # the holder may stop a server of other settings, then start one (both bounded)
    waited = 2 * timeout + 4 * STOP_GRACE_SECONDS
    deadline = time.monotonic() + waited
    try:
        while not try_lock(fd, exclusive=True):
            if time.monotonic() >= deadline:
                raise WarmServerUnavailable(
                    f"{path} stayed locked for {waited:g} s: a start is stuck"
                )
            await asyncio.sleep(_POLL_SECONDS / 2)
    except BaseException:  # also when cancelled
        os.close(fd)
        raise
    return fd


async def _answers(record: _Record) -> bool:
    """Whether our process on the port is healthy and accepts the key of the record.

    The key is sent only once the process is known to hold the listening socket itself.
    """
    import httpx

    if not listens_on(record.pid, HOST, record.port):
        return False
    root = f"http://{HOST}:{record.port}"
    headers = {"Authorization": f"Bearer {record.api_key}"}
    body = {"content": "ok", "model": record.alias}
    async with httpx.AsyncClient(timeout=10.0, trust_env=False) as http:
        try:
            health = await http.get(f"{root}/health")
            tokens = await http.post(f"{root}/tokenize", json=body, headers=headers)
        except httpx.HTTPError:
            return False
    return health.status_code == 200 and tokens.status_code == 200


def _replace(directory: Path, record: _Record, why: str) -> None:
    """Stop a server of ours that cannot be reused (`why`), if no program holds a lease on it.

    Raises:
        WarmServerUnavailable: Another program uses it.
    """
    lease = open_lock(directory / LEASE)
    try:
        if not try_lock(lease, exclusive=True):
            raise WarmServerUnavailable(
                f"the warm local model server (pid {record.pid}) {why} and is in use by "
                "another program"
            )
        stop_process(record.pid, record.started, STOP_GRACE_SECONDS)
        (directory / STATE).unlink(missing_ok=True)
    finally:
        os.close(lease)


def _take_lease(directory: Path, keep_alive: float) -> int:
    """A shared lease on the server (no program can hold it exclusively meanwhile)."""
    lease = open_lock(directory / LEASE)
    if not try_lock(lease, exclusive=False):  # only a holder of the start lock takes it so
        os.close(lease)
        raise LocalServerError("the warm local model server's lease is held exclusively")
    _mark_use(directory, keep_alive)
    return lease


def _mark_use(directory: Path, keep_alive: float) -> None:
    """Record a use now, and the keep-alive that applies from now on."""
    write_private(directory / USAGE, {"keep_alive": keep_alive})


async def _start(
    directory: Path, plan: _Plan, settings: dict[str, Any], keep_alive: float, timeout: float
) -> _Record:
    """Start a detached server, wait until it is healthy, and write the state file."""
    log = directory / LOG
    config = {
        "model_path": str(plan.model_path),
        "alias": plan.alias,
        "chat_template": plan.chat_template,
        "context_size": plan.context_size,
        "threads": plan.threads,
        "port": plan.port,
        "api_key": plan.api_key,
        "log_path": str(log),
        "run_dir": str(directory),
        "keep_alive": keep_alive,
        "model_stamp": settings["model_stamp"],
    }
    pid = await asyncio.to_thread(_spawn, config, log, timeout)
    started = process_start(pid)
    if started is None:
        raise _failed("exited during start-up", log)
    try:
        await _await_ready(pid, started, plan.port, log, timeout)
    except BaseException:
        stop_process(pid, started, STOP_GRACE_SECONDS)
        raise
    record = _Record(
        pid=pid,
        started=started,
        port=plan.port,
        api_key=plan.api_key,
        alias=plan.alias,
        threads=plan.threads,
        settings=settings,
    )
    record.write(directory)
    return record


def _spawn(config: dict[str, Any], log: Path, timeout: float) -> int:
    """Run the warm server's module; its first process tells the server's pid, then exits.

    The configuration, API key included, goes to its standard input, never to its command
    line, which other users of the machine can read.
    """
    fd = create_log(log)
    try:
        process = subprocess.Popen(
            module_command(WARM_MODULE),
            cwd=CHILD_FOLDER,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=fd,
            start_new_session=True,  # no terminal signals, no controlling terminal
        )
    finally:
        os.close(fd)
    try:  # its output ends when it has forked: the server writes to its log
        line, _ = process.communicate(json.dumps(config).encode() + b"\n", timeout=timeout)
    except BaseException:
        process.kill()
        process.communicate()
        raise
    line = line.strip()
    if not line.isdigit():
        raise _failed(f"exited during start-up (exit code {process.returncode})", log)
    return int(line)


async def _await_ready(pid: int, started: int, port: int, log: Path, timeout: float) -> None:
    """Wait until the server process itself listens on `port` and ``/health`` answers."""
    import httpx

    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(timeout=2.0, trust_env=False) as http:
        while time.monotonic() < deadline:
            if process_start(pid) != started:
                raise _failed("exited during start-up", log)
            if listens_on(pid, HOST, port):
                with contextlib.suppress(httpx.HTTPError):
                    if (await http.get(f"http://{HOST}:{port}/health")).status_code == 200:
                        return
            await asyncio.sleep(_POLL_SECONDS)
    raise _failed(f"did not become healthy within {timeout:g} s", log)


def _failed(what: str, log: Path) -> LocalServerError:
    tail = _log_tail(log)
    return LocalServerError(
        f"The warm llama.cpp server {what}. Its log ends with:\n{tail}", log_tail=tail
    )


def stop_warm_server() -> int | None:
    """Stop this user's warm local model server now, even while a program uses it.

    It is terminated (killed after 5 seconds if needed) and its state file removed; the
    next program that needs one starts a new one.

    Returns:
        The pid of the server stopped, or `None` when none was running.

    Raises:
        WarmServerUnavailable: The run directory is unsafe, or the platform is not Linux.
        LocalServerError: Its start lock stayed held, or it did not stop.
    """
    directory = run_dir()
    lock = lock_within(directory / START_LOCK, 3 * STOP_GRACE_SECONDS)
    if lock is None:
        raise LocalServerError(f"{directory / START_LOCK} stayed locked: is a start stuck?")
    try:
        record = _Record.read(directory)
        (directory / STATE).unlink(missing_ok=True)
        if record is None or not is_warm_server(record.pid, record.started):
            return None
        stop_process(record.pid, record.started, STOP_GRACE_SECONDS)
        return record.pid
    finally:
        os.close(lock)
