"""`DurableAgent`: an agent whose runs survive a crash of their process, on DBOS."""

from __future__ import annotations

import asyncio
import os
import re
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, Literal
from urllib.parse import urlsplit, urlunsplit

from glassagent._agent.agent import Agent
from glassagent._core.errors import ConfigurationError, RunAborted, RunError, UserError
from glassagent._core.result import OutputT, RunResult
from glassagent._durable import codec
from glassagent._durable.workflow import AGENTS, WORKFLOW, Durable, register
from glassagent._version import __version__

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from dbos import DBOSConfig, WorkflowHandleAsync, WorkflowStatus
    from typing_extensions import Self

    from glassagent._history.tree import History

DurableRunStatus = Literal[
    "pending",
    "enqueued",
    "delayed",
    "success",
    "error",
    "cancelled",
    "max_recovery_attempts_exceeded",
]
"""Where a durable run is: ``pending`` while a process runs it (or until one resumes it after
a crash), ``success`` or ``error`` once it ended (`DurableAgent.result` gives the result or
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
            version: The version of the agent's code (default: ``glassagent-<version>``):
                only a worker of the version a run started under resumes it. Change it when a
                change of the agent (tools, instructions, model) would change its runs.

        Raises:
            UserError: For an `agent` that is not an `Agent`, a `name` DBOS cannot take,
                or an agent with calls that need approval (not durable yet).
        """
        if not isinstance(agent, Agent):
            raise UserError(f"`agent` must be an Agent, got {type(agent).__name__}.")
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise UserError(
                f"`name` must be 3 to 256 lowercase letters, digits, '-' or '_', not {name!r}."
            )
        if agent.requires_approval is not False or any(
            tool.requires_approval is not False or tool.approver is not None for tool in agent.tools
        ):
            raise UserError(
                "A DurableAgent cannot run tool calls that need approval yet: the agent's "
                "requires_approval and its tools' must be False."
            )
        self.agent: Agent[Any, OutputT] = agent
        """The agent whose runs are durable."""
        self.name: str = name
        """The application's name: runs are kept and resumed under it."""
        self.database_url: str = database_url or f"sqlite:///{os.path.abspath(name)}.sqlite"
        """Where the runs are kept."""
        self.executor_id: str = executor_id or name
        """Which worker this is: pending runs of this id resume when it starts."""
        self.version: str = version or f"glassagent-{__version__}"
        """The version of the agent's code: runs resume only under the one they started in."""
        self._durable = Durable(agent)  # what the workflow finds by name
        self._loop_executor: ThreadPoolExecutor | None = None  # the loop's, before DBOS's
        self._stopping = False  # leaving `async with`: runs still going are stopped
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
        }

    async def __aenter__(self) -> Self:
        """Start DBOS on the database; the runs a crash left pending resume in the background.

        Raises:
            ConfigurationError: When a durable agent (or DBOS itself) is already running in
                this process, ``DBOS__CLOUD`` is set, or DBOS cannot open the database.
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
        self._stopping = False
        AGENTS[self.name] = self._durable
        loop = asyncio.get_running_loop()
        self._loop_executor = getattr(loop, "_default_executor", None)
        try:
            dbos.DBOS(config=self._config())
            dbos.DBOS.launch()  # on this loop: resumed runs run on it too
        except Exception as exc:
            self._close()
            url = self.database_url
            detail = _masked(f"{type(exc).__name__}: {exc}", url)
            raise ConfigurationError(f"DBOS could not start on {_shown(url)}: {detail}") from None
        except BaseException:
            self._close()
            raise
        self._open = True
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop DBOS; runs still going stop too, and stay pending to resume next time."""
        self._stopping = True
        running = list(self._durable.running)
        for task in running:
            task.cancel()
        if running:
            await asyncio.wait(running)
        # DBOS made its thread pool the loop's default, and is about to shut it down
        executor, self._loop_executor = self._loop_executor, None
        asyncio.get_running_loop().set_default_executor(executor or ThreadPoolExecutor())
        await asyncio.to_thread(self._close)

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

    async def run(
        self, prompt: str, *, run_id: str | None = None, history: History | None = None
    ) -> RunResult[OutputT]:
        """Run the agent durably, as the workflow `run_id`; return its result.

        A run id names one run: running an id again (here or in another process) does not
        start a new run, it returns that run's result.

        Args:
            prompt: The user's message.
            run_id: The run's id (default: a new random one); the tools' ``ctx.run_id``.
            history: The conversation so far: the thread at its current node is the context.
                It is stored with the run as its standard dict; the run does not change it.

        Raises:
            GlassAgentError: When the run fails (with ``.result`` set), as `Agent.run` does.
            UserError: Outside ``async with``, or for arguments of the wrong type.
        """
        from dbos import DBOS, SetWorkflowID

        from glassagent._history.tree import History

        self._check_open()
        if not isinstance(prompt, str):
            raise UserError(f"`prompt` must be a string, got {type(prompt).__name__}.")
        if history is not None and not isinstance(history, History):
            raise UserError(f"`history` must be a History, got {type(history).__name__}.")
        if run_id is not None and (not isinstance(run_id, str) or not run_id):
            raise UserError(f"`run_id` must be a non-empty string, got {run_id!r}.")
        run_id = run_id or uuid.uuid4().hex
        document = history.to_dict() if history is not None else None
        handle: WorkflowHandleAsync[dict[str, Any]]
        with SetWorkflowID(run_id):
            handle = await DBOS.start_workflow_async(
                register(), self.name, run_id, prompt, document
            )
        return await self._outcome(run_id, handle.get_result())

    async def result(self, run_id: str) -> RunResult[OutputT]:
        """Wait for the run `run_id` to end, wherever it runs; return its result.

        Also a run this process resumed after a crash, or one another worker runs on the
        same database.

        Raises:
            GlassAgentError: When the run failed (with ``.result`` set), as `Agent.run` does.
            UserError: Outside ``async with``, or when no run of this agent has that id.
        """
        from dbos import DBOS
        from dbos._error import DBOSNonExistentWorkflowError

        self._check_open()
        handle: WorkflowHandleAsync[dict[str, Any]]
        try:
            handle = await DBOS.retrieve_workflow_async(run_id)
            status = await handle.get_status()
        except DBOSNonExistentWorkflowError:
            status = None
        if status is None or status.name != WORKFLOW:
            raise UserError(f"No durable run has the id {run_id!r}.")
        return await self._outcome(run_id, handle.get_result(polling_interval_sec=POLL_SECONDS))

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

        Args:
            status: Only the runs with this status.
            limit: At most this many (the oldest).

        Raises:
            UserError: Outside ``async with``.
        """
        from dbos import DBOS

        self._check_open()
        found = await DBOS.list_workflows_async(
            name=WORKFLOW,
            application_name=self.name,
            status=status.upper() if status is not None else None,
            limit=limit,
            load_input=False,
            load_output=False,
        )
        return [_run_of(workflow) for workflow in found]

    def __repr__(self) -> str:
        return f"DurableAgent(name={self.name!r}, database_url={_shown(self.database_url)!r})"


def _shown(url: str) -> str:
    """`url` with its password, if any, masked (for messages and reprs)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def _masked(text: str, url: str) -> str:
    """`text` with the password of `url`, if any, masked."""
    password = urlsplit(url).password
    return text.replace(password, "***") if password else text


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
