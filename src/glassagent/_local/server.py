"""`LocalServer`: the embedded llama.cpp server, run in a child process we own."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any

from glassagent._core.errors import ConfigurationError, UserError
from glassagent._local.client import LocalServerClient, SlowCallHint, local_client
from glassagent._local.errors import LocalServerError
from glassagent._local.fetch import ensure_default_model
from glassagent._local.model import DEFAULT_MODEL, check_model_file

if TYPE_CHECKING:
    from typing_extensions import Self

HOST = "127.0.0.1"
STOP_GRACE_SECONDS = 5.0
"""How long `stop` waits after terminating the server before it kills it."""
_POLL_SECONDS = 0.1
_LOG_TAIL_LINES = 30
_TEMPLATE = "qwen2.5-json-tools.jinja"


@dataclass(frozen=True, kw_only=True)
class _Plan:
    """Everything the child process needs, resolved and checked."""

    model_path: Path
    alias: str
    chat_template: str | None
    context_size: int
    threads: int
    port: int
    api_key: str = field(repr=False)


@dataclass(kw_only=True)
class _Child:
    """A running server process and its log file."""

    process: subprocess.Popen[bytes]
    log_path: Path
    port: int


def default_threads() -> int:
    """The default number of generation threads: one fewer than the CPUs we may use, at least 1.

    The CPUs are those this process may run on (its affinity) where the platform tells,
    else all of them. Leaving one free keeps llama.cpp's threads from competing with your
    program and the server's own HTTP threads: on a busy machine, oversubscribed threads
    make every call many times slower.
    """
    if hasattr(os, "sched_getaffinity"):
        count = len(os.sched_getaffinity(0))
    else:  # macOS, Windows
        count = os.cpu_count() or 1
    return max(1, count - 1)


def default_chat_template() -> str:
    """The chat template used with the default model (Qwen2.5's, without `<tool_call>` tags)."""
    return (resources.files("glassagent._local") / "templates" / _TEMPLATE).read_text("utf-8")


class LocalServer:
    """The embedded llama.cpp server (from the `xllamacpp` package), on 127.0.0.1.

    Use it as an async or a sync context manager. On entry it starts llama.cpp's own
    OpenAI-compatible server in a child process on a free port, with a fresh random API key
    (which `client` passes on), without the web UI and without open CORS, and waits until
    ``/health`` answers; on exit (also on error or cancellation) it terminates that process,
    kills it after a grace period if needed, and reaps it. A crash of the server cannot take
    your process down, and the server never outlives your process.

    ```python
    async with LocalServer() as server:
        agent = Agent(server.client(), [add])
        print((await agent.run("What is 17 + 25?")).text)
    ```

    Args:
        model_path: A GGUF model file. By default, the default model from
            `ensure_default_model` (fetched on first use).
        chat_template: A Jinja chat template that replaces the model's own: a `str` is the
            template itself, a `Path` a file holding it. By default, the default model uses
            the shipped template with which llama.cpp parses its tool calls; other models
            use their own.
        context_size: The context window, in tokens.
        threads: CPU threads for generation; by default `default_threads()`, one fewer
            than the CPUs this process may use (at least 1).
        port: The port to listen on; by default a free one.
        startup_timeout: Seconds to wait for the server to become healthy.

    Raises:
        UserError: For a non-positive `context_size`, `threads` or `startup_timeout`.
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        chat_template: str | Path | None = None,
        context_size: int = 4096,
        threads: int | None = None,
        port: int | None = None,
        startup_timeout: float = 120.0,
    ) -> None:
        if context_size <= 0 or (threads is not None and threads <= 0) or startup_timeout <= 0:
            raise UserError("context_size, threads and startup_timeout must be positive.")
        self._model_path = None if model_path is None else Path(model_path)
        self._chat_template = chat_template
        self._context_size = context_size
        self._threads = default_threads() if threads is None else threads
        self._port = port
        self._startup_timeout = startup_timeout
        self._child: _Child | None = None
        self._alias = ""
        self._api_key = ""
        self._hint = SlowCallHint(self._threads)

    # -- what a running server exposes -------------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether the server process is alive."""
        return self._child is not None and self._child.process.poll() is None

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL, e.g. ``http://127.0.0.1:43123/v1``."""
        return f"{self._root_url()}/v1"

    @property
    def model_name(self) -> str:
        """The name the server knows its model by (used in requests)."""
        self._require_child()
        return self._alias

    @property
    def context_size(self) -> int:
        """The context window the server is started with, in tokens.

        Its clients' profile (`LocalServerClient.profile`) says so, so the agent's
        context check uses the window the server really has.
        """
        return self._context_size

    @property
    def threads(self) -> int:
        """The number of CPU threads the server generates with."""
        return self._threads

    @property
    def api_key(self) -> str:
        """The API key the server requires, new at each start; `client` sends it for you.

        Pass it to other clients of this server (e.g. ``Authorization: Bearer <key>``).
        It is never shown in reprs or errors; keep it that way.
        """
        self._require_child()
        return self._api_key

    @property
    def pid(self) -> int:
        """The server's process id."""
        return self._require_child().process.pid

    @property
    def log_path(self) -> Path:
        """The server's log file (removed when the server stops)."""
        return self._require_child().log_path

    def client(self, **options: Any) -> LocalServerClient:
        """A client for this server: an `OpenAICompatibleClient` that carries its API key.

        Args:
            **options: Further keyword arguments for `OpenAICompatibleClient`, e.g.
                ``tool_protocol="native"``; ``model`` defaults to `model_name`, ``api_key``
                to the server's `api_key` (``OPENAI_API_KEY`` is never sent),
                ``json_grammar`` to `True` (llama.cpp constrains JSON-protocol replies to
                the protocol's schema) and, for the default model, ``tool_protocol`` to
                ``"json"``: on the coding agent's prompts it was the only protocol whose
                plain answers came in one call and streamed (see "Choosing the tool
                protocol" in the local-model guide).
        """
        return local_client(
            self.base_url, self.model_name, self.api_key, self._hint, options, self._context_size
        )

    # -- start and stop ------------------------------------------------------------------

    def start(self) -> None:
        """Start the server and wait until it is healthy (blocking).

        Raises:
            ConfigurationError: The ``local`` extra (xllamacpp) is not installed.
            ModelFileError: The model file is missing or not a GGUF file.
            ModelDownloadError: The default model could not be fetched.
            LocalServerError: The server exited or did not become healthy in time.
        """
        self._require_stopped()
        plan = self._plan()
        self._child = _spawn(plan)
        try:
            _wait_healthy(self._child, self._startup_timeout)
        except BaseException:
            self.stop()
            raise

    async def astart(self) -> None:
        """Start the server and wait until it is healthy, without blocking the event loop.

        Raises:
            ConfigurationError: The ``local`` extra (xllamacpp) is not installed.
            ModelFileError: The model file is missing or not a GGUF file.
            ModelDownloadError: The default model could not be fetched.
            LocalServerError: The server exited or did not become healthy in time.
        """
        self._require_stopped()
        plan = await asyncio.to_thread(self._plan)
        self._child = _spawn(plan)
        try:
            await _await_healthy(self._child, self._startup_timeout)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop the server: terminate it, kill it after a grace period, reap it. Idempotent."""
        child, self._child = self._child, None
        if child is not None:
            try:
                _terminate(child.process)
            finally:
                child.log_path.unlink(missing_ok=True)

    async def astop(self) -> None:
        """Stop the server like `stop`, waiting without blocking the event loop."""
        child, self._child = self._child, None
        if child is None:
            return
        try:
            with contextlib.suppress(ProcessLookupError):
                child.process.terminate()
            deadline = time.monotonic() + STOP_GRACE_SECONDS
            # a child process offers no event to await: poll it
            while child.process.poll() is None and time.monotonic() < deadline:  # noqa: ASYNC110
                await asyncio.sleep(_POLL_SECONDS / 2)
        finally:
            _terminate(child.process)  # kills and reaps what is left, even when cancelled
            child.log_path.unlink(missing_ok=True)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        await self.astart()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.astop()

    def __repr__(self) -> str:
        state = f"running at {self.base_url}" if self.running else "stopped"
        return f"LocalServer(model_path={self._model_path!r}, {state})"

    # -- helpers ---------------------------------------------------------------------------

    def _require_child(self) -> _Child:
        if self._child is None:
            raise UserError("The local server is not running; use `async with LocalServer()`.")
        return self._child

    def _require_stopped(self) -> None:
        if self._child is not None:
            raise UserError("The local server is already running.")

    def _root_url(self) -> str:
        return f"http://{HOST}:{self._require_child().port}"

    def _plan(self) -> _Plan:
        """Check the extra and the model (fetching the default one), pick the port."""
        if importlib.util.find_spec("xllamacpp") is None:
            raise ConfigurationError(
                'The embedded local model needs the `local` extra: pip install "glassagent[local]"'
            )
        path = self._model_path or ensure_default_model()
        check_model_file(path)
        is_default = path.name == DEFAULT_MODEL.file_name
        template = self._chat_template
        if isinstance(template, Path):
            template = template.read_text("utf-8")
        elif template is None and is_default:
            template = default_chat_template()
        self._alias = DEFAULT_MODEL.name if is_default else path.stem
        self._api_key = secrets.token_urlsafe(32)
        self._hint = SlowCallHint(self._threads)
        return _Plan(
            model_path=path.resolve(),
            alias=self._alias,
            chat_template=template,
            context_size=self._context_size,
            threads=self._threads,
            port=self._port or _free_port(),
            api_key=self._api_key,
        )


CHILD_FOLDER = os.path.abspath(os.sep)
"""The working folder of the server processes: ``python -m`` imports from its working
folder first, and the file system's root holds no module a user could have planted."""


def module_command(module: str) -> list[str]:
    """The command line that runs `module` in a child process, safe from planted modules.

    ``-P`` (Python 3.11 and newer) keeps the working folder off the import path; the child
    also runs in `CHILD_FOLDER`, which older Pythons need.
    """
    safe_path = ["-P"] if sys.version_info >= (3, 11) else []
    return [sys.executable, *safe_path, "-m", module]


def _free_port() -> int:
    """A port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
        return port


def _spawn(plan: _Plan) -> _Child:
    """Start the child process, its output going to a fresh log file (readable by us only).

    The configuration, API key included, goes to the child's standard input, never to its
    command line, which other users of the machine can read.
    """
    fd, log_name = tempfile.mkstemp(prefix="glassagent-llama-server-", suffix=".log")
    config = {
        "model_path": str(plan.model_path),
        "alias": plan.alias,
        "chat_template": plan.chat_template,
        "context_size": plan.context_size,
        "threads": plan.threads,
        "port": plan.port,
        "api_key": plan.api_key,
        "log_path": log_name,
    }
    with os.fdopen(fd, "wb") as log:
        process = subprocess.Popen(
            module_command("glassagent._local.child"),
            cwd=CHILD_FOLDER,
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=sys.platform != "win32",  # keep terminal signals to us
        )
    assert process.stdin is not None
    with contextlib.suppress(BrokenPipeError):  # a child that died is reported by the health check
        process.stdin.write(json.dumps(config).encode() + b"\n")
        process.stdin.flush()
    return _Child(process=process, log_path=Path(log_name), port=plan.port)


def _health_status(child: _Child, response_status: int | None) -> bool:
    """Whether the server is healthy; raises when the process has exited."""
    code = child.process.poll()
    if code is not None:
        tail = _log_tail(child.log_path)
        raise LocalServerError(
            f"The llama.cpp server exited during start-up (exit code {code}). Its log ends "
            f"with:\n{tail}",
            log_tail=tail,
        )
    # Trust /health only once our child says it has bound the port: before that, another
    # program on the port could answer (and would then receive the key).
    return response_status == 200 and _announced(child.log_path)


_ANNOUNCEMENT = b"glassagent: llama.cpp server listening on "


def _announced(log_path: Path) -> bool:
    """Whether the child wrote that its server is listening (see `child.main`)."""
    try:
        return _ANNOUNCEMENT in log_path.read_bytes()
    except OSError:
        return False


def _timed_out(child: _Child, timeout: float) -> LocalServerError:
    tail = _log_tail(child.log_path)
    return LocalServerError(
        f"The llama.cpp server did not become healthy within {timeout:g} s. Its log ends "
        f"with:\n{tail}",
        log_tail=tail,
    )


def _wait_healthy(child: _Child, timeout: float) -> None:
    import httpx

    url = f"http://{HOST}:{child.port}/health"
    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=2.0, trust_env=False) as http:
        while time.monotonic() < deadline:
            status = None
            with contextlib.suppress(httpx.HTTPError):
                status = http.get(url).status_code
            if _health_status(child, status):
                return
            time.sleep(_POLL_SECONDS)
    raise _timed_out(child, timeout)


async def _await_healthy(child: _Child, timeout: float) -> None:
    import httpx

    url = f"http://{HOST}:{child.port}/health"
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(timeout=2.0, trust_env=False) as http:
        while time.monotonic() < deadline:
            status = None
            with contextlib.suppress(httpx.HTTPError):
                status = (await http.get(url)).status_code
            if _health_status(child, status):
                return
            await asyncio.sleep(_POLL_SECONDS)
    raise _timed_out(child, timeout)


def _terminate(process: subprocess.Popen[bytes]) -> None:
    """Terminate, then kill after the grace period; always reap and close the pipe."""
    try:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(STOP_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
        process.wait()
    finally:
        stdin: IO[bytes] | None = process.stdin
        if stdin is not None:
            with contextlib.suppress(OSError):
                stdin.close()


def _log_tail(path: Path, lines: int = _LOG_TAIL_LINES) -> str:
    """The last `lines` lines of the log file."""
    try:
        text = path.read_text("utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:]) or "(empty log)"
