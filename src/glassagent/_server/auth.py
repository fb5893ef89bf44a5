"""Who a request is: a bearer token in its ``Authorization`` header or the web view's cookie.

Tokens are kept as their SHA-256 digests only. The web view's cookie holds a token's digest
(in hex): `sign_in` sets it when the page is opened with ``?token=...``. Its name carries the
port the browser used (``glassagent-token-8000``), since a browser shares cookies among the
ports of one host.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from starlette.requests import Request
from starlette.responses import Response

from glassagent._server.hosts import split_host

COOKIE_PREFIX = "glassagent-token"
"""The web view's cookie is this name, then ``-`` and the port of the address in use."""


def digest(token: str) -> bytes:
    """The SHA-256 digest a token is kept and looked up as."""
    return hashlib.sha256(token.encode("utf-8", "replace")).digest()


def hashed(tokens: Mapping[str, str]) -> dict[bytes, str]:
    """`tokens` (token -> user id) keyed by their digests."""
    return {digest(token): user for token, user in tokens.items()}


def cookie_name(host: str | None) -> str:
    """The cookie's name for a request whose ``Host`` header is `host`."""
    port = split_host(host or "")[1]
    return f"{COOKIE_PREFIX}-{port}" if port else COOKIE_PREFIX


def user_of(tokens: Mapping[bytes, str], request: Request) -> str | None:
    """The user whose token the request brings, or `None`.

    An ``Authorization`` header decides alone (``Bearer <token>``); without one, the web
    view's cookie is read.
    """
    header = request.headers.get("authorization")
    if header is not None:
        scheme, _, token = header.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return None
        return tokens.get(digest(token))
    cookie = request.cookies.get(cookie_name(request.headers.get("host")))
    if not cookie or len(cookie) != 64:
        return None
    try:
        return tokens.get(bytes.fromhex(cookie))
    except ValueError:
        return None


def sign_in(response: Response, request: Request, token: str) -> None:
    """Set the web view's cookie on `response`: ``HttpOnly``, ``SameSite=Strict``.

    ``Secure`` too when the request came over HTTPS. It lasts as long as the browser's
    session.
    """
    response.set_cookie(
        cookie_name(request.headers.get("host")),
        digest(token).hex(),
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
