# glassagent sandbox launcher: runs one `sh -c` command in Linux namespaces under Landlock.
"""The sandbox's launcher: the program between the agent and a sandboxed command.

It imports only the standard library and is never imported from a folder the command can
write: `glassagent._workspace.sandbox` reads this source once, at its first probe of the
machine (`sandbox_support`), and starts ``python -I -S -c BOOT`` with the source and the
command's settings on its standard input (`main` gets the settings). Then:

1. The launcher unshares user, mount, PID, IPC and (without network) network namespaces,
   maps its user and group ids to themselves, and forks.
2. The fork is PID 1 of the new PID namespace. It makes the mounts private and puts a
   ``/dev`` of its own in place (``null``, ``zero``, ``full``, ``random``, ``urandom`` and
   ``tty`` of the host, a new ``devpts`` on ``/dev/pts``: no terminal of the host). It puts
   fresh, empty file systems on ``/tmp``, ``/dev/shm`` and ``/run``; the workspace and the
   command's temporary folder are mounted back where they are, and the settings'
   ``readonly`` folders (the ``PATH`` and Python folders under a hidden one, the Python
   folders, ``.git/hooks`` and ``.git/config`` under a writable one) are mounted back
   read-only. It mounts a ``/proc`` of its own (an empty one where the kernel refuses),
   brings up ``lo``, and forks the shell.
3. The shell's process joins a new session keyring, sets no_new_privs, restricts itself
   with Landlock (read and execute everywhere; write in the workspace, the temporary
   folder, the fresh ``/tmp`` and ``/dev/shm``, and to ``/dev/null``, ``/dev/zero``,
   ``/dev/full``, ``/dev/tty`` and its own terminals; with Landlock ABI 6, no signals or
   abstract unix sockets out of the sandbox), enters the workspace and execs
   ``/bin/sh -c COMMAND``.
4. PID 1 reaps children until the shell exits, hands its wait status to the launcher and
   exits: the kernel then kills every process left in the namespace. The launcher ends
   as the shell did (its exit code, or the signal that killed it).

A step that fails writes ``glassagent sandbox: ...`` to standard error and ends with exit
code 125: the command never runs outside the sandbox. Every process the launcher forks
ends through ``os._exit``, whatever goes wrong in it.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import json
import os
import resource
import signal
import socket
import stat
import struct
from collections.abc import Sequence
from typing import Any, NoReturn

SETUP_FAILED = 125
"""The launcher's exit code when the sandbox could not be made."""
TRANSIENT_NOTE = "(it may work later)"
"""Ends the message of a failure that may pass (a limit reached, memory short)."""

_CLONE_NEWNS, _CLONE_NEWIPC, _CLONE_NEWUSER = 0x00020000, 0x08000000, 0x10000000
_CLONE_NEWPID, _CLONE_NEWNET = 0x20000000, 0x40000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REMOUNT = 0x1, 0x2, 0x4, 0x8, 0x20
_MS_NOATIME, _MS_NODIRATIME, _MS_BIND, _MS_REC = 0x400, 0x800, 0x1000, 0x4000
_MS_PRIVATE, _MS_RELATIME, _MS_STRICTATIME = 0x40000, 0x200000, 0x1000000
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_SET_NO_NEW_PRIVS = 1, 4, 38
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1
_TRANSIENT = (errno.EAGAIN, errno.ENOMEM, errno.ENOSPC, errno.EUSERS)

# Landlock and mount_setattr: the same system call numbers on every architecture listed here.
_LANDLOCK_ARCHES = ("x86_64", "aarch64", "i686", "i386", "armv7l", "riscv64", "ppc64le", "s390x")
_SYS_MOUNT_SETATTR, _AT_FDCWD, _AT_RECURSIVE, _MOUNT_ATTR_RDONLY = 442, -100, 0x8000, 0x1
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION, _RULE_PATH_BENEATH = 1, 1
_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_TRUNCATE, _IOCTL_DEV = 1 << 14, 1 << 15
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1
_FS_RIGHTS = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1}
"""Every file system right Landlock handles, by ABI (5 and later: ``(1 << 16) - 1``)."""
_KEYCTL = {"x86_64": 250, "aarch64": 219}
"""The ``keyctl`` system call, where its number is known here."""
_KEYCTL_JOIN_SESSION_KEYRING = 1

