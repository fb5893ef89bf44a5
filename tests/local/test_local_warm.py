"""`WarmServer` and the command line's warm local model, against the fake xllamacpp.

Each test gets its own run directory (``$XDG_RUNTIME_DIR``), and every warm server process
started with it is stopped by its pid at the end of the test (found through ``/proc``: its
module and that environment variable), whatever the test did.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from glassagent import Message
from glassagent._local.rundir import process_start
from glassagent.cli._setup import open_client
from glassagent.errors import UserError
from glassagent.local import (
    DEFAULT_KEEP_ALIVE,
    KEEP_ALIVE_ENV,
    WarmServer,
    WarmServerUnavailable,
    keep_alive_from_env,
    stop_warm_server,
)
from tests.support.cli import cli_env, run_cli
from tests.support.loopback_server import LoopbackServer, Reply, Request

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")

FAKE = Path(__file__).parent / "fake_xllamacpp"
MODULE = b"glassagent._local.warm_child"
STOP_SECONDS = 10.0


def warm_pids(run: Path) -> list[int]:
    """The warm server processes started with `run` as their ``$XDG_RUNTIME_DIR``."""
    marker = f"XDG_RUNTIME_DIR={run}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[1:-1][-2:] == [b"-m", MODULE] and marker in environ:
            found.append(int(entry.name))
    return found


def holders(data: bytes, name: str) -> list[str]:
    """The processes whose /proc file `name` (cmdline, environ) holds `data`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and data in (entry / name).read_bytes():
                found.append(entry.name)
        except OSError:
            continue
    return found


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] not in "ZX"


def wait_until(condition: Any, timeout: float = STOP_SECONDS) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.fixture
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A new ``$XDG_RUNTIME_DIR``; its warm servers are killed at the end, by pid."""
    monkeypatch.delenv(KEEP_ALIVE_ENV, raising=False)
    path = Path(tempfile.mkdtemp(prefix="run-", dir=tmp_path))  # mode 0700
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(path))
    try:
        yield path
    finally:
        for pid in warm_pids(path):
            os.kill(pid, signal.SIGKILL)
        assert wait_until(lambda: not any(alive(pid) for pid in warm_pids(path)))


@pytest.fixture
def run(runtime: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`runtime`, with the fake xllamacpp for the servers."""
    monkeypatch.syspath_prepend(str(FAKE))
    path = os.pathsep.join(p for p in (str(FAKE), os.environ.get("PYTHONPATH")) if p)
    monkeypatch.setenv("PYTHONPATH", path)
    return runtime


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "tiny-model.gguf"
    path.write_bytes(b"GGUF" + b"\0" * 64)
    return path


def state(run: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run / "glassagent" / "server.json").read_text())
    return data


async def ask(server: WarmServer) -> str:
    async with server.client() as client:
        return (await client.chat([Message(role="user", content="hi")])).text


# -- discovery and reuse -------------------------------------------------------------------


@pytest.mark.slow
def test_two_commands_share_one_server_that_keeps_running(
    run: Path, model: Path, tmp_path: Path
) -> None:
    command = ["run", "--provider", "local", "--model", str(model), "hi"]
    first = run_cli(*command, cwd=tmp_path, env=cli_env())
    second = run_cli(*command, cwd=tmp_path, env=cli_env())
    assert first.returncode == 0, first.stderr
    assert second.returncode == 0, second.stderr
    assert "tiny-model saw tiny-model" in first.stdout
    assert "tiny-model saw tiny-model" in second.stdout
    pid = state(run)["pid"]
    assert f"started a local model server (pid {pid})" in first.stderr
    assert f"reusing the running local model server (pid {pid})" in second.stderr
    assert warm_pids(run) == [pid]  # outlives both commands
    directory = run / "glassagent"
    assert directory.stat().st_mode & 0o777 == 0o700
    for name in ("server.json", "server.log", "lease", "start.lock", "last-use.json"):
        assert (directory / name).stat().st_mode & 0o777 == 0o600, name
    assert stop_warm_server() == pid
    assert not alive(pid)
    assert stop_warm_server() is None


