"""`evaluate`: run every case of a dataset on an agent, score each attempt, report."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import hashlib
import importlib.util
import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from glassagent._agent.agent import Agent
from glassagent._agent.budget import Budget
from glassagent._core.errors import UserError
from glassagent._core.events import to_jsonable
from glassagent._evals.evaluators import charges, evaluator_named, run_evaluator
from glassagent._evals.model import Case, Dataset, EvalContext, Evaluator, Score, evaluator_name
from glassagent._evals.report import Attempt, CaseReport, Report

if TYPE_CHECKING:
    from glassagent._core.cost import Cost
    from glassagent._core.events import Event
    from glassagent._core.messages import ToolCall
    from glassagent._core.result import RunResult

AgentSource = Agent[Any, Any] | Callable[[Case], Agent[Any, Any]]
"""An agent, or a function that makes the agent of one attempt of a case."""

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_NO_EVALUATOR = Score("completed", 1.0, True, "the run ended without an error (nothing to check)")


@dataclass(frozen=True)
class _Job:
    index: int
    case: Case
    repeat: int
    evaluators: tuple[Any, ...]


def _evaluators_for(case: Case, given: Sequence[Any]) -> tuple[Any, ...]:
    """The case's named evaluators (a given one of the same name instead), then the given."""
    by_name = {evaluator_name(evaluator): evaluator for evaluator in given}
    named = [evaluator_named(n, case) for n in case.scored_by() if n not in by_name]
    return (*named, *given)


def _check(concurrency: int, repeat: int, timeout: float | None, budget: Budget | None) -> None:
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise UserError(f"`concurrency` must be an int of at least 1, got {concurrency!r}.")
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise UserError(f"`repeat` must be an int of at least 1, got {repeat!r}.")
    if timeout is not None and (isinstance(timeout, bool) or not timeout > 0):
        raise UserError(f"`timeout` must be a positive number of seconds, got {timeout!r}.")
    if budget is not None and not isinstance(budget, Budget):
        raise UserError(f"`budget` must be a Budget, got {type(budget).__name__}.")


async def evaluate(
    agent: AgentSource,
    dataset: Dataset | Iterable[Case],
    *,
    evaluators: Sequence[Evaluator] = (),
    concurrency: int = 4,
    repeat: int = 1,
    timeout: float | None = None,
    budget: Budget | None = None,
    record_dir: str | os.PathLike[str] | None = None,
    name: str | None = None,
    progress: bool | None = None,
) -> Report:
    """Run every case of `dataset` on `agent`, score each attempt, and report.

    Each attempt is one ``agent.run(...)`` (a factory is called once per attempt, given the
    case). Attempts run concurrently, at most `concurrency` at a time. An attempt that raises
    (or times out) is reported with its ``error`` and a score of 0; the others continue.

    Args:
        agent: The agent, or a function making the agent of one attempt from its case.
        dataset: The cases (a `Dataset`, or any iterable of `Case`).
        evaluators: Evaluators applied to every case, besides those each case names (one of
            the same name as a case's replaces the built-in, e.g. a configured `Judge`).
        concurrency: Most attempts running at once.
        repeat: Attempts per case (pass@k, mean and spread of the scores).
        timeout: Seconds each attempt's run may take (`None`: the agent's ``run_timeout``);
            its evaluators get as many seconds again, together (an async one still running
            then scores 0; a sync one cannot be interrupted).
        budget: Limits on each attempt's spending (`None`: the agent's ``budget``).
        record_dir: A folder for each attempt's events, ``cases/<case>-<repeat>.jsonl``
            (replay one with ``ReplayClient``), and the report as ``report.json``. An
            attempt whose events cannot be written keeps its score, with ``record_error``.
        name: The report's name (default: the dataset's).
        progress: Show a progress bar on stderr (rich; `None`: when stderr is a terminal
            and rich is installed).

    Raises:
        UserError: For invalid arguments; `DatasetError` for a case naming ``judge`` with
            no `Judge` among `evaluators`.
    """
    _check(concurrency, repeat, timeout, budget)
    data = dataset if isinstance(dataset, Dataset) else Dataset("cases", dataset)
    if not isinstance(agent, Agent) and not callable(agent):
        raise UserError(f"`agent` must be an Agent or a function making one, got {agent!r}.")
    jobs = [
        _Job(index, case, number, _evaluators_for(case, evaluators))
        for index, case in enumerate(data)
        for number in range(repeat)
    ]
    folder = Path(record_dir) if record_dir is not None else None
    started = datetime.now(timezone.utc)
    clock = time.perf_counter()
    limit = asyncio.Semaphore(concurrency)
    config: dict[str, Any] = {}
    runner = _Runner(agent, timeout, budget, folder, config)
    show = _rich_terminal() if progress is None else progress
    with _progress(len(jobs), show) as advance:

        async def one(job: _Job) -> Attempt:
            async with limit:
                attempt = await runner.attempt(job)
            advance(attempt.passed)
            return attempt

        attempts = await asyncio.gather(*(one(job) for job in jobs))
    report = Report(
        name=name or data.name,
        dataset=data.name,
        started_at=started.isoformat(timespec="seconds"),
        duration_s=round(time.perf_counter() - clock, 3),
        config={
            "provider": config.get("provider"),
            "model": config.get("model"),
            "concurrency": concurrency,
            "repeat": repeat,
            "timeout_s": timeout,
            "evaluators": sorted({evaluator_name(e) for job in jobs for e in job.evaluators}),
            **({"record_dir": str(folder.absolute())} if folder is not None else {}),
        },
        cases=tuple(
            CaseReport(case.name, case.tags, tuple(attempts[i * repeat : (i + 1) * repeat]))
            for i, case in enumerate(data)
        ),
        currency=config.get("currency", "USD"),
    )
    if folder is not None:
        report.save(folder / "report.json")
    return report


