"""`MCPServer`: the tools of a Model Context Protocol server, as glassagent tools."""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TextIO

from typing_extensions import Self

from glassagent._core.errors import MCPServerError, ToolError, UserError
from glassagent._core.options import check_integer
from glassagent._mcp.connection import (
    CONNECTION_CLOSED,
    REQUEST_TIMEOUT,
    Connection,
    describe,
    error_code,
)
from glassagent._mcp.content import result_text
from glassagent._mcp.transport import Http, Stdio, Transport, require_sdk, stdio_args
from glassagent._tools.context import ToolContext
from glassagent._tools.tool import Tool

if TYPE_CHECKING:
    from mcp import ClientSession

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_MAX_PAGES = 1000


def _check_timeout(name: str, value: float | None) -> float | None:
    if value is None:
        return value
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise UserError(f"MCPServer: `{name}` must be a positive number of seconds or None.")
    return value


def _bounded(text: str, limit: int | None) -> str:
    """`text`, or its first `limit` characters and a note saying how many were cut."""
    if limit is None or len(text) <= limit:
        return text
    cut = len(text) - limit
    return (
        f"{text[:limit]}\n[... {cut:,} more characters cut here: the result has "
        f"{len(text):,} characters, only the first {limit:,} are shown ...]"
    )


def _progress_text(progress: float, total: float | None, message: str | None) -> str:
    if message:
        return message
    return f"{progress:g}/{total:g}" if total else f"{progress:g}"


