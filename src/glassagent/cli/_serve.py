"""``glassagent serve``: the invoke API of `glassagent.server` on a host and port.

Everything is checked before the model starts: the tokens file, the host (no tokens: loopback
only), the allowed hosts and origins, the address, the store (a database's tables are
created, or checked, then) and the workspace; a mistake is a `BadInput` (one line, exit code
2). Then the client opens, and the app is served in this event loop until SIGINT or SIGTERM;
the client is closed (and a local model stopped) after the server, and the database's
connections after it. Without ``--tokens`` (and without ``--no-token``), a random token is
made at each start, and the address of the web view that carries it is printed once the
server listens, as ``jupyter lab`` does. The event loop is
uvloop's when it is installed (`run_serving`), and uvicorn parses HTTP with httptools when it
is (both come with the ``server`` extra); otherwise asyncio's loop and h11.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import re
import secrets
import socket
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from glassagent.cli._options import ServeOptions
from glassagent.cli._sandbox import open_workspace
from glassagent.cli._session import DEFAULT_SYSTEM, EXIT_OK
from glassagent.cli._setup import (
    BadInput,
    budget_for,
    check_workspace,
    open_client,
    provider_of,
    settings_for,
)
from glassagent.errors import ConfigurationError
from glassagent.history import SQLHistoryStore
from glassagent.server import (
    ServerLimits,
    aserve,
    check_allowed_hosts,
    check_allowed_origins,
    check_host,
    create_app,
    load_tokens,
)
from glassagent.tools import Tool

Note = Callable[[str], None]
_DATABASE_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def run_serving(main: Coroutine[Any, Any, int]) -> int:
    """Run `main` (the serve command) to its end on uvloop if installed, else like `asyncio.run`.

    uvloop's loop runs uvicorn's sockets and the app's tasks with less CPU per request; it is
    not there on Windows, nor in an older version without ``uvloop.run`` (then asyncio's).
    """
    try:
        uvloop: Any = importlib.import_module("uvloop")
    except ImportError:
        return asyncio.run(main)
    run = getattr(uvloop, "run", None)
    if run is None:  # uvloop before 0.18
        return asyncio.run(main)
    code: int = run(main)
    return code


async def serve_command(options: ServeOptions, note: Note) -> int:
    """Check everything, open the model client, serve until stopped; exit code 0.

    Raises:
        BadInput: For a tokens file, host, address, store, workspace, provider, model or key
            that cannot work.
    """
    tokens = _tokens(options.tokens)
    if options.no_token and tokens is not None:
        raise BadInput("--no-token and --tokens exclude each other")
    try:
        check_host(options.host, authenticated=tokens is not None)
    except ConfigurationError as exc:
        raise BadInput(f"{exc} (give them with --tokens FILE)") from exc
    try:
        hosts = check_allowed_hosts(options.allowed_hosts)
        check_allowed_origins(options.allowed_origins)
    except ConfigurationError as exc:
        raise BadInput(str(exc)) from exc
    if options.no_token and "*" in hosts:
        raise BadInput("--allowed-host '*' needs a token: any web page could drive the server")
    _check_durable(options)
    _check_address(options.host, options.port)
    store = await _open_store(options.store)
    try:
        return await _serve(options, note, tokens, store)
    finally:
        if isinstance(store, SQLHistoryStore):
            await store.aclose()


async def _serve(
    options: ServeOptions,
    note: Note,
    tokens: dict[str, str] | None,
    store: Path | SQLHistoryStore | None,
) -> int:
    """Check the tools, open the model client and serve until stopped; exit code 0."""
    tools = _tools(options, note)
    provider = provider_of(options.provider, note)
    access_token = None if tokens is not None or options.no_token else secrets.token_urlsafe(32)
    async with open_client(provider, options.model, options.base_url, note) as client:
        try:
            limits = ServerLimits(
                max_iterations=options.max_iterations,
                budget=budget_for(options.max_cost, options.max_turn_tokens, client),
            )
            app = create_app(
                model=client,
                tools=tools,
                store=store,
                tokens=tokens,
                access_token=access_token,
                limits=limits,
                system=_system(options, tools),
                settings=settings_for(provider),
                allowed_hosts=options.allowed_hosts,
                allowed_origins=options.allowed_origins,
                durable=options.durable,
                worker_id=options.worker_id,
            )
        except ConfigurationError as exc:  # starlette is missing, or the model cannot be priced
            raise BadInput(str(exc)) from exc
        users = f"{len(set(tokens.values()))} users" if tokens else "one anonymous user"
        turns = f", durable turns in {_shown(options.durable)}" if options.durable else ""
        note(
            f"serving {client.provider_name}/{client.model} to {users}, "
            f"{len(tools)} tools, {_kept(store)}{turns} (HTTP: {_http_stack()})"
        )
        if options.no_token:
            note(NO_TOKEN_WARNING)
        await aserve(
            app,
            host=options.host,
            port=options.port,
            on_started=lambda address: note(_where(address, access_token, tokens)),
        )
    return EXIT_OK


NO_TOKEN_WARNING = (
    "WARNING: --no-token: this server asks no one for a token. Any program or user of this "
    "machine can drive the agent and its tools through it (with --workspace: change the "
    "folder's files; with --allow-commands: run commands). Web pages of other sites still "
    "cannot (the Host and Origin checks)."
)
"""What ``serve --no-token`` prints before it serves."""


def _check_durable(options: ServeOptions) -> None:
    """``--durable`` needs DBOS (the durable extra); ``--worker-id`` needs ``--durable``.

    Raises:
        BadInput: Otherwise.
    """
    if options.worker_id is not None and options.durable is None:
        raise BadInput("--worker-id needs --durable")
    if options.durable is not None and importlib.util.find_spec("dbos") is None:
        raise BadInput("--durable needs DBOS: pip install 'glassagent[durable]'")


def _where(address: str, access_token: str | None, tokens: dict[str, str] | None) -> str:
    """The line that tells where the web view is, with the launch token when there is one."""
    if access_token is not None:
        return (
            f"open {address}/?token={access_token} in a browser; API clients send "
            "'Authorization: Bearer <the token>'"
        )
    if tokens is not None:
        return f"open {address}/ in a browser (it asks for a token)"
    return f"open {address}/ in a browser (no token)"


def _http_stack() -> str:
    """Which HTTP parser uvicorn uses (its ``http="auto"``) and which event loop runs."""
    parser = "httptools" if importlib.util.find_spec("httptools") is not None else "h11"
    loop = type(asyncio.get_running_loop()).__module__.partition(".")[0]
    return f"{parser} on {'uvloop' if loop == 'uvloop' else 'asyncio'}"


def _system(options: ServeOptions, tools: list[Tool]) -> str | None:
    """``--system``; else the coding agent's instructions when there are workspace tools."""
    if options.system is not None:
        return options.system
    return DEFAULT_SYSTEM if tools else None


def _tokens(path: Path | None) -> dict[str, str] | None:
    if path is None:
        return None
    try:
        return load_tokens(path)
    except ConfigurationError as exc:
        raise BadInput(str(exc)) from exc


def _check_address(host: str, port: int) -> None:
    """Bind `host` and `port` for a moment, as the server will, to report a problem in one line.

    Raises:
        BadInput: When the host is unknown, or the address is in use or not this machine's.
    """
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
    except OSError as exc:  # socket.gaierror included
        raise BadInput(f"cannot serve on {host}:{port}: {exc.strerror or exc}") from exc


async def _open_store(store: str | None) -> Path | SQLHistoryStore | None:
    """The store directory, or the database (tables created or checked), or `None`.

    Raises:
        BadInput: For a directory that cannot be, a URL of another database, or a database
            that cannot be reached or holds a newer glassagent's tables.
    """
    if store is None:
        return None
    if not _DATABASE_URL.match(store):
        return _store(Path(store))
    try:
        database = SQLHistoryStore(store)
    except ConfigurationError as exc:
        raise BadInput(str(exc)) from exc
    try:
        await database.create_schema()
    except ConfigurationError as exc:
        await database.aclose()
        raise BadInput(str(exc)) from None
    return database


def _shown(url: str) -> str:
    """A database URL without its password."""
    return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", url)


def _kept(store: Path | SQLHistoryStore | None) -> str:
    if store is None:
        return "no stored chats"
    return f"chats in {store.url if isinstance(store, SQLHistoryStore) else store}"


def _store(path: Path) -> Path:
    """The store directory: it may not exist yet, but its parent must.

    Raises:
        BadInput: When it is not a directory, or its parent does not exist.
    """
    if path.exists() and not path.is_dir():
        raise BadInput(f"the store {str(path)!r} is not a folder")
    if not path.exists() and not path.resolve().parent.is_dir():
        raise BadInput(f"cannot keep chats in {str(path)!r}: its folder does not exist")
    return path.resolve()


def _tools(options: ServeOptions, note: Note) -> list[Tool]:
    """The workspace's tools with ``--workspace`` (never asking: no one is at a terminal)."""
    if options.workspace is None:
        if options.allow_commands:
            raise BadInput("--allow-commands needs --workspace")
        return []
    root = check_workspace(options.workspace)
    return list(open_workspace(root, options, note).tools)
