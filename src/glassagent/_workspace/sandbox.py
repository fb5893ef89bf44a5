"""The sandbox of `execute_command` on Linux: whether this machine can make it, and its start.

The sandbox itself is `glassagent._workspace.launcher`, a standard-library-only program
started as ``python -I -S -c BOOT`` with its source and the command's settings on its
standard input: it never imports a module from a folder a command can write, and its
command line shows no setting (the environment may hold what ``env=`` passed).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeAlias

from glassagent._core.errors import UserError

SandboxMode: TypeAlias = Literal["auto", "required", "off"]
"""How `execute_command` is sandboxed: ``"auto"`` where the machine supports it,
``"required"`` (no commands otherwise), or ``"off"``."""

SANDBOX_MODES: tuple[SandboxMode, ...] = ("auto", "required", "off")

NAMESPACES = ("user", "mount", "pid", "ipc", "network")
"""The Linux namespaces each sandboxed command gets (``network`` unless it may use it)."""

_PROBE_SECONDS = 15.0
_BOOT = (
    "import sys;d=sys.stdin.buffer.read();n,_,d=d.partition(b'\\n');n=int(n);"
    "g={'__name__':'glassagent_sandbox'};"
    "exec(compile(d[:n],'glassagent-sandbox-launcher','exec'),g);g['main'](d[n:])"
)
_PYTHON = os.path.realpath(sys.executable) if sys.executable else ""
_PREFIX = "glassagent sandbox: "

logger = logging.getLogger("glassagent")
_warned = False


@dataclass(frozen=True)
class SandboxSupport:
    """Whether this machine can run `execute_command` in a sandbox (`sandbox_support`)."""

    available: bool
    """Whether commands can run in the sandbox here."""
    reason: str
    """Why not, in one sentence; empty when `available`."""
    landlock_abi: int = 0
    """The kernel's Landlock ABI version (0: none, or not measured)."""
    namespaces: tuple[str, ...] = ()
    """The Linux namespaces a command gets (``user``, ``mount``, ``pid``, ``ipc``,
    ``network``); empty when not `available`."""
    proc: Literal["private", "hidden", ""] = ""
    """``private``: the command sees a ``/proc`` of its own, showing only its processes;
    ``hidden``: an empty ``/proc`` (the kernel refused a new one); empty when not
    `available`."""

    def describe(self) -> str:
        """One line: what the sandbox is made of, or why there is none."""
        if not self.available:
            return f"no sandbox: {self.reason}"
        proc = "its own /proc" if self.proc == "private" else "an empty /proc"
        return (
            f"Linux namespaces ({', '.join(self.namespaces)}), Landlock ABI "
            f"{self.landlock_abi}, {proc}"
        )


@functools.cache
def sandbox_support() -> SandboxSupport:
    """What this machine offers to sandbox `execute_command`; measured once per process.

    On Linux it starts one sandboxed command (``sh -c :``, about 50 ms) and reports whether
    every step worked: unprivileged user, mount, PID, IPC and network namespaces, a fresh
    ``/proc`` (or an empty one), the loopback interface, and Landlock. Elsewhere (macOS,
    Windows) the sandbox is not available.
    """
    if not sys.platform.startswith("linux"):
        name = {"darwin": "macOS", "win32": "Windows"}.get(sys.platform, sys.platform)
        return SandboxSupport(
            False, f"the sandbox needs Linux (namespaces and Landlock); this is {name}"
        )
    if not _PYTHON:
        return SandboxSupport(False, "no Python executable to start the sandbox with")
    return _probe()


