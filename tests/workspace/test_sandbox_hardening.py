"""The sandbox of execute_command: what it hides and keeps from changing, with real processes.

The workspace's Python and git hooks, tools under /tmp, the host's terminals, the keyring,
the warnings, and the launcher's own processes.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from glassagent.errors import UserError
from glassagent.workspace import SandboxMode, SandboxSupport, Workspace
from tests.support.sandbox import (
    PYTHON,
    SUPPORT,
    connect_script,
    listener,
    needs_sandbox,
)
from tests.support.workspace import run_one


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "workspace"
    folder.mkdir()
    return folder


# ---- what the sandbox hides, and what it keeps from changing --------------------------------


@pytest.fixture
def in_tmp() -> Iterator[Path]:
    """A new folder right in the host's /tmp (which the sandbox replaces with its own)."""
    folder = Path(tempfile.mkdtemp(dir="/tmp", prefix="glassagent-test-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def tool(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(f"#!/bin/sh\necho {text}\n")
    path.chmod(0o755)
    return path


@needs_sandbox
async def test_tools_on_the_path_under_tmp_are_there_read_only(root: Path, in_tmp: Path) -> None:
    # As in CI, where the project (and its .venv/bin) is cloned under /tmp: the fresh /tmp
    # hid them. They come back read-only; a socket elsewhere in /tmp stays hidden.
    bin_folder = in_tmp / "bin"
    bin_folder.mkdir()
    tool(bin_folder, "glassagent-test-tool", "the tool ran")
    (in_tmp / "other").mkdir()
    socket_path = str(in_tmp / "other" / "agent.sock")
    path = f"{bin_folder}:{root}:{os.environ['PATH']}"  # the workspace stays writable
    ws = Workspace(root, allow_commands=True, env={"PATH": path})
    command = (
        f"glassagent-test-tool; echo x > {bin_folder}/new; ls {in_tmp}; "
        f"{connect_script(socket_path, 'AF_UNIX')}; echo w > written"
    )
    with listener(socket.AF_UNIX, socket_path):
        outcome = await run_one(ws, "execute_command", command=command)
    lines = outcome.result.splitlines()
    assert lines[0] == "the tool ran", outcome.result
    assert "Read-only file system" in lines[1] or "Permission denied" in lines[1]
    assert lines[2:] == ["bin", "refused 2", "[exit code 0]"]  # no "other", no socket
    assert not (bin_folder / "new").exists()
    assert (root / "written").read_text() == "w\n"


@pytest.fixture
def fake_python(monkeypatch: pytest.MonkeyPatch, root: Path, in_tmp: Path) -> tuple[Path, Path]:
    """Two folders made Python's for the test: one in the workspace (two levels down, as a
    conda or pixi environment), one elsewhere in /tmp (as a clone's .venv in CI)."""
    from glassagent._workspace import sandbox

    inside, outside = root / "envs" / "py", in_tmp / "venv"
    for folder in (inside, outside):
        (folder / "bin").mkdir(parents=True)
        tool(folder / "bin", "python9", f"python of {folder.name}")
    monkeypatch.setattr(sandbox, "_python_folders", lambda: (str(inside), str(outside)))
    return inside, outside


@needs_sandbox
async def test_pythons_and_git_hooks_in_the_workspace_cannot_be_changed(
    root: Path, fake_python: tuple[Path, Path]
) -> None:
    # What runs later outside the sandbox (the next command's launcher, git's hooks and
    # config) is read-only inside; moving it aside fails too; the rest stays writable.
    inside, outside = fake_python
    (root / ".git" / "hooks").mkdir(parents=True)
    (root / ".git" / "config").write_text("[core]\n")
    attempts = {
        "python": f"echo x > {inside}/bin/python9",
        "new": f"echo x > {inside}/new",
        "moved": "mv envs envs2",
        "moved-py": "mv envs/py envs/py2",
        "hook": "echo x > .git/hooks/pre-commit",
        "config": "echo x >> .git/config",
        "moved-git": "mv .git .git2",
        "outside": f"echo x > {outside}/new",
    }
    command = "".join(f"{{ {c}; }} 2>/dev/null; echo {name}=$?; " for name, c in attempts.items())
    command += f"{outside}/bin/python9; echo ok > file.txt; echo y > .git/HEAD && echo git-ok"
    outcome = await run_one(Workspace(root, allow_commands=True), "execute_command",
                            command=command)  # fmt: skip
    codes = dict(line.split("=") for line in outcome.result.splitlines() if "=" in line)
    assert codes.keys() == attempts.keys()
    assert all(code != "0" for code in codes.values()), outcome.result
    assert outcome.result.endswith("python of venv\ngit-ok\n[exit code 0]")
    assert (root / "file.txt").read_text() == "ok\n"
    assert (inside / "bin" / "python9").read_text().endswith("echo python of py\n")
    assert not (root / ".git" / "hooks" / "pre-commit").exists()
    assert (root / ".git" / "config").read_text() == "[core]\n"
    assert sorted(os.listdir(root)) == [".git", "envs", "file.txt"]


@needs_sandbox
def test_a_python_of_its_own_under_tmp_runs_and_stays_as_it_is(tmp_path: Path) -> None:
    # The CI case for real: the agent runs from a virtual environment under /tmp, made with
    # --copies (its python is a file of its own). A command runs that python; in a workspace
    # holding the environment it cannot replace it, and the launcher runs the base Python.
    import site

    home = Path(tempfile.mkdtemp(dir="/tmp", prefix="glassagent-test-"))
    try:
        venv = home / "venv"
        subprocess.run([PYTHON, "-m", "venv", "--copies", "--without-pip", str(venv)], check=True)
        purelib = next(venv.glob("lib/python3*/site-packages"))
        paths = [str(Path(__file__).parents[2] / "src"), *site.getsitepackages()]
        (purelib / "glassagent-test.pth").write_text("\n".join(paths) + "\n")
        script = (
            "import asyncio, sys\n"
            "sys.path.insert(0, sys.argv[3])\n"
            "from glassagent._workspace.sandbox import launcher_argv\n"
            "from glassagent.workspace import Workspace\n"
            "from tests.support.workspace import run_one\n"
            "ws = Workspace(sys.argv[1], allow_commands=True)\n"
            "done = asyncio.run(run_one(ws, 'execute_command', command=sys.argv[2]))\n"
            "print(done.result)\n"
            "print('launcher', launcher_argv(ws.root)[0])\n"
        )
        python = str(venv / "bin" / "python3")
        here = str(Path(__file__).parents[2])
        runs = {
            tmp_path: f"{python} -c 'import sys; print(sys.prefix)'",
            home: "echo x > venv/bin/python3; echo x > venv/pyvenv.cfg; echo ok > f; cat f",
        }
        for workspace, command in runs.items():
            argv = [python, "-c", script, str(workspace), command, here]
            done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
            *outputs, launcher = done.stdout.splitlines()
            if workspace == tmp_path:
                assert outputs == [str(venv), "[exit code 0]"], done.stdout + done.stderr
            else:
                assert outputs[-2:] == ["ok", "[exit code 0]"], done.stdout + done.stderr
                assert all("Read-only file system" in line for line in outputs[:2]), outputs
            assert done.returncode == 0, done.stderr
            assert launcher.startswith("launcher /")
            assert not launcher.startswith(f"launcher {venv}")  # the base Python, not the copy
        assert (venv / "bin" / "python3").stat().st_size > 1000  # still Python
    finally:
        shutil.rmtree(home, ignore_errors=True)


PTY_INSIDE = """
import os, pty
pid, fd = pty.fork()
if pid == 0:
    print("a terminal of its own:", os.isatty(0), flush=True)
    os._exit(0)
seen = b""
while True:
    try:
        chunk = os.read(fd, 100)
    except OSError:  # the other side closed
        break
    if not chunk:
        break
    seen += chunk
print(seen.decode().strip(), os.waitpid(pid, 0)[1])
"""


@needs_sandbox
async def test_the_hosts_terminals_are_not_there_but_its_own_work(root: Path) -> None:
    # A terminal of the user's (what they type) sits in the host's /dev/pts, which the
    # read rule on / used to cover.
    master, slave = os.openpty()
    try:
        slave_path = os.ttyname(slave)
        secret = f"typed-{secrets.token_hex(8)}"
        os.write(master, f"{secret}\n".encode())
        command = (
            f"dd if={slave_path} bs=100 count=1 2>&1; ls /dev; "
            f"{PYTHON} -I -c {shlex.quote(PTY_INSIDE)}; "
            "echo x > /dev/null && echo null-ok; head -c 4 /dev/urandom | wc -c"
        )
        outcome = await run_one(Workspace(root, allow_commands=True), "execute_command",
                                command=command)  # fmt: skip
    finally:
        os.close(master)
        os.close(slave)
    assert secret not in outcome.result
    lines = outcome.result.splitlines()
    assert f"'{slave_path}': No such file or directory" in lines[0]
    entries = ["fd", "full", "null", "ptmx", "pts", "random", "shm", "stderr", "stdin"]
    entries += ["stdout", "tty", "urandom", "zero"]
    assert lines[1 : 1 + len(entries)] == entries
    assert lines[1 + len(entries) :] == [
        "a terminal of its own: True 0",
        "null-ok",
        "4",
        "[exit code 0]",
    ]


KEYRING = """
import ctypes, json, os, sys
numbers = {"x86_64": (248, 250), "aarch64": (217, 219)}.get(os.uname().machine)
if numbers is None:
    print("skip: no keyctl numbers for this machine"); sys.exit()
add_key, keyctl = numbers
libc = ctypes.CDLL(None, use_errno=True)
session, join, search = -3, 1, 10
libc.syscall(keyctl, join, None)  # a session keyring of this test's own, not the user's
name, secret = sys.argv[2].encode(), b"the-secret"
if libc.syscall(add_key, b"user", name, secret, len(secret), session) < 0:
    print("skip: add_key:", os.strerror(ctypes.get_errno())); sys.exit()
sys.path.insert(0, sys.argv[3])
import asyncio
from glassagent.workspace import Workspace
from tests.support.workspace import run_one
found = (
    "import ctypes,sys; libc=ctypes.CDLL(None, use_errno=True); "
    f"k=libc.syscall({keyctl}, {search}, {session}, b'user', {name!r}, 0); "
    "print('found' if k > 0 else 'missing')"
)
for mode in ("auto", "off"):
    ws = Workspace(sys.argv[1], allow_commands=True, sandbox=mode)
    command = f"{os.path.realpath(sys.executable)} -I -c {json.dumps(found)}"
    print(mode, asyncio.run(run_one(ws, "execute_command", command=command)).result)
"""


@needs_sandbox
def test_the_session_keyring_is_not_the_agents(tmp_path: Path) -> None:
    # A key in the agent's session keyring (as a login's keys are) is found by a command
    # that runs without the sandbox, not by one inside it: it gets a new, empty keyring.
    name = f"glassagent-test-{secrets.token_hex(8)}"
    done = subprocess.run(
        [sys.executable, "-c", KEYRING, str(tmp_path), name, str(Path(__file__).parents[2])],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    if done.stdout.startswith("skip: "):
        pytest.skip(done.stdout.strip())
    assert done.stdout.splitlines() == [
        "auto missing",
        "[exit code 0]",
        "off found",
        "[exit code 0]",
    ], done.stdout + done.stderr


@pytest.fixture
def older_landlock(monkeypatch: pytest.MonkeyPatch) -> SandboxSupport:
    from glassagent._workspace import sandbox

    support = SandboxSupport(True, "", 5, sandbox.NAMESPACES, "private")
    monkeypatch.setattr(sandbox, "sandbox_support", lambda: support)
    return support


def test_a_network_on_landlock_before_6_is_said_to_reach_host_sockets(
    root: Path, older_landlock: SandboxSupport
) -> None:
    reachable = "abstract unix sockets of the host are reachable"
    networked = Workspace(root, allow_commands=True, allow_network=True)
    assert networked.sandboxed
    assert f"network allowed; WARNING: {reachable} (X11, D-Bus)" in networked.sandbox_status
    assert reachable in older_landlock.describe()
    closed = Workspace(root, allow_commands=True, sandbox="required")  # its own network
    assert closed.sandbox_status.endswith("Landlock ABI 5); no network")
    with pytest.raises(UserError, match="sandbox='required'") as raised:
        Workspace(root, allow_commands=True, allow_network=True, sandbox="required")
    assert reachable in str(raised.value)


@needs_sandbox
def test_a_workspace_that_holds_tmp_is_said_to_show_the_hosts() -> None:
    held = Workspace("/tmp", allow_commands=True)
    assert held.sandboxed
    assert held.sandbox_status.endswith(
        "; WARNING: the workspace holds /tmp: commands see the host's /tmp as they are, "
        "sockets (tmux, X11, ssh-agent) included"
    )
    with pytest.raises(UserError, match=r"sandbox='required'.*the workspace holds /tmp"):
        Workspace("/tmp", allow_commands=True, sandbox="required")
    assert Workspace("/tmp", sandbox="required").sandbox_status == "commands are not allowed"


@pytest.mark.parametrize("mode", ["auto", "off"])
async def test_a_command_with_a_nul_character_does_not_run(root: Path, mode: SandboxMode) -> None:
    if sys.platform == "win32" or (mode == "auto" and not SUPPORT.available):
        pytest.skip("no commands here")
    ws = Workspace(root, allow_commands=True, sandbox=mode)
    outcome = await run_one(ws, "execute_command", command="echo a > made\x00; echo b")
    assert outcome.is_error
    assert outcome.result.startswith("Error: the command contains a NUL character")
    assert not (root / "made").exists()


@needs_sandbox
def test_every_process_of_the_launcher_ends_through_exit(tmp_path: Path) -> None:
    # Whatever fails in a process the launcher forked (here the shell's exec, refused a NUL
    # character) ends it with the launcher's message: it never goes back into the code
    # that forked it (the shell's process would go on as PID 1).
    from glassagent._workspace import sandbox

    data = sandbox.launcher_input("echo a\x00b", cwd=tmp_path, tmp=tmp_path, env={}, network=False)
    done = subprocess.run(sandbox.launcher_argv(), input=data, capture_output=True, check=False)
    assert (done.returncode, done.stdout) == (125, b"")
    assert done.stderr.decode() == "glassagent sandbox: embedded null byte\n"


LIMITED = """
import ctypes, json, os, signal, sys, time
libc = ctypes.CDLL(None, use_errno=True)
uid, gid = os.geteuid(), os.getegid()
if libc.unshare(0x10000000) != 0:  # a user namespace, whose limits are this test's own
    print(json.dumps("skip: unshare: " + os.strerror(ctypes.get_errno()))); sys.exit()
open("/proc/self/setgroups", "w").write("deny")
open("/proc/self/uid_map", "w").write(f"{uid} {uid} 1")
open("/proc/self/gid_map", "w").write(f"{gid} {gid} 1")
with open("/proc/sys/user/max_user_namespaces", "w") as setting:
    setting.write("1")
ready, told = os.pipe()
holder = os.fork()
if holder == 0:  # takes the one user namespace there may be in ours
    os.write(told, str(libc.unshare(0x10000000)).encode())
    time.sleep(60)
    os._exit(0)
assert os.read(ready, 10) == b"0"
from glassagent.workspace import sandbox_support
seen = [sandbox_support()]
os.kill(holder, signal.SIGKILL)
os.waitpid(holder, 0)
for _ in range(100):  # the kernel frees the namespace a moment later
    seen.append(sandbox_support())
    if seen[-1].available:
        break
    time.sleep(0.05)
seen.append(sandbox_support())
print(json.dumps([[s.available, s.reason, id(s)] for s in seen]))
"""


@needs_sandbox
def test_a_failure_that_may_pass_is_not_kept() -> None:
    # The user namespaces there may be are all taken: the probe fails, and is not kept;
    # once one is free, the next probe works, and that one is kept.
    argv = [sys.executable, "-c", LIMITED]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
    seen = json.loads(done.stdout)
    if isinstance(seen, str):
        pytest.skip(seen)
    (failed, reason, _), *_, (worked, _, kept), (still, _, again) = seen
    assert not failed
    assert reason.endswith("user namespace limit reached (it may work later)")
    assert worked
    assert still
    assert kept == again


def test_a_probe_that_times_out_or_says_nothing_is_not_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from glassagent._workspace import sandbox

    unshare = "glassagent sandbox: unshare (user, mount, PID namespaces) failed: "
    answers: list[Any] = [
        subprocess.TimeoutExpired("launcher", 15),
        subprocess.CompletedProcess("launcher", 0, b"", b""),
        subprocess.CompletedProcess(
            "launcher", 125, b"", f"{unshare}Cannot allocate memory (it may work later)\n".encode()
        ),
        subprocess.CompletedProcess("launcher", 125, b"", f"{unshare}Bad address\n".encode()),
        subprocess.CompletedProcess(
            "launcher", 0, b'{"landlock_abi": 7, "proc": "private"}\n', b""
        ),
    ]

    def run(*args: object, **kwargs: object) -> object:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(sandbox, "_support", None)
    monkeypatch.setattr(sandbox.sys, "platform", "linux")
    monkeypatch.setattr(sandbox.subprocess, "run", run)
    reasons = [sandbox.sandbox_support().reason for _ in range(3)]
    assert reasons == [
        "the sandbox's probe took over 15 s",
        "the sandbox's probe ended without its report (no output)",
        f"{unshare[20:]}Cannot allocate memory (it may work later)",
    ]
    lasting = sandbox.sandbox_support()  # a failure that stays is kept
    assert lasting.reason.endswith("failed: Bad address")
    assert sandbox.sandbox_support() is lasting
    monkeypatch.setattr(sandbox, "_support", None)
    works = sandbox.sandbox_support()
    assert works.available
    assert works.landlock_abi == 7
    assert sandbox.sandbox_support() is works
    assert not answers
