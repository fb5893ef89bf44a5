"""`Guard`: the checks every request passes before the app sees it, as one small ASGI layer.

- ``Host`` must name this machine (``localhost``, 127.0.0.0/8, ``[::1]``, with any port),
  the address the connection came to, or an allowed host: a web page of another name that
  resolves to this machine (DNS rebinding) is refused with 403.
- A request another web site made is refused with 403: an ``Origin`` that is not the
  request's own (scheme aside: ``Origin``'s host and port against ``Host``), or
  ``Sec-Fetch-Site: cross-site`` or ``same-site`` (another port of the same host is
  same-site), unless the ``Origin`` is an allowed one. Clients other than browsers send
  neither header and pass.
- A request that is not ``GET``, ``HEAD`` or ``OPTIONS`` must have ``Content-Type:
  application/json`` (415): a web page can send no such request to another site without
  the site's consent (a CORS preflight), so no "simple" cross-site request gets through.
- At most ``max_requests`` requests are handled at once; one more gets 503 with
  ``Retry-After: 1``.

Every answer gets ``X-Content-Type-Options: nosniff``. The checks cost a pass over the
headers and a dictionary look-up per request.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from glassagent._providers.http import is_loopback
from glassagent._server.hosts import host_name
from glassagent._server.request import InvokeError
from glassagent._server.responses import error_response

NOSNIFF = (b"x-content-type-options", b"nosniff")
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_SAME = frozenset({b"same-origin", b"none"})
_SEEN_HOSTS = 1024  # Host values remembered, so most requests skip parsing theirs


def _refusal(status: int, code: str, message: str, *extra: tuple[bytes, bytes]) -> Message:
    _, body, _ = error_response(InvokeError(message, status=status, code=code))
    encoded = json.dumps(body).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(encoded)).encode()),
        (b"connection", b"close"),
        NOSNIFF,
        *extra,
    ]
    return {"status": status, "headers": headers, "body": encoded}


_FORBIDDEN_HOST = _refusal(
    403,
    "forbidden_host",
    "This server does not answer to the host in the Host header: it answers to a loopback "
    "name or address, the address it is reached at, and its allowed hosts (--allowed-host).",
)
_CROSS_SITE = _refusal(
    403,
    "cross_site",
    "Requests made by another web site are refused (Origin, Sec-Fetch-Site); an origin of "
    "yours can be allowed (--allowed-origin).",
)
_NOT_JSON = _refusal(
    415,
    "unsupported_media_type",
    "The body must be JSON, sent with 'Content-Type: application/json'.",
)


class Guard:
    """The ASGI layer that checks each request's host, origin, content type and the load.

    Args:
        app: The app it guards.
        allowed_hosts: From `glassagent._server.hosts.check_allowed_hosts`.
        allowed_origins: From `glassagent._server.hosts.check_allowed_origins`.
        max_requests: The most requests handled at once.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        allowed_hosts: frozenset[str],
        allowed_origins: frozenset[str],
        max_requests: int,
    ) -> None:
        self.app = app
        self.allowed_hosts = allowed_hosts
        self.any_host = "*" in allowed_hosts
        self.allowed_origins = frozenset(o.encode("latin-1") for o in allowed_origins)
        self.max_requests = max_requests
        self.in_flight = 0
        self._hosts: dict[bytes, tuple[bool, str]] = {}
        self._busy = _refusal(
            503,
            "busy",
            f"The server is handling as many requests as it takes at once ({max_requests}); "
            "retry shortly.",
            (b"retry-after", b"1"),
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse the request, or pass it on with ``nosniff`` added to its answer."""
        if scope["type"] == "websocket":  # no route takes one: refused (403) before any check
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":  # lifespan
            await self.app(scope, receive, send)
            return
        host = origin = site = kind = None
        for name, value in scope["headers"]:
            if name == b"host":
                host = value
            elif name == b"origin":
                origin = value
            elif name == b"sec-fetch-site":
                site = value
            elif name == b"content-type":
                kind = value
        refusal = None
        if host is not None and not self._host_allowed(host, scope):
            refusal = _FORBIDDEN_HOST
        elif (origin is not None or site is not None) and not self._same_site(host, origin, site):
            refusal = _CROSS_SITE
        elif scope["method"] not in _SAFE_METHODS and not _is_json(kind):
            refusal = _NOT_JSON
        elif self.in_flight >= self.max_requests:
            refusal = self._busy
        if refusal is not None:
            await _send(send, refusal)
            return
        self.in_flight += 1
        try:
            await self.app(scope, receive, _nosniff(send))
        finally:
            self.in_flight -= 1

    def _host_allowed(self, host: bytes, scope: Scope) -> bool:
        known = self._hosts.get(host)
        if known is None:
            name = host_name(host.decode("latin-1"))
            allowed = self.any_host or name in self.allowed_hosts or is_loopback(name)
            known = (allowed, name)
            if len(self._hosts) >= _SEEN_HOSTS:
                self._hosts.clear()
            self._hosts[host] = known
        if known[0]:
            return True
        server = scope.get("server")  # the address this connection came to
        return server is not None and known[1] == str(server[0]).lower()

    def _same_site(self, host: bytes | None, origin: bytes | None, site: bytes | None) -> bool:
        if origin is not None:
            if origin in self.allowed_origins:
                return True
            start = origin.find(b"://")
            if host is None or start < 0 or origin[start + 3 :].lower() != host.lower():
                return False
        return site is None or site in _SAME


def _is_json(kind: bytes | None) -> bool:
    if kind is None:
        return False
    media_type = kind.partition(b";")[0].strip().lower()
    return media_type == b"application/json"


async def _send(send: Send, refusal: Message) -> None:
    start = {"type": "http.response.start", "status": refusal["status"]}
    await send({**start, "headers": refusal["headers"]})
    await send({"type": "http.response.body", "body": refusal["body"], "more_body": False})


def _nosniff(send: Send) -> Send:
    async def sender(message: Message) -> None:
        if message["type"] == "http.response.start":  # no route sets it: the guard alone does
            message = {**message, "headers": [*message.get("headers", ()), NOSNIFF]}
        await send(message)

    return sender