def _rich_terminal() -> bool:
    """Whether stderr is a terminal and rich is installed (the progress bar's default)."""
    try:
        return sys.stderr.isatty() and importlib.util.find_spec("rich") is not None
    except (AttributeError, ValueError):  # a replaced or closed stderr
        return False


@contextmanager
def _progress(total: int, show: bool) -> Iterator[Callable[[bool], None]]:
    """A rich progress bar on stderr, advanced once per attempt (nothing when not shown)."""
    if not show:
        yield lambda passed: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(
        TextColumn("[bold]eval[/bold]"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[passed]} passed"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=False,
    )
    task = bar.add_task("eval", total=total, passed=0)
    count = [0]

    def advance(passed: bool) -> None:
        count[0] += passed
        bar.update(task, advance=1, passed=count[0])

    with bar:
        yield advance


def _file_name(case: str, repeat: int) -> str:
    """A file name for a case's attempt: the name, made safe (and unique) for any system.

    A name changed to be safe, or with capitals (``A`` and ``a`` are one file on macOS and
    Windows), gets a short hash of itself.
    """
    safe = _UNSAFE.sub("_", case).strip("._")[:80]
    if safe != case or case != case.lower():
        safe = f"{safe}_{hashlib.sha256(case.encode()).hexdigest()[:8]}"
    return f"{safe}-{repeat}.jsonl"


