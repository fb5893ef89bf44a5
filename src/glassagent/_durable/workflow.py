"""The durable run as a DBOS workflow, and the agents this process runs durably, by name.

A workflow's arguments are stored, so it takes plain data only: the agent's name, the run's
id, the prompt, the history as its standard dict, and the run's options (plain JSON, for a
`Durable` that builds each run's agent; last and optional, so runs stored without them
still resume). It finds the `DurableAgent` by name in
`AGENTS` (filled before DBOS launches, so a run recovered at launch finds it) and returns the
run's result as JSON; a failed run raises `RunFailed`, whose ``data`` DBOS keeps as JSON
(the portable serializer), so its status is ``ERROR``.

DBOS keeps its registrations for the whole process: `register` makes the workflow and the
steps once, under fixed names that a pending run's rows refer to.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, cast

from glassagent._agent.config import RunSteps
from glassagent._core.errors import GlassAgentError, RunError
from glassagent._durable import codec
from glassagent._durable.approvals import wait_for_answers
from glassagent._durable.handle import Feed
from glassagent._durable.model_queue import ModelQueue
from glassagent._durable.model_queue import register as register_queued
from glassagent._durable.steps import STEPS, DurableClient, Replay, tool_step

if TYPE_CHECKING:
    from glassagent._agent.agent import Agent
    from glassagent._core.result import RunResult

WORKFLOW = "glassagent.durable.run"
"""The DBOS name of the run workflow (stored with every run: never change it)."""
MODEL_STEP = "glassagent.durable.model_call"
"""The DBOS name of a model call's step."""
TOOL_STEP = "glassagent.durable.tool_call"
"""The DBOS name of a tool call's step."""
CLOCK_STEP = "glassagent.durable.clock"
"""The DBOS name of the step that reads the time (an approval's deadline)."""
FINISH_STEP = "glassagent.durable.finish_turn"
"""The DBOS name of the step that keeps a run's outcome once it ended (`Durable.finish`)."""

Build = Callable[[dict[str, Any]], "Agent[Any, Any]"]
"""Makes the agent of one run from the run's options."""
Finish = Callable[[dict[str, Any], "RunResult[Any]"], Awaitable[None]]
"""Keeps the result of a run that ended without error, given the run's options."""


@dataclass
class Durable:
    """A durable agent as its runs see it: the agent, and the runs this process executes."""

    agent: Agent[Any, Any]
    approval_timeout: float | None = None
    running: set[asyncio.Task[Any]] = field(default_factory=set)
    stopping: bool = False
    """The process leaves: what a tool returns now is not its outcome (the run resumes)."""
    feeds: dict[str, Feed] = field(default_factory=dict)
    """The events of the runs this process executes, by run id (`DurableAgentRun`)."""
    model_queue: ModelQueue | None = None
    """The queue the model calls go through (`None`: each is a step of the run)."""
    build: Build | None = None
    """Makes each run's agent from its options (runs started with options); else `agent`."""
    finish: Finish | None = None
    """Run as one step after a run with options ended without error: e.g. to save the turn
    where it belongs, also when no one waits for the run (one resumed after a crash)."""


AGENTS: dict[str, Durable] = {}
"""The durable agents of this process, by name (one at a time: DBOS is one per process)."""

RunWorkflow = Callable[
    [str, str, str, "dict[str, Any] | None", "dict[str, Any] | None"],
    Coroutine[Any, Any, dict[str, Any]],
]

_workflow: RunWorkflow | None = None
_finish_step: Callable[[str, dict[str, Any], dict[str, Any]], Awaitable[None]] | None = None


class RunFailed(Exception):
    """A durable run ended with an error: ``data`` holds the error and the partial result."""

    def __init__(self, message: str, data: dict[str, Any]) -> None:
        super().__init__(message)
        self.data = data


def register() -> RunWorkflow:
    """Make the workflow and the steps DBOS functions (once per process); the workflow."""
    global _workflow, _finish_step
    if _workflow is None:
        from dbos import DBOS

        STEPS.model_call = DBOS.step(name=MODEL_STEP)(STEPS.model_call)
        STEPS.tool_call = DBOS.step(name=TOOL_STEP)(STEPS.tool_call)
        STEPS.clock = DBOS.step(name=CLOCK_STEP)(STEPS.clock)
        _finish_step = DBOS.step(name=FINISH_STEP)(finish_turn)
        register_queued(AGENTS)
        _workflow = cast("RunWorkflow", DBOS.workflow(name=WORKFLOW)(run_workflow))
    return _workflow


