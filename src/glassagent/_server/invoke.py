"""`invoke`: one agent turn on a posted, stored or new conversation; `InvokeResult`."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from glassagent._agent.agent import Agent
from glassagent._agent.approval import pending_calls
from glassagent._agent.run import AgentRun
from glassagent._core.client import BaseLLMClient
from glassagent._core.cost import Cost
from glassagent._core.errors import (
    ConfigurationError,
    GlassAgentError,
    HistoryProblem,
    RunAborted,
    UserError,
)
from glassagent._core.events import BudgetExceededEvent, to_jsonable
from glassagent._core.messages import ModelSettings, StopReason, ToolCall, Usage
from glassagent._core.pricing import client_cost
from glassagent._core.result import RunResult
from glassagent._core.tool_choice import check_against
from glassagent._history.model import Version
from glassagent._history.protocol import ChatStore
from glassagent._history.store import HistoryStore
from glassagent._history.tree import History
from glassagent._server import chats
from glassagent._server.request import (
    DEFAULT_SERVER_LIMITS,
    InvokeError,
    InvokeRequest,
    ServerLimits,
    check_approvals,
    checked_limits,
)
from glassagent._tools.tool import Tool
from glassagent._tools.wrap import as_tool

if TYPE_CHECKING:
    from glassagent._agent.hook import OnEvent

ModelsLike = BaseLLMClient | Mapping[str, BaseLLMClient]
"""One client (its ``model`` is its id), or clients by model id (the first is the default)."""

InvokeStatus = Literal["completed", "aborted", "budget_exceeded", "awaiting_approval"]
"""How an invoked turn ended (`InvokeResult.status`)."""


@dataclass(frozen=True)
class InvokeResult:
    """What one invoke produced: the answer, how the turn ended, and where it was kept."""

    text: str
    """The answer (for an aborted turn: the partial text)."""
    status: InvokeStatus
    """``completed``; ``aborted`` when the turn was cut short (a client disconnected);
    ``budget_exceeded`` when the server's `Budget` (`ServerLimits.budget`) stopped it before
    a model call, `text` then being the last answer text of the turn, if any;
    ``awaiting_approval`` when calls of it wait for a person's answer (`approvals`): a request
    with ``approvals`` resumes it."""
    stop_reason: StopReason | None
    """Why the model stopped its last answer (``end_turn``, ``max_tokens``, ...); `None`
    when no answer arrived."""
    usage: Usage
    """Tokens used by the turn's model calls."""
    iterations: int
    """Model calls made."""
    chat_id: str | None = None
    """The stored chat the turn used (and, with ``append_to_history``, was saved to)."""
    history: History | None = None
    """The conversation with the turn appended, when it is returned rather than stored."""
    history_version: Version = "2.0"
    """The format `history` is written in by `to_dict` (the one it was posted in)."""
    run: RunResult | None = None
    """The run's complete result: its messages and events."""
    cost: Cost | None = None
    """What the turn's model calls cost (`RunResult.cost`): unpriced, with the reason, when
    the model has no prices or a call reported no usage; `None` when not recorded."""
    budget_exceeded: BudgetExceededEvent | None = None
    """The event that ended the turn when its status is ``budget_exceeded``: the limit and
    why."""
    approvals: tuple[ToolCall, ...] = ()
    """With status ``awaiting_approval``: the calls waiting for an answer, in the order the
    model made them (empty otherwise)."""
    run_id: str | None = None
    """The turn's durable run (a server with ``durable``): post it again to follow the turn."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON response body.

        ``text``, ``status``, ``stop_reason``, ``usage``, ``cache_hit_rate`` (the share of
        the input tokens read from the prompt cache, from 0 to 1, when some were), ``cost``
        (``{"amount": "0.00123", "currency": "USD"}``, the amount an exact decimal string, or
        ``null`` when the turn could not be priced) and ``iterations``; then
        ``budget_exceeded`` (``{"limit", "reason"}``), ``approvals`` (with status
        ``awaiting_approval`` only: the waiting calls as ``{"id", "name", "arguments"}``),
        ``chat_id``, ``run_id`` and ``history`` when they are set.
        """
        body: dict[str, Any] = {
            "text": self.text,
            "status": self.status,
            "stop_reason": self.stop_reason,
            "usage": to_jsonable(self.usage),
            **cache_hit_rate(self.usage),
            "cost": cost_dict(self.cost),
            "iterations": self.iterations,
        }
        if self.budget_exceeded is not None:
            stop = self.budget_exceeded
            body["budget_exceeded"] = {"limit": stop.limit, "reason": stop.reason}
        if self.status == "awaiting_approval":
            body["approvals"] = [approval_dict(call) for call in self.approvals]
        if self.chat_id is not None:
            body["chat_id"] = self.chat_id
        if self.run_id is not None:
            body["run_id"] = self.run_id
        if self.history is not None:
            body["history"] = self.history.to_dict(self.history_version)
        return body


