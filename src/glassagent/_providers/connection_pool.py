"""A connection pool that hands out connections without rescanning all of them.

httpcore's pool, each time a request is sent and each time a response is closed, looks at
every connection it holds: whether it is idle, counted with a scan per idle connection (so
quadratic in the pool's size), and whether an idle one has expired, which asks its socket
(a system call per idle connection). With many agent runs at once that scan, not the
framework, costs most of a request's CPU, and it grows with every connection the pool keeps.

The built-in clients' own pools (not an ``http_client`` you pass) assign requests as
httpcore does with less work: idle connections are counted once, the idle ones are checked
for expiry at most once a second (and whenever the pool is full, before an idle connection
is closed to make room; each time where keep-alive is off), and a connection is always
checked right before it is handed out, so a connection the server closed is still never
reused. Idle connections beyond the
keep-alive limit are closed (httpcore closes every idle one while the pool holds more than
that limit; the built-in clients keep all alive, so both agree there).

The pool is httpcore's own with this one method replaced, which rests on httpcore's private
members; it was written for httpcore 1.0.3 to 1.0.9 (the versions with this method), and
httpcore's own connection-pool tests run against it in CI (``.ci/httpcore_pool_tests.py``).
It is used only where httpcore is a 1.0 release that has every member it needs (checked on
first use; otherwise httpcore's own pool is kept, logged once at debug level), and can be
turned off: ``GLASSAGENT_FAST_POOL=0`` in the environment, or ``fast_pool=False`` where a
transport is made.
"""

from __future__ import annotations

import logging
import time
from functools import cache
from typing import TYPE_CHECKING, Any

from glassagent._providers.config import FAST_POOL_ENV, fast_pool_from_env

if TYPE_CHECKING:
    import httpx

ENV = FAST_POOL_ENV
"""The environment variable that turns the cheaper pool off (``0``) or on (``1``, default)."""
SWEEP_SECONDS = 1.0
"""How often idle connections are all checked for expiry (each is checked again before use)."""
_FIELDS = (
    "_connections",
    "_requests",
    "_max_connections",
    "_max_keepalive_connections",
    "_keepalive_expiry",
)
_MEMBERS = {  # what the pool calls, by httpcore class (see `_missing`)
    "AsyncConnectionPool": ("_assign_requests_to_connections", "create_connection"),
    "AsyncPoolRequest": ("is_queued", "assign_to_connection"),
    "AsyncHTTPConnection": (
        "can_handle_request",
        "is_available",
        "is_idle",
        "has_expired",
        "is_closed",
    ),
}
logger = logging.getLogger("glassagent")
_said: set[str] = set()


def enabled(fast_pool: bool | None = None) -> bool:
    """Whether owned pools take the cheaper assignment: `fast_pool`, or ``$GLASSAGENT_FAST_POOL``.

    `None` reads the environment variable (`config.fast_pool_from_env`): ``0``, ``false``,
    ``no`` or ``off`` turn it off; unset, empty, ``1``, ``true``, ``yes`` or ``on`` leave it on.

    Raises:
        ConfigurationError: When the variable holds anything else.
    """
    if fast_pool is not None:
        return bool(fast_pool)
    return fast_pool_from_env()


def speed_up(client: httpx.AsyncClient, fast_pool: bool | None = None) -> httpx.AsyncClient:
    """Give `client`'s default transport the cheaper assignment; returns `client`.

    Left as it is when `fast_pool` (see `enabled`) says no, or when its transport is not
    httpx's own pool over a fitting httpcore 1.0 (a proxy, another transport, another
    httpcore, or one without a member the pool calls): then httpcore's assignment does the
    work.

    Raises:
        ConfigurationError: When `fast_pool` is `None` and ``$GLASSAGENT_FAST_POOL`` holds
            neither on nor off.
    """
    if not enabled(fast_pool):
        return client
    pool = getattr(getattr(client, "_transport", None), "_pool", None)
    cheaper = _pool_class()
    if cheaper is None or type(pool) is not cheaper.__base__:
        return client
    missing = [name for name in _FIELDS if not hasattr(pool, name)]
    if missing:
        _say_once(f"httpcore's pool has no {', '.join(missing)}")
        return client
    pool.__class__ = cheaper
    return client


