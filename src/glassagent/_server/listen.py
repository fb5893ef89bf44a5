"""uvicorn as `serve` and `aserve` run it: the app's limits on connections, and its signals.

uvicorn bounds idle keep-alive connections (``timeout_keep_alive``) and open connections
(``limit_concurrency``), but not how long a connection may take to send a request's
headers: a connection that sends nothing, or a byte now and then, stays open for ever.
`header_deadline_protocol` adds that bound (`ServerLimits.header_timeout`) to uvicorn's HTTP
protocol, whichever it is (httptools or h11): a timer armed when the connection opens and
after each answer, that closes the connection if, when it fires, no request is under way.
"""

from __future__ import annotations

import asyncio
import logging
import re
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from glassagent._server.request import ServerLimits

_TOKEN_IN_PATH = re.compile(r"([?&]token=)[^&\s]*")


def make_server(
    uvicorn: Any,
    app: Any,
    limits: ServerLimits,
    *,
    host: str,
    port: int,
    log_level: str,
    access_log: bool,
    on_started: Callable[[str], None] | None = None,
) -> Any:
    """A `uvicorn.Server` for `app` with `limits`; `on_started` gets its address once bound."""
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=access_log,
        http=header_deadline_protocol(limits.header_timeout),
        limit_concurrency=limits.max_connections,
        timeout_keep_alive=limits.keep_alive_timeout,
    )

    class Server(uvicorn.Server):  # type: ignore[misc]
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets=sockets)
            if self.started and on_started is not None:
                bound = self.servers[0].sockets[0].getsockname()[1]
                on_started(f"http://{f'[{host}]' if ':' in host else host}:{bound}")

    return Server(config)


def header_deadline_protocol(seconds: float) -> type[asyncio.Protocol]:
    """The HTTP protocol class of uvicorn (its ``auto``), closing connections slow to send headers.

    The timer starts when the connection opens and after each answer. When it fires, the
    connection is closed unless a request (its headers all received) is under way: a
    connection that sent nothing, or only part of its headers, or goes on sending the rest
    of a body its answer did not wait for.
    """
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    class HeaderDeadline(AutoHTTPProtocol):  # type: ignore[misc, valid-type]
        _deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()

        def connection_lost(self, exc: BaseException | None) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            super().connection_lost(exc)

        def _arm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            self._deadline = self.loop.call_later(seconds, self._expired)

        def _expired(self) -> None:
            self._deadline = None
            cycle = self.cycle
            busy = cycle is not None and not cycle.response_complete
            if not busy and not self.transport.is_closing():
                self.transport.close()

    return HeaderDeadline


class _HideTokens(logging.Filter):
    """Masks the ``token=`` of request paths in uvicorn's access log."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        path = args[2] if isinstance(args, tuple) and len(args) > 2 else None
        if isinstance(path, str) and "token=" in path:
            assert isinstance(args, tuple)
            record.args = (*args[:2], _TOKEN_IN_PATH.sub(r"\1[hidden]", path), *args[3:])
        return True


@contextmanager
def tokens_hidden() -> Iterator[None]:
    """The access log of uvicorn never shows a ``?token=`` (the web view's address) meanwhile."""
    access = logging.getLogger("uvicorn.access")
    hide = _HideTokens()
    access.addFilter(hide)
    try:
        yield
    finally:
        access.removeFilter(hide)


@contextmanager
def signals_kept() -> Iterator[None]:
    """SIGINT and SIGTERM handled by a no-op meanwhile, the former handlers restored after.

    uvicorn handles both while it serves, then restores the handlers it found and raises
    the signal again: this no-op receives it, so the process goes on to its cleanup.
    """
    if threading.current_thread() is not threading.main_thread():
        yield  # uvicorn handles no signals outside the main thread either
        return
    handled = [signal.SIGINT, signal.SIGTERM]
    former = {number: signal.signal(number, _ignore) for number in handled}
    try:
        yield
    finally:
        for number, handler in former.items():
            signal.signal(number, handler)


def _ignore(number: int, frame: object) -> None:
    """A signal handler that does nothing."""
