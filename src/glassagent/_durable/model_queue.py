"""Model calls through a durable queue: a cap on the calls at once (and per minute), shared.

With ``DurableAgent(max_model_calls=..., model_calls_per_minute=...)``, each model call of a
run is not a step of the run but a small workflow of its own, enqueued on a DBOS queue in the
runs' database: ``glassagent-models-<name>-<provider>``, whose ``global_concurrency`` and
``limiter`` every worker of that name shares. Whichever worker (of the name and version)
dequeues a call runs it, with `model_call_body` as a direct step does, and the run reads its
result: the same JSON a direct step returns. The call is the step `QUEUED_STEP` enqueued
directly (DBOS wraps it in the workflow `QUEUED_WORKFLOW`); its id is the run's id and the
call's place in it, so a resumed run reads a finished call back and sends nothing again.

Its arguments are stored, so they are plain JSON: the agent's name, the request as
`codec.request_dict`, and a token. The deltas reach the run live:

- when this process dequeues the call, through the run's `Channel`, found by the token (the
  request object too: nothing is read back from JSON);
- when another worker does, through the DBOS stream `STREAM` of the call's workflow. Its
  values are batches of deltas (those that arrive while a write is under way go together),
  each tagged with the attempt that wrote it. A call whose worker died mid-call runs again
  from the start when the call is recovered, as a new attempt: the run then follows the
  newest attempt and drops the values an older one still writes. The deltas already passed
  on stay in the run's events (as they were shown live); the answer, the messages and the
  result are those of the attempt that finished.

A run that resumes after a crash reads the calls it had enqueued back without following
their streams: their text and thinking come whole, as a replayed step's do.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import sys
import uuid
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from glassagent._core.errors import ConfigurationError, RunError, UserError
from glassagent._durable import codec
from glassagent._durable.steps import Channel, model_call_body

if TYPE_CHECKING:
    from dbos import WorkflowHandleAsync

    from glassagent._agent.agent import Agent
    from glassagent._core.messages import StreamPart
    from glassagent._core.request import ModelRequest

QUEUED_STEP = "glassagent.durable.queued_model_call"
"""The DBOS name of a queued model call's step (stored with every call: never change it)."""
QUEUED_WORKFLOW = "<temp>." + QUEUED_STEP
"""The name DBOS gives the workflow that wraps the step when it is enqueued."""
STREAM = "glassagent.deltas"
"""The key of a queued call's stream of deltas (for the run, when another worker runs it)."""
POLL_SECONDS = 0.05
"""How often a worker looks for calls to start, and a run for the deltas and the result."""
DONE_POLL_SECONDS = 0.005
"""How often a run looks for the result of a call that ran in its process and ended."""
PREFIX = "glassagent-models-"
"""The start of the name of every queue of model calls (`queue_name`)."""

logger = logging.getLogger("glassagent.durable")

QueuedCall = Callable[[str, dict[str, Any], str], Coroutine[Any, Any, dict[str, Any]]]


def check_calls(name: str, value: object) -> int | None:
    """`value` as a ``max_model_calls`` or ``model_calls_per_minute``: None or an int >= 1.

    Raises:
        UserError: For anything else.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UserError(f"`{name}` must be None or a whole number of at least 1, not {value!r}.")
    return value


def queue_name(name: str, provider: str) -> str:
    """The queue of the durable agent `name`'s calls to `provider`."""
    provider = re.sub(r"[^a-z0-9_-]+", "-", provider.lower()).strip("-") or "model"
    return f"{PREFIX}{name}-{provider}"


@dataclass
class _Local:
    """A run of this process waiting on a queued call: what the call needs if it runs here."""

    channel: Channel
    request: ModelRequest
    loop: asyncio.AbstractEventLoop
    done: asyncio.Event = field(default_factory=asyncio.Event)  # the call ran here, and ended


_LOCAL: dict[str, _Local] = {}
"""The runs of this process waiting on a queued call, by the call's token."""


