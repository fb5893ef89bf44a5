"""The names a server answers to and the origins it takes requests from, checked.

No Starlette here: `glassagent.server` publishes these checks, and importing it needs
neither Starlette nor uvicorn.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from glassagent._core.errors import ConfigurationError

_ORIGIN = re.compile(r"^([a-z][a-z0-9+.-]*)://([^/?#\s@]+)$")
_DEFAULT_PORTS = {"http": ":80", "https": ":443"}


def check_allowed_hosts(hosts: Iterable[str]) -> frozenset[str]:
    """Check the host names a server is to answer to, besides loopback ones.

    What `create_app` does with its ``allowed_hosts`` (and ``glassagent serve`` with
    ``--allowed-host``): a request whose ``Host`` names none of them, nor a loopback name or
    address, nor the address the request came to, gets 403.

    Args:
        hosts: Host names or addresses, without scheme, port or path
            (``"agent.example.com"``, ``"192.0.2.10"``, ``"[2001:db8::1]"``); ``"*"`` for
            any. One string counts as a list of one.

    Returns:
        The names in lower case, IPv6 addresses without brackets.

    Raises:
        ConfigurationError: For a value that is not a host name or address (a port, a path
            or a scheme in it).
    """
    if isinstance(hosts, str):
        hosts = [hosts]
    checked = set()
    for host in hosts:
        if not isinstance(host, str) or not host.strip():
            raise ConfigurationError(f"An allowed host must be a non-empty string: {host!r}.")
        name = host.strip().lower()
        if name.startswith("[") and name.endswith("]"):
            name = name[1:-1]
        if any(c in name for c in "/@[] \t") or (name.count(":") == 1):
            raise ConfigurationError(
                f"The allowed host {host!r} is not a host name or address: give it without "
                "scheme, port or path, e.g. 'agent.example.com'."
            )
        checked.add(name)
    return frozenset(checked)


def check_allowed_origins(origins: Iterable[str]) -> frozenset[str]:
    """Check the web origins whose requests a server is to take though they are not its own.

    What `create_app` does with its ``allowed_origins`` (and ``glassagent serve`` with
    ``--allowed-origin``): a request whose ``Origin`` is one of them passes the cross-site
    check, e.g. behind a proxy that rewrites ``Host``. The server sends no CORS headers.

    Args:
        origins: Origins as a browser sends them: scheme, host and port only
            (``"https://app.example.com"``, ``"http://localhost:3000"``). One string counts
            as a list of one.

    Returns:
        The origins in lower case, without a default port (``:80``, ``:443``) or a final
            ``/``.

    Raises:
        ConfigurationError: For a value that is not ``scheme://host[:port]``.
    """
    if isinstance(origins, str):
        origins = [origins]
    checked = set()
    for origin in origins:
        text = origin.strip().lower().rstrip("/") if isinstance(origin, str) else ""
        match = _ORIGIN.match(text)
        if match is None:
            raise ConfigurationError(
                f"The allowed origin {origin!r} is not an origin: give scheme, host and port "
                "only, e.g. 'https://app.example.com' or 'http://localhost:3000'."
            )
        scheme, authority = match.groups()
        default = _DEFAULT_PORTS.get(scheme)
        if default and authority.endswith(default):
            authority = authority[: -len(default)]
        checked.add(f"{scheme}://{authority}")
    return frozenset(checked)


def host_name(host: str) -> str:
    """The name or address in a ``Host`` header: no port, no brackets, lower-case."""
    return split_host(host)[0]


def split_host(host: str) -> tuple[str, str]:
    """A ``Host`` header's name (no brackets, lower-case) and its port (``""`` for none)."""
    host = host.strip().lower()
    if host.startswith("["):
        end = host.find("]")
        if end <= 0:
            return host, ""
        rest = host[end + 1 :]
        return host[1:end], rest[1:] if rest[:1] == ":" and rest[1:].isdigit() else ""
    name, colon, port = host.rpartition(":")
    return (name, port) if colon and (port.isdigit() or not port) else (host, "")