def cache_hit_rate(usage: Usage) -> dict[str, float]:
    """``{"cache_hit_rate": ...}`` when the prompt cache served input tokens, else ``{}``."""
    if usage.cache_read_tokens <= 0 or usage.input_tokens <= 0:
        return {}
    return {"cache_hit_rate": min(usage.cache_read_tokens / usage.input_tokens, 1.0)}


def approval_dict(call: ToolCall) -> dict[str, Any]:
    """A call awaiting approval as the response shows it: ``{"id", "name", "arguments"}``."""
    return {"id": call.id, "name": call.name, "arguments": to_jsonable(call.input)}


def cost_dict(cost: Cost | None) -> dict[str, str] | None:
    """A cost as the response's ``cost``: amount (a decimal string) and currency, or `None`."""
    if cost is None or cost.amount is None:
        return None
    return {"amount": format(cost.amount, "f"), "currency": cost.currency}


@dataclass(frozen=True)
class ServerConfig:
    """What every request of one server shares: its models, tools and defaults."""

    clients: Mapping[str, BaseLLMClient]
    default_model: str
    tools: Mapping[str, Tool]
    system: str | None = None
    settings: ModelSettings | None = None
    limits: ServerLimits = DEFAULT_SERVER_LIMITS
    on_event: OnEvent | None = None
    """Given each event of every run the server makes (``Agent(on_event=...)``)."""


def make_config(
    models: ModelsLike,
    tools: Iterable[Tool | Callable[..., Any]] = (),
    *,
    system: str | None = None,
    settings: ModelSettings | None = None,
    limits: ServerLimits | None = None,
    on_event: OnEvent | None = None,
) -> ServerConfig:
    """Check and gather a server's configuration.

    Raises:
        ConfigurationError: For no model, a non-client, two tools of one name, a budget
            with a ``max_cost`` on a model that cannot be priced in its currency, or an
            `on_event` that is not callable.
        UserError: For `limits` that are not a `ServerLimits`.
    """
    if on_event is not None and not callable(on_event):
        raise ConfigurationError(f"`on_event` must be callable, got {type(on_event).__name__}.")
    if isinstance(models, BaseLLMClient):
        clients: dict[str, BaseLLMClient] = {models.model: models}
    elif isinstance(models, Mapping):
        clients = dict(models)
    else:
        raise ConfigurationError(
            f"`model` must be a BaseLLMClient or a mapping of model ids to clients, "
            f"not {type(models).__name__}."
        )
    if not clients:
        raise ConfigurationError("The server needs at least one model client.")
    for model_id, client in clients.items():
        if not isinstance(model_id, str) or not isinstance(client, BaseLLMClient):
            raise ConfigurationError("Each model must map a model id (str) to a BaseLLMClient.")
    by_name: dict[str, Tool] = {}
    for item in tools:
        wrapped = as_tool(item)
        if wrapped.name in by_name:
            raise ConfigurationError(f"Two tools are named {wrapped.name!r}.")
        by_name[wrapped.name] = wrapped
    limits = checked_limits(limits)
    if limits.budget is not None and limits.budget.max_cost is not None:
        for client in clients.values():
            check_priced(client, limits.budget.currency)
    return ServerConfig(
        clients=clients,
        default_model=next(iter(clients)),
        tools=by_name,
        system=system,
        settings=settings,
        limits=limits,
        on_event=on_event,
    )


