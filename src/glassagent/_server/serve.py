"""`create_app`, `serve` and their checks: tokens, and which hosts an open server may bind."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from glassagent._core.errors import ConfigurationError, UserError
from glassagent._core.messages import ModelSettings
from glassagent._history.protocol import ChatStore
from glassagent._history.store import check_user_id
from glassagent._providers.http import is_loopback
from glassagent._server.chats import ANONYMOUS_USER, UserStores
from glassagent._server.facts import check_host_facts
from glassagent._server.invoke import ModelsLike, make_config
from glassagent._server.listen import make_server, signals_kept, tokens_hidden
from glassagent._server.request import ServerLimits
from glassagent._tools.tool import Tool

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from glassagent._agent.hook import OnEvent

_INSTALL = "pip install 'glassagent[server]'"


def create_app(
    *,
    model: ModelsLike,
    tools: Iterable[Tool | Callable[..., Any]] = (),
    store: str | os.PathLike[str] | ChatStore | None = None,
    tokens: Mapping[str, str] | None = None,
    access_token: str | None = None,
    limits: ServerLimits | None = None,
    system: str | None = None,
    settings: ModelSettings | None = None,
    on_event: OnEvent | None = None,
    allowed_hosts: Iterable[str] = (),
    allowed_origins: Iterable[str] = (),
    host: Mapping[str, Any] | None = None,
    durable: str | None = None,
    worker_id: str | None = None,
    takeover_after: float | None = 30.0,
) -> Starlette:
    """The ASGI app of the direct invoke API (needs the ``glassagent[server]`` extra).

    Routes: ``POST /api/ai/invoke`` (one turn, as JSON or as a stream of events),
    ``GET /api/ai/chats/{chat_id}`` (a stored chat, to its owner), ``GET /api/ai/chats`` (the
    user's chats), ``GET /api/ai/health``, and the web view: a page at ``GET /`` that chats
    with the agent and shows each step as it streams (its files under ``/static/``).
    Serve it with `serve`, or with any ASGI server (``uvicorn.run(app)``).

    Whatever the tokens, the app answers only requests whose ``Host`` is a loopback name or
    address, the address the request came to, or one of `allowed_hosts` (else 403: a web
    page of another name that resolves to this machine, DNS rebinding, is refused); refuses
    requests another web site made (an ``Origin`` not the request's own, or
    ``Sec-Fetch-Site: cross-site`` or ``same-site``; 403) unless their origin is one of
    `allowed_origins`; takes only JSON (``Content-Type: application/json``, else 415) in a
    ``POST``; and handles at most ``limits.max_concurrent_requests`` requests at once (503).
    Every answer carries ``X-Content-Type-Options: nosniff``.

    Args:
        model: The model client, or clients by ``model_id`` (the first is the default).
        tools: Every tool the server offers; a request picks among them (``active_tools``).
        store: Where chats are kept: a directory (or a `HistoryStore`, whose directory and
            limits are used), each user's chats in their own subdirectory; or any other
            `ChatStore`, e.g. an `SQLHistoryStore` on SQLite or PostgreSQL (its schema
            created), each user's chats its `for_user`. `None`: no chats are kept, and
            ``chat_id`` is refused.
        tokens: Bearer tokens mapped to user ids (see `load_tokens`), for several users.
        access_token: One bearer token for the one anonymous user (what ``glassagent
            serve`` makes at each start, e.g. with ``secrets.token_urlsafe(32)``). Not with
            `tokens`. With neither, every request is the anonymous user, unauthenticated
            (`serve` then binds loopback addresses only); the host and origin checks still
            keep web pages of other sites out.
        limits: Bounds on requests; `ServerLimits()` when not given.
        system: System instructions for requests that bring none.
        settings: Generation settings under each request's ``params``.
        on_event: Given each event of every run the app makes, as it is emitted (see
            ``Agent(on_event=...)``): to trace the runs (`glassagent.otel.EventTracer`) or
            record them.
        allowed_hosts: More names (or addresses) the server answers to, e.g. its public
            name behind a proxy: ``["agent.example.com"]``, without port; ``"*"`` for any.
        allowed_origins: Web origins whose requests are taken even though they are not the
            request's own (``"https://app.example.com"``), e.g. the public origin of a proxy
            that rewrites ``Host``.
        host: Facts of the application for its tools' context, as the design's context
            dict has them: ``app_path``, ``chat_path``, ``history_path`` (paths),
            ``main_port`` (a port number) and ``debug_mode`` (a bool); tools read them as
            ``ctx.app_path`` and so on. The server adds its own, which win: the port it
            serves on (when the ASGI server tells it), each turn's ``chat_id`` and its
            store as ``chat_manager``; with a file store (a directory or a `HistoryStore`)
            also the chat's folder as ``chat_path`` and its file as ``history_path``,
            unless `host` gives them.
        durable: Run each turn as a durable run kept in this database
            (``sqlite:///turns.sqlite``, or ``postgresql://...`` for several servers; needs
            the ``glassagent[durable]`` extra): a turn survives a crash of the server, a
            call that needs approval waits in the database, and the request's ``run_id``
            names the turn (see "Durable turns" in the server guide). The app's lifespan
            starts and stops it: serve it with `serve`, `aserve` or an ASGI server that runs
            lifespans. Not with `host` facts (a durable turn's tools do not get them).
        worker_id: This server's worker id among those sharing the database (default: the
            host name and the process id, unique per process: a worker resumes at its start
            the runs its own id left pending, so two live processes must not share one).
        takeover_after: How long, in seconds, another server may be silent before this one
            takes over its pending turns (see `DurableAgent`); `None`: never.

    Raises:
        ConfigurationError: For no model, clashing tool names, invalid tokens, both `tokens`
            and `access_token`, an allowed host or origin that is not one, ``"*"`` among the
            allowed hosts without `tokens` or `access_token`, a `store` that is
            neither a directory nor a `ChatStore`, an `on_event` that is not callable, a
            `host` key that is not one of those above or a value of the wrong type, a
            `durable` that is not a URL (or with `host`, or tools with an approver), or
            when Starlette (or DBOS, with `durable`) is not installed.
        UserError: For `limits` that are not a `ServerLimits`.
    """
    try:
        from glassagent._server.app import build_app
        from glassagent._server.hosts import check_allowed_hosts, check_allowed_origins
    except ImportError as exc:  # pragma: no cover - the test environment has the extra
        raise ConfigurationError(f"create_app needs Starlette: {_INSTALL}") from exc
    config = make_config(
        model, tools, system=system, settings=settings, limits=limits, on_event=on_event
    )
    stores = None
    if isinstance(store, (str, os.PathLike, ChatStore)):
        stores = UserStores(store)
    elif store is not None:
        raise ConfigurationError(
            f"`store` must be a directory or a ChatStore, not {type(store).__name__}."
        )
    facts = check_host_facts(host) if host is not None else {}
    users = _users(tokens, access_token)
    hosts = check_allowed_hosts(allowed_hosts)
    if "*" in hosts and users is None:
        raise ConfigurationError(_ANY_HOST_NEEDS_TOKENS)
    turns = None
    if durable is not None:
        if host is not None:
            raise ConfigurationError("`host` facts are not given to durable turns' tools.")
        from glassagent._server.durable import DurableServer

        turns = DurableServer(
            config, stores, durable, worker_id=worker_id, takeover_after=takeover_after
        )
    return build_app(
        config,
        stores,
        users,
        allowed_hosts=hosts,
        allowed_origins=check_allowed_origins(allowed_origins),
        host=facts,
        durable=turns,
    )


_ANY_HOST_NEEDS_TOKENS = (
    "Answering any Host ('*' among the allowed hosts) needs tokens: without them, any web page "
    "could drive the server through DNS rebinding."
)


def _users(tokens: Mapping[str, str] | None, access_token: str | None) -> dict[str, str] | None:
    """Each token's user: `tokens` checked, or `access_token` for the anonymous user."""
    if access_token is None:
        return check_tokens(tokens) if tokens is not None else None
    if tokens is not None:
        raise ConfigurationError("Give `tokens` (several users) or `access_token`, not both.")
    if not isinstance(access_token, str) or not access_token.strip():
        raise ConfigurationError("`access_token` must be a non-empty string.")
    if access_token != access_token.strip():
        raise ConfigurationError("`access_token` must not begin or end with spaces.")
    return {access_token: ANONYMOUS_USER}


def check_tokens(tokens: Any) -> dict[str, str]:
    """`tokens` as a dict, after checking it maps non-empty tokens to non-empty user ids.

    Raises:
        ConfigurationError: Otherwise; the message never shows a token.
    """
    if not isinstance(tokens, Mapping) or not tokens:
        raise ConfigurationError(
            "Tokens must be a non-empty JSON object mapping bearer tokens to user ids, e.g. "
            '{"<token>": "alice"}.'
        )
    checked: dict[str, str] = {}
    for number, (token, user) in enumerate(tokens.items(), 1):
        if not isinstance(token, str) or not token.strip() or token != token.strip():
            raise ConfigurationError(
                f"Token number {number} is not a non-empty string without surrounding spaces."
            )
        if not isinstance(user, str) or not user:
            raise ConfigurationError(f"The user id of token number {number} is not a string.")
        try:
            check_user_id(user)
        except UserError as exc:
            raise ConfigurationError(f"Token number {number}: {exc}") from None
        checked[token] = user
    return checked


def load_tokens(path: str | os.PathLike[str]) -> dict[str, str]:
    """Read a tokens file: a JSON object mapping bearer tokens to user ids.

    Example of a file: ``{"3f9c...long random token...": "alice", "b71e...": "bob"}``.

    Args:
        path: The file.

    Raises:
        ConfigurationError: When it cannot be read or is not such an object (the message
            never shows a token).
    """
    try:
        data = json.loads(Path(path).read_bytes())
    except OSError as exc:
        raise ConfigurationError(f"Cannot read the tokens file {str(path)!r}: {exc}") from None
    except ValueError:
        raise ConfigurationError(f"The tokens file {str(path)!r} is not valid JSON.") from None
    return check_tokens(data)


def check_host(host: str, *, authenticated: bool) -> None:
    """Refuse to serve without tokens on an address other machines can reach.

    Args:
        host: The address the server is to bind.
        authenticated: Whether the app has tokens.

    Raises:
        ConfigurationError: When `host` is not a loopback address and there are no tokens.
    """
    if not authenticated and not is_loopback(host):
        raise ConfigurationError(
            f"Refusing to serve on {host!r} without tokens: anyone who can reach it could use "
            "the model and the tools. Give tokens (a JSON file mapping bearer tokens to user "
            "ids), or bind a loopback address such as 127.0.0.1."
        )


def serve(
    app: Starlette,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level: str = "info",
    access_log: bool = True,
    on_started: Callable[[str], None] | None = None,
) -> None:
    """Serve an app made by `create_app` with uvicorn until interrupted (blocks).

    Without tokens, only a loopback host is accepted (`check_host`). Port 0 picks a free
    port; uvicorn's log line ``Uvicorn running on http://HOST:PORT`` names it, and so does
    `on_started`. The app's `ServerLimits` bound the connections: how many are open
    (``max_connections``), how long one may take to send a request's headers
    (``header_timeout``) and stay idle (``keep_alive_timeout``). The access log shows the
    web view's ``?token=`` as ``[hidden]``.

    Args:
        app: The app.
        host: The address to bind.
        port: The port to bind.
        log_level: uvicorn's log level (``"info"``, ``"warning"``, ...).
        access_log: Log one line per request.
        on_started: Called with the server's address (``http://HOST:PORT``, the port
            bound) once it listens.

    Raises:
        ConfigurationError: For an app not made by `create_app`, a non-loopback host
            without tokens, an address that cannot be bound (uvicorn logs why), or when
            uvicorn is not installed.
    """
    server = _server(app, "serve", host, port, log_level, access_log, on_started)
    with tokens_hidden():
        try:
            server.run()
        except KeyboardInterrupt:  # uvicorn raises the SIGINT it handled again
            pass
        except SystemExit:  # uvicorn's way to report a failed start, logged already
            raise ConfigurationError(f"The server could not start on {host}:{port}.") from None


async def aserve(
    app: Starlette,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level: str = "info",
    access_log: bool = True,
    on_started: Callable[[str], None] | None = None,
) -> None:
    """Serve an app made by `create_app` with uvicorn in the running event loop.

    The async form of `serve`, for apps whose model clients live in this loop (opened with
    ``async with``, or a `glassagent.local.LocalServer`): it returns once the server has
    stopped, so they are closed after it. SIGINT (Ctrl-C) and SIGTERM stop it: uvicorn
    finishes the open requests, and the signal is not raised again afterwards, so the
    caller's cleanup runs. Port 0 picks a free port; uvicorn's log line ``Uvicorn running
    on http://HOST:PORT`` names it, and so does `on_started`. The connections are bounded
    as by `serve`.

    Args:
        app: The app.
        host: The address to bind.
        port: The port to bind.
        log_level: uvicorn's log level (``"info"``, ``"warning"``, ...).
        access_log: Log one line per request.
        on_started: Called with the server's address (``http://HOST:PORT``, the port
            bound) once it listens.

    Raises:
        ConfigurationError: For an app not made by `create_app`, a non-loopback host
            without tokens, an address that cannot be bound (uvicorn logs why), or when
            uvicorn is not installed.
    """
    server = _server(app, "aserve", host, port, log_level, access_log, on_started)
    with signals_kept(), tokens_hidden():
        try:
            await server.serve()
        except SystemExit:  # uvicorn's way to report a failed start, logged already
            raise ConfigurationError(f"The server could not start on {host}:{port}.") from None


def _server(
    app: Starlette,
    name: str,
    host: str,
    port: int,
    log_level: str,
    access_log: bool,
    on_started: Callable[[str], None] | None,
) -> Any:
    """The uvicorn server of `app` on `host` and `port`, bounded by the app's limits.

    Raises:
        ConfigurationError: For another app than `create_app`'s, or a `host` it may not
            serve on, or when uvicorn is missing.
    """
    state = getattr(app.state, "glassagent", None)
    if state is None:
        raise ConfigurationError(f"{name}() runs apps made by glassagent.server.create_app.")
    check_host(host, authenticated=state.tokens is not None)
    try:
        import uvicorn
    except ImportError as exc:  # pragma: no cover - the test environment has the extra
        raise ConfigurationError(f"{name} needs uvicorn: {_INSTALL}") from exc
    limits: ServerLimits = state.config.limits
    return make_server(
        uvicorn,
        app,
        limits,
        host=host,
        port=port,
        log_level=log_level,
        access_log=access_log,
        on_started=on_started,
    )
