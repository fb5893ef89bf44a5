"""Durable turns: the server's turns as durable runs (`create_app(durable=URL)`).

Each turn is a run of one `DurableAgent` that the app's lifespan enters: its model and tool
calls are checkpointed in the database, so a turn outlives a crash of the server, and
several servers on one PostgreSQL share the runs (a live one takes over a dead one's runs).
A turn's id is the request's ``run_id``: posting it again follows that run (nothing runs
again). The turn's choices (model, tools, settings, the user and the chat) are the run's
options, plain JSON stored with it: a run resumed in another process builds the same agent
from them, and its last step appends the turn to the user's chat, also when no request
waits for it. Calls that need approval wait in the database; the request answers at once
with ``awaiting_approval``, and a request with the ``run_id`` and ``approvals`` answers them.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from glassagent._agent.agent import Agent
from glassagent._core.errors import ConfigurationError, HistoryProblem, RunAborted, UserError
from glassagent._core.events import to_jsonable
from glassagent._core.messages import ModelSettings, ToolCall, Usage
from glassagent._core.result import RunResult
from glassagent._durable.codec import from_jsonable
from glassagent._history.tree import History
from glassagent._server import chats
from glassagent._server.chats import UserStores
from glassagent._server.invoke import (
    Invocation,
    InvokeResult,
    ServerConfig,
    check_tool_choice,
    described,
)
from glassagent._server.request import InvokeError, InvokeRequest

if TYPE_CHECKING:
    from glassagent._durable.agent import DurableAgent
    from glassagent._durable.handle import DurableAgentRun

logger = logging.getLogger("glassagent.server")

NAME = "glassagent-serve"
"""The durable application name of the server's runs (the same for every server)."""
POLL_SECONDS = 0.1
"""How often a request looks whether its run waits for approval."""
_INSTALL = "pip install 'glassagent[durable]'"


def default_worker_id() -> str:
    """This process's worker id: the host name and the process id.

    Unique per process: a worker resumes at its start the runs its own id left pending, so
    two processes of one id would both run them. A server that died is taken over by a
    live one (or by itself restarted, as a new worker) once it has been silent long enough.
    """
    return f"{socket.gethostname()}-{os.getpid()}"


class DurableServer:
    """The durable agent of one app, and how its runs build their agent and keep their turn."""

    def __init__(
        self,
        config: ServerConfig,
        stores: UserStores | None,
        url: str,
        *,
        worker_id: str | None = None,
        takeover_after: float | None = 30.0,
    ) -> None:
        """Check everything; nothing is opened until `lifespan`.

        Raises:
            ConfigurationError: When the ``durable`` extra is missing, or for a URL, worker
                id or takeover time the durable agent refuses, or tools with an approver.
        """
        try:
            from glassagent._durable.agent import DurableAgent
        except ImportError as exc:  # pragma: no cover - the test environment has the extra
            raise ConfigurationError(f"Durable turns need DBOS: {_INSTALL}") from exc
        if not isinstance(url, str) or not url:
            raise ConfigurationError(f"`durable` must be a database URL, not {url!r}.")
        self.config = config
        self.stores = stores
        base = self.build({})
        try:
            self.agent: DurableAgent[Any] = DurableAgent(
                base,
                name=NAME,
                database_url=url,
                executor_id=worker_id or default_worker_id(),
                takeover_after=takeover_after,
            )
        except UserError as exc:
            raise ConfigurationError(str(exc)) from None
        self.agent._hooks(self.build, self.finish)

    @asynccontextmanager
    async def lifespan(self, app: Any) -> AsyncIterator[None]:
        """The app's lifespan: the durable agent runs (and resumes pending turns) in it."""
        async with self.agent:
            yield

    def build(self, options: Mapping[str, Any]) -> Agent[Any, Any]:
        """The agent of a turn, from the options it was started with."""
        config, limits = self.config, self.config.limits
        client = config.clients.get(options.get("model_id") or config.default_model)
        if client is None:  # a model this server no longer has: its default one
            client = config.clients[config.default_model]
        names = options.get("tools")
        tools = list(config.tools.values())
        if isinstance(names, list):
            tools = [config.tools[name] for name in names if name in config.tools]
        settings = config.settings or ModelSettings()
        if isinstance(options.get("settings"), dict):
            settings = settings.merge(from_jsonable(ModelSettings, options["settings"]))
        system = options.get("system")
        most = options.get("max_iterations") or limits.max_iterations
        return Agent(
            client,
            tools,
            system=system if isinstance(system, str) else config.system,
            max_iterations=min(most, limits.max_iterations),
            settings=settings,
            run_timeout=limits.run_timeout,
            budget=limits.budget,
            on_event=config.on_event,
        )

    async def finish(self, options: Mapping[str, Any], result: RunResult[Any]) -> None:
        """Append a turn that ended to the user's stored chat (the run's last step)."""
        chat_id, user = options.get("chat_id"), options.get("user")
        if not options.get("append") or self.stores is None:
            return
        if not isinstance(chat_id, str) or not isinstance(user, str):
            return
        store = self.stores.get(user)
        history = await chats.load(store, chat_id)
        if history is None:
            history = History(model=self.build(options).client.model)
        chats.append_turn(history, result.new_messages, below=options.get("start_node"))
        await chats.save(store, chat_id, history, attempts=self.config.limits.save_attempts)