def check_priced(client: BaseLLMClient, currency: str) -> None:
    """Check that `client`'s calls can be priced in `currency`, as a cost budget needs.

    Raises:
        ConfigurationError: When they cannot (no prices), or are priced in another currency.
    """
    usage = Usage(input_tokens=1000, output_tokens=1000)
    try:
        probe = client_cost(client, usage)
    except GlassAgentError as exc:  # an invalid profile file
        raise ConfigurationError(str(exc)) from exc
    if probe.amount is None:
        raise ConfigurationError(
            f"The budget has a max_cost, but calls of {client.model!r} cannot be priced: "
            f"{probe.reason}. Add pricing to the model's profile, or budget max_tokens instead."
        )
    if probe.currency != currency:
        raise ConfigurationError(
            f"The budget's max_cost is in {currency}, but {client.model!r} is priced in "
            f"{probe.currency}."
        )


_RESUMING: set[tuple[int, str]] = set()
"""The stored chats (the store's id, the chat id) whose waiting calls a request answers now."""


class Invocation:
    """One request on its way: `start` resolves it and starts the run, `finish` keeps the turn.

    The HTTP app drives it itself, to stream events and abort on a disconnect; `invoke` is
    the plain sequence. `close` ends it whatever happened (`finish` does too).
    """

    def __init__(
        self,
        request: InvokeRequest,
        config: ServerConfig,
        store: ChatStore | None,
        host: Mapping[str, Any] | None = None,
    ) -> None:
        self.request = request
        self.config = config
        self.store = store
        self.host: Mapping[str, Any] = host or {}
        """Facts of the application for the tools' context (`Agent.run`'s ``host``)."""
        self.chat_id: str | None = None
        self.history: History | None = None
        self.returns_history = False  # the history goes back in the response, not to a store
        self.start_node: str | None = None
        self._claim: tuple[int, str] | None = None  # a stored chat this request resumes

    def client(self) -> BaseLLMClient:
        """The client the request names.

        Raises:
            InvokeError: 400 for an unknown model id.
        """
        model_id = self.request.model_id or self.config.default_model
        client = self.config.clients.get(model_id)
        if client is None:
            known = ", ".join(sorted(self.config.clients))
            raise InvokeError(
                f"Unknown model_id {model_id!r}; this server has: {known}.",
                status=400,
                code="unknown_model",
            )
        return client

    def tools(self) -> list[Tool]:
        """The tools the request activates (all of the server's when it names none).

        Raises:
            InvokeError: 400 naming the first unknown tool.
        """
        names = self.request.active_tools
        if names is None:
            return list(self.config.tools.values())
        for name in names:
            if name not in self.config.tools:
                known = ", ".join(sorted(self.config.tools)) or "none"
                raise InvokeError(
                    f"Unknown tool {name!r} in active_tools; this server has: {known}.",
                    status=400,
                    code="unknown_tool",
                )
        return [self.config.tools[name] for name in names]

    async def start(self) -> AgentRun:
        """Resolve model, tools and conversation, and create the run (not started yet).

        Every run defers approval: it ends ``awaiting_approval`` rather than wait for calls
        without an approver. A request with ``approvals`` resumes such a run instead.

        Raises:
            InvokeError: 400 (unknown model or tool, chats without a store, a ``run_id``),
                404 (no such chat), 409 (no call of the conversation awaits approval) or 422
                (a history attachment or message the policy refuses, approvals of calls that
                do not wait).
        """
        request, limits = self.request, self.config.limits
        if request.run_id is not None:
            raise InvokeError(
                "`run_id` names a durable turn: this server runs none (see `durable`).",
                status=400,
                code="not_durable",
            )
        check_approvals(request, limits)
        client = self.client()
        system = request.system_prompt
        tools = self.tools()
        settings = (self.config.settings or ModelSettings()).merge(request.settings)  # request wins
        check_tool_choice(settings, tools)
        agent = Agent(
            client,
            tools,
            system=system if system is not None else self.config.system,
            max_iterations=min(
                request.max_iterations or limits.max_iterations, limits.max_iterations
            ),
            settings=settings,
            run_timeout=limits.run_timeout,
            budget=limits.budget,
            on_event=self.config.on_event,
        )
        await self._resolve_history(client)
        self.start_node = self.history.current_node if self.history is not None else None
        if request.approvals is not None:
            return self._resume(agent, request.approvals)
        try:
            return agent.run(
                request.message, history=self.history, defer_approval=True, host=self._tool_host()
            )
        except UserError as exc:  # the thread's attachments or tool calls (AttachmentError)
            raise InvokeError(str(exc), status=422, code="invalid_history") from None

    def _resume(self, agent: Agent, approvals: Mapping[str, bool | str]) -> AgentRun:
        """The run that resumes the conversation's turn awaiting approval, with `approvals`.

        The run appends nothing itself: `finish` keeps its turn below `start_node`, as any.
        """
        history = self.history
        assert history is not None  # checked: approvals come with a conversation
        try:
            waiting = {call.id for call in pending_calls(history.to_messages())}
        except UserError as exc:  # the thread's attachments (AttachmentError)
            raise InvokeError(str(exc), status=422, code="invalid_history") from None
        if not waiting:
            raise InvokeError(
                "Nothing to resume: no tool call of this conversation awaits approval.",
                status=409,
                code="nothing_to_resume",
            )
        _check_waiting(approvals, waiting)
        self._claim_chat()
        try:
            return agent.resume(history, approvals, defer_approval=True, host=self._tool_host())
        except UserError as exc:  # the thread's attachments or tool calls
            self.close()
            raise InvokeError(str(exc), status=422, code="invalid_history") from None

    def _claim_chat(self) -> None:
        """Refuse a second request answering the same stored chat's calls at the same time.

        Both would run the approved calls; the first to claim the chat goes on, the other
        gets 409, and may try again once the first has kept its turn.
        """
        if self.chat_id is None or self.store is None:
            return
        claim = (id(self.store), self.chat_id)
        if claim in _RESUMING:
            raise InvokeError(
                f"Nothing to resume: another request is answering the calls of chat "
                f"{self.chat_id!r} now.",
                status=409,
                code="nothing_to_resume",
            )
        _RESUMING.add(claim)
        self._claim = claim

    def close(self) -> None:
        """The request is over: another may resume its stored chat. Safe to call again."""
        if self._claim is not None:
            _RESUMING.discard(self._claim)
            self._claim = None

    async def _resolve_history(self, client: BaseLLMClient) -> None:
        """Posted history wins; else the stored chat; else a new conversation."""
        request = self.request
        if request.history is not None:
            self.history = request.history
            self.returns_history = request.append_to_history
            return
        if request.chat_id is not None:
            store = self._require_store()
            self.chat_id = request.chat_id
            self.history = await chats.load(store, request.chat_id, thread=True)
            if self.history is None:
                if not request.append_to_history or request.approvals is not None:
                    raise InvokeError(
                        f"There is no chat {request.chat_id!r}.", status=404, code="not_found"
                    )
                self.history = History(model=client.model)
            return
        if request.append_to_history:
            self.history = History(model=client.model)
            if self.store is not None:
                self.chat_id = str(uuid.uuid4())
            else:
                self.returns_history = True

    def _tool_host(self) -> dict[str, Any]:
        """The application's facts, with the chat and the store this turn uses.

        A chat kept in a `HistoryStore` also gives its folder (``chat_path``) and its file
        (``history_path``), unless the application gave them.
        """
        host: dict[str, Any] = {}
        if isinstance(self.store, HistoryStore) and self.chat_id is not None:
            host["chat_path"] = str(self.store.directory)
            host["history_path"] = str(self.store.path(self.chat_id))
        host.update(self.host)
        turn = {"chat_id": self.chat_id, "chat_manager": self.store}
        host.update((name, value) for name, value in turn.items() if value is not None)
        return host

    def _require_store(self) -> ChatStore:
        if self.store is None:
            raise InvokeError(
                "This server keeps no chats: send the conversation as `history` instead of "
                "`chat_id`.",
                status=400,
                code="no_store",
            )
        return self.store

    async def finish(self, result: RunResult) -> InvokeResult:
        """Keep a turn that did not fail as the request asked; describe it; then `close`.

        A turn awaiting approval is kept as a finished one, to be resumed from there.

        Raises:
            HistoryConflictError: When the stored chat kept changing under this turn
                (`ServerLimits.save_attempts`), or the message it continues was removed.
        """
        history = self.history
        returned = history if self.returns_history else None
        try:
            if self.request.append_to_history and history is not None:
                chats.append_turn(history, result.new_messages, below=self.start_node)
                if self.chat_id is not None and self.store is not None:
                    attempts = self.config.limits.save_attempts
                    await chats.save(self.store, self.chat_id, history, attempts=attempts)
        finally:
            self.close()
        return described(result, self.chat_id, returned, self.request.history_version)


