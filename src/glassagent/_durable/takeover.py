"""Several workers on one database: the pending runs of a worker that is gone are taken over.

DBOS resumes a pending run only in a worker of the same executor id, version and name, when
it starts; it has no heartbeat. So each entered durable agent (a worker) keeps a row of its
own in the table `TABLE`, in the same database: its name, executor id and version, and when
it last beat, by the database's clock (so the workers' clocks never matter). It beats every
third of its lease (its ``takeover_after``, or `DEFAULT_LEASE`).

A worker that takes over looks, every beat, for the pending runs of its name and version
(and the workflows they started, such as queued model calls, as DBOS's own recovery does)
whose executor is another one that is gone: its row is older than both the taker's
``takeover_after`` and the worker's own lease, or it has no row (it never beat, or it left
cleanly and deleted it). The taker claims the gone worker in one conditional write (the row's
time becomes now, so the other takers see it alive and hold off), lists that worker's pending
runs again, and resumes each with DBOS's public ``resume_workflow_async``: the run is queued
on DBOS's internal queue, and one live worker of the name and version dequeues it and
resumes it (finished steps are not run again). DBOS fences the old worker, should it still be
alive: its late step writes are refused.

A worker leaving ``async with`` deletes its row: it is gone, so its pending runs (stopped by
the exit) are taken over at once by a live worker; that is what a deploy needs. A worker that
does not take over (``takeover_after=None``) still beats, so its runs are not taken from it.

Like a crash, a takeover is at least once: the step in flight runs again. A worker whose
loop stalls longer than its lease looks gone and has its runs taken (DBOS keeps one outcome);
so does a run listed by a taker that then stalls longer than a lease before resuming it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from typing import TYPE_CHECKING, Any

from glassagent._core.errors import ConfigurationError
from glassagent._durable.urls import masked, shown

if TYPE_CHECKING:
    from collections.abc import Collection

    import sqlalchemy as sa

TABLE = "glassagent_durable_workers"
"""The table of the workers' heartbeats, in the runs' database."""
DEFAULT_LEASE = 30.0
"""How long (seconds) a worker that does not take over counts as alive after its last beat."""
MIN_TAKEOVER_AFTER = 1.0
"""The smallest ``takeover_after`` (seconds): a worker beats three times per lease."""
FORGET_AFTER = 86400.0
"""A row this old (seconds) is deleted when a worker starts (no row and an old row agree)."""
STOP_SECONDS = 5.0
"""How long leaving ``async with`` waits for a beat in progress to end."""

logger = logging.getLogger("glassagent.durable")


def check_takeover_after(value: object) -> float | None:
    """`value` as a ``takeover_after``: None, or seconds (at least `MIN_TAKEOVER_AFTER`).

    Raises:
        UserError: For anything else.
    """
    from glassagent._core.errors import UserError

    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise UserError(f"`takeover_after` must be None or a number of seconds, not {value!r}.")
    if value < MIN_TAKEOVER_AFTER:
        raise UserError(
            f"`takeover_after` must be at least {MIN_TAKEOVER_AFTER:g} seconds, not {value!r}."
        )
    return float(value)


class Workers:
    """One worker's heartbeat in the database, and its takeover of gone workers' runs."""

    def __init__(
        self,
        database_url: str,
        *,
        name: str,
        executor_id: str,
        version: str,
        takeover_after: float | None,
    ) -> None:
        self.database_url = database_url
        self.name = name
        self.executor_id = executor_id
        self.version = version
        self.takeover_after = takeover_after
        self.lease = takeover_after if takeover_after is not None else DEFAULT_LEASE
        """How long this worker counts as alive after a beat (others wait that long, too)."""
        self.taken: list[str] = []
        """The runs this worker resumed for gone workers, oldest first."""
        self._engine: sa.Engine | None = None
        self._table: sa.Table | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    # ---- life --------------------------------------------------------------------------------

    async def start(self) -> None:
        """`open`, then beat (and take over) in the background until `stop`.

        Raises:
            ConfigurationError: When the database refuses (its URL's password masked).
        """
        await self.open()
        self._stop = asyncio.Event()
        self._task = asyncio.create_task(self._serve(), name=f"glassagent-workers-{self.name}")

    async def open(self) -> None:
        """Make the table if missing, forget very old rows, and beat once.

        Raises:
            ConfigurationError: When the database refuses (its URL's password masked).
        """
        try:
            await asyncio.to_thread(self._open)
            await self.beat()
        except Exception as exc:
            await self.leave(delete=False)
            detail = _masked(f"{type(exc).__name__}: {exc}", self.database_url)
            raise ConfigurationError(
                f"The durable agent {self.name!r} could not keep its heartbeat in "
                f"{shown(self.database_url)}: {detail}"
            ) from None

    async def stop(self) -> None:
        """Stop beating and taking over (a beat in progress ends first, briefly)."""
        task, self._task = self._task, None
        if task is None:
            return
        self._stop.set()
        done, _ = await asyncio.wait({task}, timeout=STOP_SECONDS)
        if not done:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def leave(self, *, delete: bool = True) -> None:
        """Delete this worker's row (its pending runs are free to take over); close."""
        engine, self._engine = self._engine, None
        if engine is None:
            return
        try:
            if delete:
                await asyncio.to_thread(self._delete, engine)
        except Exception as exc:  # the row ages instead
            logger.warning("%s could not delete its heartbeat: %s", self._who(), self._said(exc))
        finally:
            await asyncio.to_thread(engine.dispose)

    async def _serve(self) -> None:
        failing = False
        while not self._stop.is_set():
            try:
                await self.beat()
                if self.takeover_after is not None:
                    await self.take_over()
            except Exception as exc:
                level = logging.DEBUG if failing else logging.WARNING
                logger.log(level, "%s: its heartbeat failed: %s", self._who(), self._said(exc))
                failing = True
            else:
                if failing:
                    logger.warning("%s: its heartbeat works again.", self._who())
                failing = False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self.lease / 3)

    # ---- the table ---------------------------------------------------------------------------

    def _open(self) -> None:
        import sqlalchemy as sa
        from sqlalchemy.schema import CreateTable

        url = sa.make_url(self.database_url)
        if url.get_backend_name() == "sqlite":
            engine = sa.create_engine(url, connect_args={"timeout": 30})
        else:  # as DBOS does: psycopg 3, whatever driver the URL names
            url = url.set(drivername="postgresql+psycopg")
            engine = sa.create_engine(url, pool_size=1, max_overflow=2, pool_pre_ping=True)
        self._engine = engine
        metadata = sa.MetaData()
        self._table = sa.Table(
            TABLE,
            metadata,
            sa.Column("app_name", sa.Text, primary_key=True),
            sa.Column("executor_id", sa.Text, primary_key=True),
            sa.Column("version", sa.Text, primary_key=True),
            sa.Column("beat_at", sa.Double, nullable=False),  # the database's clock, seconds
            sa.Column("stale_after", sa.Double, nullable=False),  # the worker's lease
            sa.Column("taken_by", sa.Text, nullable=True),  # who claimed it, once gone
        )
        for attempt in (1, 2):  # two workers creating it at once: one of them fails, once
            try:
                with engine.begin() as conn:
                    conn.execute(CreateTable(self._table, if_not_exists=True))
                break
            except sa.exc.DBAPIError:
                if attempt == 2:
                    raise
        table = self._table
        with engine.begin() as conn:
            conn.execute(
                table.delete().where(
                    table.c.app_name == self.name,
                    table.c.beat_at < self._now() - FORGET_AFTER,
                )
            )

    def _now(self) -> sa.ColumnElement[float]:
        """Now, in seconds since the epoch, by the database's clock."""
        import sqlalchemy as sa

        assert self._engine is not None
        if self._engine.dialect.name == "sqlite":
            text = "((julianday('now') - 2440587.5) * 86400.0)"
        else:
            text = "CAST(EXTRACT(EPOCH FROM clock_timestamp()) AS DOUBLE PRECISION)"
        return sa.literal_column(text, sa.Double)

    def _key(self, executor_id: str) -> list[sa.ColumnElement[bool]]:
        table = self._tbl()
        return [
            table.c.app_name == self.name,
            table.c.executor_id == executor_id,
            table.c.version == self.version,
        ]

    def _tbl(self) -> sa.Table:
        if self._table is None:
            raise RuntimeError("The workers' table is not open.")
        return self._table

    def _upsert(self, executor_id: str, *, taken_by: str | None, only_new: bool) -> Any:
        """An insert of a row for `executor_id` beating now; on conflict, update or skip."""
        from sqlalchemy.dialects import postgresql, sqlite

        assert self._engine is not None
        sqlite_db = self._engine.dialect.name == "sqlite"
        insert = sqlite.insert if sqlite_db else postgresql.insert
        table = self._tbl()
        values = {"beat_at": self._now(), "stale_after": self.lease, "taken_by": taken_by}
        statement = insert(table).values(
            app_name=self.name, executor_id=executor_id, version=self.version, **values
        )
        keys = ["app_name", "executor_id", "version"]
        if only_new:
            return statement.on_conflict_do_nothing(index_elements=keys)
        return statement.on_conflict_do_update(index_elements=keys, set_=values)

    def _beat(self) -> None:
        assert self._engine is not None
        with self._engine.begin() as conn:
            conn.execute(self._upsert(self.executor_id, taken_by=None, only_new=False))

    def _delete(self, engine: sa.Engine) -> None:
        table = self._tbl()
        with engine.begin() as conn:
            conn.execute(table.delete().where(*self._key(self.executor_id)))

    def _gone(self) -> sa.ColumnElement[bool]:
        """Whether a row is older than both this taker's wait and its worker's own lease."""
        import sqlalchemy as sa

        table, now = self._tbl(), self._now()
        assert self.takeover_after is not None
        return sa.and_(
            table.c.beat_at < now - self.takeover_after,
            table.c.beat_at < now - table.c.stale_after,
        )

    def _alive(self, executors: Collection[str]) -> set[str]:
        import sqlalchemy as sa

        assert self._engine is not None
        table = self._tbl()
        query = sa.select(table.c.executor_id).where(
            table.c.app_name == self.name,
            table.c.version == self.version,
            table.c.executor_id.in_(sorted(executors)),
            sa.not_(self._gone()),
        )
        with self._engine.connect() as conn:
            return set(conn.execute(query).scalars())

    def _claim(self, executor_id: str) -> bool:
        assert self._engine is not None
        table = self._tbl()
        claimed = table.update().where(*self._key(executor_id), self._gone())
        values = {"beat_at": self._now(), "stale_after": self.lease, "taken_by": self.executor_id}
        with self._engine.begin() as conn:
            if conn.execute(claimed.values(**values)).rowcount == 1:
                return True
            new = self._upsert(executor_id, taken_by=self.executor_id, only_new=True)
            return bool(conn.execute(new).rowcount == 1)

    # ---- beating and taking over -------------------------------------------------------------

    async def beat(self) -> None:
        """Write this worker's row: alive now."""
        await asyncio.to_thread(self._beat)

    async def gone(self, executors: Collection[str]) -> set[str]:
        """Which of these other workers (of this name and version) are gone."""
        others = set(executors) - {self.executor_id}
        if self.takeover_after is None or not others:
            return set()
        return others - await asyncio.to_thread(self._alive, others)

    async def claim(self, executor_id: str) -> bool:
        """Claim the gone worker `executor_id`: True for one taker only, until it ages again."""
        if self.takeover_after is None or executor_id == self.executor_id:
            return False
        return await asyncio.to_thread(self._claim, executor_id)

    async def pending(
        self, executor_id: str | None = None
    ) -> dict[str, list[tuple[str, str | None]]]:
        """The pending workflows of this name and version, by executor (others' only).

        Runs and whatever workflows they started (queued model calls, with their queue), as
        DBOS's own recovery at a worker's start takes them all.
        """
        from dbos import DBOS

        found = await DBOS.list_workflows_async(
            application_name=self.name,
            app_version=self.version,
            status="PENDING",
            executor_id=executor_id,
            load_input=False,
            load_output=False,
        )
        runs: dict[str, list[tuple[str, str | None]]] = {}
        for run in found:
            if run.executor_id and run.executor_id != self.executor_id:
                runs.setdefault(run.executor_id, []).append((run.workflow_id, run.queue_name))
        return runs

    async def take_over(self) -> list[str]:
        """Resume the pending runs of the workers that are gone; the runs resumed."""
        from dbos import DBOS

        resumed: list[str] = []
        for executor_id in sorted(await self.gone(await self.pending())):
            if not await self.claim(executor_id):
                continue  # another taker has it
            runs = (await self.pending(executor_id)).get(executor_id, [])  # after the claim
            for run_id, queue in runs:  # a queued model call goes back on its own queue
                await DBOS.resume_workflow_async(run_id, queue_name=queue)
                resumed.append(run_id)
                self.taken.append(run_id)
            if runs:
                logger.warning(
                    "%s took over %d pending run(s) of the worker %r, which is gone: %s",
                    self._who(),
                    len(runs),
                    executor_id,
                    ", ".join(run_id for run_id, _ in runs),
                )
        return resumed

    def _who(self) -> str:
        return f"The durable agent {self.name!r} (worker {self.executor_id!r})"

    def _said(self, exc: BaseException) -> str:
        return _masked(f"{type(exc).__name__}: {exc}", self.database_url)


def _masked(text: str, url: str) -> str:
    """`text` with the password of `url`, if any, masked (as written and decoded)."""
    from urllib.parse import unquote, urlsplit

    text = masked(text, url)
    password = urlsplit(url).password
    return text.replace(unquote(password), "***") if password else text
