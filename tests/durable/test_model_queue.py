"""Model calls through a durable queue: a cap on the calls at once, shared by all workers.

Two worker processes on one SQLite database start runs at once against a slow scripted model
that counts the requests in flight; a worker killed with SIGKILL resumes its run without
sending a finished call again. In this process: the queue's registered limits, the deltas of
a call run here (through the run's channel) and of one run elsewhere (through the call's
DBOS stream), and which attempt's deltas a run passes on.
"""

from __future__ import annotations

import asyncio
import collections
import signal
from pathlib import Path
from typing import Any

import pytest

from glassagent import Agent, LLMResponse, ToolCall, tool
from glassagent.errors import RunAborted, UserError
from glassagent.testing import FunctionClient, ScriptedClient
from tests.support.durable import (
    ANSWER,
    effects,
    model_reply,
    output,
    start_worker,
)
from tests.support.durable_queue import two_workers_share_the_cap
from tests.support.loopback_server import LoopbackServer

pytest.importorskip("dbos")

from glassagent._durable import model_queue
from glassagent._durable.model_queue import QUEUED_WORKFLOW, STREAM, Attempts, queue_name
from glassagent.durable import DurableAgent

pytestmark = pytest.mark.durable


def tool_results_in(request: Any) -> int:
    return sum(1 for m in request.json()["messages"] if m.get("role") == "tool")


# ---- worker processes ------------------------------------------------------------------------


def test_two_workers_never_make_more_model_calls_at_once_than_the_cap(tmp_path: Path) -> None:
    two_workers_share_the_cap(tmp_path, database=tmp_path / "runs.sqlite")


def test_a_run_killed_with_a_queue_resumes_without_sending_a_finished_call_again(
    tmp_path: Path,
) -> None:
    database = tmp_path / "runs.sqlite"
    options = {"max_model_calls": 1}
    with LoopbackServer(model_reply) as server:
        crashed = start_worker(
            "run",
            database=database,
            base_url=server.url,
            folder=tmp_path,
            kill=True,
            options=options,
        )
        assert crashed.returncode == -signal.SIGKILL, crashed.stderr
        assert [tool_results_in(r) for r in server.requests] == [0, 1]  # two calls finished
        resumed = start_worker(
            "result", database=database, base_url=server.url, folder=tmp_path, options=options
        )
        assert resumed.returncode == 0, resumed.stderr
        seen = collections.Counter(tool_results_in(r) for r in server.requests)
    assert seen == {0: 1, 1: 1, 2: 1, 3: 1}  # none sent again after the crash
    result = output(tmp_path, "result")
    assert result["run-1"]["text"] == ANSWER
    assert result["run-1"]["iterations"] == 4
    killed_pid = int((tmp_path / "killed").read_text(encoding="utf-8"))
    done = [(e["tool"], e["pid"]) for e in effects(tmp_path / "effects.jsonl")]
    assert done == [
        ("first", killed_pid),
        ("second", killed_pid),
        ("second", result["pid"]),
        ("third", result["pid"]),
    ]
    streamed = result["events:run-1"]
    assert [event["type"] for event in streamed] == result["run-1"]["events"]
    marks = [event.get("replayed", False) for event in streamed]
    live = marks.index(False)
    assert all(marks[:live])
    assert not any(marks[live:])
    assert [e["type"] for e in streamed[:live]].count("llm_response") == 2  # read back
    assert streamed[live]["type"] == "function_execution_complete"  # the second tool, live


# ---- in this process -------------------------------------------------------------------------


SCRIPT: list[Any] = [
    LLMResponse(
        text="Adding one and two now.",
        tool_calls=[ToolCall("c1", "add", {"a": 1, "b": 2})],
        thinking="The user wants a sum.",
    ),
    "One and two make three, as the tool says.",
]


def adding_agent() -> Agent:
    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    return Agent(ScriptedClient(SCRIPT, chunk_delay=0.05), [add])


async def chunks_of(durable: DurableAgent[Any], run_id: str) -> tuple[list[tuple[str, str]], Any]:
    """The run's text and thinking chunks, as they stream, and its result."""
    run = durable.run("Add 1 and 2.", run_id=run_id)
    chunks = [
        (event.type, event.text)
        async for event in run
        if event.type in ("text_chunk", "thinking_chunk")
    ]
    return chunks, await run


def joined(chunks: list[tuple[str, str]]) -> dict[str, str]:
    return {kind: "".join(text for k, text in chunks if k == kind) for kind, _ in chunks}


async def stream_values(call_id: str) -> list[Any]:
    from dbos import DBOS

    return [value async for value in DBOS.read_stream_async(call_id, STREAM)]


def test_the_limits_must_be_whole_numbers_of_at_least_one(tmp_path: Path) -> None:
    agent = adding_agent()
    url = f"sqlite:///{tmp_path / 'x.sqlite'}"
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(UserError, match="max_model_calls"):
            DurableAgent(agent, name="limits", database_url=url, max_model_calls=bad)  # type: ignore[arg-type]
        with pytest.raises(UserError, match="model_calls_per_minute"):
            DurableAgent(agent, name="limits", database_url=url, model_calls_per_minute=bad)  # type: ignore[arg-type]
    durable = DurableAgent(agent, name="limits", database_url=url, max_model_calls=1)
    assert (durable.max_model_calls, durable.model_calls_per_minute) == (1, None)
    assert queue_name("limits", "Azure OpenAI") == "glassagent-models-limits-azure-openai"


