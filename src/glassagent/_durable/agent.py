"""`DurableAgent`: an agent whose runs survive a crash of their process, on DBOS."""

from __future__ import annotations

import asyncio
import os
import re
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, Literal, get_args

from glassagent._agent.agent import Agent
from glassagent._core.errors import ConfigurationError, RunAborted, RunError, UserError
from glassagent._core.result import OutputT, RunResult
from glassagent._durable import codec
from glassagent._durable.approvals import (
    APPROVALS,
    connected,
    read_published,
    send_answer,
    stored,
    waiting,
)
from glassagent._durable.handle import DurableAgentRun
from glassagent._durable.model_queue import ModelQueue, check_calls, queue_name
from glassagent._durable.takeover import Workers, check_takeover_after
from glassagent._durable.urls import masked, shown
from glassagent._durable.workflow import AGENTS, WORKFLOW, Build, Durable, Finish, register
from glassagent._version import __version__

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from dbos import DBOSConfig, WorkflowHandleAsync, WorkflowStatus
    from typing_extensions import Self

    from glassagent._core.messages import ToolCall
    from glassagent._history.tree import History

DurableRunStatus = Literal[
    "pending",
    "awaiting_approval",
    "enqueued",
    "delayed",
    "success",
    "error",
    "cancelled",
    "max_recovery_attempts_exceeded",
]
"""Where a durable run is: ``pending`` while a process runs it (or until one resumes it after
a crash), ``awaiting_approval`` while it waits for answers (`DurableAgent.approve`),
``success`` or ``error`` once it ended (`DurableAgent.result` gives the result or
raises the error), ``cancelled``; ``enqueued`` and ``delayed`` for runs waiting on a queue;
``max_recovery_attempts_exceeded`` for a run whose process crashed too often."""

POLL_SECONDS = 0.1
"""How often `DurableAgent.result` looks for the end of a run another process runs."""

_NAME = re.compile(r"[a-z0-9_-]{3,256}")  # DBOS's application names


@dataclass(frozen=True)
class DurableRun:
    """One durable run as the database knows it (`DurableAgent.runs`)."""

    run_id: str
    """The run's id (its DBOS workflow id)."""
    status: DurableRunStatus
    """Where the run is."""
    created_at: float | None
    """When the run started, in seconds since the Unix epoch."""
    updated_at: float | None
    """When its status last changed, in seconds since the Unix epoch."""
    executor_id: str | None
    """The worker that runs (or last ran) it: its `DurableAgent.executor_id`."""
    version: str | None
    """The `DurableAgent.version` it started under; only a worker of that version resumes it."""
    approvals: tuple[ToolCall, ...] = ()
    """The tool calls that wait for an answer (status ``awaiting_approval``)."""