_FRESH = (("/tmp", 0o1777), ("/dev/shm", 0o1777), ("/run", 0o755), ("/var/run", 0o755))
"""Folders that get an empty file system of their own: no host sockets (tmux, X11, docker,
D-Bus, ssh-agent) or files left by others in them; ``/tmp`` and ``/dev/shm`` writable."""
_KEPT = ("/run/systemd/resolve",)
"""Folders under a fresh one that are mounted back read-only (DNS settings)."""
_DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty")
"""The host's devices in the sandbox's ``/dev``."""
_DEV_LINKS = (
    ("ptmx", "pts/ptmx"),
    ("fd", "/proc/self/fd"),
    ("stdin", "/proc/self/fd/0"),
    ("stdout", "/proc/self/fd/1"),
    ("stderr", "/proc/self/fd/2"),
)
_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/pts")
"""What a command may write to besides its folders (``/dev/pts``: its own terminals)."""

_libc = ctypes.CDLL(None, use_errno=True)


class SetupError(Exception):
    """A step of making the sandbox failed; the message says which and why."""

    def __init__(self, message: str, number: int = 0) -> None:
        super().__init__(message)
        self.errno = number


def main(data: bytes) -> None:
    """Run the command the settings `data` (JSON) describe, and end as it ended."""
    try:
        config: dict[str, Any] = json.loads(data)
        _quiet_stdin()
        _follow_parent(int(config["parent"]))
        _unshare(network=bool(config["network"]))
        status_read, status_write = os.pipe()
        init = os.fork()
    except BaseException as exc:  # whatever it is, the command does not run
        _fail(exc)
    if init == 0:
        os.close(status_read)
        _init(config, status_write)
    os.close(status_write)
    report = _read_all(status_read)
    _, status = os.waitpid(init, 0)
    _end_as(int(report) if report else status)


def _fail(error: BaseException) -> NoReturn:
    """Say what failed on standard error and exit with `SETUP_FAILED`, whatever happens."""
    try:
        detail = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        detail = detail or type(error).__name__
        where = f" ({error.filename})" if isinstance(error, OSError) and error.filename else ""
        later = f" {TRANSIENT_NOTE}" if getattr(error, "errno", None) in _TRANSIENT else ""
        os.write(2, f"glassagent sandbox: {detail}{where}{later}\n".encode())
    finally:
        os._exit(SETUP_FAILED)


def _check(result: int, step: str) -> int:
    if result < 0:
        number = ctypes.get_errno()
        raise SetupError(f"{step} failed: {os.strerror(number)}", number)
    return result


def _quiet_stdin() -> None:
    """Our standard input carried the settings; the command gets none."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)


def _follow_parent(parent: int) -> None:
    """Die with the agent (and so take the sandbox with us)."""
    _check(_libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PDEATHSIG)")
    if os.getppid() != parent:
        raise SetupError("the agent that started the command is gone")


def _unshare(*, network: bool) -> None:
    """New namespaces; our user and group ids mapped to themselves in the user namespace."""
    uid, gid = os.geteuid(), os.getegid()
    flags = _CLONE_NEWUSER | _CLONE_NEWNS | _CLONE_NEWPID | _CLONE_NEWIPC
    if not network:
        flags |= _CLONE_NEWNET
    try:
        _check(_libc.unshare(flags), "unshare (user, mount, PID namespaces)")
    except SetupError as exc:
        if exc.errno in (errno.ENOSPC, errno.EUSERS):
            raise SetupError(f"{exc}: user namespace limit reached", exc.errno) from None
        raise
    try:
        with open("/proc/self/setgroups", "w") as setgroups:
            setgroups.write("deny")
    except FileNotFoundError:  # kernels before 3.19
        pass
    for name, number in (("uid_map", uid), ("gid_map", gid)):
        with open(f"/proc/self/{name}", "w") as mapping:
            mapping.write(f"{number} {number} 1")


def _read_all(fd: int) -> str:
    chunks = []
    while chunk := os.read(fd, 64):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks).decode().strip()


def _end_as(status: int) -> NoReturn:
    """Exit as a process whose wait status is `status` did."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if number not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
        os._exit(128 + number)  # a signal that does not end a process
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else SETUP_FAILED)


# ---- PID 1 of the new namespace -----------------------------------------------------------


def _init(config: dict[str, Any], status_fd: int) -> NoReturn:
    """Set the sandbox up, run the shell, reap, report its status and exit."""
    try:
        _check(_libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PDEATHSIG)")
        _check(_libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0), "prctl(DUMPABLE)")
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # the command cannot signal PID 1
        writable = [config["cwd"], config["tmp"]]
        _mount_folders(writable, config.get("readonly", ()))
        proc = _mount_proc()
        if not config["network"]:
            _loopback_up()
        abi = landlock_abi()
        if abi < 1:
            raise SetupError("Landlock is not available in this kernel")
        if config.get("probe"):
            report = {"landlock_abi": abi, "proc": proc}
            os.write(1, json.dumps(report).encode() + b"\n")
        shell = os.fork()
        if shell == 0:
            _shell(config, abi, [*writable, "/tmp", "/dev/shm"])
        status = _reap(shell)
        os.write(status_fd, str(status).encode())
    except BaseException as exc:  # PID 1 never returns into main
        _fail(exc)
    os._exit(0)