async def test_the_queue_is_registered_with_the_limits_asked(tmp_path: Path) -> None:
    from dbos import DBOS

    url = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    name = queue_name("queue-config", "scripted")
    durable = DurableAgent(
        adding_agent(),
        name="queue-config",
        database_url=url,
        max_model_calls=3,
        model_calls_per_minute=90,
    )
    async with durable:
        queue = await DBOS.retrieve_queue_async(name)
        assert queue is not None
        assert await queue.get_global_concurrency_async() == 3
        assert await queue.get_worker_concurrency_async() is None
        assert await queue.get_limiter_async() == {"limit": 90, "period": 60.0}
        assert await queue.get_polling_interval_sec_async() == model_queue.POLL_SECONDS
    plain = DurableAgent(adding_agent(), name="queue-config", database_url=url)
    async with plain:  # no queue asked: the stored one stays as it was
        assert [q.name for q in await DBOS.list_queues_async()] == [name]
        queue = await DBOS.retrieve_queue_async(name)
        assert queue is not None
        assert await queue.get_global_concurrency_async() == 3
    capped = DurableAgent(adding_agent(), name="queue-config", database_url=url, max_model_calls=5)
    async with capped:  # a new cap replaces the stored one; no rate limit now
        queue = await DBOS.retrieve_queue_async(name)
        assert queue is not None
        assert await queue.get_global_concurrency_async() == 5
        assert await queue.get_limiter_async() is None


async def test_a_queued_call_run_here_streams_through_the_run_as_a_step_does(
    tmp_path: Path,
) -> None:
    from dbos import DBOS

    url = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    async with DurableAgent(adding_agent(), name="queue-here", database_url=url) as durable:
        direct, direct_result = await chunks_of(durable, "direct")
    queued_agent = DurableAgent(
        adding_agent(), name="queue-here", database_url=url, max_model_calls=1
    )
    async with queued_agent as durable:
        queued, result = await chunks_of(durable, "queued")
        steps = await DBOS.list_workflow_steps_async("queued")
        names = [step["function_name"] for step in steps]
        call, result_read = QUEUED_WORKFLOW, "DBOS.getResult"  # a queued call's two records
        assert names == [call, result_read, "glassagent.durable.tool_call", call, result_read]
        calls = [step["child_workflow_id"] for step in steps if step["function_name"] == names[0]]
        assert [await stream_values(call) for call in calls] == [[], []]  # nothing written
    assert len(direct) == 3 + 3 + 3  # thinking and text, then text: streamed in pieces
    assert queued == direct
    assert result.text == direct_result.text == "One and two make three, as the tool says."
    assert result.all_messages == direct_result.all_messages


async def test_a_queued_call_run_elsewhere_streams_its_deltas_through_the_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dbos import DBOS

    class Elsewhere(dict[str, Any]):
        """No run of this process waits here: each call streams as in another worker."""

        def get(self, key: str, default: Any = None) -> Any:
            return default

    url = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    async with DurableAgent(adding_agent(), name="queue-far", database_url=url) as durable:
        direct, direct_result = await chunks_of(durable, "direct")
    monkeypatch.setattr(model_queue, "_LOCAL", Elsewhere())
    queued_agent = DurableAgent(
        adding_agent(), name="queue-far", database_url=url, max_model_calls=1
    )
    async with queued_agent as durable:
        queued, result = await chunks_of(durable, "queued")
        steps = await DBOS.list_workflow_steps_async("queued")
        calls = [s["child_workflow_id"] for s in steps if s["function_name"] == QUEUED_WORKFLOW]
        written = [await stream_values(call) for call in calls]
    assert joined(queued) == joined(direct)  # every piece once, in order
    assert len(queued) > 4  # in pieces as they came, not whole at the end
    assert result.all_messages == direct_result.all_messages
    for values in written:  # one attempt per call, its deltas in several writes
        assert len({value["attempt"] for value in values}) == 1
        assert len(values) > 1
    first = [part for value in written[0] for part in value["parts"]]
    assert [part["kind"] for part in first] == ["thinking"] * 3 + ["text"] * 3
    assert "".join(part["text"] for part in first if part["kind"] == "text") == SCRIPT[0].text


async def test_leaving_puts_a_call_in_flight_back_on_its_queue(tmp_path: Path) -> None:
    from glassagent._durable.approvals import connected

    def answer(messages: Any, tools: Any, system: Any, settings: Any) -> Any:
        if not any(message.role == "tool" for message in messages):
            return LLMResponse(
                text="Adding one and two now.", tool_calls=[ToolCall("c1", "add", {"a": 1, "b": 2})]
            )
        return "One and two make three."

    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    client = FunctionClient(answer, chunk_delay=0.3)  # a second per call
    url = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    durable = DurableAgent(
        Agent(client, [add]), name="queue-leave", database_url=url, max_model_calls=1
    )
    async with durable:
        waiting = asyncio.ensure_future(durable.run("Add 1 and 2.", run_id="leave"))
        for _ in range(200):  # until the first call is under way
            if client.requests:
                break
            await asyncio.sleep(0.02)
    with pytest.raises(RunAborted):
        await waiting
    async with connected(url, "queue-leave") as database:
        calls = await database.list_workflows_async(name=QUEUED_WORKFLOW, load_input=False)
    # back on its queue for any worker, not pending in the one that left
    assert [(call.status, call.queue_name) for call in calls] == [
        ("ENQUEUED", queue_name("queue-leave", "function"))
    ]
    async with durable:
        result = await durable.result("leave")
    assert result.text == "One and two make three."
    assert len(client.requests) == 3  # the first call again, from its start; then the second


def test_a_run_follows_the_newest_attempt_of_a_call() -> None:
    attempts = Attempts()
    seen = ["a", "a", "b", "a", "b", "c", "b", "a", "c"]
    assert [attempts.accept(attempt) for attempt in seen] == [
        True,
        True,
        True,  # the call started again: follow the new attempt
        False,  # the old one writes late: dropped
        True,
        True,
        False,
        False,
        True,
    ]
