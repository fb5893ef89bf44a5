"""The sandbox of `execute_command` on Linux: whether this machine can make it, and its start.

The sandbox itself is `glassagent._workspace.launcher`, a standard-library-only program
started as ``python -I -S -c BOOT`` with its source and the command's settings on its
standard input: it never imports a module from a folder a command can write, and its
command line shows no setting (the environment may hold what ``env=`` passed). Its source
is read once, at the first probe (`sandbox_support`): later changes to the file never run.

The settings name the folders the launcher mounts back read-only (`read_only_folders`):
those a command needs that lie under a folder the sandbox replaces (``/tmp``, ``/run``,
``/dev``), and those it must not change because something runs them later, outside the
sandbox (Python's folders, ``.git/hooks``, ``.git/config``).
"""

from __future__ import annotations

import errno
import functools
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeAlias

from glassagent._core.errors import UserError

SandboxMode: TypeAlias = Literal["auto", "required", "off"]
"""How `execute_command` is sandboxed: ``"auto"`` where the machine supports it,
``"required"`` (no commands otherwise), or ``"off"``."""

SANDBOX_MODES: tuple[SandboxMode, ...] = ("auto", "required", "off")

NAMESPACES = ("user", "mount", "pid", "ipc")
"""The Linux namespaces every sandboxed command gets; a ``network`` one too unless the
workspace allows the network."""

_PROBE_SECONDS = 15.0
_BOOT = (
    "import sys;d=sys.stdin.buffer.read();n,_,d=d.partition(b'\\n');n=int(n);"
    "g={'__name__':'glassagent_sandbox'};"
    "exec(compile(d[:n],'glassagent-sandbox-launcher','exec'),g);g['main'](d[n:])"
)
_PYTHON = os.path.realpath(sys.executable) if sys.executable else ""
_PREFIX = "glassagent sandbox: "
_TRANSIENT_NOTE = "(it may work later)"  # the launcher's TRANSIENT_NOTE
_HINT = "user namespaces are restricted here:"
_HIDDEN = ("/tmp", "/run", "/var/run", "/dev")
"""Folders the sandbox replaces with its own (empty ones; for ``/dev``, a few devices)."""
_HOST_SOCKETS = ("/tmp", "/run")
"""Folders whose host sockets a workspace holding them would show to commands."""

logger = logging.getLogger("glassagent")
_warned = False
_support: SandboxSupport | None = None
_support_lock = threading.Lock()


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
    """The Linux namespaces every command gets (``user``, ``mount``, ``pid``, ``ipc``);
    empty when not `available`. A command also gets a ``network`` one unless its workspace
    allows the network (`Workspace.sandbox_status` says which)."""
    proc: Literal["private", "hidden", ""] = ""
    """``private``: the command sees a ``/proc`` of its own, showing only its processes;
    ``hidden``: an empty ``/proc`` (the kernel refused a new one); empty when not
    `available`."""

    def describe(self) -> str:
        """One line: what the sandbox is made of, or why there is none."""
        if not self.available:
            return f"no sandbox: {self.reason}"
        proc = "its own /proc" if self.proc == "private" else "an empty /proc"
        text = (
            f"Linux namespaces ({', '.join(self.namespaces)}; network unless allowed), "
            f"Landlock ABI {self.landlock_abi}, {proc}"
        )
        if self.landlock_abi < 6:
            text += "; with the network allowed, abstract unix sockets of the host are reachable"
        return text


def sandbox_support() -> SandboxSupport:
    """What this machine offers to sandbox `execute_command`; measured once per process.

    On Linux it starts one sandboxed command (``sh -c :``, about 50 ms) and reports whether
    every step worked: unprivileged user, mount, PID, IPC and network namespaces, a ``/dev``
    of its own (with a new ``devpts``), a fresh ``/proc`` (or an empty one), the loopback
    interface, a new session keyring, and Landlock. Elsewhere (macOS,
    Windows) the sandbox is not available. A failure that may pass (the probe timed out, a
    limit on user namespaces or processes was reached) is not kept: the next call measures
    again.
    """
    global _support
    with _support_lock:
        if _support is not None:
            return _support
        support, lasting = _measure()
        if lasting:
            _support = support
        return support


