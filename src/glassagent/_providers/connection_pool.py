"""A connection pool that hands out connections without rescanning all of them.

httpcore's pool, each time a request is sent and each time a response is closed, looks at
every connection it holds: whether it is idle, counted with a scan per idle connection (so
quadratic in the pool's size), and whether an idle one has expired, which asks its socket
(a system call per idle connection). With many agent runs at once that scan, not the
framework, costs most of a request's CPU, and it grows with every connection the pool keeps.

The built-in clients' own pools (not an ``http_client`` you pass) assign requests as
httpcore does with less work: idle connections are counted once, the idle ones are checked
for expiry at most once a second (and whenever the pool is full, before an idle connection
is closed to make room), and a connection is always checked right before it is handed out,
so a connection the server closed is still never reused. Idle connections beyond the
keep-alive limit are closed (httpcore closes every idle one while the pool holds more than
that limit; the built-in clients keep all alive, so both agree there). The pool is
httpcore's own, with this one method replaced, and only under httpcore 1.0, the version
this was written for.
"""

from __future__ import annotations

import time
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx

SWEEP_SECONDS = 1.0
"""How often idle connections are all checked for expiry (each is checked again before use)."""
_FIELDS = ("_connections", "_requests", "_max_connections", "_max_keepalive_connections")


def speed_up(client: httpx.AsyncClient) -> httpx.AsyncClient:
    """Give `client`'s default transport the cheaper assignment; returns `client`.

    Left as it is when its transport is not httpx's own pool over httpcore 1.0 (a proxy,
    another transport, another httpcore): then httpcore's assignment does the work.
    """
    pool = getattr(getattr(client, "_transport", None), "_pool", None)
    cheaper = _pool_class()
    fits = cheaper is not None and type(pool) is cheaper.__base__
    if fits and all(hasattr(pool, name) for name in _FIELDS):
        pool.__class__ = cheaper
    return client


@cache
def _pool_class() -> type[Any] | None:
    """The pool class (made on first use: httpcore is imported lazily), if httpcore fits."""
    import httpcore

    base = httpcore.AsyncConnectionPool
    if not httpcore.__version__.startswith("1.0.") or not callable(
        getattr(base, "_assign_requests_to_connections", None)
    ):
        return None

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
            """Whether the idle connections are due for their expiry check (once a second)."""
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
