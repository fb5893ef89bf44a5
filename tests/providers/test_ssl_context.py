"""The owned HTTP clients share one TLS context instead of loading the CA bundle each."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import certifi

from glassagent._providers.transport import new_http_client


def _context(client: Any) -> ssl.SSLContext:
    # httpx's own transport keeps the context its pool connects with
    return client._transport._pool._ssl_context  # type: ignore[no-any-return]


async def test_owned_clients_share_one_verifying_context(monkeypatch) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    first, second = new_http_client(), new_http_client(trust_env=False)
    try:
        assert _context(first) is _context(second)
        assert _context(first).verify_mode is ssl.CERT_REQUIRED
        assert _context(first).check_hostname
    finally:
        await first.aclose()
        await second.aclose()


async def test_a_trusted_environment_s_ca_file_is_honoured_and_an_untrusted_one_is_not(
    monkeypatch, tmp_path
) -> None:
    bundle = tmp_path / "ca.pem"
    bundle.write_bytes(Path(certifi.where()).read_bytes())  # noqa: ASYNC240
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    default = new_http_client()
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    trusting, direct = new_http_client(), new_http_client(trust_env=False)
    try:
        assert _context(trusting) is not _context(default)  # made from the given bundle
        assert _context(direct) is _context(default)  # a direct client ignores the variable
    finally:
        for client in (default, trusting, direct):
            await client.aclose()