class DurableAgent(Generic[OutputT]):
    """An `Agent` whose runs are DBOS workflows: a run survives a crash and resumes.

    Every model call and every tool call of a run is a step whose outcome the database keeps
    once it is done. When the process dies, the next process that enters ``async with`` on a
    durable agent of the same `name`, `executor_id` and `version` (and the same database)
    resumes the run: finished model calls are not sent again, finished tool calls are not run
    again, and the call in flight at the crash runs again (at least once: a tool should pass
    ``ctx.idempotency_key`` to what it changes). The result, its usage and cost are those of a
    run that was never interrupted.

    Example:
        ```python
        durable = DurableAgent(agent, name="support-bot", database_url="sqlite:///runs.db")
        async with durable:  # resumes the runs a crash left pending
            result = await durable.run("Refund order 1234", run_id="order-1234")
        ```

    DBOS is one per process: one durable agent at a time may be entered.
    """

    def __init__(
        self,
        agent: Agent[Any, OutputT],
        *,
        name: str,
        database_url: str | None = None,
        executor_id: str | None = None,
        version: str | None = None,
        approval_timeout: float | None = None,
        takeover_after: float | None = 30.0,
        max_model_calls: int | None = None,
        model_calls_per_minute: int | None = None,
    ) -> None:
        """Make an agent's runs durable.

        Args:
            agent: The agent; its tools and client serve every run, resumed ones too.
            name: The application's name (3 to 256 of ``a-z``, ``0-9``, ``-`` and ``_``): its
                runs are kept under it, and only an agent of this name resumes them.
            database_url: Where the runs are kept: ``sqlite:///path/to/runs.sqlite`` (the
                default: ``<name>.sqlite`` in the current directory). Nothing else is
                contacted: no DBOS Conductor, no telemetry.
            executor_id: Which worker this is (default: `name`): a pending run is resumed
                by a worker of the same id, when it starts. Give each of several workers
                sharing one database its own id.
            version: The version of the agent's code (default: ``<name>@glassagent-<version>``;
                it must differ between agents of different names on one database):
                only a worker of the version a run started under resumes it. Change it when a
                change of the agent (tools, instructions, model) would change its runs.
            approval_timeout: How long a run waits for the answers to calls that need
                approval, in seconds (default: no limit); the calls still waiting then are
                declined. The wait is kept in the database: it goes on across restarts.
            takeover_after: How long, in seconds (at least 1; default 30), another worker
                of this `name` and `version` on the same database may be silent (and as long
                as its own `takeover_after`) before this one takes over its pending runs.
                Each worker writes a heartbeat row in the table
                ``glassagent_durable_workers`` every third of it; one that left ``async
                with`` is gone at once. `None`: never take over (this worker still beats,
                and counts as alive for 30 seconds after each beat).
            max_model_calls: At most this many model calls at once, across every worker of
                this `name` on the database (default: no cap). Each model call then goes
                through a durable queue of the client's provider,
                ``glassagent-models-<name>-<provider>``, and whichever worker of this `name`
                and `version` dequeues it runs it. Turning the queue on or off changes the
                runs' steps: give the agent a new `version` when runs are pending.
            model_calls_per_minute: At most this many model calls start in any 60 seconds,
                across every worker (default: no limit); through the same queue.

        Raises:
            UserError: For an `agent` that is not an `Agent`, a `name` DBOS cannot take,
                an `approval_timeout` that is not a positive number, a `takeover_after`
                that is not None or at least 1 second, a `max_model_calls` or
                `model_calls_per_minute` that is not None or a whole number of at least 1,
                a tool with an `Approver` (its answers are not kept: answer with
                `approve` and `deny`), or an agent with `handoffs`.
        """
        if not isinstance(agent, Agent):
            raise UserError(f"`agent` must be an Agent, got {type(agent).__name__}.")
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise UserError(
                f"`name` must be 3 to 256 lowercase letters, digits, '-' or '_', not {name!r}."
            )
        if agent.handoffs:
            raise UserError(
                "A durable agent cannot hand off: the other agent's model calls would not be "
                "checkpointed, so a resumed run could not replay them. Give it the other "
                "agent as a tool (`as_tool`) instead."
            )
        approvers = [tool.name for tool in agent.tools if tool.approver is not None]
        if approvers:
            raise UserError(
                f"A DurableAgent cannot use the approvers of {', '.join(approvers)}: their "
                "answers are not kept. Answer with DurableAgent.approve and deny instead."
            )
        if approval_timeout is not None and (
            isinstance(approval_timeout, bool)
            or not isinstance(approval_timeout, (int, float))
            or not approval_timeout > 0
        ):
            raise UserError(
                "`approval_timeout` must be a positive number of seconds, not "
                f"{approval_timeout!r}."
            )
        self.agent: Agent[Any, OutputT] = agent
        """The agent whose runs are durable."""
        self.name: str = name
        """The application's name: runs are kept and resumed under it."""
        self.database_url: str = database_url or f"sqlite:///{os.path.abspath(name)}.sqlite"
        """Where the runs are kept."""
        self.executor_id: str = executor_id or name
        """Which worker this is: pending runs of this id resume when it starts."""
        self.version: str = version or f"{name}@glassagent-{__version__}"
        """The version of the agent's code: runs resume only under the one they started in."""
        self.approval_timeout: float | None = approval_timeout
        """How long a run waits for approval answers, in seconds (`None`: no limit)."""
        self.takeover_after: float | None = check_takeover_after(takeover_after)
        """How long another worker may be silent before its pending runs are taken over."""
        self._workers = Workers(
            self.database_url,
            name=name,
            executor_id=self.executor_id,
            version=self.version,
            takeover_after=self.takeover_after,
        )
        self._durable = Durable(agent, approval_timeout)  # what the workflow finds by name
        self.max_model_calls: int | None = check_calls("max_model_calls", max_model_calls)
        """At most this many model calls at once, across all workers (`None`: no cap)."""
        self.model_calls_per_minute: int | None = check_calls(
            "model_calls_per_minute", model_calls_per_minute
        )
        """At most this many model calls start per minute, across all workers."""
        if max_model_calls is not None or model_calls_per_minute is not None:
            self._durable.model_queue = ModelQueue(
                name,
                queue_name(name, agent.client.provider_name),
                self.max_model_calls,
                self.model_calls_per_minute,
            )
        self._loop_executor: ThreadPoolExecutor | None = None  # the loop's, before DBOS's
        self._stopping = False  # leaving `async with`: runs still going are stopped
        self._waiters: set[asyncio.Future[Any]] = set()  # awaited runs and follows
        self._open = False

    def _config(self) -> DBOSConfig:
        from dbos import DBOSPortableJSONSerializer

        return {
            "name": self.name,
            "system_database_url": self.database_url,
            "application_version": self.version,
            "executor_id": self.executor_id,
            "enable_otlp": False,
            "log_level": "WARNING",
            "serializer": DBOSPortableJSONSerializer(),  # JSON rows, never pickles
            # SQLite has no notifications: how soon a waiting run sees an answer
            "notification_listener_polling_interval_sec": POLL_SECONDS,
        }

    async def __aenter__(self) -> Self:
        """Start DBOS on the database; the runs a crash left pending resume in the background.

        Raises:
            ConfigurationError: When a durable agent (or DBOS itself) is already running in
                this process, ``DBOS__CLOUD`` is set, or DBOS (or the workers' heartbeat
                table, or the model calls' queue) cannot open the database.
        """
        import dbos._dbos

        if AGENTS:
            running = next(iter(AGENTS))
            raise ConfigurationError(
                f"The durable agent {running!r} is running in this process: DBOS runs one "
                "application per process. Leave its `async with` first."
            )
        if dbos._dbos._dbos_global_instance is not None:
            raise ConfigurationError("DBOS is already configured in this process.")
        if os.environ.get("DBOS__CLOUD") == "true":
            raise ConfigurationError("DBOS__CLOUD is set: durable agents run without DBOS Cloud.")
        register()  # before launch, which resumes pending runs
        self._stopping = self._durable.stopping = False
        AGENTS[self.name] = self._durable
        loop = asyncio.get_running_loop()
        self._loop_executor = getattr(loop, "_default_executor", None)
        try:
            dbos.DBOS(config=self._config())
            dbos.DBOS.launch()  # on this loop: resumed runs run on it too
        except Exception as exc:
            self._close()
            url = self.database_url
            detail = masked(f"{type(exc).__name__}: {exc}", url)
            raise ConfigurationError(f"DBOS could not start on {shown(url)}: {detail}") from None
        except BaseException:
            self._close()
            raise
        self._open = True
        try:  # this worker's heartbeat, and its takeover of gone workers' runs
            if self._durable.model_queue is not None:  # the queue of the model calls
                await self._durable.model_queue.register()
            await self._workers.start()
        except BaseException:
            await self.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop DBOS; runs still going stop too, and stay pending to resume next time.

        This worker's heartbeat row is deleted last: a live worker sharing the database
        takes its pending runs over at once (see `takeover_after`).
        """
        await self._workers.stop()  # before DBOS goes: it lists and resumes runs
        self._stopping = True
        self._durable.stopping = True  # tools cut short now keep no outcome
        running = [*self._durable.running, *self._waiters]  # runs here, waits for others
        for task in running:
            task.cancel()
        if running:
            await asyncio.wait(running)
        # DBOS made its thread pool the loop's default, and is about to shut it down
        executor, self._loop_executor = self._loop_executor, None
        asyncio.get_running_loop().set_default_executor(executor or ThreadPoolExecutor())
        try:
            await asyncio.to_thread(self._close)
        finally:
            self._stopping = False  # a later cancellation is the caller's own again
            await self._workers.leave()  # gone: its pending runs are free to take over

    def _close(self) -> None:
        from dbos import DBOS

        self._open = False
        try:
            DBOS.destroy()
        finally:
            AGENTS.pop(self.name, None)

    def _check_open(self) -> None:
        if not self._open:
            raise UserError("Use the durable agent inside `async with durable:`.")

    def run(
        self, prompt: str, *, run_id: str | None = None, history: History | None = None
    ) -> DurableAgentRun[OutputT]:
        """Run the agent durably, as the workflow `run_id`.

        ``await durable.run(...)`` returns the `RunResult`; ``async for event in
        durable.run(...)`` streams the run's events first (then awaiting the same object
        returns its result). A run id names one run: running an id again (here or in another
        process) does not start a new run, it returns that run's result.

        Args:
            prompt: The user's message.
            run_id: The run's id (default: a new random one); the tools' ``ctx.run_id``.
            history: The conversation so far: the thread at its current node is the context.
                It is stored with the run as its standard dict; the run does not change it.

        Raises:
            GlassAgentError: When the run fails (with ``.result`` set), as `Agent.run` does:
                on awaiting it.
            UserError: Outside ``async with``, or for arguments of the wrong type.
        """
        from glassagent._history.tree import History

        self._check_open()
        if not isinstance(prompt, str):
            raise UserError(f"`prompt` must be a string, got {type(prompt).__name__}.")
        if history is not None and not isinstance(history, History):
            raise UserError(f"`history` must be a History, got {type(history).__name__}.")
        if run_id is not None and (not isinstance(run_id, str) or not run_id):
            raise UserError(f"`run_id` must be a non-empty string, got {run_id!r}.")
        document = history.to_dict() if history is not None else None
        return self._start(prompt, run_id or uuid.uuid4().hex, document, None)

    def _start(
        self,
        prompt: str,
        run_id: str,
        history: dict[str, Any] | None,
        options: dict[str, Any] | None,
    ) -> DurableAgentRun[OutputT]:
        """The run `run_id` (started, or the one of that id); `options` go to the workflow."""
        self._check_open()

        async def outcome() -> RunResult[OutputT]:
            from dbos import DBOS, SetWorkflowID

            handle: WorkflowHandleAsync[dict[str, Any]]
            with SetWorkflowID(run_id):
                handle = await DBOS.start_workflow_async(
                    register(), self.name, run_id, prompt, history, options
                )
            self._own(run_id, await handle.get_status())  # not another agent's run of that id
            return await self._outcome(run_id, handle.get_result())

        return DurableAgentRun(run_id, self._durable.feeds, outcome, self._waiters)

    def _hooks(self, build: Build, finish: Finish | None) -> None:
        """Make each run started with options build its agent, and keep its result (`Durable`).

        Set before ``async with``, so the runs it resumes at launch find them.
        """
        self._durable.build = build
        self._durable.finish = finish

    async def _options(self, run_id: str) -> dict[str, Any] | None:
        """The options the run `run_id` of this agent was started with (`{}`: none).

        `None` when no run of this agent has that id. Inside ``async with``.
        """
        from dbos import DBOS

        self._check_open()
        found = await DBOS.list_workflows_async(workflow_ids=[run_id], load_output=False)
        if not found or found[0].name != WORKFLOW:
            return None
        inputs: Any = found[0].input
        if isinstance(inputs, dict):  # the portable serializer's form
            args, kwargs = list(inputs.get("args") or ()), dict(inputs.get("kwargs") or {})
        else:
            args, kwargs = list(getattr(inputs, "args", ())), dict(getattr(inputs, "kwargs", {}))
        options = args[4] if len(args) > 4 else kwargs.get("options")
        return options if isinstance(options, dict) else {}

    async def _waiting(self, run_id: str) -> tuple[ToolCall, ...]:
        """The calls the run `run_id` waits on now, read through this process's DBOS."""
        from dbos import DBOS

        self._check_open()
        return read_published(await DBOS.get_event_async(run_id, APPROVALS, timeout_seconds=0))[1]

    def follow(self, run_id: str) -> DurableAgentRun[OutputT]:
        """Follow the run `run_id`, wherever it runs: await it for its result.

        Also a run this process resumed after a crash, or one another worker runs on the
        same database. Iterated, it streams the events of a run this process executes, from
        its first (those a resumed run replays are marked ``replayed``).

        Raises:
            GlassAgentError: On awaiting, when the run failed (with ``.result`` set).
            UserError: Outside ``async with``; on awaiting, when no run of this agent has
                that id.
        """
        self._check_open()
        waited = partial(self._waited, run_id)
        return DurableAgentRun(run_id, self._durable.feeds, waited, self._waiters)

    async def result(self, run_id: str) -> RunResult[OutputT]:
        """Wait for the run `run_id` to end, wherever it runs; return its result.

        The same as ``await durable.follow(run_id)``.

        Raises:
            GlassAgentError: When the run failed (with ``.result`` set), as `Agent.run` does.
            UserError: Outside ``async with``, or when no run of this agent has that id.
        """
        return await self.follow(run_id)

    async def _waited(self, run_id: str) -> RunResult[OutputT]:
        from dbos import DBOS
        from dbos._error import DBOSNonExistentWorkflowError

        handle: WorkflowHandleAsync[dict[str, Any]]
        try:
            handle = await DBOS.retrieve_workflow_async(run_id)
            status = await handle.get_status()
        except DBOSNonExistentWorkflowError:
            status = None
        if status is None or status.name != WORKFLOW:
            raise UserError(f"No durable run has the id {run_id!r}.")
        self._own(run_id, status)
        return await self._outcome(run_id, handle.get_result(polling_interval_sec=POLL_SECONDS))

    def _own(self, run_id: str, status: WorkflowStatus) -> None:
        """Refuse the run of another agent's name that has this id (in a shared database)."""
        owner = status.application_name
        if owner is not None and owner != self.name:
            raise UserError(
                f"The run id {run_id!r} is a run of the durable agent {owner!r}, not of "
                f"{self.name!r}: give each run an id of its own."
            )

    async def _outcome(self, run_id: str, outcome: Awaitable[Any]) -> RunResult[OutputT]:
        from dbos._error import DBOSAwaitedWorkflowCancelledError

        spec, redact = self.agent._output, self.agent.redact
        try:
            data = await outcome
        except asyncio.CancelledError:
            if not self._stopping:
                raise
            raise self._stopped(run_id) from None
        except DBOSAwaitedWorkflowCancelledError:
            message = f"The durable run {run_id!r} was cancelled."
            raise RunAborted(message, reason="cancelled") from None
        except Exception as exc:
            failed = getattr(exc, "data", None)  # `RunFailed`, live or read back as JSON
            if isinstance(failed, dict) and isinstance(failed.get("error"), dict):
                error = codec.error_from(failed["error"])
                if failed.get("result") is not None:
                    error.result = codec.result_from(failed["result"], spec, redact)
                raise error from None
            if self._stopping:
                raise self._stopped(run_id) from exc
            raise RunError(
                f"The durable run {run_id!r} failed: {type(exc).__name__}: {exc}"
            ) from exc
        result: RunResult[OutputT] = codec.result_from(data, spec, redact)
        return result

    def _stopped(self, run_id: str) -> RunAborted:
        return RunAborted(
            f"The durable agent {self.name!r} stopped during the run {run_id!r}, which stays "
            "pending: it resumes when the agent starts again.",
            reason="the durable agent stopped",
        )

    async def runs(
        self, *, status: DurableRunStatus | None = None, limit: int | None = None
    ) -> list[DurableRun]:
        """The runs of this agent's name in the database, oldest first.

        Works without ``async with`` too (it only reads the database).

        Args:
            status: Only the runs with this status.
            limit: At most this many (the oldest).

        Raises:
            ConfigurationError: When the database cannot be read.
            UserError: For a `status` that is none of `DurableRunStatus`.
        """
        if status is not None and status not in get_args(DurableRunStatus):
            known = ", ".join(get_args(DurableRunStatus))
            raise UserError(f"`status` must be one of {known}, not {status!r}.")
        asked = "pending" if status == "awaiting_approval" else status
        if not stored(self.database_url):
            return []
        async with connected(self.database_url, self.name) as client:
            found = await client.list_workflows_async(
                name=WORKFLOW,
                application_name=self.name,
                status=asked.upper() if asked is not None else None,
                limit=limit,
                load_input=False,
                load_output=False,
            )
            runs = [_run_of(workflow) for workflow in found]
            for i, run in enumerate(runs):
                if run.status == "pending" and (calls := await waiting(client, run.run_id)):
                    runs[i] = replace(run, status="awaiting_approval", approvals=calls)
        if status is None:
            return runs
        return [run for run in runs if run.status == status]

    async def approvals(self, run_id: str) -> tuple[ToolCall, ...]:
        """The tool calls of the run `run_id` that wait for an answer now.

        Works from any process that reaches the database, without ``async with``.

        Raises:
            ConfigurationError: When the database cannot be read.
            UserError: For a `run_id` that is not a non-empty string.
        """
        _check_ids(run_id=run_id)
        if not stored(self.database_url):
            return ()
        async with connected(self.database_url, self.name) as client:
            return await waiting(client, run_id)

    async def approve(self, run_id: str, call_id: str) -> bool:
        """Approve a call that the run `run_id` waits on: the run goes on with it.

        Works from any process that reaches the database, without ``async with``: the answer
        is kept until the run reads it, also when its worker is down at the time.

        Args:
            run_id: The run's id.
            call_id: The call's id (``event.call.id`` of its ``approval_required`` event).

        Returns:
            Whether the call was waiting (`False`: an unknown id, or answered already).

        Raises:
            ConfigurationError: When the database cannot be reached.
            UserError: For ids that are not non-empty strings.
        """
        return await self._answer(run_id, call_id, True, None)

    async def deny(self, run_id: str, call_id: str, reason: str | None = None) -> bool:
        """Decline a call that the run `run_id` waits on: it never runs.

        The model gets an error result saying the user declined the call, with `reason`
        (as `AgentRun.deny`). Works from any process, as `approve`.

        Returns:
            Whether the call was waiting (`False`: an unknown id, or answered already).

        Raises:
            ConfigurationError: When the database cannot be reached.
            UserError: For ids that are not non-empty strings, or a `reason` not a string.
        """
        if reason is not None and not isinstance(reason, str):
            raise UserError(f"`reason` must be a string, got {type(reason).__name__}.")
        return await self._answer(run_id, call_id, False, reason)

    async def _answer(self, run_id: str, call_id: str, approved: bool, reason: str | None) -> bool:
        _check_ids(run_id=run_id, call_id=call_id)
        if not stored(self.database_url):
            return False
        async with connected(self.database_url, self.name) as client:
            return await send_answer(client, run_id, call_id, approved, reason)

    def __repr__(self) -> str:
        return f"DurableAgent(name={self.name!r}, database_url={shown(self.database_url)!r})"


def _run_of(workflow: WorkflowStatus) -> DurableRun:
    def seconds(ms: int | None) -> float | None:
        return ms / 1000 if ms is not None else None

    return DurableRun(
        run_id=workflow.workflow_id,
        status=workflow.status.lower(),  # type: ignore[arg-type]  # DBOS's status names
        created_at=seconds(workflow.created_at),
        updated_at=seconds(workflow.updated_at),
        executor_id=workflow.executor_id,
        version=workflow.app_version,
    )


def _check_ids(**ids: object) -> None:
    """Refuse ids that are not non-empty strings (`UserError`)."""
    for name, value in ids.items():
        if not isinstance(value, str) or not value:
            raise UserError(f"`{name}` must be a non-empty string, got {value!r}.")
