"""Run httpcore's own connection-pool tests against glassagent's pool (`connection_pool`).

glassagent's owned HTTP clients replace one private method of httpcore's pool. httpcore's
tests are not in its wheel, so this downloads the source distribution of the installed
httpcore from the package index (``pip download --no-binary :all:``), unpacks its tests into
a temporary folder, installs what they import and the environment lacks (h2's frame
libraries, pytest-trio) into that folder too (``pip install --target``: the environment is
left as it was), and runs them with ``httpcore.AsyncConnectionPool`` replaced by glassagent's
pool. The replacement keeps httpcore's class name, as the tests compare ``repr(pool)``.

Run: ``.venv/bin/python .ci/httpcore_pool_tests.py`` (extra arguments go to pytest).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

TESTS = ("tests/_async/test_connection_pool.py", "tests/test_cancellations.py")
"""httpcore's tests that build ``httpcore.AsyncConnectionPool``: every test of its async pool
(assignment, keep-alive, expiry, HTTP/2, limits, timeouts, concurrency) and of cancellations."""
NEEDED = {
    "hpack": "hpack",
    "hyperframe": "hyperframe",
    "h2": "h2",
    "trio": "trio",
    "outcome": "outcome",
    "pytest_trio": "pytest-trio",
}
"""What the tests import (module: distribution), installed only where missing."""

PLUGIN = '''
"""Makes httpcore.AsyncConnectionPool glassagent's pool, and checks that the tests used it."""
import httpcore
import pytest

from glassagent._providers import connection_pool

_sweeping = connection_pool._pool_class()
if _sweeping is None:
    raise RuntimeError("glassagent's pool does not take this httpcore " + httpcore.__version__)
ASSIGNED = [0]


class AsyncConnectionPool(_sweeping):
    """glassagent's pool under httpcore's class name (the tests compare repr(pool))."""

    def _assign_requests_to_connections(self):
        ASSIGNED[0] += 1
        return super()._assign_requests_to_connections()


httpcore.AsyncConnectionPool = AsyncConnectionPool


def pytest_sessionfinish(session, exitstatus):
    print(f"\\nglassagent's pool assigned requests {ASSIGNED[0]} times")
    if ASSIGNED[0] == 0 and session.exitstatus == 0:
        session.exitstatus = 1  # the tests did not reach the pool: nothing was checked
'''

INI = """[pytest]
addopts = -rxXs --strict-config --strict-markers -p glassagent_pool -p no:asyncio
    -p no:cacheprovider
markers =
    copied_from(source, changes=None): a test copied from elsewhere (httpcore's marker)
filterwarnings = error
"""


def pip(*args: str) -> None:
    """Run this interpreter's pip, quietly."""
    subprocess.run([sys.executable, "-m", "pip", "-q", *args], check=True)


def unpack_tests(version: str, into: Path) -> Path:
    """Download httpcore `version`'s source distribution and unpack its tests; their root."""
    pip("download", "--no-binary", ":all:", "--no-deps", f"httpcore=={version}", "-d", str(into))
    (archive,) = into.glob("httpcore-*.tar.gz")
    root = into / "httpcore-tests"
    with tarfile.open(archive) as tar:
        prefix = f"{archive.name.removesuffix('.tar.gz')}/"
        members = [m for m in tar.getmembers() if m.name.startswith(prefix + "tests/")]
        for member in members:
            member.name = member.name.removeprefix(prefix)
        if hasattr(tarfile, "data_filter"):  # Python 3.10.12 and later: nothing outside root
            tar.extractall(root, members=members, filter="data")
        else:
            tar.extractall(root, members=members)  # names checked above
    return root


def main() -> int:
    """Run the tests; pytest's exit status (0 when all passed against glassagent's pool)."""
    started = time.monotonic()
    version = importlib.metadata.version("httpcore")
    with tempfile.TemporaryDirectory(prefix="httpcore-pool-") as folder:
        work = Path(folder)
        root = unpack_tests(version, work)
        deps = work / "deps"
        missing = [dist for module, dist in NEEDED.items() if not importlib.util.find_spec(module)]
        if missing:  # --no-deps: what these need besides (trio, pytest) is installed already
            pip("install", "--no-deps", "--target", str(deps), *missing)
        (root / "glassagent_pool.py").write_text(PLUGIN)
        (root / "pytest.ini").write_text(INI)
        path = [str(root), str(deps), os.environ.get("PYTHONPATH", "")]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p)}
        print(f"httpcore {version}: {', '.join(TESTS)} against glassagent's pool", flush=True)
        command = [sys.executable, "-m", "pytest", *TESTS, *sys.argv[1:]]
        status = subprocess.run(command, cwd=root, env=env, check=False).returncode
    print(f"httpcore pool tests: {time.monotonic() - started:.1f} s, exit status {status}")
    return status


if __name__ == "__main__":
    sys.exit(main())