def _mount(source: str | None, target: str, kind: str | None, flags: int, data: str = "") -> None:
    encoded = [None if s is None else os.fsencode(s) for s in (source, target, kind)]
    result = _libc.mount(*encoded, ctypes.c_ulong(flags), data.encode() or None)
    _check(result, f"mount {kind or source} on {target}")


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _mount_folders(writable: Sequence[str], readonly: Sequence[str]) -> None:
    """Private mounts, our own ``/dev``, empty `_FRESH` folders; folders mounted back.

    What is mounted back is opened first, while the host's folders are still in sight.
    """
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)
    fresh = [
        (folder, mode)
        for folder, mode in _FRESH
        if os.path.isdir(folder)
        and not os.path.islink(folder)
        # a writable folder that holds it (a workspace of /tmp) keeps it as it is
        and not any(_within(folder, w) for w in writable)
    ]
    covered = ["/dev", *(folder for folder, _ in fresh)]
    binds = _binds(writable, readonly, covered)
    handles = [os.open(path, os.O_PATH | os.O_CLOEXEC) for path, _ in binds]
    devices = [
        (name, os.open(f"/dev/{name}", os.O_PATH | os.O_CLOEXEC))
        for name in _DEV_NODES
        if os.path.exists(f"/dev/{name}")
    ]
    _private_dev(devices)
    for folder, mode in fresh:
        _mount("tmpfs", folder, "tmpfs", _MS_NOSUID | _MS_NODEV, f"mode={mode:o}")
    for (path, read_only), handle in zip(binds, handles, strict=True):
        _bind(handle, path, read_only=read_only)


def _binds(
    writable: Sequence[str], readonly: Sequence[str], covered: Sequence[str]
) -> list[tuple[str, bool]]:
    """The folders (and files) to mount back, parents first; whether each is read-only.

    The writable folders under a covered one come back as they are; every `readonly` one
    read-only. The folders between a writable folder and a read-only one in it are mounted
    on themselves: a mount point cannot be renamed, so a command cannot move the read-only
    one aside and put a folder of its own in its place.
    """
    kept = [os.path.realpath(k) for k in _KEPT if os.path.isdir(k)]
    kept = [k for k in kept if any(_within(k, c) and k != c for c in covered)]
    binds = {path: False for path in writable if any(_within(path, c) for c in covered)}
    for path in [*readonly, *kept]:
        binds[path] = True
    for path in [*readonly]:
        for root in writable:
            if _within(path, root) and path != root:
                parts = path[len(root) :].strip("/").split("/")[:-1]
                for count in range(1, len(parts) + 1):
                    binds.setdefault(os.path.join(root, *parts[:count]), False)
    return sorted(binds.items(), key=lambda item: item[0].rstrip("/").count("/"))


def _bind(handle: int, path: str, *, read_only: bool) -> None:
    """Mount what `handle` opened on `path` (made where missing); read-only if asked."""
    if not os.path.lexists(path):
        if stat.S_ISDIR(os.fstat(handle).st_mode):
            os.makedirs(path)
        else:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o600))
    _mount(f"/proc/self/fd/{handle}", path, None, _MS_BIND | _MS_REC)
    os.close(handle)
    if read_only:
        _read_only(path)


def _read_only(path: str) -> None:
    """Make the mount on `path`, and every mount under it, read-only."""
    attr = ctypes.create_string_buffer(struct.pack("=QQQQ", _MOUNT_ATTR_RDONLY, 0, 0, 0), 32)
    target = os.fsencode(path)
    if _syscall(_SYS_MOUNT_SETATTR, _AT_FDCWD, target, _AT_RECURSIVE, attr, 32) == 0:
        return
    # No mount_setattr (a filter refuses it): remount the top mount only, with the flags
    # the kernel locked on it (they must be kept in a user namespace).
    have = os.statvfs(path).f_flag
    flags = _MS_REMOUNT | _MS_BIND | _MS_RDONLY
    flags |= have & (os.ST_NOSUID | os.ST_NODEV | os.ST_NOEXEC | os.ST_NODIRATIME)
    if have & os.ST_NOATIME:
        flags |= _MS_NOATIME
    else:
        flags |= _MS_RELATIME if have & os.ST_RELATIME else _MS_STRICTATIME
    _mount(None, path, None, flags)


