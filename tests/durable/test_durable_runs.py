"""Durable runs on a real DBOS, on SQLite: crashed with SIGKILL and resumed by new processes.

The workers are fresh interpreters (`tests.support.durable_worker`) that talk to a scripted
OpenAI-compatible server on 127.0.0.1, in this process; an audit hook in each refuses every
other connection. The plain, uninterrupted runs they are compared with run here.
"""

from __future__ import annotations

import asyncio
import collections
import json
import signal
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from glassagent import (
    Agent,
    BaseLLMClient,
    LLMResponse,
    Message,
    ModelSettings,
    ToolCall,
    ToolContext,
    Usage,
    tool,
)
from glassagent._core.events import to_jsonable
from glassagent.errors import (
    ConfigurationError,
    ProviderError,
    RunAborted,
    ToolCallFormatError,
    UserError,
)
from glassagent.history import History
from glassagent.llm import StreamPart, TextDelta, ThinkingDelta, ToolDefinition
from glassagent.testing import FunctionClient, ScriptedClient
from tests.support.durable import (
    ANSWER,
    API_KEY,
    PROMPT,
    effects,
    make_agent,
    model_reply,
    output,
    start_worker,
)
from tests.support.loopback_server import LoopbackServer

pytest.importorskip("dbos")

from glassagent.durable import DurableAgent

pytestmark = pytest.mark.durable


def tool_results_in(request: Any) -> int:
    return sum(1 for m in request.json()["messages"] if m.get("role") == "tool")


def plain_run(tmp_path: Path) -> Any:
    """The same run on a plain agent, never interrupted (its own server and effects)."""
    with LoopbackServer(model_reply) as server:
        result = make_agent(server.url, tmp_path / "plain-effects.jsonl").run_sync(PROMPT)
        assert len(server.requests) == 4
    return result


def same_as_plain(durable: dict[str, Any], plain: Any) -> None:
    assert durable["text"] == plain.text == ANSWER
    assert durable["messages"] == to_jsonable(plain.all_messages)  # the final history
    assert durable["new"] == len(plain.new_messages)
    assert durable["usage"] == to_jsonable(plain.usage)
    assert durable["cost"] == to_jsonable(plain.cost)
    assert plain.cost.amount is not None
    assert plain.cost.amount > 0
    assert durable["iterations"] == plain.iterations == 4
    assert durable["stop_reason"] == "end_turn"
    assert durable["events"] == [event.type for event in plain.events]


def no_secret_in(database: Path) -> None:
    stored = b"".join(p.read_bytes() for p in database.parent.glob(database.name + "*"))
    assert b"call_second" in stored  # the steps are there...
    assert API_KEY.encode() not in stored  # ...the key is not
    assert b"Authorization" not in stored


def replayed_then_live(streamed: list[dict[str, Any]], types: list[str]) -> None:
    """The stream of the resumed run: the whole run, replayed up to the call killed in flight."""
    assert [event["type"] for event in streamed] == types
    assert [event["seq"] for event in streamed] == list(range(len(types)))
    marks = [event.get("replayed", False) for event in streamed]
    live = marks.index(False)
    assert all(marks[:live])
    assert not any(marks[live:])
    # the finished steps were replayed: two model calls and the first tool; the second tool's
    # request (emitted before the crash too) is the last replayed event, its result is live
    assert types[:live].count("llm_response") == 2
    assert streamed[live - 1]["type"] == "function_execution_start"
    assert streamed[live]["type"] == "function_execution_complete"
    assert streamed[live]["execution"]["call_id"] == "call_second"
    assert all("replayed" not in event or event["replayed"] is True for event in streamed)


def test_a_run_killed_in_its_second_tool_resumes_in_a_new_process(tmp_path: Path) -> None:
    database = tmp_path / "runs.sqlite"
    with LoopbackServer(model_reply) as server:
        crashed = start_worker(
            "run", database=database, base_url=server.url, folder=tmp_path, kill=True
        )
        assert crashed.returncode == -signal.SIGKILL, crashed.stderr
        assert not (tmp_path / "run.json").exists()
        assert [tool_results_in(r) for r in server.requests] == [0, 1]  # two calls finished
        resumed = start_worker("result", database=database, base_url=server.url, folder=tmp_path)
        assert resumed.returncode == 0, resumed.stderr
        seen = collections.Counter(tool_results_in(r) for r in server.requests)
    # each finished model request was sent once: none again after the crash
    assert seen == {0: 1, 1: 1, 2: 1, 3: 1}
    killed_pid = int((tmp_path / "killed").read_text(encoding="utf-8"))
    result = output(tmp_path, "result")
    done = [(e["tool"], e["pid"], e["key"]) for e in effects(tmp_path / "effects.jsonl")]
    # each finished tool ran once; the one killed in flight twice, with the same key
    assert done == [
        ("first", killed_pid, "run-1:call_first"),
        ("second", killed_pid, "run-1:call_second"),
        ("second", result["pid"], "run-1:call_second"),
        ("third", result["pid"], "run-1:call_third"),
    ]
    same_as_plain(result["run-1"], plain_run(tmp_path))
    assert result["run-1"]["event_run_ids"] == ["run-1"]
    replayed_then_live(result["events:run-1"], result["run-1"]["events"])
    assert result["probe"] == "blocked"
    assert json.loads((tmp_path / "blocked-result.json").read_text(encoding="utf-8")) == []
    no_secret_in(database)