def described(
    result: RunResult,
    chat_id: str | None,
    history: History | None,
    version: Version,
    run_id: str | None = None,
) -> InvokeResult:
    """The `InvokeResult` of a turn's run that did not fail."""
    status, stop = ending(result)
    return InvokeResult(
        text=result.text,
        status=status,
        stop_reason=result.model_stop_reason,
        usage=result.usage,
        iterations=result.iterations,
        chat_id=chat_id,
        history=history,
        history_version=version,
        run=result,
        cost=result.cost,
        budget_exceeded=stop,
        approvals=result.pending_approvals,
        run_id=run_id,
    )


def ending(result: RunResult) -> tuple[InvokeStatus, BudgetExceededEvent | None]:
    """How a turn that did not fail ended, and the budget's event when the budget ended it."""
    if result.stop_reason == "aborted":
        return "aborted", None
    if result.stop_reason == "awaiting_approval":
        return "awaiting_approval", None
    last = result.events[-1] if result.events else None
    if result.stop_reason == "budget" and isinstance(last, BudgetExceededEvent):
        return "budget_exceeded", last
    return "completed", None


async def invoke(
    request: InvokeRequest,
    *,
    clients: ModelsLike,
    tools: Iterable[Tool | Callable[..., Any]] = (),
    store: ChatStore | None = None,
    system: str | None = None,
    settings: ModelSettings | None = None,
    limits: ServerLimits | None = None,
    on_event: OnEvent | None = None,
    host: Mapping[str, Any] | None = None,
) -> InvokeResult:
    """Run one agent turn: resolve the conversation, run the agent, keep the turn if asked.

    The conversation is the posted ``request.history`` if there is one, else the chat
    ``request.chat_id`` of `store`, else a new one; the model sees its thread at
    ``current_node``, followed by ``request.message``. The agent runs the ReAct loop with the
    active tools, up to ``request.max_iterations`` model calls (capped by
    ``limits.max_iterations``). With ``append_to_history`` the turn (the message, every tool
    call and result, and the answer) is appended below the node it started from: to the
    posted history (returned), or to the stored chat (saved; when the chat changed meanwhile,
    the turn is merged into it, see `ServerLimits.save_attempts`). A turn that fails appends
    nothing; one that ``limits.budget`` stops before a model call ends with status
    ``budget_exceeded`` and is kept like a finished one.

    Calls that need approval do not hold the turn (``defer_approval=True``; a tool's own
    `Approver` is still asked): it ends with status ``awaiting_approval``, the calls in
    `InvokeResult.approvals`, and is kept like a finished one. A request with
    ``approvals`` (and no message) answers them: the turn resumes from the conversation
    (`Agent.resume`), and the answer has the same form (it may await approval again).

    Args:
        request: The request, e.g. from `InvokeRequest.from_json`.
        clients: The model client, or clients by model id (the first is the default).
        tools: Every tool the server offers; ``request.active_tools`` picks among them.
        store: Where chats are kept, e.g. a `HistoryStore` or an `SQLHistoryStore` (`None`:
            ``chat_id`` is refused with 400). Its chats are used as they are: give
            ``store.for_user(user)`` to keep each user's apart.
        system: System instructions when the request gives none.
        settings: Generation settings under the request's ``params``.
        limits: The server's limits; `ServerLimits()` when not given.
        on_event: Given each event of the run as it is emitted, e.g. to trace or record it
            (see ``Agent(on_event=...)``).
        host: Facts of the application its tools see on their context (``app_path``,
            ``main_port``, ...; see ``Agent.run(host=...)``); the turn adds ``chat_id``
            and ``chat_manager`` (`store`), and for a chat of a `HistoryStore` its folder
            and file as ``chat_path`` and ``history_path`` unless `host` gives them.

    Raises:
        InvokeError: For what the request asks that the server cannot do (400, 404, 422), and
            409 ``nothing_to_resume`` for approvals when no call of the conversation awaits
            one (or another request is answering the stored chat's calls).
        UserError: For a `request` that is not an `InvokeRequest` (read a parsed body with
            `InvokeRequest.from_dict`), a `store` that is not a `ChatStore`, or `limits`
            that are not a `ServerLimits`.
        ConfigurationError: For a cost budget on a model that cannot be priced.
        HistoryConflictError: When the stored chat could not be updated (409).
        GlassAgentError: The run's error when it fails (`ProviderError`,
            `MaxIterationsExceeded`, ...), with ``.result`` set.
    """
    if not isinstance(request, InvokeRequest):
        raise UserError(
            f"invoke() takes an InvokeRequest, not {type(request).__name__}: read a parsed "
            "body with InvokeRequest.from_dict(body)."
        )
    if store is not None and not isinstance(store, ChatStore):
        raise UserError(
            f"`store` must be a ChatStore (e.g. a HistoryStore), not {type(store).__name__}."
        )
    config = make_config(
        clients, tools, system=system, settings=settings, limits=limits, on_event=on_event
    )
    invocation = Invocation(request, config, store, host)
    try:
        run = await invocation.start()
        return await invocation.finish(await run_to_end(run))
    finally:
        invocation.close()


async def run_to_end(run: AgentRun) -> RunResult:
    """Await `run`; an aborted run gives its (partial) result, any other error is raised."""
    try:
        return await run
    except RunAborted as exc:
        if exc.result is None:  # pragma: no cover - an ended run always sets it
            raise
        return exc.result


def _check_waiting(approvals: Mapping[str, bool | str], waiting: set[str]) -> None:
    """Refuse answers to calls that do not wait in the conversation (422)."""
    problems = [
        HistoryProblem(f"approvals.{call_id}", "no such call awaits approval")
        for call_id in approvals
        if call_id not in waiting
    ]
    if problems:
        ids = ", ".join(repr(call_id) for call_id in sorted(waiting))
        raise InvokeError(
            f"Only these calls await approval: {ids}; {len(problems)} answer(s) name others.",
            status=422,
            code="invalid_approvals",
            problems=problems,
        )


def check_tool_choice(settings: ModelSettings, tools: Sequence[Tool]) -> None:
    """Refuse a tool choice that no tool of the turn can satisfy (400)."""
    try:
        check_against(settings.tool_choice, [tool.name for tool in tools])
    except UserError as exc:
        raise InvokeError(f"params.tool_choice: {exc}", status=400, code="unknown_tool") from None