async def run_workflow(
    name: str,
    run_id: str,
    prompt: str,
    history: dict[str, Any] | None,
    options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One run of the durable agent `name`, as a workflow whose id is `run_id`.

    With `options` (plain JSON), the agent's `Durable.build` makes the run's agent from
    them, and its `Durable.finish` keeps the result, as one step, once the run ended
    without error.

    Raises:
        RunFailed: When the run fails, with the error and its partial result.
        RunError: When this process has no durable agent of that name.
    """
    durable = AGENTS.get(name)
    if durable is None:
        raise RunError(f"No durable agent named {name!r} runs in this process.")
    task = asyncio.current_task()
    if task is not None:  # cancelled when the agent's context exits: the run stays pending
        durable.running.add(task)
    try:
        data = await _run(durable, run_id, prompt, history, options)
        if options is not None and durable.finish is not None and _finish_step is not None:
            await _finish_step(name, options, data)
        return data
    finally:
        if task is not None:
            durable.running.discard(task)


async def finish_turn(name: str, options: dict[str, Any], data: dict[str, Any]) -> None:
    """The body of the step that gives a run's result to `Durable.finish` (`FINISH_STEP`).

    Raises:
        RunError: When this process has no durable agent of that name.
    """
    durable = AGENTS.get(name)
    if durable is None:  # pragma: no cover - the workflow checked it
        raise RunError(f"No durable agent named {name!r} runs in this process.")
    agent = _agent_of(durable, options)
    if durable.finish is not None:
        await durable.finish(options, codec.result_from(data, agent._output, agent.redact))


def _agent_of(durable: Durable, options: dict[str, Any] | None) -> Agent[Any, Any]:
    """The agent of a run: built from its options when the durable agent builds them."""
    if options is not None and durable.build is not None:
        return durable.build(options)
    return durable.agent


async def _run(
    durable: Durable,
    run_id: str,
    prompt: str,
    history: dict[str, Any] | None,
    options: dict[str, Any] | None,
) -> dict[str, Any]:
    from glassagent._history.tree import History

    agent = _agent_of(durable, options)
    spec = agent._output
    replay = Replay(await recorded_steps(run_id))
    steps = RunSteps(
        tool=partial(tool_step, replay, lambda: durable.stopping),
        approvals=partial(wait_for_answers, replay, durable.approval_timeout),
        replaying=replay.replaying,
    )
    feed = durable.feeds.setdefault(run_id, Feed())  # a reader may be waiting on it
    try:
        thread = History.from_dict(history) if history is not None else None
        run = agent._run_steps(
            prompt,
            history=thread,
            run_id=run_id,
            client=partial(DurableClient, replay=replay, queue=durable.model_queue),
            steps=steps,
        )
        async for event in run:
            feed.put(event)
        result = await run
    except GlassAgentError as exc:
        ended = exc.result
        data = {
            "error": codec.error_dict(exc),
            "result": codec.result_dict(ended, spec) if ended is not None else None,
        }
        raise RunFailed(str(exc), data) from exc
    finally:
        feed.end()
        if durable.feeds.get(run_id) is feed:
            del durable.feeds[run_id]
    return codec.result_dict(result, spec)


COUNTED = frozenset({MODEL_STEP, TOOL_STEP, "DBOS.recv", "DBOS.getResult"})
"""The recorded operations a resumed run replays before it goes on live (see `Replay`); a
queued model call counts once it is done, by the reading of its result (``getResult``): one
enqueued but still running at the crash is in flight, and runs again, live."""


async def recorded_steps(run_id: str) -> int:
    """How many model calls, tool calls and answer waits the run `run_id` recorded so far.

    Asked outside the workflow's DBOS context (in a fresh one): inside it, DBOS would record
    the question as a step of the run, and a resumed run would read the first answer back.
    """
    from dbos import DBOS

    listing = DBOS.list_workflow_steps_async(run_id, load_output=False)
    steps = await contextvars.Context().run(asyncio.ensure_future, listing)  # a task in it
    return sum(step["function_name"] in COUNTED for step in steps)