def test_another_process_lists_the_runs_and_reads_their_results(tmp_path: Path) -> None:
    database = tmp_path / "runs.sqlite"
    ids = ("run-ok", "run-fail")
    with LoopbackServer(model_reply) as server:
        ran = start_worker(
            "run", database=database, base_url=server.url, folder=tmp_path, run_ids=ids
        )
        assert ran.returncode == 0, ran.stderr
        sent = len(server.requests)
        listed = start_worker(
            "list", database=database, base_url=server.url, folder=tmp_path, run_ids=ids
        )
        assert listed.returncode == 0, listed.stderr
        assert len(server.requests) == sent  # reading results sends nothing
    first, second = output(tmp_path, "run"), output(tmp_path, "list")
    assert first["pid"] != second["pid"]
    assert second["run-ok"] == first["run-ok"]
    same_as_plain(second["run-ok"], plain_run(tmp_path))
    failed = second["run-fail"]
    assert failed == first["run-fail"]
    assert (failed["error"], failed["module"]) == ("ProviderError", "glassagent.errors")
    assert "this request fails" in failed["message"]
    assert failed["result"]["stop_reason"] == "error"
    assert failed["result"]["events"] == ["llm_request", "error"]
    statuses = {run["run_id"]: run["status"] for run in second["runs"]}
    assert statuses == {"run-ok": "success", "run-fail": "error"}
    assert {run["executor_id"] for run in second["runs"]} == {"durable-test"}
    assert second["pending"] == []
    assert len([e for e in effects(tmp_path / "effects.jsonl")]) == 3  # run-ok's tools, once


def test_a_worker_contacts_nothing_but_its_database_and_the_model(tmp_path: Path) -> None:
    with LoopbackServer(model_reply) as server:
        ran = start_worker(
            "run", database=tmp_path / "r.sqlite", base_url=server.url, folder=tmp_path
        )
        assert ran.returncode == 0, ran.stderr
    assert output(tmp_path, "run")["run-1"]["text"] == ANSWER
    assert output(tmp_path, "run")["probe"] == "blocked"  # the guard refuses what it must
    assert json.loads((tmp_path / "blocked-run.json").read_text(encoding="utf-8")) == []


# ---- in this process -------------------------------------------------------------------------


def counting_agent(calls: list[str]) -> Agent:
    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        calls.append(f"add {a} {b}")
        return a + b

    script = [
        LLMResponse(tool_calls=[ToolCall("c1", "add", {"a": 1, "b": 2})], thinking="Let me add."),
        "1 + 2 = 3",
    ]
    return Agent(ScriptedClient(script, chunk_delay=0.001), [add])


def comparable(events: Any) -> list[dict[str, Any]]:
    """Event dicts without what differs between any two runs (ids, times)."""
    skip = {"run_id", "timestamp", "latency_ms", "duration_ms"}
    found = []
    for event in events:
        data = {k: v for k, v in event.to_dict().items() if k not in skip}
        if "execution" in data:
            data["execution"] = {k: v for k, v in data["execution"].items() if k not in skip}
        found.append(data)
    return found


async def test_an_uninterrupted_durable_run_is_the_plain_run(tmp_path: Path) -> None:
    plain_calls: list[str] = []
    plain = await counting_agent(plain_calls).run("What is 1 + 2?")
    calls: list[str] = []
    agent = counting_agent(calls)
    durable = DurableAgent(agent, name="in-process", database_url=f"sqlite:///{tmp_path / 'd.db'}")
    async with durable:
        result = await durable.run("What is 1 + 2?", run_id="sum")
        again = await durable.run("Something else entirely", run_id="sum")  # the same run
        read = await durable.result("sum")
        runs = await durable.runs()
    assert result.text == plain.text == "1 + 2 = 3"
    assert result.all_messages == plain.all_messages
    assert (result.usage, result.cost, result.iterations) == (plain.usage, plain.cost, 2)
    assert comparable(result.events) == comparable(plain.events)  # the chunks streamed live
    assert {event.run_id for event in result.events} == {"sum"}
    assert again == result
    assert read == result
    assert calls == plain_calls == ["add 1 2"]  # the second `run` of "sum" ran nothing
    assert agent.client.remaining == 0  # type: ignore[attr-defined]
    assert [(run.run_id, run.status, run.executor_id) for run in runs] == [
        ("sum", "success", "in-process")
    ]
    assert await asyncio.to_thread(lambda: "the loop's executor works") != ""