def _probe() -> SandboxSupport:
    folder = tempfile.mkdtemp(prefix="glassagent-probe-")
    try:
        data = launcher_input(":", cwd=folder, tmp=folder, env={}, network=False, probe=True)
        done = subprocess.run(
            launcher_argv(),
            input=data,
            capture_output=True,
            cwd="/",
            env={},
            timeout=_PROBE_SECONDS,
            start_new_session=True,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return SandboxSupport(False, f"the sandbox's launcher could not run: {exc}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if done.returncode != 0:
        return SandboxSupport(False, _failure(done.stderr.decode(errors="replace")))
    report = json.loads(done.stdout.decode().splitlines()[0])
    proc: Literal["private", "hidden"] = "private" if report["proc"] == "private" else "hidden"
    return SandboxSupport(True, "", int(report["landlock_abi"]), NAMESPACES, proc)


def _failure(stderr: str) -> str:
    """The reason a probe failed, from the launcher's message, with a hint where known."""
    lines = [line for line in stderr.splitlines() if line.startswith(_PREFIX)]
    reason = lines[-1][len(_PREFIX) :] if lines else (stderr.strip() or "unknown failure")
    if "Landlock" in reason:
        return f"{reason} (it needs Linux 5.13 or later with Landlock enabled, lsm=landlock)"
    hints = {
        "/proc/sys/kernel/apparmor_restrict_unprivileged_userns": "1",
        "/proc/sys/kernel/unprivileged_userns_clone": "0",
        "/proc/sys/user/max_user_namespaces": "0",
    }
    for path, blocking in hints.items():
        try:
            value = Path(path).read_text().strip()
        except OSError:
            continue
        if value == blocking:
            setting = path.removeprefix("/proc/sys/").replace("/", ".")
            return f"{reason} (user namespaces are restricted here: {setting}={value})"
    return reason


@functools.cache
def _launcher_source() -> bytes:
    """The launcher's source, read once: later changes to the file are never run."""
    from importlib import resources

    return resources.files("glassagent._workspace").joinpath("launcher.py").read_bytes()


def launcher_argv() -> list[str]:
    """The command line that starts the launcher (its source comes on standard input)."""
    return [_PYTHON, "-I", "-S", "-c", _BOOT]


def launcher_input(
    command: str,
    *,
    cwd: str | os.PathLike[str],
    tmp: str | os.PathLike[str],
    env: Mapping[str, str],
    network: bool,
    probe: bool = False,
) -> bytes:
    """What the launcher reads on standard input: its source, then the command's settings."""
    source = _launcher_source()
    settings = {
        "command": command,
        "cwd": os.path.realpath(cwd),
        "tmp": os.path.realpath(tmp),
        "env": dict(env),
        "network": network,
        "parent": os.getpid(),
        "probe": probe,
    }
    return b"%d\n%s%s" % (len(source), source, json.dumps(settings).encode())


def warn_unsandboxed(reason: str) -> None:
    """Say once per process, on the ``glassagent`` logger, that commands run unsandboxed."""
    global _warned
    if not _warned:
        _warned = True
        logger.warning("execute_command runs commands WITHOUT a sandbox: %s", reason)


def plan(mode: object, *, allow_commands: bool, allow_network: bool) -> tuple[bool, str]:
    """Whether commands run in the sandbox, and one line saying how they run.

    Raises:
        UserError: For an unknown `mode`, or ``"required"`` where the sandbox cannot be
            made (while commands are allowed).
    """
    if mode not in SANDBOX_MODES:
        raise UserError(f"`sandbox` must be 'auto', 'required' or 'off', got {mode!r}.")
    if not allow_commands:
        return False, "commands are not allowed"
    if mode == "off":
        return False, "commands run WITHOUT a sandbox: it is turned off"
    support = sandbox_support()
    if support.available:
        network = "network allowed" if allow_network else "no network"
        abi = support.landlock_abi
        return True, f"commands run in a sandbox (Linux namespaces, Landlock ABI {abi}); {network}"
    if mode == "required":
        raise UserError(
            f"Commands must run in a sandbox (sandbox='required'), but this machine cannot make "
            f"one: {support.reason}. With sandbox='auto' or sandbox='off' they run without one."
        )
    warn_unsandboxed(support.reason)
    return False, f"commands run WITHOUT a sandbox: {support.reason}"