class DurableTurn:
    """One request of a durable server: `start` finds or starts the run, `outcome` follows it."""

    def __init__(self, server: DurableServer, request: InvokeRequest, user: str) -> None:
        self.server = server
        self.request = request
        self.user = user
        self.run_id = request.run_id or uuid.uuid4().hex
        self.options: dict[str, Any] = {}
        self.answered: frozenset[str] = frozenset()
        self.run: DurableAgentRun[Any] | None = None

    async def start(self) -> DurableAgentRun[Any]:
        """Answer the request's approvals, then follow its run; or start a new run.

        Raises:
            InvokeError: 404 (a run of another user, or no such chat), 409 (no call of the
                run waits), 422 (answers to calls that do not wait, approvals without a
                ``run_id``), or what a new turn's request asks that the server cannot do.
        """
        durable = self.server.agent
        options = await durable._options(self.run_id)
        if options is not None and options.get("user") != self.user:
            raise InvokeError(f"There is no run {self.run_id!r}.", status=404, code="not_found")
        if self.request.approvals is not None:
            if self.request.run_id is None:
                raise InvokeError(
                    "A durable server answers the calls of a turn by its `run_id`: send it "
                    "with the approvals.",
                    status=422,
                    code="invalid_request",
                    problems=[HistoryProblem("run_id", "is required with `approvals`")],
                )
            await self._answer(self.request.approvals)
        if options is not None:
            self.options = options
            self.run = durable.follow(self.run_id)
        else:
            self.run = await self._new_run()
        return self.run

    async def _answer(self, approvals: Mapping[str, bool | str]) -> None:
        durable = self.server.agent
        waiting = {call.id for call in await durable._waiting(self.run_id)}
        if not waiting:
            raise InvokeError(
                f"Nothing to resume: no call of the run {self.run_id!r} awaits approval.",
                status=409,
                code="nothing_to_resume",
            )
        others = [call_id for call_id in approvals if call_id not in waiting]
        if others:
            ids = ", ".join(repr(call_id) for call_id in sorted(waiting))
            raise InvokeError(
                f"Only these calls await approval: {ids}; {len(others)} answer(s) name others.",
                status=422,
                code="invalid_approvals",
                problems=[
                    HistoryProblem(f"approvals.{c}", "no such call awaits approval") for c in others
                ],
            )
        for call_id, answer in approvals.items():
            if answer is True:
                await durable.approve(self.run_id, call_id)
            else:
                await durable.deny(self.run_id, call_id, answer or None)
        self.answered = frozenset(approvals)

    async def _new_run(self) -> DurableAgentRun[Any]:
        """Resolve the turn as the plain server does, and start it as a durable run."""
        server, request = self.server, self.request
        invocation = Invocation(request, server.config, self._store())
        client = invocation.client()
        tools = invocation.tools()
        settings = (server.config.settings or ModelSettings()).merge(request.settings)
        check_tool_choice(settings, tools)
        await invocation._resolve_history(client)
        history = invocation.history
        self.options = {
            "user": self.user,
            "chat_id": invocation.chat_id,
            "start_node": history.current_node if history is not None else None,
            "append": request.append_to_history,
            "model_id": request.model_id or server.config.default_model,
            "tools": list(request.active_tools) if request.active_tools is not None else None,
            "settings": to_jsonable(request.settings) if request.settings is not None else None,
            "system": request.system_prompt,
            "max_iterations": request.max_iterations,
        }
        document = history.to_dict() if history is not None else None
        return server.agent._start(request.message, self.run_id, document, self.options)

    def _store(self) -> Any:
        stores = self.server.stores
        return stores.get(self.user) if stores is not None else None

    async def outcome(self) -> InvokeResult:
        """Follow the run to its end, or to a wait for approval; the answer.

        Raises:
            GlassAgentError: The run's error when it failed.
        """
        assert self.run is not None
        durable = self.server.agent
        ended = asyncio.ensure_future(self.run)
        try:
            while True:
                done, _ = await asyncio.wait({ended}, timeout=POLL_SECONDS)
                if done:
                    break
                calls = await durable._waiting(self.run_id)
                if calls and not self.answered & {call.id for call in calls}:
                    return self._awaiting(calls)
        finally:
            if not ended.done():
                ended.cancel()  # stops following only: the run goes on, durably
        try:
            result = ended.result()
        except RunAborted as exc:
            if exc.result is None:  # pragma: no cover - an ended run always sets it
                raise
            result = exc.result
        return self._ended(result)

    def _awaiting(self, calls: tuple[ToolCall, ...]) -> InvokeResult:
        return InvokeResult(
            text="",
            status="awaiting_approval",
            stop_reason=None,
            usage=Usage(),
            iterations=0,
            chat_id=self.options.get("chat_id"),
            history_version=self.request.history_version,
            approvals=calls,
            run_id=self.run_id,
        )

    def _ended(self, result: RunResult[Any]) -> InvokeResult:
        history = self.request.history
        if history is not None and self.request.append_to_history:
            below = self.options.get("start_node", history.current_node)
            chats.append_turn(history, result.new_messages, below=below)
        else:
            history = None
        chat_id = self.options.get("chat_id")
        return described(result, chat_id, history, self.request.history_version, self.run_id)