async def test_a_durable_run_streams_its_events_live(tmp_path: Path) -> None:
    durable = DurableAgent(
        counting_agent([]), name="streamed", database_url=f"sqlite:///{tmp_path / 's.db'}"
    )
    async with durable:
        run = durable.run("What is 1 + 2?", run_id="sum")
        streamed = [event async for event in run]
        result = await run
        finished = durable.follow("sum")  # ran and ended: no events here, its result
        late = [event async for event in finished]
        again = await finished
        dropped = durable.run("dropped")
        with pytest.warns(RuntimeWarning, match="never awaited or iterated"):
            del dropped  # the last reference: it is finalised at once
    assert streamed == list(result.events)
    assert [event.type for event in streamed][-1] == "complete"
    assert not any(event.replayed for event in streamed)
    assert late == []
    assert again == result


async def test_a_run_continues_a_history_and_leaves_it_as_it_was(tmp_path: Path) -> None:
    history = History()
    history.append(Message(role="user", content="Remember 7."))
    history.append(Message(role="assistant", content="Noted: 7."))
    before = history.to_dict()
    plain = await counting_agent([]).run("What is 1 + 2?", history=history)
    durable = DurableAgent(
        counting_agent([]), name="with-history", database_url=f"sqlite:///{tmp_path / 'h.db'}"
    )
    async with durable:
        result = await durable.run("What is 1 + 2?", history=history)
    assert result.all_messages == plain.all_messages
    assert [m.content for m in result.all_messages[:2]] == ["Remember 7.", "Noted: 7."]
    assert result.new_messages == plain.new_messages
    assert history.to_dict() == before


