"""A throwaway PostgreSQL cluster for the tests: initdb into a temporary folder, pg_ctl start.

It listens on 127.0.0.1 and a free port (its unix socket in the folder), trusts local
connections, and is stopped (``pg_ctl stop -m immediate``) and removed at the end. initdb
refuses to run as root, so as root the cluster belongs to the ``postgres`` user (or
``nobody``). Without PostgreSQL's binaries the tests skip, except in CI (``CI=true``), where
that is a failure.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

START_SECONDS = 60
MISSING = (
    "PostgreSQL is not installed (no initdb and pg_ctl on PATH or in "
    "/usr/lib/postgresql/*/bin): install it (apt-get install postgresql) to run these tests"
)


def find_bindir() -> Path | None:
    """Where initdb and pg_ctl are: on PATH, or Debian's /usr/lib/postgresql/<version>/bin."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).resolve().parent
    versions = glob.glob("/usr/lib/postgresql/*/bin/initdb")
    versions.sort(key=lambda p: int(p.split("/")[-3]) if p.split("/")[-3].isdigit() else 0)
    return Path(versions[-1]).parent if versions else None


def missing_postgres() -> None:
    """Skip the test for want of PostgreSQL; in CI (``CI=true``) fail it."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"in CI, {MISSING}")
    pytest.skip(MISSING)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _owner() -> dict[str, Any]:
    """subprocess arguments that run the server unprivileged when we are root."""
    if os.name != "posix" or os.geteuid() != 0:
        return {}
    import pwd

    for name in ("postgres", "nobody"):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
    raise RuntimeError("running as root, and there is no postgres or nobody user for initdb")


@dataclass(frozen=True)
class Cluster:
    """A running cluster: where its programs are, and its port."""

    bindir: Path
    port: int
    data: Path

    @property
    def url(self) -> str:
        """The base URL, without a database name."""
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}"

    def server_pid(self) -> int:
        """The process id of the postmaster (its backends are its children)."""
        return int((self.data / "postmaster.pid").read_text().split()[0])

    def create_database(self, name: str) -> str:
        """Create the database `name`; its URL."""
        createdb = [str(self.bindir / "createdb"), "-h", "127.0.0.1", "-p", str(self.port)]
        subprocess.run(
            [*createdb, "-U", "postgres", name],
            check=True,
            capture_output=True,
            timeout=START_SECONDS,
        )
        return f"{self.url}/{name}"


@contextmanager
def cluster(bindir: Path, *, durable: bool = False) -> Iterator[Cluster]:
    """A started cluster, stopped and removed afterwards.

    Not `durable` (for tests), it skips fsync: a crash would lose it, which it may.
    """
    folder = Path(tempfile.mkdtemp(prefix="glassagent-pg-"))
    owner = _owner()
    if owner:
        os.chown(folder, owner["user"], owner["group"])
    data, log = folder / "data", folder / "log"
    run: dict[str, Any] = {"check": True, "capture_output": True, "text": True, **owner}
    initdb = [str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust"]
    pg_ctl = [str(bindir / "pg_ctl"), "-D", str(data), "-w", "-t", str(START_SECONDS)]
    try:
        subprocess.run(
            [*initdb, "--no-sync", "-E", "UTF8", "--locale=C"], timeout=START_SECONDS, **run
        )
        port = _free_port()
        settings = f"-c listen_addresses=127.0.0.1 -p {port} -k {folder} -c max_connections=200"
        if not durable:
            settings += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        subprocess.run(
            [*pg_ctl, "-l", str(log), "-o", settings, "start"], timeout=START_SECONDS + 10, **run
        )
        try:
            yield Cluster(bindir, port, data)
        finally:
            stop = [*pg_ctl, "-m", "immediate", "stop"]
            subprocess.run(stop, timeout=START_SECONDS, **{**run, "check": False})
    except subprocess.CalledProcessError as exc:
        detail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        raise RuntimeError(f"PostgreSQL did not start: {exc.stderr}\n{detail}") from exc
    finally:
        shutil.rmtree(folder, ignore_errors=True)