def _measure() -> tuple[SandboxSupport, bool]:
    """What this machine offers, and whether that answer lasts (is worth keeping)."""
    if not sys.platform.startswith("linux"):
        name = {"darwin": "macOS", "win32": "Windows"}.get(sys.platform, sys.platform)
        reason = f"the sandbox needs Linux (namespaces and Landlock); this is {name}"
        return SandboxSupport(False, reason), True
    if not _PYTHON:
        return SandboxSupport(False, "no Python executable to start the sandbox with"), True
    return _probe()


def _probe() -> tuple[SandboxSupport, bool]:
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
    except subprocess.TimeoutExpired:
        return SandboxSupport(False, f"the sandbox's probe took over {_PROBE_SECONDS:g} s"), False
    except (OSError, subprocess.SubprocessError) as exc:
        lasting = getattr(exc, "errno", None) not in (errno.EAGAIN, errno.ENOMEM)
        return SandboxSupport(False, f"the sandbox's launcher could not run: {exc}"), lasting
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    stderr = done.stderr.decode(errors="replace")
    if done.returncode != 0:
        reason = _failure(stderr)  # a limit set to 0 (a hint says so) is no passing state
        return SandboxSupport(False, reason), _TRANSIENT_NOTE not in stderr or _HINT in reason
    try:
        report = json.loads(done.stdout.decode(errors="replace").splitlines()[0])
        abi, proc = int(report["landlock_abi"]), report["proc"]
    except (IndexError, ValueError, KeyError, TypeError):
        reason = f"the sandbox's probe ended without its report ({stderr.strip() or 'no output'})"
        return SandboxSupport(False, reason), False
    kind: Literal["private", "hidden"] = "private" if proc == "private" else "hidden"
    return SandboxSupport(True, "", abi, NAMESPACES, kind), True


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
            return f"{reason} ({_HINT} {setting}={value})"
    return reason


@functools.cache
def _launcher_source() -> bytes:
    """The launcher's source, read once (at the first probe): later changes never run."""
    from importlib import resources

    return resources.files("glassagent._workspace").joinpath("launcher.py").read_bytes()


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _interpreter(workspace: str | None) -> str:
    """The Python that runs the launcher.

    The base Python of a virtual environment, unless it is in the `workspace`: a Python
    copied into the environment (``venv --copies``) could be changed by a command.
    """
    base = getattr(sys, "_base_executable", "") or ""
    real = os.path.realpath(base) if base else ""
    usable = bool(real) and real != _PYTHON and os.access(real, os.X_OK)
    if usable and (workspace is None or not _within(real, os.path.realpath(workspace))):
        return real
    return _PYTHON


def launcher_argv(workspace: str | os.PathLike[str] | None = None) -> list[str]:
    """The command line that starts the launcher (its source comes on standard input)."""
    python = _interpreter(None if workspace is None else os.fspath(workspace))
    return [python, "-I", "-S", "-c", _BOOT]


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
    root, folder = os.path.realpath(cwd), os.path.realpath(tmp)
    settings = {
        "command": command,
        "cwd": root,
        "tmp": folder,
        "env": dict(env),
        "network": network,
        "parent": os.getpid(),
        "probe": probe,
        "readonly": read_only_folders(root, folder, env.get("PATH", "")),
    }
    return b"%d\n%s%s" % (len(source), source, json.dumps(settings).encode())


@functools.cache
def _python_folders() -> tuple[str, ...]:
    """Python's folders: its prefixes, the interpreters' folders, its site-packages."""
    import site
    import sysconfig

    folders = {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix}
    folders |= {os.path.dirname(_PYTHON), os.path.dirname(_interpreter(None))}
    folders |= {sysconfig.get_paths().get(name, "") for name in ("stdlib", "platstdlib")}
    folders |= {*site.getsitepackages(), site.getusersitepackages()}
    folders |= {p for p in sys.path if os.path.basename(p) in ("site-packages", "dist-packages")}
    return tuple(sorted({os.path.realpath(f) for f in folders if f and os.path.isdir(f)}))


