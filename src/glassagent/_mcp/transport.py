"""How to reach an MCP server: a child process over stdio, or a URL over streamable HTTP.

Nothing here imports the ``mcp`` SDK at import time; `connect` does, when a server starts.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO
from urllib.parse import urlsplit

from glassagent._core.errors import ConfigurationError, UserError

if TYPE_CHECKING:
    from mcp.client._transport import TransportStreams

_INSTALL = 'MCP servers need the MCP Python SDK: pip install "glassagent[mcp]"'


def require_sdk() -> None:
    """Raise `ConfigurationError` when the ``mcp`` package is not installed."""
    try:
        import mcp  # noqa: F401
    except ImportError as exc:
        raise ConfigurationError(f"{_INSTALL} ({exc})") from None


@dataclass(frozen=True)
class Stdio:
    """A server started as a child process, speaking MCP on its stdin and stdout."""

    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = field(default=None, repr=False)
    cwd: str | Path | None = None
    stderr: TextIO | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.command, str) or not self.command:
            raise UserError("MCPServer.stdio needs a command (a non-empty string).")
        if isinstance(self.args, str) or not all(isinstance(a, str) for a in self.args):
            raise UserError("MCPServer.stdio: `args` must be a sequence of strings.")

    @property
    def label(self) -> str:
        """A default server name: the command's file name, and its first argument's."""
        words = [self.command, *self.args[:1]]
        return " ".join(Path(word).name or word for word in words)

    def redact(self, text: str) -> str:
        """`text` with the values of `env` masked."""
        return _mask(text, (self.env or {}).values())

    @asynccontextmanager
    async def connect(self) -> AsyncIterator[TransportStreams]:
        """Start the process; yield the session's streams; stop the process on exit."""
        from mcp.client.stdio import StdioServerParameters, stdio_client

        params = StdioServerParameters(
            command=self.command,
            args=list(self.args),
            env=dict(self.env) if self.env is not None else None,
            cwd=self.cwd,
        )
        async with stdio_client(params, errlog=self.stderr or sys.stderr) as streams:
            yield streams


@dataclass(frozen=True)
class Http:
    """A server reached over MCP's streamable HTTP transport."""

    url: str = field(repr=False)
    headers: Mapping[str, str] | None = field(default=None, repr=False)
    connect_timeout: float = 30.0

    def __post_init__(self) -> None:
        parts = urlsplit(self.url) if isinstance(self.url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise UserError(f"MCPServer.http needs an http:// or https:// URL, got {self.url!r}.")

    @property
    def label(self) -> str:
        """A default server name: host, port and path, without credentials or query."""
        parts = urlsplit(self.url)
        port = f":{parts.port}" if parts.port else ""
        return f"{parts.hostname}{port}{parts.path}"

    def redact(self, text: str) -> str:
        """`text` with the URL's credentials and query, and the header values, masked."""
        parts = urlsplit(self.url)
        secrets = [self.url, parts.query, parts.password or "", *(self.headers or {}).values()]
        return _mask(text, secrets)

    @asynccontextmanager
    async def connect(self) -> AsyncIterator[TransportStreams]:
        """Open an HTTP client; yield the session's streams; end the MCP session on exit."""
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        timeout = httpx2.Timeout(self.connect_timeout, read=None)
        headers: dict[str, Any] = dict(self.headers or {})
        async with (
            httpx2.AsyncClient(headers=headers, timeout=timeout) as client,
            streamable_http_client(self.url, http_client=client) as streams,
        ):
            yield streams


Transport = Stdio | Http
"""Where a server is."""


def _mask(text: str, secrets: Iterable[str]) -> str:
    for secret in sorted(secrets, key=len, reverse=True):  # the whole URL before its query
        if len(secret) >= 4:
            text = text.replace(secret, "***")
    return text


def stdio_args(args: Sequence[str]) -> tuple[str, ...]:
    """`args` as a tuple, refusing a lone string (which would be split into characters)."""
    if isinstance(args, str):
        raise UserError("MCPServer.stdio: `args` must be a list of strings, not one string.")
    return tuple(args)
