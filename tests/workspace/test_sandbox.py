"""The sandbox of execute_command, with real processes, sockets and files.

Processes a command starts are watched from the host by a token no other process has in its
command line (a `sleep` duration made for the test): a pid the command prints is one of its
own PID namespace and means nothing outside.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import shlex
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from glassagent.errors import UserError
from glassagent.workspace import SandboxMode, SandboxSupport, Workspace, sandbox_support
from tests.support.sandbox import (
    PYTHON,
    SUPPORT,
    connect_script,
    escapes,
    kill_all,
    listener,
    needs_sandbox,
    none_running,
    running,
    token,
)
from tests.support.workspace import context, run_one, tools


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "workspace"
    folder.mkdir()
    return folder


# ---- support --------------------------------------------------------------------------------


def test_support_is_measured_once_and_told_plainly() -> None:
    assert sandbox_support() is SUPPORT
    if sys.platform.startswith("linux") and os.environ.get("CI"):
        assert SUPPORT.available, SUPPORT.reason  # CI's machines can make it
    if SUPPORT.available:
        assert SUPPORT.reason == ""
        assert SUPPORT.landlock_abi >= 1
        assert SUPPORT.namespaces == ("user", "mount", "pid", "ipc")  # network: per workspace
        assert SUPPORT.proc in ("private", "hidden")
        assert f"Landlock ABI {SUPPORT.landlock_abi}" in SUPPORT.describe()
        assert "(user, mount, pid, ipc; network unless allowed)" in SUPPORT.describe()
    else:
        assert SUPPORT.reason
        assert SUPPORT.describe() == f"no sandbox: {SUPPORT.reason}"


def test_other_systems_have_no_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    from glassagent._workspace import sandbox

    monkeypatch.setattr(sys, "platform", "darwin")
    support, lasting = sandbox._measure()
    assert lasting
    assert not support.available
    assert support.reason == "the sandbox needs Linux (namespaces and Landlock); this is macOS"


def test_a_failed_probe_names_the_step_that_failed(tmp_path: Path) -> None:
    from glassagent._workspace import sandbox

    stderr = "glassagent sandbox: unshare (user, mount, PID namespaces) failed: Operation not "
    stderr += "permitted\n"
    assert sandbox._failure(stderr).startswith("unshare (user, mount, PID namespaces) failed")
    landlock = sandbox._failure("glassagent sandbox: Landlock is not available in this kernel\n")
    assert landlock.endswith("(it needs Linux 5.13 or later with Landlock enabled, lsm=landlock)")
    # a step that fails in the launcher itself ends it with exit code 125 and that line
    data = sandbox.launcher_input(
        ":", cwd=tmp_path / "missing", tmp=tmp_path, env={}, network=False
    )
    if SUPPORT.available:
        done = subprocess.run(sandbox.launcher_argv(), input=data, capture_output=True, check=False)
        assert done.returncode == 125
        assert done.stderr.decode().startswith("glassagent sandbox: No such file or directory")


@pytest.fixture
def unsupported(monkeypatch: pytest.MonkeyPatch) -> str:
    reason = "user namespaces are restricted here (simulated)"
    monkeypatch.setattr(
        "glassagent._workspace.sandbox.sandbox_support", lambda: SandboxSupport(False, reason)
    )
    monkeypatch.setattr("glassagent._workspace.sandbox._warned", False)
    return reason


def test_required_refuses_commands_where_the_sandbox_cannot_be_made(
    root: Path, unsupported: str
) -> None:
    with pytest.raises(UserError, match="sandbox='required'") as raised:
        Workspace(root, allow_commands=True, sandbox="required")
    assert unsupported in str(raised.value)
    no_commands = Workspace(root, sandbox="required")  # nothing to refuse
    assert not no_commands.sandboxed
    with pytest.raises(UserError, match="`sandbox` must be"):
        Workspace(root, allow_commands=True, sandbox="strict")  # type: ignore[arg-type]


async def test_auto_runs_unsandboxed_where_it_cannot_and_says_so_once(
    root: Path, unsupported: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="glassagent"):
        first = Workspace(root, allow_commands=True)
        Workspace(root, allow_commands=True)
    warnings = [r.getMessage() for r in caplog.records if r.name == "glassagent"]
    assert warnings == [f"execute_command runs commands WITHOUT a sandbox: {unsupported}"]
    assert not first.sandboxed
    assert first.sandbox_status == f"commands run WITHOUT a sandbox: {unsupported}"
    outcome = await run_one(first, "execute_command", command="echo hi")
    assert outcome.result == "hi\n[exit code 0]"


def test_env_must_map_names_to_text(root: Path) -> None:
    for env in ({"A=B": "x"}, {"": "x"}, {"A": 1}, ["A"]):
        with pytest.raises(UserError, match="`env`"):
            Workspace(root, allow_commands=True, env=env)  # type: ignore[arg-type]
    ws = Workspace(root, env={"A": "1"})
    with pytest.raises(TypeError):
        ws.env["B"] = "2"  # type: ignore[index]


# ---- nothing outlives the call ----------------------------------------------------------


def own_command_line() -> str:
    return Path("/proc/self/cmdline").read_bytes().replace(b"\0", b" ").decode()


@needs_sandbox
async def test_processes_that_leave_the_group_end_with_the_command(root: Path) -> None:
    mark = token()
    try:
        outcome = await run_one(Workspace(root, allow_commands=True), "execute_command",
                                command=escapes(mark))  # fmt: skip
        assert outcome.result == "started\n[exit code 0]"
        assert await none_running(mark)
    finally:
        kill_all(mark)


async def test_without_the_sandbox_they_escape(root: Path) -> None:
    # What the sandbox is for: the process group's kill misses those that left it.
    if sys.platform == "win32":
        pytest.skip("no commands on Windows")
    mark = token()
    try:
        ws = Workspace(root, allow_commands=True, sandbox="off")
        outcome = await run_one(ws, "execute_command", command=escapes(mark, quiet=True))
        assert outcome.result == "started\n[exit code 0]"
        await asyncio.sleep(0.1)
        assert len(running(mark)) == 2
    finally:
        kill_all(mark)


@needs_sandbox
async def test_a_timeout_ends_them_too(root: Path) -> None:
    mark = token()
    try:
        ws = Workspace(root, allow_commands=True)
        outcome = await run_one(
            ws, "execute_command", command=f"{escapes(mark)}; sleep {mark}", timeout=0.5
        )
        assert outcome.result.startswith("Error: the command did not finish within 0.5 s")
        assert "started" in outcome.result
        assert await none_running(mark)
    finally:
        kill_all(mark)


@needs_sandbox
async def test_a_cancelled_call_ends_them_too(root: Path) -> None:
    mark = token()
    started = asyncio.Event()
    execute = tools(Workspace(root, allow_commands=True))["execute_command"]
    ctx = context("execute_command", lambda line: started.set())
    task = asyncio.create_task(execute(f"{escapes(mark)}; sleep {mark}", ctx=ctx))
    try:
        await asyncio.wait_for(started.wait(), 10)
        assert len(running(mark)) >= 4  # the three, the last sleep (and the shell)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await none_running(mark)
    finally:
        kill_all(mark)


# ---- what a command sees and may do ----------------------------------------------------------


@needs_sandbox
async def test_no_network_unless_allowed_but_a_loopback_of_its_own(root: Path) -> None:
    with listener() as server:
        command = connect_script(server.getsockname())
        closed = await run_one(Workspace(root, allow_commands=True), "execute_command",
                               command=command)  # fmt: skip
        assert closed.result.startswith("refused 111"), closed.result  # nothing listens there
        ws = Workspace(root, allow_commands=True, allow_network=True)
        assert "(Linux namespaces: user, mount, pid, ipc; Landlock" in ws.sandbox_status
        assert ws.sandbox_status.endswith("; network allowed") or SUPPORT.landlock_abi < 6
        opened = await run_one(ws, "execute_command", command=command)
        assert opened.result == "connected\n[exit code 0]"
        server.accept()[0].close()
    local = (
        "import socket\n"
        "s=socket.create_server(('127.0.0.1',0))\n"
        "c=socket.create_connection(s.getsockname(),2)\n"
        "print('local ok')\n"
    )
    inside = await run_one(Workspace(root, allow_commands=True), "execute_command",
                           command=f"{PYTHON} -I -c {shlex.quote(local)}")  # fmt: skip
    assert inside.result == "local ok\n[exit code 0]"


@needs_sandbox
async def test_host_sockets_are_out_of_reach(root: Path, tmp_path: Path) -> None:
    # A unix socket in the host's /tmp (as tmux's, X11's, ssh-agent's) is not there at all;
    # an abstract one is in another network namespace, or scoped out by Landlock ABI 6.
    path = str(tmp_path / "host.sock")
    abstract = f"\0glassagent-test-{secrets.token_hex(8)}"
    with listener(socket.AF_UNIX, path), listener(socket.AF_UNIX, abstract):
        for allow_network in (False, True):
            ws = Workspace(root, allow_commands=True, allow_network=allow_network)
            by_path = await run_one(ws, "execute_command",
                                    command=connect_script(path, "AF_UNIX"))  # fmt: skip
            assert by_path.result.startswith("refused 2"), by_path.result  # ENOENT
            if allow_network and SUPPORT.landlock_abi < 6:
                continue
            hidden = await run_one(ws, "execute_command",
                                   command=connect_script(abstract, "AF_UNIX"))  # fmt: skip
            assert hidden.result.startswith("refused"), hidden.result


@pytest.fixture
def outside() -> Iterator[Path]:
    """A folder outside /tmp (the sandbox's /tmp is its own, so a write there is no test)."""
    folder = Path(tempfile.mkdtemp(dir="/var/tmp" if os.path.isdir("/var/tmp") else None))
    yield folder
    (folder / "f").unlink(missing_ok=True)
    folder.rmdir()


def present(path: str | Path) -> bool:
    return os.path.exists(path)


@needs_sandbox
async def test_writes_only_in_the_workspace_and_its_temporary_folders(
    root: Path, outside: Path
) -> None:
    marker = f"glassagent-test-{secrets.token_hex(8)}"
    command = (
        f"echo x > {outside}/f; echo in > inside.txt; "
        'echo t > "$TMPDIR/t" && cat "$TMPDIR/t"; '
        f"echo p > /tmp/{marker} && cat /tmp/{marker}; "
        "echo n > /dev/null && echo null-ok"
    )
    ws = Workspace(root, allow_commands=True)
    outcome = await run_one(ws, "execute_command", command=command)
    assert f"cannot create {outside}/f: Permission denied" in outcome.result
    assert outcome.result.endswith("t\np\nnull-ok\n[exit code 0]")
    assert not present(outside / "f")
    assert (root / "inside.txt").read_text() == "in\n"
    assert not present(f"/tmp/{marker}")  # its /tmp was its own
    tmpdir = await run_one(ws, "execute_command", command='echo "$TMPDIR"')
    assert not present(tmpdir.result.splitlines()[0])  # removed after the call


@needs_sandbox
async def test_it_sees_only_its_own_processes(root: Path) -> None:
    command = (
        "echo pid=$$ ppid=$PPID; ls /proc | grep -c '^[0-9]'; "
        "tr '\\0' ' ' < /proc/1/cmdline | grep -c glassagent_sandbox; "
        "cat /proc/1/environ; echo environ=$?"
    )
    outcome = await run_one(Workspace(root, allow_commands=True), "execute_command",
                            command=command)  # fmt: skip
    lines = outcome.result.splitlines()
    if SUPPORT.proc == "hidden":
        assert lines[1] == "0"
        return
    assert lines[0] == "pid=2 ppid=1"  # PID 1 is the sandbox's init
    assert int(lines[1]) <= 5  # init, sh, ls, grep (no process of the host)
    assert lines[2] == "1"
    assert "environ=1" in lines[-2:]  # PID 1 is not readable


def test_a_key_in_the_agents_environment_does_not_reach_a_command(tmp_path: Path) -> None:
    # The key is in the agent process's own environment from its start (as a real one is,
    # and as /proc/PID/environ shows it). Without the sandbox, /proc/$PPID/environ leaks it.
    key = f"sk-test-{secrets.token_hex(12)}"
    script = (
        "import asyncio, sys\n"
        "sys.path.insert(0, sys.argv[2])\n"
        "from glassagent.workspace import Workspace\n"
        "from tests.support.workspace import run_one\n"
        "command = 'cat /proc/$PPID/environ; cat /proc/*/environ; env'\n"
        "ws = Workspace(sys.argv[1], allow_commands=True, sandbox=sys.argv[3])\n"
        "print(asyncio.run(run_one(ws, 'execute_command', command=command)).result)\n"
    )
    env = {**os.environ, "OPENAI_API_KEY": key, "DATABASE_URL": f"postgresql://a:{key}@db/x"}
    modes: list[SandboxMode] = ["auto", "off"] if SUPPORT.available else ["off"]
    for mode in modes:
        done = subprocess.run(
            [sys.executable, "-c", script, str(tmp_path), str(Path(__file__).parents[2]), mode],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        assert "[exit code" in done.stdout
        assert (key in done.stdout) == (mode == "off"), done.stdout[-2000:]


@needs_sandbox
async def test_the_launcher_imports_nothing_from_the_workspace(root: Path) -> None:
    for name in ("json", "ctypes", "os", "sitecustomize", "usercustomize", "struct"):
        (root / f"{name}.py").write_text(f"open({str(root / 'imported')!r}, 'a').write('{name}')\n")
    outcome = await run_one(Workspace(root, allow_commands=True), "execute_command",
                            command="echo ran")  # fmt: skip
    assert outcome.result == "ran\n[exit code 0]"
    assert not (root / "imported").exists()


@needs_sandbox
async def test_exit_codes_and_signals_come_through(root: Path) -> None:
    ws = Workspace(root, allow_commands=True)
    assert (await run_one(ws, "execute_command", command="exit 7")).result.endswith("[exit code 7]")
    killed = await run_one(ws, "execute_command", command="echo bye; kill -TERM $$")
    assert killed.result == "bye\n[killed by signal 15]"
    assert ws.sandboxed
    assert ws.sandbox_status.startswith(
        "commands run in a sandbox (Linux namespaces: user, mount, pid, ipc, network; Landlock"
    )
    assert ws.sandbox_status.endswith("; no network")


async def test_off_runs_as_before(root: Path) -> None:
    if not present("/proc/self"):
        pytest.skip("needs /proc")
    ws = Workspace(root, allow_commands=True, sandbox="off")
    assert not ws.sandboxed
    assert ws.sandbox_status == "commands run WITHOUT a sandbox: it is turned off"
    outcome = await run_one(ws, "execute_command", command="tr '\\0' ' ' < /proc/$PPID/cmdline")
    assert outcome.result.startswith(own_command_line())  # the agent's own process, unhidden


@needs_sandbox
def test_the_model_is_told_what_the_sandbox_forbids(root: Path) -> None:
    def told(ws: Workspace) -> str:
        return next(t.description for t in ws.tools if t.name == "execute_command")

    closed = told(Workspace(root, allow_commands=True))
    assert "sandbox" in closed
    assert "no network access" in closed
    networked = told(Workspace(root, allow_commands=True, allow_network=True))
    assert "sandbox" in networked
    assert "network" not in networked
    assert "sandbox" not in told(Workspace(root, allow_commands=True, sandbox="off"))


# ---- the command line -----------------------------------------------------------------------


def test_the_cli_takes_the_sandbox_options() -> None:
    from glassagent.cli import _options

    run = _options.parse(
        ["run", "--sandbox", "off", "--allow-network", "--env", "A", "--env", "B=x=1", "hi"], "1"
    )
    assert isinstance(run, _options.Options)
    assert (run.sandbox, run.allow_network, run.env) == ("off", True, ("A", "B=x=1"))
    chat = _options.parse([], "1")
    assert isinstance(chat, _options.Options)
    assert (chat.sandbox, chat.allow_network, chat.env) == ("auto", False, ())
    serve = _options.parse(["serve", "--sandbox", "required", "--env", "C"], "1")
    assert isinstance(serve, _options.ServeOptions)
    assert (serve.sandbox, serve.env) == ("required", ("C",))
    for wrong in (["--sandbox", "on"], ["--env", "=x"], ["--env", "A B"]):
        with pytest.raises(_options.UsageError):
            _options.parse(["run", *wrong, "hi"], "1")


def test_the_cli_resolves_env_and_refuses_a_required_sandbox_it_cannot_make(
    root: Path, unsupported: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from glassagent.cli import _options, _sandbox, _setup

    monkeypatch.setenv("GLASSAGENT_TEST_PASSED", "from-here")
    env = _sandbox.command_env(["GLASSAGENT_TEST_PASSED", "B=1"], os.environ)
    assert env == {"GLASSAGENT_TEST_PASSED": "from-here", "B": "1"}
    with pytest.raises(_setup.BadInput, match="--env NOT_SET_HERE: NOT_SET_HERE is not set"):
        _sandbox.command_env(["NOT_SET_HERE"], {})
    notes: list[str] = []
    required = _options.parse(["run", "--allow-commands", "--sandbox", "required", "hi"], "1")
    assert isinstance(required, _options.Options)
    with pytest.raises(_setup.BadInput, match="--sandbox required") as raised:
        _sandbox.open_workspace(root, required, notes.append)
    assert unsupported in str(raised.value)
    auto = _options.parse(["run", "--allow-commands", "hi"], "1")
    assert isinstance(auto, _options.Options)
    workspace = _sandbox.open_workspace(root, auto, notes.append)
    assert notes == [f"commands run WITHOUT a sandbox: {unsupported}"]
    assert not workspace.sandboxed


def test_doctor_tells_what_this_machine_supports(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from glassagent.cli import _sandbox, main

    code = main(["doctor"])
    out = capsys.readouterr().out
    assert code == (0 if SUPPORT.available else 1)
    if SUPPORT.available:
        assert "execute_command sandbox: available" in out
        assert f"Landlock ABI {SUPPORT.landlock_abi}" in out
    monkeypatch.setattr(_sandbox, "sandbox_support", lambda: SandboxSupport(False, "no way"))
    assert main(["doctor"]) == 1
    assert "execute_command sandbox: NOT available: no way" in capsys.readouterr().out


# ---- escapes ------------------------------------------------------------------------------


@pytest.fixture
def host_process() -> Iterator[subprocess.Popen[bytes]]:
    """A process of the host that a command must not reach."""
    with subprocess.Popen(["sleep", token()]) as process:
        yield process
        process.kill()


@needs_sandbox
async def test_escape_attempts_fail(
    root: Path, outside: Path, host_process: subprocess.Popen[bytes]
) -> None:
    command = (
        "kill -9 -1; echo kill=$?; "
        "umount /proc 2>/dev/null; echo umount=$?; "
        "mount -t tmpfs none /mnt 2>/dev/null; echo mount=$?; "
        f"unshare -r sh -c 'echo x > {outside}/f' 2>/dev/null; echo nested=$?; "
        f"echo x 2>/dev/null > /proc/self/root{outside}/f; echo via-proc=$?; "
        "ls /proc | grep -c '^[0-9]'"
    )
    ws = Workspace(root, allow_commands=True)
    outcome = await run_one(ws, "execute_command", command=command)
    lines = dict(line.split("=") for line in outcome.result.splitlines() if "=" in line)
    del lines["kill"]  # it signals what it can see: its own processes (none but itself)
    assert all(code != "0" for code in lines.values()), outcome.result
    assert host_process.poll() is None
    assert not present(outside / "f")


ESCAPER = """
import asyncio, sys
from glassagent.workspace import Workspace
sys.path.insert(0, sys.argv[2])
from tests.support.workspace import context, tools

async def main():
    execute = tools(Workspace(sys.argv[1], allow_commands=True, sandbox=sys.argv[4]))
    await execute["execute_command"](sys.argv[3], ctx=context("x", lambda line: print(line,
        flush=True)))

asyncio.run(main())
"""


@pytest.mark.attack
@pytest.mark.parametrize("mode", ["auto", "off"])
def test_a_killed_agent_takes_the_sandbox_with_it(root: Path, mode: str) -> None:
    # SIGKILL to the agent: no cleanup of its own runs. The sandbox dies with it (its
    # launcher and PID 1 have a parent-death signal); without it, escaped processes stay.
    if mode == "auto" and not SUPPORT.available:
        pytest.skip(SUPPORT.reason)
    mark = token()
    here = str(Path(__file__).parents[2])
    command = f"{escapes(mark, quiet=True)}; sleep {mark}"
    try:
        with subprocess.Popen(
            [sys.executable, "-c", ESCAPER, str(root), here, command, mode],
            stdout=subprocess.PIPE,
            text=True,
        ) as agent:
            assert agent.stdout is not None
            assert agent.stdout.readline() == "started\n"
            agent.kill()
        deadline = time.monotonic() + (5 if mode == "auto" else 0.3)
        while running(mark) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (running(mark) == []) == (mode == "auto")
    finally:
        kill_all(mark)


@pytest.mark.attack
@needs_sandbox
async def test_nothing_survives_a_command_that_keeps_escaping(root: Path) -> None:
    # Processes that fork setsid children as fast as they can, stopped at random moments by
    # a timeout or a cancellation, many times over.
    mark = token()
    command = f"for i in 1 2 3 4; do (while :; do setsid sleep {mark} & done) & done; sleep {mark}"
    ws = Workspace(root, allow_commands=True)
    execute = tools(ws)["execute_command"]
    try:
        for round_ in range(30):
            delay = 0.2 + secrets.randbelow(800) / 1000
            if round_ % 2:
                outcome = await run_one(ws, "execute_command", command=command, timeout=delay)
                assert outcome.is_error
            else:
                task = asyncio.create_task(execute(command, ctx=context("execute_command")))
                await asyncio.sleep(delay)
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            assert await none_running(mark), f"round {round_}: {len(running(mark))} left"
    finally:
        kill_all(mark)
