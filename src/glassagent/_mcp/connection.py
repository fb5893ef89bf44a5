"""One MCP session, held open by a task of its own.

The SDK's transports and `ClientSession` are anyio context managers with task groups: they
must be entered and left by the same task. A `Connection` enters them in a dedicated task
(the holder), which waits until `close` asks it to leave; any task may then send requests
through the session. Starting, and stopping, is bounded in time: a holder that does not
finish in time is cancelled through its anyio cancel scope, so the SDK's shielded,
bounded shutdown (which stops a child process) still runs.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from glassagent._core.errors import MCPServerError

if TYPE_CHECKING:
    import anyio
    from mcp import ClientSession
    from mcp_types import InitializeResult

    from glassagent._mcp.transport import Transport

_CLIENT_NAME = "glassagent"
REQUEST_TIMEOUT = -32001  # the JSON-RPC codes the SDK uses (mcp_types.REQUEST_TIMEOUT)
CONNECTION_CLOSED = -32000
_SHUTDOWN_GRACE = 10.0
"""Seconds a cancelled holder gets to finish the SDK's own bounded stop sequence (close the
child's input, wait, terminate it, wait, kill it: about 6 s at most)."""


def leaf(exc: BaseException) -> BaseException:
    """`exc`, or the first exception inside it when it is an exception group."""
    while isinstance(getattr(exc, "exceptions", None), tuple) and exc.exceptions:  # type: ignore[attr-defined]
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    return exc


def error_code(exc: BaseException) -> object:
    """The JSON-RPC error code of an SDK error (`mcp.MCPError.code`), if it has one."""
    return getattr(leaf(exc), "code", None)


def describe(exc: BaseException) -> str:
    """A one-line description of `exc` (of its first leaf, for an exception group)."""
    exc = leaf(exc)
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class Connection:
    """A started session with one server (made by `open`, ended by `close`)."""

    def __init__(self, transport: Transport, name: str, request_timeout: float | None) -> None:
        self._transport = transport
        self._name = name
        self._request_timeout = request_timeout
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._scope: anyio.CancelScope | None = None
        self.session: ClientSession | None = None
        """The session while it is open."""
        self.failure: BaseException | None = None
        """What ended the holder, when something did."""

    async def open(self, limit: float | None) -> InitializeResult:
        """Start the transport and initialise the session within `limit` seconds.

        Raises:
            MCPServerError: When the server cannot be started or does not initialise in time.
        """
        import anyio

        loop = asyncio.get_running_loop()
        ready: asyncio.Future[InitializeResult] = loop.create_future()
        ready.add_done_callback(_retrieved)  # a waiter that gave up leaves none unread
        self._scope = anyio.CancelScope()
        self._task = asyncio.create_task(self._hold(ready), name=f"glassagent-mcp-{self._name}")
        try:
            return await asyncio.wait_for(asyncio.shield(ready), limit)
        except asyncio.TimeoutError:
            await self.close(limit, graceful=False)
            raise MCPServerError(
                f"MCP server {self._name!r} did not start within {limit:g} s.",
                server=self._name,
            ) from None
        except BaseException:  # it could not start, or we were cancelled while it started
            await self.close(limit, graceful=False)
            raise

    async def _hold(self, ready: asyncio.Future[InitializeResult]) -> None:
        """The holder task: enter the transport and the session, wait, leave them."""
        from mcp import ClientSession, Implementation

        assert self._scope is not None
        try:
            with self._scope:
                async with (
                    self._transport.connect() as (read, write),
                    ClientSession(
                        read,
                        write,
                        read_timeout_seconds=self._request_timeout,
                        client_info=Implementation(name=_CLIENT_NAME, version=_version()),
                    ) as session,
                ):
                    result = await session.initialize()
                    self.session = session
                    ready.set_result(result)
                    await self._stop.wait()
                    self.session = None
        except Exception as exc:
            self.failure = exc
            if not ready.done():
                ready.set_exception(self._start_error(exc))
        finally:
            self.session = None
            if not ready.done():  # cancelled before it started: the waiter gave up already
                ready.set_exception(
                    MCPServerError(f"MCP server {self._name!r} was stopped.", server=self._name)
                )

    def _start_error(self, exc: BaseException) -> MCPServerError:
        """The error of a failed start; the cause is in the message, masked, not chained."""
        if error_code(exc) == CONNECTION_CLOSED:
            cause = "it closed the connection (did it exit? its standard error may say why)"
        else:
            cause = self._transport.redact(describe(exc))
        text = f"MCP server {self._name!r} could not be started: {cause}"
        return MCPServerError(text, server=self._name)

    @property
    def is_open(self) -> bool:
        """Whether the session is open (the server may still have died since)."""
        return self.session is not None and self._task is not None and not self._task.done()

    async def close(self, limit: float | None, *, graceful: bool = True) -> None:
        """Leave the session and the transport; past `limit` seconds, cancel the holder.

        Not `graceful` (a start that failed or was given up): cancel the holder at once.
        """
        task, scope = self._task, self._scope
        if task is None or scope is None:
            return
        self._stop.set()
        try:
            if graceful:
                await asyncio.wait({task}, timeout=limit)
        finally:
            if not task.done():  # too slow, not graceful, or our caller was cancelled
                scope.cancel()
        if not task.done():
            await asyncio.wait({task}, timeout=_SHUTDOWN_GRACE)
        if task.done() and not task.cancelled():
            with contextlib.suppress(BaseException):
                task.result()


def _retrieved(future: asyncio.Future[InitializeResult]) -> None:
    """Mark `future`'s exception as read, so asyncio logs no "never retrieved" for it.

    `open` waits through `asyncio.shield`; once it gives up (a timeout, a cancellation), the
    holder still ends the future with an error that nobody else reads.
    """
    if not future.cancelled():
        future.exception()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("glassagent")
    except PackageNotFoundError:
        return "0"


def request_failure(name: str, tool: str, exc: BaseException) -> str:
    """The message a failed request of `tool` gives the model."""
    return f"MCP server {name!r} failed to run tool {tool!r}: {describe(exc)}"