async def test_open_client_twice_reuses_the_server(run: Path, model: Path) -> None:
    notes: list[str] = []
    answers = []
    for _ in range(2):
        async with open_client("local", str(model), None, notes.append) as client:
            answers.append((await client.chat([Message(role="user", content="hi")])).text)
    pid = state(run)["pid"]
    assert answers == ["tiny-model saw tiny-model"] * 2
    assert notes[1] == f"started a local model server (pid {pid}); it keeps running until " + (
        f"unused for 10 min ({KEEP_ALIVE_ENV}=0: stop it with each command)"
    )
    assert notes[3] == f"reusing the running local model server (pid {pid})"
    assert warm_pids(run) == [pid]


async def test_other_settings_replace_an_unused_server(run: Path, model: Path) -> None:
    async with WarmServer(model, context_size=4096) as server:
        old = server.pid
        assert not server.reused
    async with WarmServer(model, context_size=4096) as server:
        assert server.reused
        assert server.pid == old
    async with WarmServer(model, context_size=2048) as server:
        assert not server.reused
        assert server.pid != old
        assert await ask(server) == "tiny-model saw tiny-model"
        new = server.pid
    assert not alive(old)
    os.utime(model, ns=(0, 0))  # the model file changed: a new server, and the old one stops
    async with WarmServer(model, context_size=2048) as server:
        assert server.pid != new
    assert not alive(new)


@pytest.mark.slow
async def test_a_server_in_use_is_never_stopped_for_other_settings(
    run: Path, model: Path, tmp_path: Path
) -> None:
    async with WarmServer(model, context_size=4096) as server:
        with pytest.raises(WarmServerUnavailable, match="other settings and is in use"):
            await WarmServer(model, context_size=2048).open()
        # the command line falls back to a server of its own
        done = run_cli("run", "--provider", "local", "--model", str(model), "hi", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert "not keeping the local model running between commands" in done.stderr
        assert "starting the embedded local model" in done.stderr
        assert alive(server.pid)
        assert await ask(server) == "tiny-model saw tiny-model"
        assert warm_pids(run) == [server.pid]


@pytest.mark.slow
def test_concurrent_starts_make_one_server(run: Path, model: Path) -> None:
    code = (
        "import asyncio, sys\n"
        "from glassagent.local import WarmServer\n"
        "async def main():\n"
        "    async with WarmServer(sys.argv[1]) as server:\n"
        "        print(server.pid, server.reused)\n"
        "asyncio.run(main())\n"
    )
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(model)], stdout=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    outputs = [process.communicate(timeout=60)[0].split() for process in processes]
    assert all(process.returncode == 0 for process in processes)
    assert len({pid for pid, _ in outputs}) == 1, outputs
    assert sorted(reused for _, reused in outputs) == ["False", "True", "True"]
    assert len(warm_pids(run)) == 1


# -- what is not trusted -------------------------------------------------------------------


async def test_a_dead_server_in_the_state_file_is_replaced(run: Path, model: Path) -> None:
    async with WarmServer(model) as server:
        old = server.pid
    os.kill(old, signal.SIGKILL)
    assert wait_until(lambda: not alive(old))
    async with WarmServer(model) as server:
        assert not server.reused
        assert server.pid != old
        assert await ask(server) == "tiny-model saw tiny-model"


async def test_another_program_on_the_port_never_gets_the_key(run: Path, model: Path) -> None:
    seen: list[Request] = []

    def record(request: Request) -> Reply:
        seen.append(request)
        return Reply.body(b'{"status": "ok"}')

    async with WarmServer(model) as server:
        real = state(run)
    key = real["api_key"]
    with LoopbackServer(record) as other:
        port = int(other.url.rsplit(":", 1)[1])
        path = run / "glassagent" / "server.json"
        # our server's record, but another program's port
        path.write_text(json.dumps({**real, "port": port}))
        async with WarmServer(model) as server:
            assert not server.reused  # ours, but not on that port: replaced
            assert server.pid != real["pid"]
        assert not alive(real["pid"])
        # a live process that is not our server (this test), on that port
        started = process_start(os.getpid())
        now = state(run)
        path.write_text(json.dumps({**now, "pid": os.getpid(), "started": started, "port": port}))
        async with WarmServer(model) as server:
            assert not server.reused
    assert not any(key in str(request.headers) for request in seen)
    assert seen == []  # not even /health: the port was not its process's