@dataclass(frozen=True)
class ModelQueue:
    """The queue of one durable agent's model calls, and its limits."""

    name: str
    """The durable agent's name: the queued call finds the agent's client by it."""
    queue: str
    """The DBOS queue's name (`queue_name`)."""
    max_calls: int | None = None
    """At most this many calls at once, across all workers (`None`: no cap)."""
    per_minute: int | None = None
    """At most this many calls start in any 60 seconds (`None`: no limit)."""

    async def register(self) -> None:
        """Register the queue and its limits in the database (after DBOS launched).

        Raises:
            ConfigurationError: When DBOS refuses the queue.
        """
        from dbos import DBOS

        limiter = {"limit": self.per_minute, "period": 60.0} if self.per_minute else None
        try:
            _claims_one_at_a_time()
            await DBOS.register_queue_async(
                self.queue,
                global_concurrency=self.max_calls,
                limiter=limiter,  # type: ignore[arg-type]  # DBOS's QueueRateLimit dict
                polling_interval_sec=POLL_SECONDS,
            )
        except Exception as exc:
            raise ConfigurationError(
                f"The queue {self.queue!r} of the model calls could not be registered: "
                f"{type(exc).__name__}: {exc}"
            ) from exc

    async def call(
        self, request: ModelRequest, channel: Channel, *, replaying: bool
    ) -> dict[str, Any]:
        """Enqueue one model call, stream its deltas into `channel`; its result as JSON.

        Called in the run's workflow: the enqueue and the result are recorded in it. A
        `replaying` run (the call was enqueued before a crash) does not follow the deltas.

        Raises:
            RunError: When the queued call failed other than with a model error (which is in
                the JSON, as a direct step's is).
        """
        from dbos import DBOS

        token = uuid.uuid4().hex
        local = _LOCAL[token] = _Local(channel, request, asyncio.get_running_loop())
        handle: WorkflowHandleAsync[dict[str, Any]]
        try:
            handle = await DBOS.enqueue_workflow_async(
                self.queue, QUEUED.call, self.name, codec.request_dict(request), token
            )
            if not replaying:
                await _followed(handle.workflow_id, local)
            # a call that ran here has ended: its result is being written, soon read
            poll = DONE_POLL_SECONDS if local.done.is_set() else POLL_SECONDS
            try:
                data: dict[str, Any] = await handle.get_result(polling_interval_sec=poll)
            except Exception as exc:
                raise RunError(
                    f"The queued model call {handle.workflow_id!r} failed: "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
            return data
        finally:
            _LOCAL.pop(token, None)


async def _followed(call_id: str, local: _Local) -> None:
    """Pass the call's deltas on until it ends: from its stream, or from this process."""
    reader = _outside_workflow(_forward(call_id, local.channel))  # nothing of it recorded
    here = asyncio.ensure_future(local.done.wait())
    try:
        await asyncio.wait({reader, here}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (reader, here):
            task.cancel()
        await asyncio.wait({reader, here})
    failed = None if reader.cancelled() else reader.exception()
    if failed is not None:  # the deltas are for show: the answer comes with the result
        logger.warning("The deltas of the model call %s could not be read: %s", call_id, failed)


def _outside_workflow(work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
    """A task for `work`, outside the DBOS context of the workflow that starts it."""
    import contextvars

    return contextvars.Context().run(asyncio.ensure_future, work)


class Attempts:
    """Which values of a call's stream the run passes on: the newest attempt's.

    Values come in the order they were written. A new attempt id is a new attempt (the call
    ran again after its worker died); an attempt seen before the newest one is a stale one.
    """

    __slots__ = ("current", "stale")

    def __init__(self) -> None:
        self.current: str | None = None
        self.stale: set[str] = set()

    def accept(self, attempt: str) -> bool:
        """Whether to pass on a value of `attempt`."""
        if attempt == self.current:
            return True
        if attempt in self.stale:
            return False
        if self.current is not None:
            self.stale.add(self.current)
        self.current = attempt
        return True


async def _forward(workflow_id: str, channel: Channel) -> None:
    """Put the deltas another worker streams for the call into `channel`, until it ends."""
    from dbos import DBOS

    attempts = Attempts()
    stream = DBOS.read_stream_async(workflow_id, STREAM, polling_interval_sec=POLL_SECONDS)
    async for value in stream:
        if not isinstance(value, dict) or not attempts.accept(str(value.get("attempt"))):
            continue
        channel.ran = True  # its deltas stream: the answer's text is not repeated whole
        for part in value.get("parts", ()):
            channel.put(codec.part_from(part))


class _Streamed(Channel):
    """A channel that writes the deltas to the call's DBOS stream, for a run elsewhere.

    Writes go one at a time, in order; deltas that arrive meanwhile go in the next write
    (adjacent text, or thinking, joined). Made and fed inside the call's step: its writes
    belong to the step (DBOS appends them; a workflow's own writes would be replayed).
    """

    def __init__(self) -> None:
        super().__init__()
        self.attempt = uuid.uuid4().hex
        self._batch: list[dict[str, Any]] = []
        self._writer: asyncio.Task[None] | None = None
        self._failed = False

    def put(self, part: StreamPart) -> None:
        """Queue a delta for the stream."""
        data = codec.part_dict(part)
        last = self._batch[-1] if self._batch else None
        if last is not None and last["kind"] == data["kind"] and "text" in data:
            last["text"] += data["text"]
        else:
            self._batch.append(data)
        if self._writer is None or self._writer.done():
            self._writer = asyncio.ensure_future(self._write())

    async def _write(self) -> None:
        from dbos import DBOS

        while self._batch:
            parts, self._batch = self._batch, []
            if self._failed:
                continue
            try:
                await DBOS.write_stream_async(STREAM, {"attempt": self.attempt, "parts": parts})
            except Exception as exc:  # the deltas are for show: the answer is in the result
                self._failed = True
                logger.warning("A queued model call could not stream its deltas: %s", exc)

    async def flush(self) -> None:
        """Wait until every delta is written."""
        if self._writer is not None:
            await self._writer

    def stop(self) -> None:
        """Stop writing (the step ends): no write may outlive it."""
        if self._writer is not None:
            self._writer.cancel()


async def queued_call_body(name: str, request: dict[str, Any], token: str) -> dict[str, Any]:
    """Run one queued model call of the durable agent `name`; its result as JSON.

    In the worker that enqueued it, the deltas go to the waiting run's channel; in another,
    to the call's stream (`STREAM`). The task is one of the agent's running ones: leaving
    ``async with`` stops it, and puts the call back on its queue, for a worker still there
    (or the next one to start) to run from the start.

    Raises:
        RunError: When this process has no durable agent of that name.
    """
    from dbos import DBOS

    call_id = DBOS.workflow_id
    durable = QUEUED.agents.get(name)
    if durable is None:
        raise RunError(f"No durable agent named {name!r} runs in this process.")
    local = _LOCAL.get(token)
    streamed: _Streamed | None = None
    if local is not None and local.loop is asyncio.get_running_loop():
        channel, model_request = local.channel, local.request
    else:
        local = None
        channel = streamed = _Streamed()
        model_request = codec.request_from(request)
    task = asyncio.current_task()
    if task is not None:
        durable.running.add(task)
    try:
        data = await model_call_body(durable.agent.client, model_request, channel)
        if streamed is not None:
            await streamed.flush()
        return data
    except asyncio.CancelledError:  # this worker leaves: another may run the call
        if call_id is not None:
            await _outside_workflow(_requeue(call_id))
        raise
    finally:
        if local is not None:
            local.done.set()
        if streamed is not None:
            streamed.stop()
        if task is not None:
            durable.running.discard(task)


async def _requeue(call_id: str) -> None:
    """Put the call `call_id`, stopped while it ran here, back on its queue."""
    from dbos import DBOS

    try:
        status = await DBOS.get_workflow_status_async(call_id)
        if status is not None and status.status == "PENDING" and status.queue_name:
            await DBOS.resume_workflow_async(call_id, queue_name=status.queue_name)
    except Exception as exc:  # it stays pending: it runs when this worker starts again
        logger.warning("The model call %s could not go back on its queue: %s", call_id, exc)


def _claims_one_at_a_time() -> None:
    """On SQLite, let one process at a time claim model calls from this app's queues.

    DBOS (3.4) counts a queue's running calls outside the transaction that claims more, on
    SQLite, so two processes may claim the same free places. A lock on a file beside the
    database (``<database>.glassagent-queue.lock``) around each claim keeps the count
    right; PostgreSQL needs none. Without ``fcntl`` (Windows) claims are not serialized.
    """
    if sys.platform == "win32":
        return
    import fcntl

    from dbos._dbos import _get_dbos_instance

    sys_db: Any = _get_dbos_instance()._sys_db
    engine = sys_db.engine
    claim = sys_db.start_queued_workflows
    if engine.dialect.name != "sqlite" or getattr(claim, "glassagent_alone", False):
        return
    database = engine.url.database
    if not database or database == ":memory:":
        return
    lock = os.path.realpath(database) + ".glassagent-queue.lock"

    def claim_alone(queue: Any, *args: Any, **kwargs: Any) -> Any:
        if not str(queue.name).startswith(PREFIX):
            return claim(queue, *args, **kwargs)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            return claim(queue, *args, **kwargs)
        finally:
            os.close(fd)  # and the lock with it

    claim_alone.glassagent_alone = True  # type: ignore[attr-defined]
    sys_db.start_queued_workflows = claim_alone


class Host(Protocol):
    """A durable agent as a queued call finds it (`glassagent._durable.workflow.Durable`)."""

    agent: Agent[Any, Any]
    running: set[asyncio.Task[Any]]


@dataclass
class _Queued:
    """The queued call as DBOS registered it (the plain body until then), and its agents."""

    call: QueuedCall
    agents: Mapping[str, Host] = field(default_factory=dict)


QUEUED = _Queued(queued_call_body)
"""The queued call's step; a DBOS step once `register` ran."""


def register(agents: Mapping[str, Host]) -> None:
    """Make the queued call a DBOS step (once per process, before DBOS launches).

    Args:
        agents: The durable agents of this process by name, where a call finds its client.
    """
    from dbos import DBOS

    QUEUED.call = DBOS.step(name=QUEUED_STEP)(queued_call_body)
    QUEUED.agents = agents
