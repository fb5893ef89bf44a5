"""The ASGI app (Starlette): the guard, authentication, bounded bodies, JSON answers, streams."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from glassagent._agent.run import AgentRun
from glassagent._core.errors import UserError
from glassagent._history.store import check_chat_id
from glassagent._server import auth, chats, web
from glassagent._server.chats import ANONYMOUS_USER, UserStores
from glassagent._server.durable import DurableServer, DurableTurn
from glassagent._server.guard import Guard
from glassagent._server.invoke import Invocation, ServerConfig, run_to_end
from glassagent._server.request import InvokeError, InvokeRequest, ServerLimits
from glassagent._server.responses import error_response

INVOKE_PATH = "/api/ai/invoke"
CHATS_PATH = "/api/ai/chats/{chat_id}"
CHAT_LIST_PATH = "/api/ai/chats"
HEALTH_PATH = "/api/ai/health"

_TERMINAL = frozenset({"complete", "aborted", "error", "budget_exceeded", "awaiting_approval"})
_DISCONNECTED = "the client disconnected"


@dataclass(frozen=True)
class AppState:
    """What the endpoints share: kept on ``app.state.glassagent``."""

    config: ServerConfig
    stores: UserStores | None
    tokens: Mapping[bytes, str] | None  # SHA-256 of each token -> its user id
    host: Mapping[str, Any] = field(default_factory=dict)  # the application's facts, checked
    durable: DurableServer | None = None  # turns are durable runs (`create_app(durable=)`)

    def user(self, request: Request) -> str:
        """The user a request authenticates as (its bearer token, or the web view's cookie).

        Raises:
            InvokeError: 401 when the server has tokens and the request brings none of them.
        """
        if self.tokens is None:
            return ANONYMOUS_USER
        user = auth.user_of(self.tokens, request)
        if user is None:
            raise InvokeError(
                "Missing or unknown bearer token: send 'Authorization: Bearer <token>'.",
                status=401,
                code="unauthorized",
            )
        return user


def build_app(
    config: ServerConfig,
    stores: UserStores | None,
    tokens: Mapping[str, str] | None,
    *,
    allowed_hosts: frozenset[str] = frozenset(),
    allowed_origins: frozenset[str] = frozenset(),
    host: Mapping[str, Any] | None = None,
    durable: DurableServer | None = None,
) -> Starlette:
    """The Starlette app serving `config` (see `glassagent.server.create_app`).

    `tokens` map each token to its user; `None`: no authentication. Every request passes
    the `Guard` first. `host` holds the application's facts for the tools' context, checked
    (`check_host_facts`). With `durable`, the turns are its durable runs, and the app's
    lifespan runs its durable agent.
    """
    guard = Middleware(
        Guard,
        allowed_hosts=allowed_hosts,
        allowed_origins=allowed_origins,
        max_requests=config.limits.max_concurrent_requests,
    )
    app = Starlette(
        routes=[
            Route(INVOKE_PATH, _invoke, methods=["POST"]),
            Route(CHAT_LIST_PATH, _chat_list, methods=["GET"]),
            Route(CHATS_PATH, _chat, methods=["GET"]),
            Route(HEALTH_PATH, _health, methods=["GET"]),
            *web.ROUTES,
        ],
        middleware=[guard],
        lifespan=durable.lifespan if durable is not None else None,
    )
    hashed = auth.hashed(tokens) if tokens is not None else None
    app.state.glassagent = AppState(
        config=config,
        stores=stores,
        tokens=hashed,
        host=MappingProxyType(dict(host or {})),
        durable=durable,
    )
    return app


def _state(request: Request) -> AppState:
    state: AppState = request.app.state.glassagent
    return state


def _error(exc: BaseException) -> Response:
    status, body, headers = error_response(exc)
    return JSONResponse(body, status_code=status, headers=headers)


async def _health(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def _chat(request: Request) -> Response:
    state = _state(request)
    try:
        user = state.user(request)
        chat_id = request.path_params["chat_id"]
        try:
            check_chat_id(chat_id)
        except UserError as exc:
            raise InvokeError(str(exc), status=422, code="invalid_request") from None
        history = None
        if state.stores is not None:
            history = await chats.load(state.stores.get(user), chat_id)
        if history is None:
            raise InvokeError(f"There is no chat {chat_id!r}.", status=404, code="not_found")
    except Exception as exc:
        return _error(exc)
    return JSONResponse(history.to_dict())


async def _chat_list(request: Request) -> Response:
    state = _state(request)
    try:
        user = state.user(request)
        if state.stores is None:
            raise InvokeError("This server keeps no chats.", status=400, code="no_store")
        ids = await state.stores.get(user).alist()
    except Exception as exc:
        return _error(exc)
    return JSONResponse({"chats": [{"chat_id": chat_id} for chat_id in ids]})


async def _read_body(request: Request, limits: ServerLimits) -> bytes:
    """The body, refused with 413 as soon as it is known to exceed the limit, 408 when slow.

    The whole body must arrive within ``limits.body_timeout`` seconds, and no pause between
    two pieces may last ``limits.body_idle_timeout``: one timer, moved at each piece, that
    cancels the wait (as ``asyncio.timeout``, which Python 3.10 lacks).
    """
    limit = limits.max_body_bytes
    declared = request.headers.get("content-length")
    if declared is not None and declared.strip().isdigit() and int(declared) > limit:
        raise _too_large(limit)
    timer = _BodyTimer(limits)
    try:
        chunks: list[bytes] = []
        size = 0
        while True:  # straight from ASGI: Request.stream() costs more than the JSON parsing
            message = await request.receive()
            if message["type"] != "http.request":  # the client left before it finished
                raise InvokeError("The client disconnected.", status=400, code="disconnected")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise _too_large(limit)
            chunks.append(chunk)
            if not message.get("more_body", False):
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)
            timer.move()
    except asyncio.CancelledError:
        if not timer.ours():
            raise
        raise InvokeError(
            f"The request body did not arrive in time (all of it within {limits.body_timeout} "
            f"s, and no pause of {limits.body_idle_timeout} s).",
            status=408,
            code="body_timeout",
        ) from None
    finally:
        timer.stop()


class _BodyTimer:
    """Cancels the current task when the body is late; `ours` tells that cancellation apart."""

    def __init__(self, limits: ServerLimits) -> None:
        self.loop = asyncio.get_running_loop()
        self.task = asyncio.current_task()
        self.deadline = self.loop.time() + limits.body_timeout
        self.idle = limits.body_idle_timeout
        self.expired = False
        self.handle = self.loop.call_at(self._next(), self._expire)

    def _next(self) -> float:
        return min(self.deadline, self.loop.time() + self.idle)

    def _expire(self) -> None:
        self.expired = True
        if self.task is not None:
            self.task.cancel()  # the task waits on `receive`: the only await the timer spans

    def move(self) -> None:
        """A piece arrived: the next must come within the idle time (and the deadline)."""
        self.handle.cancel()
        self.handle = self.loop.call_at(self._next(), self._expire)

    def stop(self) -> None:
        self.handle.cancel()

    def ours(self) -> bool:
        """Whether the cancellation came from this timer alone (then it is withdrawn)."""
        if not self.expired:
            return False
        uncancel = getattr(self.task, "uncancel", None)  # Python 3.11+: count it back
        return uncancel is None or uncancel() == 0


def _too_large(limit: int) -> InvokeError:
    return InvokeError(
        f"The request body exceeds the server's limit of {limit} bytes.",
        status=413,
        code="too_large",
    )


async def _invoke(request: Request) -> Response:
    state = _state(request)
    limits = state.config.limits
    try:
        user = state.user(request)
        body = await _read_body(request, limits)
        invoke_request = InvokeRequest.from_json(body, limits)
        if state.durable is not None:
            return await _durable_turn(state.durable, invoke_request, user)
        store = state.stores.get(user) if state.stores is not None else None
        host = _host_of(request, state, user)
        invocation = Invocation(invoke_request, state.config, store, host)
        run = await invocation.start()
    except Exception as exc:  # nothing to close: `start` keeps no claim when it raises
        response = _error(exc)
        if isinstance(exc, InvokeError) and exc.status in (408, 413):
            response.headers["Connection"] = "close"  # the rest of the body is not read
        return response
    if invoke_request.stream:
        return EventStream(invocation, run)
    return await _answer(invocation, run, request.receive)


async def _durable_turn(server: DurableServer, request: InvokeRequest, user: str) -> Response:
    """A durable server's turn: as JSON once it ended or waits, or as a stream."""
    turn = DurableTurn(server, request, user)
    await turn.start()
    if request.stream:
        return DurableStream(turn)
    try:
        outcome = await turn.outcome()
    except Exception as exc:
        response = _error(exc)
        if isinstance(response, JSONResponse):
            _with_run_id(response, turn.run_id)
        return response
    return JSONResponse(outcome.to_dict())


def _with_run_id(response: JSONResponse, run_id: str) -> None:
    """Add the turn's ``run_id`` to an error body (``{"error": {...}}``)."""
    body = json.loads(bytes(response.body))
    body["run_id"] = run_id
    response.body = response.render(body)
    response.headers["content-length"] = str(len(response.body))


def _host_of(request: Request, state: AppState, user: str) -> dict[str, Any]:
    """The application's facts for the tools' context, the user, and the server's port.

    The port the request came to wins over the application's ``main_port``; ``user_id`` is
    the user the request authenticated as.
    """
    server = request.scope.get("server")  # (host, port), or None (e.g. a Unix socket)
    port = server[1] if server and len(server) > 1 and server[1] is not None else None
    host = {**state.host, "user_id": user}
    if port is not None:
        host["main_port"] = str(port)
    return host


async def _watch(receive: Receive, run: AgentRun) -> None:
    """Abort `run` when the client disconnects (the body has been read by then)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            run.abort(_DISCONNECTED)
            return


async def _answer(invocation: Invocation, run: AgentRun, receive: Receive) -> Response:
    watcher = asyncio.create_task(_watch(receive, run))
    try:
        try:
            result = await run_to_end(run)
        finally:
            watcher.cancel()
        outcome = await invocation.finish(result)
    except Exception as exc:
        return _error(exc)
    finally:
        invocation.close()
    return JSONResponse(outcome.to_dict())


def _sse(data: Mapping[str, Any]) -> bytes:
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=repr)
    return b"data: " + text.encode("utf-8", "surrogatepass") + b"\n\n"


class EventStream(Response):
    """A run's events as Server-Sent Events: one ``data:`` line of JSON per event.

    The terminal event (``complete``, ``aborted``, ``budget_exceeded``,
    ``awaiting_approval`` or ``error``) of the run (not one of a sub-agent's run inside it,
    whose ``depth`` is above 0) is held back until the turn is kept as asked, and
    then carries the answer's ``status`` (and ``approvals``, ``chat_id``, ``history`` when it
    has them); if keeping it fails, an ``error`` event takes its place. A client that
    disconnects aborts the run, and the aborted turn is kept like a finished one.
    """

    media_type = "text/event-stream"

    def __init__(self, invocation: Invocation, run: AgentRun) -> None:
        # not Response.__init__: it would declare an empty body (Content-Length: 0)
        self.status_code = 200
        self.background = None
        self.init_headers({"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        self.invocation = invocation
        self.run = run
        self._open = True

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        start = {"type": "http.response.start", "status": 200, "headers": self.raw_headers}
        watcher = asyncio.create_task(_watch(receive, self.run))
        try:
            await self._send(send, start)
            last: dict[str, Any] | None = None
            async for event in self.run:
                data = event.to_dict()
                if data["type"] in _TERMINAL and not event.depth:  # a sub-agent's end streams
                    last = data
                else:
                    await self._send_event(send, data)
            assert last is not None
            await self._send_event(send, await self._ending(last))
        finally:
            watcher.cancel()
            self.invocation.close()
        await self._send(send, {"type": "http.response.body", "body": b"", "more_body": False})

    async def _ending(self, last: dict[str, Any]) -> dict[str, Any]:
        """The terminal event, once the turn is kept; an ``error`` event when that failed."""
        result = self.run.result
        if last["type"] == "error" or result is None:
            return last
        try:
            outcome = await self.invocation.finish(result)
        except Exception as exc:
            _, body, _ = error_response(exc)
            error = body["error"]
            return {
                "type": "error",
                "run_id": last["run_id"],
                "seq": last["seq"],
                "error": error["message"],
                "error_type": error["type"],
            }
        extra = outcome.to_dict()
        for name in ("status", "approvals", "chat_id", "history"):
            if name in extra:
                last[name] = extra[name]
        return last

    async def _send_event(self, send: Send, data: Mapping[str, Any]) -> None:
        await self._send(
            send, {"type": "http.response.body", "body": _sse(data), "more_body": True}
        )

    async def _send(self, send: Send, message: dict[str, Any]) -> None:
        """Send while the client listens; a failed send means it left: abort the run."""
        if not self._open:
            return
        try:
            await send(message)
        except Exception:
            self._open = False
            self.run.abort(_DISCONNECTED)


class DurableStream(Response):
    """A durable turn's events as Server-Sent Events, as `EventStream` (``replayed`` ones too).

    The events are those this process sees (none for a run another server executes); the
    terminal event comes once the turn ended or waits for approval (then ``awaiting_approval``
    with the ``approvals``), and carries the answer's ``status``, ``run_id`` (and
    ``approvals``, ``chat_id``, ``history`` when it has them). A client that disconnects
    stops following: the run goes on.
    """

    media_type = "text/event-stream"

    def __init__(self, turn: DurableTurn) -> None:
        self.status_code = 200
        self.background = None
        self.init_headers({"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        self.turn = turn
        self.held: dict[str, Any] | None = None
        self.last: dict[str, Any] = {"run_id": turn.run_id, "seq": 0}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        start = {"type": "http.response.start", "status": 200, "headers": self.raw_headers}
        await send(start)
        relay = asyncio.create_task(self._relay(send))
        try:
            try:
                outcome = await self.turn.outcome()
            except Exception as exc:
                ending = self.held if self.held and self.held["type"] == "error" else None
                ending = ending or _error_event(exc, self.last)
            else:
                await asyncio.wait({relay}, timeout=1.0)  # the events before the end or wait
                ending = self._ending(outcome.to_dict())
        finally:
            relay.cancel()
        ending["run_id"] = self.turn.run_id
        await send({"type": "http.response.body", "body": _sse(ending), "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _relay(self, send: Send) -> None:
        assert self.turn.run is not None
        async for event in self.turn.run:
            data = event.to_dict()
            if event.depth:  # a sub-agent's event (its end too) streams as it is
                await send({"type": "http.response.body", "body": _sse(data), "more_body": True})
                continue
            self.last = data
            if data["type"] in _TERMINAL:
                self.held = data
                continue
            await send({"type": "http.response.body", "body": _sse(data), "more_body": True})

    def _ending(self, body: dict[str, Any]) -> dict[str, Any]:
        if body["status"] == "awaiting_approval":
            ending = {"type": "awaiting_approval", "seq": self.last.get("seq", 0) + 1}
        else:
            ending = self.held or {"type": "complete", "text": body["text"]}
        for name in ("status", "approvals", "chat_id", "history"):
            if name in body:
                ending[name] = body[name]
        return ending


def _error_event(exc: BaseException, last: Mapping[str, Any]) -> dict[str, Any]:
    _, body, _ = error_response(exc)
    error = body["error"]
    return {
        "type": "error",
        "seq": last.get("seq", 0) + 1,
        "error": error["message"],
        "error_type": error["type"],
    }
