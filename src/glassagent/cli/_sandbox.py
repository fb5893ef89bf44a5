"""The command sandbox at the command line: the workspace, ``--env``, and ``doctor``."""

from __future__ import annotations

import logging
import os
import platform
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from glassagent import __version__
from glassagent.cli._options import DoctorOptions, Options, ServeOptions
from glassagent.cli._setup import BadInput
from glassagent.errors import UserError
from glassagent.workspace import Workspace, sandbox_support

_UNSANDBOXED_WARNING = "execute_command runs commands WITHOUT a sandbox"


def command_env(entries: Sequence[str], environ: Mapping[str, str]) -> dict[str, str]:
    """The variables ``--env`` passes to commands: ``NAME=VALUE``, or ``NAME`` from `environ`.

    Raises:
        BadInput: For a ``NAME`` that `environ` does not have.
    """
    env: dict[str, str] = {}
    for entry in entries:
        name, given, value = entry.partition("=")
        if not given:
            if name not in environ:
                raise BadInput(f"--env {name}: {name} is not set in this environment")
            value = environ[name]
        env[name] = value
    return env


def open_workspace(
    root: Path,
    options: Options | ServeOptions,
    note: Callable[[str], None],
    *,
    requires_approval: bool = False,
) -> Workspace:
    """The workspace the options ask for; with commands, one line says how they run.

    Raises:
        BadInput: For ``--env`` or ``--sandbox required`` that cannot work.
    """
    try:
        with _quiet_warning():  # the line below says it
            workspace = Workspace(
                root,
                allow_commands=options.allow_commands,
                requires_approval=requires_approval,
                sandbox=options.sandbox,
                allow_network=options.allow_network,
                env=command_env(options.env, os.environ),
            )
    except UserError as exc:
        raise BadInput(re.sub(r"sandbox='(\w+)'", r"--sandbox \1", str(exc))) from exc
    if options.allow_commands:
        note(workspace.sandbox_status)
    return workspace


@contextmanager
def _quiet_warning() -> Iterator[None]:
    def other(record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(_UNSANDBOXED_WARNING)

    logger = logging.getLogger("glassagent")
    logger.addFilter(other)
    try:
        yield
    finally:
        logger.removeFilter(other)


def doctor(options: DoctorOptions, out: TextIO) -> int:
    """``glassagent doctor``: what this machine supports; exit code 0 when the sandbox works."""
    del options
    support = sandbox_support()
    system = f"{platform.system()} {platform.release()} ({platform.machine()})"
    lines = [f"glassagent {__version__}, Python {platform.python_version()}, {system}"]
    if support.available:
        scoped = "; signals and abstract sockets scoped" if support.landlock_abi >= 6 else ""
        proc = "a private one" if support.proc == "private" else "an empty one (no new proc)"
        lines += [
            "execute_command sandbox: available",
            f"  namespaces: {', '.join(support.namespaces)}",
            f"  Landlock ABI {support.landlock_abi}: writes only in the workspace and "
            f"temporary folders{scoped}",
            f"  /proc: {proc}",
            "  network: none unless --allow-network",
        ]
    else:
        lines += [
            f"execute_command sandbox: NOT available: {support.reason}",
            "  --sandbox auto (the default) runs commands without one; --sandbox required "
            "refuses --allow-commands",
        ]
    out.write("\n".join(lines) + "\n")
    out.flush()
    return 0 if support.available else 1
