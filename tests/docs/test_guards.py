import os
import socket

import pytest


def test_provider_keys_and_proxies_are_removed() -> None:
    leaked = [n for n in os.environ if n.endswith("_API_KEY") or n.lower().endswith("_proxy")]
    assert leaked == []


def test_the_suite_cannot_reach_the_internet() -> None:
    with socket.socket() as sock, pytest.raises(OSError, match="may not reach the network"):
        sock.connect(("93.184.216.34", 80))


def test_loopback_stays_reachable() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        with socket.socket() as client:
            client.connect(server.getsockname())
