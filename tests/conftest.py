"""Suite-wide guards: no provider keys, no proxies, no network beyond loopback."""

from __future__ import annotations

import ipaddress
import itertools
import os
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import pytest
from hypothesis import HealthCheck, settings

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

_SECRET_SUFFIXES = ("_API_KEY", "_API_BASE", "_BASE_URL", "_API_VERSION", "_ORG_ID", "_ENDPOINT")
_PROXY_VARS = {"http_proxy", "https_proxy", "all_proxy", "no_proxy", "ws_proxy", "wss_proxy"}


# ---- hypothesis: a quick look in every run, a deep one in CI's attack step --------------------
# Explicit `max_examples` in a test would override the profile: the fuzz tests leave it out.
# `deadline=None`: a slow example on a loaded machine (or under xdist) is not a failure.
settings.register_profile(
    "fast",
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.register_profile("ci-deep", settings.get_profile("fast"), max_examples=500)
settings.load_profile("fast")  # `pytest --hypothesis-profile=ci-deep` loads the other one


# ---- pytest-xdist: `-n auto` is one worker more than the CPUs --------------------------------
# The tests wait for child processes and servers about a third of the time: with 3 workers a
# 2-CPU machine stays busy (each worker also collects every test, which costs CPU too).


@pytest.hookimpl(optionalhook=True)  # without pytest-xdist, nothing asks
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    usable = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    return (len(usable) if usable else os.cpu_count() or 1) + 1


def _is_loopback(address: Any) -> bool:
    if isinstance(address, tuple) and address:
        host = address[0]
        if host in ("localhost", ""):
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False
    return isinstance(address, (str, bytes))  # AF_UNIX paths


@pytest.fixture(scope="session")
def _one_ca_bundle(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A CA bundle of one certificate (the first of certifi's), for `SSL_CERT_FILE`."""
    import certifi

    text = Path(certifi.where()).read_text(encoding="ascii")
    end = "-----END CERTIFICATE-----"
    first = text[text.index("-----BEGIN CERTIFICATE-----") : text.index(end) + len(end)]
    path = tmp_path_factory.mktemp("ca") / "one-ca.pem"
    path.write_text(first + "\n", encoding="ascii")
    return str(path)


@pytest.fixture(autouse=True)
def _isolated_environment(monkeypatch: pytest.MonkeyPatch, _one_ca_bundle: str) -> None:
    for name in list(os.environ):
        if name.upper().endswith(_SECRET_SUFFIXES) or name.lower() in _PROXY_VARS:
            monkeypatch.delenv(name, raising=False)
    # The suite never speaks TLS (loopback HTTP only), so a client's TLS context needs no real
    # CAs: loading a full bundle costs each new httpx client (Gemini's: three) about 30 ms.
    monkeypatch.setenv("SSL_CERT_FILE", _one_ca_bundle)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    for name in (
        "GOOGLE_API_KEY",
        "GOOGLE_GENAI_USE_VERTEXAI",
        "GOOGLE_CLOUD_PROJECT",
        "GLASSAGENT_PROFILE_PATH",
        "GLASSAGENT_FAST_POOL",
    ):
        monkeypatch.delenv(name, raising=False)
    # providers registered by a test (or a docs example) end with it
    monkeypatch.setattr("glassagent._providers.factory._registered", {})

    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex

    def guarded(real: Any) -> Any:
        def connect(self: socket.socket, address: Any) -> Any:
            if not _is_loopback(address):
                raise OSError(f"the test suite may not reach the network ({address!r})")
            return real(self, address)

        return connect

    monkeypatch.setattr(socket.socket, "connect", guarded(real_connect))
    monkeypatch.setattr(socket.socket, "connect_ex", guarded(real_connect_ex))


# ---- chat stores: a file store, SQLite, and a throwaway PostgreSQL cluster ------------------


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[Any]:
    """A PostgreSQL cluster for the session (a `tests.support.postgres.Cluster`)."""
    from tests.support.postgres import cluster, find_bindir, missing_postgres

    bindir = find_bindir()
    if bindir is None:
        missing_postgres()
    with cluster(bindir) as running:
        yield running


@pytest.fixture
def postgres_url(postgres_cluster: Any) -> str:
    """The URL of a new, empty database of the session's cluster."""
    url: str = postgres_cluster.create_database(f"test_{next(_DATABASES)}")
    return url


_DATABASES = itertools.count(1)
_STORE_KINDS = ["files", "sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]


@pytest.fixture(params=_STORE_KINDS)
async def place(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    """Where chats are kept, for each kind of store: stores opened on it are closed after."""
    from tests.support.store import Place

    async with Place.of(request.param, request, tmp_path) as found:
        yield found


@pytest.fixture(params=_STORE_KINDS[1:])
async def sql_place(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    """Where chats are kept, for each database."""
    from tests.support.store import Place

    async with Place.of(request.param, request, tmp_path) as found:
        yield found


# ---- glassagent.otel: spans kept in memory (the SDK is imported only by tests that ask) ----


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    """An exporter that keeps every ended span for the test to read."""
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> TracerProvider:
    """A tracer provider that hands each ended span to `exporter` at once."""
    from tests.support.otel import memory_provider

    return memory_provider(exporter)


@pytest.fixture
def quiet() -> Iterator[TextIO]:
    """Where a child process's log lines go (a real file, as a child process needs)."""
    with open(os.devnull, "w") as sink:
        yield sink