def read_only_folders(root: str, tmp: str, path: str) -> list[str]:
    """What the launcher mounts back read-only in a command's sandbox (real paths).

    - Each folder of `path` (the command's ``PATH``) and of Python (`_python_folders`)
      under a folder the sandbox replaces (``/tmp``, ``/run``, ``/dev``): the command
      finds its tools there, and cannot change them.
    - Python's folders under the workspace `root` or `tmp`: the next command's launcher
      (and the agent) runs that Python outside the sandbox.
    - ``.git/hooks`` and ``.git/config`` of the workspace: git runs hooks and commands
      set in its config later, outside the sandbox.
    """
    writable = [root, tmp]
    hidden = sorted({os.path.realpath(h) for h in _HIDDEN if os.path.isdir(h)})

    def under(folder: str, places: Iterable[str]) -> bool:
        return any(_within(folder, p) and folder != p for p in places)

    def writable_there(folder: str) -> bool:
        return any(_within(folder, w) for w in writable)

    found: list[str] = []
    for entry in path.split(os.pathsep):
        real = os.path.realpath(entry) if os.path.isabs(entry) else ""
        if real and os.path.isdir(real) and under(real, hidden) and not writable_there(real):
            found.append(real)
    for folder in _python_folders():
        if under(folder, hidden) or writable_there(folder):
            found.append(folder)
    for name in ("hooks", "config"):
        git = os.path.realpath(os.path.join(root, ".git", name))
        if os.path.exists(git) and under(git, [root]):
            found.append(git)
    return sorted(set(found))


def warn_unsandboxed(reason: str) -> None:
    """Say once per process, on the ``glassagent`` logger, that commands run unsandboxed."""
    global _warned
    if not _warned:
        _warned = True
        logger.warning("execute_command runs commands WITHOUT a sandbox: %s", reason)


def _gaps(support: SandboxSupport, allow_network: bool, root: str | None) -> list[str]:
    """What a workspace's sandbox leaves reachable of the host, one phrase each."""
    gaps = []
    if allow_network and support.landlock_abi < 6:
        gaps.append(
            f"abstract unix sockets of the host are reachable (X11, D-Bus): the network is "
            f"allowed, and Landlock ABI {support.landlock_abi} cannot scope them (it takes 6)"
        )
    if root is not None:
        real = os.path.realpath(root)
        held = [f for f in _HOST_SOCKETS if os.path.isdir(f) and _within(os.path.realpath(f), real)]
        if held:
            folders = " and ".join(held)
            gaps.append(
                f"the workspace holds {folders}: commands see the host's {folders} as they "
                f"are, sockets (tmux, X11, ssh-agent) included"
            )
    return gaps


def plan(
    mode: object, *, allow_commands: bool, allow_network: bool, root: str | None = None
) -> tuple[bool, str]:
    """Whether commands run in the sandbox, and one line saying how they run.

    Raises:
        UserError: For an unknown `mode`; for ``"required"`` where the sandbox cannot be
            made (while commands are allowed), or where it would leave host sockets
            reachable (a workspace `root` that holds ``/tmp`` or ``/run``; the network
            allowed with Landlock ABI < 6).
    """
    if mode not in SANDBOX_MODES:
        raise UserError(f"`sandbox` must be 'auto', 'required' or 'off', got {mode!r}.")
    if not allow_commands:
        return False, "commands are not allowed"
    if mode == "off":
        return False, "commands run WITHOUT a sandbox: it is turned off"
    support = sandbox_support()
    if support.available:
        gaps = _gaps(support, allow_network, root)
        if gaps and mode == "required":
            raise UserError(
                f"Commands must run in a sandbox (sandbox='required') that keeps the host's "
                f"sockets out of reach, but here {gaps[0]}. With sandbox='auto' they run in "
                f"the sandbox as it is, with a warning."
            )
        namespaces = [*support.namespaces, *([] if allow_network else ["network"])]
        network = "network allowed" if allow_network else "no network"
        status = (
            f"commands run in a sandbox (Linux namespaces: {', '.join(namespaces)}; "
            f"Landlock ABI {support.landlock_abi}); {network}"
        )
        return True, status + "".join(f"; WARNING: {gap}" for gap in gaps)
    if mode == "required":
        raise UserError(
            f"Commands must run in a sandbox (sandbox='required'), but this machine cannot make "
            f"one: {support.reason}. With sandbox='auto' or sandbox='off' they run without one."
        )
    warn_unsandboxed(support.reason)
    return False, f"commands run WITHOUT a sandbox: {support.reason}"