class MCPServer:
    """A Model Context Protocol server whose tools an agent can call.

    Make one with `MCPServer.stdio` (a program started as a child process) or
    `MCPServer.http` (a server reached over streamable HTTP). ``async with server:`` starts
    it and stops it; inside, ``await server.list_tools()`` gives its tools (`Tool`), with the
    JSON schemas the server declares, for an `Agent`. Each call goes to the server; its
    failures (an error result, a timeout, a server that exited) reach the model as the tool's
    error result. Entering the same server again, from nested ``async with`` blocks, shares
    the one session; the last exit stops it.

    Example:
        ```python
        async with MCPServer.stdio("python", ["my_server.py"]) as server:
            agent = Agent(client, tools=await server.list_tools())
            result = await agent.run("What is 2 + 3?")
        ```
    """

    __slots__ = (
        "_connection",
        "_instructions",
        "_lock",
        "_transport",
        "_users",
        "call_timeout",
        "list_timeout",
        "max_result_chars",
        "name",
        "start_timeout",
        "tool_prefix",
    )

    def __init__(
        self,
        transport: Transport,
        *,
        name: str | None = None,
        start_timeout: float | None = 30.0,
        list_timeout: float | None = 30.0,
        call_timeout: float | None = 300.0,
        tool_prefix: str | None = None,
        max_result_chars: int | None = 100_000,
    ) -> None:
        """Describe a server; use `MCPServer.stdio` or `MCPServer.http` to make one.

        Args:
            transport: Where the server is.
            name: The server's name in errors and logs; defaults to the command or the URL.
            start_timeout: Seconds to start the server and initialise the session (and, at
                the end, to stop it).
            list_timeout: Seconds each request other than a tool call may take (listing).
            call_timeout: Seconds each tool call may take; past it the model is told.
            tool_prefix: Put before each tool's name (``prefix_name``), to keep apart the
                tools of servers that use the same names.
            max_result_chars: Most characters of a tool's result (or error) passed on; a
                longer one keeps its start, with a note saying how much was cut. `None`
                for no limit.
        """
        require_sdk()
        self._transport = transport
        self.name: str = name or transport.label
        """The server's name in errors."""
        self.start_timeout: float | None = _check_timeout("start_timeout", start_timeout)
        """Seconds to start (and to stop) the server, `None` for no limit."""
        self.list_timeout: float | None = _check_timeout("list_timeout", list_timeout)
        """Seconds a listing request may take, `None` for no limit."""
        self.call_timeout: float | None = _check_timeout("call_timeout", call_timeout)
        """Seconds a tool call may take, `None` for no limit."""
        self.tool_prefix: str | None = tool_prefix
        """Put before each tool's name, with ``_``."""
        check_integer("MCPServer", "max_result_chars", max_result_chars, 1)
        self.max_result_chars: int | None = max_result_chars
        """Most characters of a tool's result passed on, `None` for no limit."""
        self._connection: Connection | None = None
        self._instructions: str | None = None
        self._users = 0
        self._lock = asyncio.Lock()

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        *,
        cwd: str | Path | None = None,
        stderr: TextIO | None = None,
        name: str | None = None,
        start_timeout: float | None = 30.0,
        list_timeout: float | None = 30.0,
        call_timeout: float | None = 300.0,
        tool_prefix: str | None = None,
        max_result_chars: int | None = 100_000,
    ) -> MCPServer:
        """A server run as a child process, speaking MCP on its standard input and output.

        The process starts on ``async with`` and is stopped at its end (its input closed,
        then terminated, then killed), also when the block is cancelled.

        Args:
            command: The program to run, e.g. ``"python"`` or ``"npx"``.
            args: Its arguments.
            env: Environment variables for it, added to a small safe default set (``PATH``,
                ``HOME``, ...); the rest of this process's environment is not passed on.
            cwd: Its working directory.
            stderr: Where its standard error goes (a real file); defaults to ours.
            name: The server's name in errors; defaults to the command's file name.
            start_timeout: Seconds to start it and initialise the session.
            list_timeout: Seconds a listing request may take.
            call_timeout: Seconds each tool call may take.
            tool_prefix: Put before each tool's name, with ``_``.
            max_result_chars: Most characters of a tool's result passed on (the start is
                kept, with a note), `None` for no limit.

        Raises:
            ConfigurationError: When the ``mcp`` package is not installed.
            UserError: On an empty command, `args` given as one string, or a limit that is
                not a positive number.
        """
        transport = Stdio(command, stdio_args(args), env, cwd, stderr)
        return cls(
            transport,
            name=name,
            start_timeout=start_timeout,
            list_timeout=list_timeout,
            call_timeout=call_timeout,
            tool_prefix=tool_prefix,
            max_result_chars=max_result_chars,
        )

    @classmethod
    def http(
        cls,
        url: str,
        headers: Mapping[str, str] | None = None,
        *,
        name: str | None = None,
        start_timeout: float | None = 30.0,
        list_timeout: float | None = 30.0,
        call_timeout: float | None = 300.0,
        tool_prefix: str | None = None,
        max_result_chars: int | None = 100_000,
    ) -> MCPServer:
        """A server reached over MCP's streamable HTTP transport, e.g. ``http://host/mcp``.

        Args:
            url: The server's MCP endpoint.
            headers: Headers sent with every request, e.g. ``Authorization``; they appear
                in no repr, event or error.
            name: The server's name in errors; defaults to the URL's host, port and path.
            start_timeout: Seconds to connect and initialise the session.
            list_timeout: Seconds a listing request may take.
            call_timeout: Seconds each tool call may take.
            tool_prefix: Put before each tool's name, with ``_``.
            max_result_chars: Most characters of a tool's result passed on (the start is
                kept, with a note), `None` for no limit.

        Raises:
            ConfigurationError: When the ``mcp`` package is not installed.
            UserError: When `url` is not an http(s) URL, or a limit is not a positive
                number.
        """
        connect = start_timeout if start_timeout is not None else 30.0
        return cls(
            Http(url, headers, connect),
            name=name,
            start_timeout=start_timeout,
            list_timeout=list_timeout,
            call_timeout=call_timeout,
            tool_prefix=tool_prefix,
            max_result_chars=max_result_chars,
        )

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        """Start the server and initialise the session (``async with`` calls it).

        Raises:
            MCPServerError: When the server cannot be started, or does not initialise
                within `start_timeout`.
        """
        async with self._lock:
            if self._users == 0:
                connection = Connection(self._transport, self.name, self.list_timeout)
                result = await connection.open(self.start_timeout)
                self._connection = connection
                self._instructions = result.instructions
            self._users += 1

    async def stop(self) -> None:
        """Stop the server, once every `start` has had its `stop` (``async with`` calls it)."""
        async with self._lock:
            if self._users == 0:
                return
            self._users -= 1
            if self._users > 0:
                return
            connection, self._connection = self._connection, None
            if connection is not None:
                await connection.close(self.start_timeout)

    @property
    def is_running(self) -> bool:
        """Whether the session is open (calls fail with an error if the server has exited)."""
        return self._connection is not None and self._connection.is_open

    @property
    def instructions(self) -> str | None:
        """The instructions the server sent when it started, if any."""
        return self._instructions

    def _session(self) -> ClientSession:
        session = self._connection.session if self._connection is not None else None
        if session is None:
            raise MCPServerError(
                f"MCP server {self.name!r} is not running; use it inside `async with server:`.",
                server=self.name,
            )
        return session

    def _failure(self, what: str, exc: BaseException, timeout: float | None) -> MCPServerError:
        code = error_code(exc)
        if code == REQUEST_TIMEOUT and timeout is not None:
            text = f"MCP server {self.name!r} did not answer {what} within {timeout:g} s."
        elif code == CONNECTION_CLOSED:
            text = f"MCP server {self.name!r} closed the connection (has it exited?) on {what}."
        else:
            cause = self._transport.redact(describe(exc))
            text = f"MCP server {self.name!r} failed on {what}: {cause}"
        return MCPServerError(text, server=self.name)

    async def list_tools(self) -> list[Tool]:
        """The server's tools, as the `Tool` objects an `Agent` takes.

        Each keeps the server's JSON schema as it is; the model's arguments are validated
        against it before the call is sent (see `Tool.from_schema`).

        Raises:
            MCPServerError: When the server is not running, does not answer within
                `list_timeout`, or lists a tool that cannot be described to a model.
        """
        from mcp_types import PaginatedRequestParams

        session = self._session()
        listed: list[Any] = []
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            params = PaginatedRequestParams(cursor=cursor) if cursor else None
            try:
                page = await session.list_tools(params=params)
            except Exception as exc:
                raise self._failure("tools/list", exc, self.list_timeout) from None
            listed.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                return self._tools(listed)
        raise MCPServerError(
            f"MCP server {self.name!r} listed more than {_MAX_PAGES} pages of tools.",
            server=self.name,
        )

    def _tools(self, listed: list[Any]) -> list[Tool]:
        tools: dict[str, Tool] = {}
        for remote in listed:
            local = self._local_name(remote.name)
            if local in tools:
                raise MCPServerError(
                    f"MCP server {self.name!r} has two tools named {local!r} here; "
                    "names are made of letters, digits, '_' and '-' (64 at most).",
                    server=self.name,
                )
            tools[local] = self._tool(local, remote)
        return list(tools.values())

    def _local_name(self, remote: str) -> str:
        name = f"{self.tool_prefix}_{remote}" if self.tool_prefix else remote
        return _UNSAFE.sub("_", name)[:64] or "_"

    def _tool(self, local: str, remote: Any) -> Tool:
        name: str = remote.name
        description = remote.description or getattr(remote, "title", None) or ""

        async def call(ctx: ToolContext, /, **arguments: Any) -> str:
            try:
                return await self.call_tool(name, arguments, progress=ctx.progress_nowait)
            except MCPServerError as exc:
                raise ToolError(exc.message) from None

        try:
            return Tool.from_schema(local, description, remote.input_schema, call)
        except UserError as exc:
            raise MCPServerError(
                f"MCP server {self.name!r}: its tool {name!r} cannot be used: {exc.message}",
                server=self.name,
            ) from None

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        progress: Callable[[str], None] | None = None,
    ) -> str:
        """Call one of the server's tools by its own name; return its result as text.

        Text content is joined; images, audio and binary resources are described in a line
        each (the model gets text only); structured content alone comes back as JSON. Past
        `max_result_chars`, only the start is kept, with a note saying how much was cut.

        Args:
            name: The tool's name on the server (without `tool_prefix`).
            arguments: Its arguments, sent as they are.
            progress: Called with each progress message the server sends.

        Raises:
            ToolError: When the server reports that the tool failed (its message).
            MCPServerError: When the server is not running, does not answer within
                `call_timeout`, or the connection fails.
        """
        session = self._session()
        report = progress

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            if report is not None:
                report(_progress_text(progress, total, message))

        timeout = self.call_timeout if self.call_timeout is not None else math.inf
        try:
            result = await session.call_tool(
                name,
                dict(arguments or {}),
                read_timeout_seconds=timeout,
                progress_callback=on_progress if progress is not None else None,
            )
        except Exception as exc:
            raise self._failure(f"tool {name!r}", exc, self.call_timeout) from None
        text = _bounded(
            result_text(result.content, result.structured_content), self.max_result_chars
        )
        if result.is_error:
            raise ToolError(text or f"MCP tool {name!r} failed.")
        return text

    def __repr__(self) -> str:
        kind = "stdio" if isinstance(self._transport, Stdio) else "http"
        return f"MCPServer(name={self.name!r}, transport={kind!r})"