class _Runner:
    """Runs and scores one attempt at a time (called concurrently)."""

    def __init__(
        self,
        agent: AgentSource,
        timeout: float | None,
        budget: Budget | None,
        folder: Path | None,
        config: dict[str, Any],
    ) -> None:
        self.agent = agent
        self.timeout = timeout
        self.budget = budget
        self.folder = folder
        self.config = config

    def _agent_for(self, case: Case) -> Agent[Any, Any]:
        made = self.agent(case) if not isinstance(self.agent, Agent) else self.agent
        if not isinstance(made, Agent):
            raise UserError(f"The agent factory returned {type(made).__name__}, not an Agent.")
        self.config.setdefault("provider", made.client.provider_name)
        self.config.setdefault("model", made.client.model)
        if self.timeout is None and self.budget is None:
            return made
        made = copy.copy(made)  # the attempt's limits; the caller's agent is left alone
        if self.timeout is not None:
            made.run_timeout = min(self.timeout, made.run_timeout or self.timeout)
        if self.budget is not None:
            made.budget = self.budget
        return made

    async def _run(self, case: Case) -> tuple[RunResult[Any] | None, str | None]:
        agent = self._agent_for(case)
        if isinstance(case.input, str):
            run = agent.run(case.input)
        else:
            *earlier, last = case.input
            run = agent.run(last.content, messages=earlier, attachments=last.attachments)
        if self.timeout is None:
            return await run, None
        # the run's own timeout ends it with its events; this one only if the run ignores it
        return await asyncio.wait_for(run, self.timeout + max(1.0, self.timeout)), None

    async def attempt(self, job: _Job) -> Attempt:
        """Run one attempt of a case and score it."""
        begin = time.perf_counter()
        result: RunResult[Any] | None
        try:
            result, error = await self._run(job.case)
        except Exception as exc:
            result = getattr(exc, "result", None)
            error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            if isinstance(exc, asyncio.TimeoutError):
                error = f"TimeoutError: the attempt took longer than {self.timeout} s"
        latency_ms = (time.perf_counter() - begin) * 1000
        events = result.events if result is not None else ()
        output = None if result is None or error else _output(result)
        ctx = EvalContext(
            case=job.case,
            output=output,
            text=result.text if result is not None and not error else "",
            result=result,
            tool_calls=_tool_calls(events),
            error=error,
        )
        with charges() as charged:
            scores = await self._score(job, ctx)
        return self._attempt(job, ctx, scores, charged, latency_ms)

    async def _score(self, job: _Job, ctx: EvalContext) -> tuple[Score, ...]:
        if ctx.error is not None:
            return ()
        if not job.evaluators:
            return (_NO_EVALUATOR,)
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        return tuple([await run_evaluator(e, ctx, deadline=deadline) for e in job.evaluators])

    def _attempt(
        self,
        job: _Job,
        ctx: EvalContext,
        scores: tuple[Score, ...],
        charged: list[Cost],
        latency_ms: float,
    ) -> Attempt:
        result = ctx.result
        events = result.events if result is not None else ()
        evaluator_cost = _amount(charged) if charged else None
        cost = None
        if result is not None:
            self.config.setdefault("currency", result.cost.currency)
            cost = _amount([result.cost, *charged])
        score = sum(s.score for s in scores) / len(scores) if scores else 0.0
        recorded, record_error = self._record(job, result)
        return Attempt(
            repeat=job.repeat,
            passed=ctx.error is None and all(s.passed for s in scores),
            score=score,
            scores=scores,
            output=to_jsonable(ctx.output),
            error=ctx.error,
            stop_reason=result.stop_reason if result is not None and not ctx.error else None,
            input_tokens=result.usage.input_tokens if result is not None else 0,
            output_tokens=result.usage.output_tokens if result is not None else 0,
            cost=cost,
            evaluator_cost=evaluator_cost,
            latency_ms=round(latency_ms, 3),
            model_calls=sum(1 for e in events if e.type == "llm_response"),
            tool_calls=len(ctx.tool_calls),
            tool_errors=sum(
                1
                for e in events
                if e.type == "function_execution_complete" and e.depth == 0 and e.execution.is_error
            ),
            events=recorded,
            record_error=record_error,
        )

    def _record(self, job: _Job, result: RunResult[Any] | None) -> tuple[str | None, str | None]:
        """Save the attempt's events: their path, or `None` and why they could not be."""
        if self.folder is None or result is None or not result.events:
            return None, None
        relative = f"cases/{_file_name(job.case.name, job.repeat)}"
        target = self.folder / relative
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            result.save_events(target)
        except Exception as exc:  # e.g. text no encoding can write: the attempt still counts
            with contextlib.suppress(OSError):
                target.unlink(missing_ok=True)
            return None, " ".join(f"{type(exc).__name__}: {exc}".split())[:500]
        return relative, None


def _output(result: RunResult[Any]) -> Any:
    output = result.output
    if isinstance(output, BaseModel):
        return output.model_dump(mode="json")
    return result.text if output is None else output


def _tool_calls(events: Sequence[Event]) -> tuple[ToolCall, ...]:
    return tuple(
        call
        for event in events
        if event.type == "llm_response" and event.depth == 0
        for call in event.tool_calls
    )


def _amount(costs: Sequence[Cost]) -> Decimal | None:
    total = costs[0]
    for cost in costs[1:]:
        total = total + cost
    return total.amount