def _say_once(why: str) -> None:
    """Log, once per reason, at debug level, that httpcore's own pool is kept."""
    if why not in _said:
        _said.add(why)
        logger.debug("glassagent keeps httpcore's own connection pool: %s.", why)


def _missing(httpcore: Any) -> list[str]:
    """The private members the pool calls that this httpcore lacks (`_MEMBERS`)."""
    from httpcore._async import connection_pool as pools

    missing = []
    for owner, names in _MEMBERS.items():
        cls = getattr(httpcore, owner, None) or getattr(pools, owner, None)
        missing += [f"{owner}.{name}" for name in names if not callable(getattr(cls, name, None))]
    return missing


@cache
def _pool_class() -> type[Any] | None:
    """The pool class (made on first use: httpcore is imported lazily), if httpcore fits."""
    import httpcore

    if not httpcore.__version__.startswith("1.0."):
        _say_once(f"it was written for httpcore 1.0, not {httpcore.__version__}")
        return None
    try:
        missing = _missing(httpcore)
    except ImportError:
        missing = ["httpcore._async.connection_pool"]
    if missing:
        _say_once(f"httpcore {httpcore.__version__} has no {', '.join(missing)}")
        return None
    base = httpcore.AsyncConnectionPool

    class SweepingConnectionPool(base):  # type: ignore[misc, valid-type]
        """httpcore's pool, assigning requests without a scan per connection."""

        _next_sweep = 0.0

        def _assign_requests_to_connections(self) -> list[Any]:
            closing: list[Any] = []
            swept = self._sweep_due()
            self._drop_closed_and_expired(closing, sweep=swept)
            connections = self._connections
            assigned: list[Any] = []
            for pool_request in [r for r in self._requests if r.is_queued()]:
                origin = pool_request.request.url.origin
                connection = self._available(origin, closing)
                if connection is None:
                    if len(connections) >= self._max_connections and not swept:
                        self._drop_closed_and_expired(closing, sweep=True, keep=assigned)
                        swept = True  # full: free dead ones first, once a pass
                    if len(connections) >= self._max_connections:
                        idle = (c for c in connections if c.is_idle() and c not in assigned)
                        connection = next(idle, None)
                        if connection is None:
                            continue  # the request waits for a connection to come free
                        connections.remove(connection)  # make room: close an idle one
                        closing.append(connection)
                    connection = self.create_connection(origin)
                    connections.append(connection)
                pool_request.assign_to_connection(connection)
                assigned.append(connection)
            return closing

        def _sweep_due(self) -> bool:
            """Whether the idle connections are due for their expiry check (once a second).

            Always, where keep-alive is off (an expiry of 0): no connection stays idle then.
            """
            if self._keepalive_expiry == 0:
                return True
            now = time.monotonic()
            if now < self._next_sweep:
                return False
            self._next_sweep = now + SWEEP_SECONDS
            return True

        def _drop_closed_and_expired(
            self, closing: list[Any], *, sweep: bool, keep: list[Any] | None = None
        ) -> None:
            """Drop closed connections; close expired (with `sweep`) and surplus idle ones.

            Connections in `keep` (handed out in this pass, not yet busy) stay.
            """
            connections = self._connections
            idle = []
            for connection in list(connections):
                if connection.is_closed():
                    connections.remove(connection)
                elif connection.is_idle() and not (keep and connection in keep):
                    if sweep and connection.has_expired():
                        connections.remove(connection)
                        closing.append(connection)
                    else:
                        idle.append(connection)
            for connection in idle[: max(0, len(idle) - self._max_keepalive_connections)]:
                connections.remove(connection)  # the oldest idle ones beyond the keep-alive
                closing.append(connection)

        def _available(self, origin: Any, closing: list[Any]) -> Any:
            """The first connection that can take a request to `origin` and has not expired."""
            for connection in list(self._connections):
                if connection.can_handle_request(origin) and connection.is_available():
                    if not (connection.is_idle() and connection.has_expired()):
                        return connection
                    self._connections.remove(connection)  # expired (or closed by the server)
                    closing.append(connection)
            return None

    return SweepingConnectionPool
