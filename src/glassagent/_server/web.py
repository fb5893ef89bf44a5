"""The web view: one page at ``/`` and its few static files, with strict security headers.

The files live in the ``static`` folder beside this module (package data, so they are in the
wheel). Only the names in `STATIC_FILES` are served; the page loads nothing from elsewhere.
Opened as ``/?token=...`` (the address ``glassagent serve`` prints), the page trades the
token for an ``HttpOnly``, ``SameSite=Strict`` cookie and redirects to ``/``.
"""

from __future__ import annotations

import functools
from importlib import resources

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from glassagent._server import auth
from glassagent._server.request import InvokeError
from glassagent._server.responses import error_response

PAGE_PATH = "/"
STATIC_PATH = "/static/{name}"

STATIC_FILES = {
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
    "icon.svg": "image/svg+xml",
}
"""The static files served under ``/static/``, with their content types."""

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
"""Only this server's own files: no inline script or style, no other origin."""

SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}
"""The headers of the page and of each static file (``nosniff`` is the guard's, on every answer)."""


@functools.cache
def _read(name: str) -> bytes:
    return resources.files("glassagent._server").joinpath("static").joinpath(name).read_bytes()


async def _page(request: Request) -> Response:
    if request.scope["query_string"]:
        token = request.query_params.get("token")
        if token is not None:
            return _sign_in(request, token)
    return Response(
        _read("index.html"), media_type="text/html; charset=utf-8", headers=SECURITY_HEADERS
    )


def _sign_in(request: Request, token: str) -> Response:
    """Trade the token of the address (``/?token=...``) for the cookie, then go to ``/``.

    The redirect takes the token out of the address bar, and so out of the browser's
    history and of what the page may be shared as. A token the server does not know gets
    401; a server without tokens just redirects.
    """
    tokens = request.app.state.glassagent.tokens
    if tokens is not None and tokens.get(auth.digest(token)) is None:
        refused = InvokeError(
            "The token in the address is not one of this server's (glassagent serve makes a "
            "new one at each start: open the address it printed last).",
            status=401,
            code="unauthorized",
        )
        status, body, headers = error_response(refused)
        return JSONResponse(body, status_code=status, headers={**SECURITY_HEADERS, **headers})
    root = request.scope.get("root_path", "").rstrip("/")
    response = RedirectResponse(root + PAGE_PATH, status_code=303, headers=SECURITY_HEADERS)
    if tokens is not None:
        auth.sign_in(response, request, token)
    return response


async def _static(request: Request) -> Response:
    name = request.path_params["name"]
    media_type = STATIC_FILES.get(name)
    if media_type is None:
        missing = InvokeError(f"There is no static file {name!r}.", status=404, code="not_found")
        status, body, _ = error_response(missing)
        return JSONResponse(body, status_code=status, headers=SECURITY_HEADERS)
    return Response(_read(name), media_type=media_type, headers=SECURITY_HEADERS)


ROUTES = [
    Route(PAGE_PATH, _page, methods=["GET"]),
    Route(STATIC_PATH, _static, methods=["GET"]),
]
"""The routes of the web view, for `glassagent._server.app.build_app`."""