async def test_an_unsafe_run_directory_is_refused(run: Path, model: Path) -> None:
    directory = run / "glassagent"
    directory.mkdir(mode=0o700)
    directory.chmod(0o770)
    with pytest.raises(WarmServerUnavailable, match="writable by group or others"):
        await WarmServer(model).open()
    with pytest.raises(WarmServerUnavailable, match="writable by group or others"):
        stop_warm_server()
    notes: list[str] = []
    async with open_client("local", str(model), None, notes.append) as client:
        assert (await client.chat([Message(role="user", content="hi")])).text.startswith("tiny")
    assert "not keeping the local model running between commands" in notes[1]
    assert "starting the embedded local model" in notes[2]
    assert warm_pids(run) == []
    if os.getuid() == 0:  # only root can give it away
        directory.chmod(0o700)
        os.chown(directory, 65534, 65534)
        with pytest.raises(WarmServerUnavailable, match="owned by another user"):
            await WarmServer(model).open()
    directory.rmdir()
    directory.symlink_to(run)
    with pytest.raises(WarmServerUnavailable, match="not a directory"):
        await WarmServer(model).open()


async def test_a_state_file_others_can_read_is_not_trusted(run: Path, model: Path) -> None:
    async with WarmServer(model) as server:
        old = server.pid
    (run / "glassagent" / "server.json").chmod(0o644)
    async with WarmServer(model) as server:
        assert not server.reused
        assert server.pid != old
    os.kill(old, signal.SIGKILL)  # the server no file names any more


async def test_the_key_is_on_no_command_line_and_in_no_log(run: Path, model: Path) -> None:
    async with WarmServer(model) as server:
        key = server.api_key
        assert key not in repr(server)
        log = server.log_path
    assert holders(key.encode(), "cmdline") == []
    assert holders(key.encode(), "environ") == []
    assert log.read_text()
    assert key not in log.read_text()


# -- when it stops ---------------------------------------------------------------------------


async def test_an_idle_server_stops_itself(run: Path, model: Path) -> None:
    async with WarmServer(model, keep_alive=0.5) as server:
        pid = server.pid
    assert wait_until(lambda: not alive(pid))
    assert not (run / "glassagent" / "server.json").exists()
    assert "idle, stopping" in (run / "glassagent" / "server.log").read_text()


@pytest.mark.slow
async def test_a_server_whose_run_folder_is_removed_stops(run: Path, model: Path) -> None:
    async with WarmServer(model, keep_alive=600) as server:
        pid = server.pid
    shutil.rmtree(run / "glassagent")  # as at logout, when the runtime folder goes
    assert wait_until(lambda: not alive(pid))


@pytest.mark.slow
async def test_a_lease_keeps_it_running_past_the_keep_alive(run: Path, model: Path) -> None:
    async with WarmServer(model, keep_alive=0.3) as server:
        pid = server.pid
        await asyncio.sleep(1.5)
        assert alive(pid)
        assert await ask(server) == "tiny-model saw tiny-model"
        async with WarmServer(model, keep_alive=0.3) as second:
            assert second.pid == pid
        await asyncio.sleep(1.0)  # the second one left, the first still holds its lease
        assert alive(pid)
    assert wait_until(lambda: not alive(pid))


@pytest.mark.slow
async def test_the_latest_use_sets_the_keep_alive(run: Path, model: Path) -> None:
    async with WarmServer(model, keep_alive=600) as server:
        pid = server.pid
    async with WarmServer(model, keep_alive=0.3) as server:
        assert server.reused
    assert wait_until(lambda: not alive(pid))


@pytest.mark.slow
def test_a_changed_model_file_stops_an_unused_server(run: Path, model: Path) -> None:
    async def start() -> int:
        async with WarmServer(model) as server:
            return server.pid

    pid = asyncio.run(start())
    model.write_bytes(b"GGUF" + b"\1" * 64)
    assert wait_until(lambda: not alive(pid))


# -- the keep-alive setting ------------------------------------------------------------------