def _private_dev(devices: Sequence[tuple[str, int]]) -> None:
    """A ``/dev`` of the sandbox's own: a few devices of the host, terminals of its own."""
    _mount("tmpfs", "/dev", "tmpfs", _MS_NOSUID | _MS_NOEXEC, "mode=755")
    for name, handle in devices:
        path = f"/dev/{name}"
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o600))
        _mount(f"/proc/self/fd/{handle}", path, None, _MS_BIND)
        os.close(handle)
    for name in ("pts", "shm"):
        os.mkdir(f"/dev/{name}", 0o755)
    pts = "newinstance,ptmxmode=0666,mode=0620"
    try:  # noqa: SIM105  # (contextlib: one more import for every command)
        _mount("devpts", "/dev/pts", "devpts", _MS_NOSUID | _MS_NOEXEC, pts)
    except SetupError:  # the kernel refuses one here: no terminals (and none of the host's)
        pass
    for name, target in _DEV_LINKS:
        os.symlink(target, f"/dev/{name}")


def _mount_proc() -> str:
    """A /proc that shows the sandbox's processes only; an empty one where that fails."""
    flags = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    try:
        _mount("proc", "/proc", "proc", flags)
    except SetupError:  # e.g. a container whose /proc has parts covered
        _mount("tmpfs", "/proc", "tmpfs", flags | _MS_RDONLY, "mode=555")
        return "hidden"
    return "private"


def _loopback_up() -> None:
    """Bring up ``lo`` in the new network namespace: local-only programs work."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(sock, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | _IFF_UP))


def _reap(shell: int) -> int:
    """Wait for every child (orphans come to PID 1) until the shell exits; its status."""
    while True:
        pid, status = os.waitpid(-1, 0)
        if pid == shell:
            return status


# ---- the shell's process --------------------------------------------------------------------


def _shell(config: dict[str, Any], abi: int, writable: Sequence[str]) -> NoReturn:
    """Restrict this process with Landlock, enter the workspace and exec the shell.

    It never returns: a failure of any kind ends it through `_fail`.
    """
    try:
        _new_session_keyring()
        _check(_libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")
        _restrict(abi, writable)
        os.chdir(config["cwd"])
        for number in (signal.SIGPIPE, signal.SIGXFSZ):  # Python ignores them; sh must not
            signal.signal(number, signal.SIG_DFL)
        os.execve("/bin/sh", ["sh", "-c", config["command"]], config["env"])
    except BaseException as exc:  # never back into PID 1's code
        _fail(exc)


def _new_session_keyring() -> None:
    """Join a new, empty session keyring: the keys of the agent's session are not ours.

    Where the system call is refused (a filter forbids ``keyctl``), the command cannot use
    it either.
    """
    number = _KEYCTL.get(os.uname().machine)
    if number is None:
        return
    if _syscall(number, _KEYCTL_JOIN_SESSION_KEYRING, None) < 0:
        code = ctypes.get_errno()
        if code not in (errno.ENOSYS, errno.EPERM):
            raise SetupError(f"keyctl(JOIN_SESSION_KEYRING) failed: {os.strerror(code)}", code)


def _syscall(number: int, *args: Any) -> int:
    """``syscall(number, ...)``; whole numbers are passed as C longs, as the kernel reads them."""
    wide = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]
    return int(_libc.syscall(ctypes.c_long(number), *wide))


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is missing or disabled."""
    if os.uname().machine not in _LANDLOCK_ARCHES:
        return 0
    version = _syscall(_SYS_CREATE_RULESET, None, 0, _CREATE_RULESET_VERSION)
    return max(version, 0)


def _restrict(abi: int, writable: Sequence[str]) -> None:
    """Landlock: read and execute everywhere, write in `writable` and to `_DEVICES`."""
    every = _FS_RIGHTS.get(abi, (1 << 16) - 1)
    scoped = _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL if abi >= 6 else 0
    attr = ctypes.create_string_buffer(struct.pack("=QQQ", every, 0, scoped), 24)
    ruleset = _check(_syscall(_SYS_CREATE_RULESET, attr, 24, 0), "Landlock")
    device = (_READ_FILE | _WRITE_FILE | _TRUNCATE | _IOCTL_DEV) & every
    rules = [("/", _EXECUTE | _READ_FILE | _READ_DIR)]
    rules += [(folder, every) for folder in writable if os.path.isdir(folder)]
    rules += [(path, device) for path in _DEVICES if os.path.exists(path)]
    for path, access in rules:
        handle = os.open(path, os.O_PATH | os.O_CLOEXEC)
        rule = ctypes.create_string_buffer(struct.pack("=Qi", access, handle), 12)
        _check(_syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, rule, 0), f"Landlock {path}")
        os.close(handle)
    _check(_syscall(_SYS_RESTRICT_SELF, ruleset, 0), "Landlock restrict_self")
    os.close(ruleset)