async def test_one_durable_agent_at_a_time_and_only_inside_its_context(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = counting_agent([])
    first = DurableAgent(agent, name="first-one", database_url=f"sqlite:///{tmp_path / 'a.db'}")
    second = DurableAgent(agent, name="second-one", database_url=f"sqlite:///{tmp_path / 'b.db'}")
    with pytest.raises(UserError, match="async with"):
        await first.run("hi")
    async with first:
        with pytest.raises(ConfigurationError, match="'first-one' is running"):
            await second.__aenter__()
        with pytest.raises(UserError, match="No durable run has the id 'nope'"):
            await first.result("nope")
    async with second:  # the first one left: the second may enter
        assert await second.runs() == []
    nowhere = DurableAgent(agent, name="nowhere", database_url="sqlite:////no/such/dir/x.db")
    with pytest.raises(ConfigurationError, match="could not start on sqlite:////no/such/dir"):
        await nowhere.__aenter__()
    async with first:  # a failed start leaves nothing behind
        assert await first.runs() == []
    monkeypatch.setenv("DBOS__CLOUD", "true")
    with pytest.raises(ConfigurationError, match="DBOS__CLOUD"):
        await first.__aenter__()


async def test_a_failed_run_raises_its_typed_error_with_the_partial_result(tmp_path: Path) -> None:
    def broken(*_: object) -> str:
        raise RuntimeError("the model's server is on fire")

    failing = Agent(FunctionClient(broken), [])
    durable = DurableAgent(failing, name="failing", database_url=f"sqlite:///{tmp_path / 'f.db'}")
    async with durable:
        with pytest.raises(ProviderError) as raised:
            await durable.run("hi", run_id="doomed")
        with pytest.raises(ProviderError) as read:
            await durable.result("doomed")
        (run,) = await durable.runs()
    for error in (raised.value, read.value):
        assert error.result is not None
        assert error.result.stop_reason == "error"
        assert [e.type for e in error.result.events] == ["llm_request", "error"]
    assert str(raised.value) == str(read.value)
    assert "RuntimeError: the model's server is on fire" in str(read.value)
    assert run.status == "error"


def test_names_and_agents_a_durable_agent_refuses() -> None:
    agent = counting_agent([])
    for name in ("ab", "Has-Upper", "with space", "x" * 257):
        with pytest.raises(UserError, match="`name`"):
            DurableAgent(agent, name=name)

    @tool(approver=lambda call: True)
    def self_approved(n: int) -> str:
        """Approved by its own approver."""
        return str(n)

    with pytest.raises(UserError, match="approvers of self_approved"):
        DurableAgent(Agent(ScriptedClient([]), [self_approved]), name="approvals")
    for timeout in (0, -1, float("nan"), True, "10"):
        with pytest.raises(UserError, match="approval_timeout"):
            DurableAgent(agent, name="approvals", approval_timeout=timeout)  # type: ignore[arg-type]
    secret = DurableAgent(agent, name="pg-bot", database_url="postgresql://bot:s3cret@127.0.0.1/db")
    assert "s3cret" not in repr(secret)
    assert "postgresql://bot:***@127.0.0.1/db" in repr(secret)
    with pytest.raises(UserError, match="must be an Agent"):
        DurableAgent(object(), name="not-an-agent")  # type: ignore[arg-type]
    other = Agent(ScriptedClient([]), name="other")
    with pytest.raises(UserError, match="cannot hand off"):
        DurableAgent(Agent(ScriptedClient([]), handoffs=[other]), name="handing")


async def test_leaving_the_context_stops_a_run_which_resumes_on_the_next_entry(
    tmp_path: Path,
) -> None:
    keys: list[str] = []
    started = asyncio.Event()

    @tool
    async def slow(ctx: ToolContext) -> str:
        """Takes long the first time."""
        keys.append(ctx.idempotency_key)
        if len(keys) == 1:
            started.set()
            await asyncio.sleep(60)
        return "slow is done"

    client = ScriptedClient([LLMResponse(tool_calls=[ToolCall("c1", "slow", {})]), "finished"])
    durable = DurableAgent(
        Agent(client, [slow]), name="stopper", database_url=f"sqlite:///{tmp_path / 's.db'}"
    )
    async with durable:
        running = asyncio.create_task(durable.run("go", run_id="long"))
        await started.wait()
    with pytest.raises(RunAborted, match="stays pending"):
        await running
    assert len(client.requests) == 1
    async with durable:  # resumes "long": its first model call is read back, not sent
        result = await durable.result("long")
        (run,) = await durable.runs()
    assert result.text == "finished"
    assert [m.content for m in result.new_messages] == ["go", "", "slow is done", "finished"]
    assert len(client.requests) == 2
    assert keys == ["long:c1", "long:c1"]  # the call in flight ran again, with its key
    assert (run.run_id, run.status) == ("long", "success")


class UnreadableFirst(BaseLLMClient):
    """Its first reply cannot be read as a tool call; then it calls `add`, then answers."""

    provider_name = "unreadable-first"
    model = "m"

    def __init__(self) -> None:
        self.sent = 0

    async def chat(self, *args: Any, **kwargs: Any) -> LLMResponse:
        raise NotImplementedError

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        system: str | None = None,
        *,
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[StreamPart]:
        self.sent += 1
        answers = sum(1 for m in messages if m.role == "assistant")
        if answers == 0:
            yield ThinkingDelta("I will call it.")
            yield TextDelta('{"tool": broken')
            raise ToolCallFormatError("the reply is no tool call", provider=self.provider_name)
        if answers == 1:
            yield LLMResponse(tool_calls=[ToolCall("c1", "add", {"a": 1, "b": 2})])
        else:
            yield TextDelta("3")
            yield LLMResponse("3", usage=Usage(5, 1))


async def test_a_replayed_run_reads_its_steps_back_failed_calls_too(tmp_path: Path) -> None:
    from dbos import DBOS

    calls: list[str] = []
    client = UnreadableFirst()
    agent = Agent(client, [counting_agent(calls).tools[0]])
    durable = DurableAgent(agent, name="replayed", database_url=f"sqlite:///{tmp_path / 'r.db'}")
    async with durable:
        first = await durable.run("1 + 2?", run_id="r")
        assert (client.sent, calls) == (3, ["add 1 2"])
        # a new workflow with the steps before the fourth (the last model call) read back
        fork = await DBOS.fork_workflow_async("r", 4)
        replayed = await durable.result(fork.get_workflow_id())
    assert (client.sent, calls) == (4, ["add 1 2"])  # only the last call ran again
    assert replayed.all_messages == first.all_messages
    assert replayed.all_messages[1].status == "unreadable"  # the failed call, read back
    assert (replayed.usage, replayed.cost, replayed.iterations) == (first.usage, first.cost, 3)
    chunks = [(e.type, e.text) for e in replayed.events if e.type.endswith("_chunk")]
    assert chunks == [
        ("thinking_chunk", "I will call it."),
        ("text_chunk", '{"tool": broken'),
        ("text_chunk", "3"),
    ]