def test_the_keep_alive_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEEP_ALIVE_ENV, raising=False)
    assert keep_alive_from_env() == DEFAULT_KEEP_ALIVE == 600
    for text, seconds in (("0", 0.0), (" 90 ", 90.0), ("2.5", 2.5)):
        monkeypatch.setenv(KEEP_ALIVE_ENV, text)
        assert keep_alive_from_env() == seconds
    for text in ("-1", "ten", "nan", "inf"):
        monkeypatch.setenv(KEEP_ALIVE_ENV, text)
        with pytest.raises(UserError, match=KEEP_ALIVE_ENV):
            keep_alive_from_env()
    with pytest.raises(UserError, match="keep_alive"):
        WarmServer(keep_alive=0)


@pytest.mark.slow
def test_keep_alive_zero_starts_and_stops_a_server_per_command(
    run: Path, model: Path, tmp_path: Path
) -> None:
    done = run_cli(
        "run", "--provider", "local", "--model", str(model), "hi",
        cwd=tmp_path, env=cli_env(**{KEEP_ALIVE_ENV: "0"}),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "starting the embedded local model (tiny-model.gguf)" in done.stderr
    assert "local model server" not in done.stderr
    assert warm_pids(run) == []
    assert not (run / "glassagent").exists()
    bad = run_cli(
        "run", "--provider", "local", "--model", str(model), "hi",
        cwd=tmp_path, env=cli_env(**{KEEP_ALIVE_ENV: "soon"}),
    )  # fmt: skip
    assert bad.returncode == 2
    assert f"{KEEP_ALIVE_ENV} must be a number of seconds" in bad.stderr


# -- the real model ----------------------------------------------------------------------------

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sample_project"
NEXT_TURN_SECONDS = 3.0


def timed_run(*args: str, cwd: Path) -> dict[str, float]:
    """Run ``glassagent run ARGS --json``; when its first model call was sent and answered.

    Times are seconds from the process's start: ``request`` (the first ``llm_request``
    event), ``answer`` (the first streamed thought, text or tool call) and ``end``.
    """
    started = time.time()
    process = subprocess.Popen(
        [sys.executable, "-m", "glassagent", "run", "--provider", "local", "--json", *args],
        cwd=cwd, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    times: dict[str, float] = {}
    try:
        stdout, stderr = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, stderr
    times["end"] = time.time() - started
    for event in map(json.loads, stdout.splitlines()):
        at = event["timestamp"] - started
        if event["type"] == "llm_request":
            times.setdefault("request", at)
        if event["type"] in ("thinking_chunk", "text_chunk", "function_call_start"):
            times.setdefault("answer", at)
    return times


def prompt_tokens(log: str) -> list[int]:
    """The tokens llama.cpp evaluated for each request's prompt (what was not cached)."""
    return [
        int(line.split("/")[-1].split()[0])
        for line in log.splitlines()
        if "prompt eval time" in line
    ]


@pytest.mark.real_model
def test_the_next_command_answers_within_3_seconds_on_the_warm_model(
    runtime: Path, tmp_path: Path
) -> None:
    from glassagent.local import ensure_default_model

    ensure_default_model()  # fetched once, outside the measured runs
    project = Path(shutil.copytree(SAMPLE, tmp_path / "project"))
    history = ["--history", str(tmp_path / "chat.json"), "--max-iterations", "3"]
    first = timed_run(*history, "What files are in the workspace? Use list_files.", cwd=project)
    second = timed_run(
        *history, "How many files did you find? Answer in one short sentence.", cwd=project
    )
    log = (runtime / "glassagent" / "server.log").read_text()
    key = state(runtime)["api_key"]
    assert key not in log
    assert holders(key.encode(), "cmdline") == []
    print(f"\nfirst command (cold start): {first}\nsecond command (warm): {second}")
    print(f"prompt tokens evaluated per request: {prompt_tokens(log)}")
    assert len(warm_pids(runtime)) == 1
    # The target (the next turn answers within NEXT_TURN_SECONDS on 2 cores) is measured and
    # published in docs/local.md; on a shared machine the test checks what it can: that the
    # warm turn starts answering in well under half the cold one's time.
    assert second["answer"] < first["answer"] / 2, (first, second)
    # the earlier turns came from llama.cpp's prompt cache: only the new tokens were evaluated
    assert prompt_tokens(log)[-1] < 100, prompt_tokens(log)
    assert "selected slot by LCP similarity" in log
