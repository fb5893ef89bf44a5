"""Context tools: scored for each run's message, the best run first, their output merged."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest

from glassagent import Agent, LLMResponse, Message, ToolCall
from glassagent.errors import RunAborted, RunTimeoutError, UserError
from glassagent.events import (
    ContextScore,
    ContextSelectionEvent,
    ContextToolCompleteEvent,
    Event,
    parse_event,
)
from glassagent.history import History
from glassagent.testing import ScriptedClient
from glassagent.tools import (
    ContextSettings,
    ContextTool,
    TurnInfo,
    context_tool,
    to_anthropic_tools,
    to_openai_tools,
)


def fixed(name: str, score: int, output: str, *, priority: int = 50) -> ContextTool:
    """A sync context tool with a constant score and output."""

    def run(query: str, ctx: TurnInfo) -> str:
        return output

    return context_tool(name=name, priority=priority, relevance=score)(run)


def selection(events: tuple[Event, ...]) -> ContextSelectionEvent:
    (event,) = [e for e in events if isinstance(e, ContextSelectionEvent)]
    return event


def completions(events: tuple[Event, ...]) -> list[ContextToolCompleteEvent]:
    return [e for e in events if isinstance(e, ContextToolCompleteEvent)]


def statuses(events: tuple[Event, ...]) -> dict[str, str]:
    return {s.tool_name: s.status for s in selection(events).scores}


async def run_agent(
    context_tools: list[ContextTool], prompt: str = "hello", **kwargs: Any
) -> tuple[ScriptedClient, Any]:
    client = ScriptedClient(["answer"])
    agent = Agent(client, context_tools=context_tools, **kwargs)
    result = await agent.run(prompt)
    return client, result


# ---- selection ---------------------------------------------------------------------------


async def test_a_score_under_min_relevance_is_not_run() -> None:
    tools = [fixed("at", 50, "A"), fixed("under", 49, "U")]
    client, result = await run_agent(tools)
    assert statuses(result.events) == {"at": "selected", "under": "below_threshold"}
    assert [e.tool_name for e in completions(result.events)] == ["at"]
    assert client.requests[0].messages[-1].content == "<context>\n[at]\nA\n</context>\n\nhello"


async def test_min_relevance_is_a_setting() -> None:
    tools = [fixed("at", 50, "A"), fixed("high", 80, "H")]
    _, result = await run_agent(tools, context_settings=ContextSettings(min_relevance=60))
    assert statuses(result.events) == {"high": "selected", "at": "below_threshold"}
    assert selection(result.events).min_relevance == 60


async def test_equal_scores_are_ranked_by_priority() -> None:
    tools = [fixed("low", 80, "L", priority=30), fixed("high", 80, "H", priority=90)]
    _, result = await run_agent(tools, context_settings=ContextSettings(max_tools=1))
    scores = selection(result.events).scores
    assert [(s.tool_name, s.status) for s in scores] == [
        ("high", "selected"),
        ("low", "over_cap"),
    ]
    assert [(s.score, s.priority) for s in scores] == [(80, 90), (80, 30)]


async def test_full_ties_keep_the_order_the_tools_were_given_in() -> None:
    tools = [fixed("first", 70, "1"), fixed("second", 70, "2"), fixed("third", 70, "3")]
    _, result = await run_agent(tools)
    assert statuses(result.events) == {
        "first": "selected",
        "second": "selected",
        "third": "over_cap",
    }


async def test_at_most_max_tools_run_the_best_ranked() -> None:
    ran: list[str] = []

    def tracked(name: str, score: int) -> ContextTool:
        @context_tool(name=name, relevance=score)
        def run(query: str, ctx: TurnInfo) -> str:
            ran.append(name)
            return name

        return run

    tools = [tracked("a", 60), tracked("b", 95), tracked("c", 70), tracked("d", 85)]
    _, result = await run_agent(tools)
    assert sorted(ran) == ["b", "d"]
    assert [(s.tool_name, s.status) for s in selection(result.events).scores] == [
        ("b", "selected"),
        ("d", "selected"),
        ("c", "over_cap"),
        ("a", "over_cap"),
    ]
    assert selection(result.events).max_tools == 2


async def test_score_beats_priority() -> None:
    tools = [fixed("important", 60, "I", priority=100), fixed("relevant", 61, "R", priority=0)]
    _, result = await run_agent(tools, context_settings=ContextSettings(max_tools=1))
    assert statuses(result.events)["relevant"] == "selected"


# ---- merging and placement ---------------------------------------------------------------


async def test_outputs_merge_in_rank_order_whatever_order_they_finish_in() -> None:
    second_done = asyncio.Event()

    @context_tool(relevance=90)
    async def slow_best(query: str, ctx: TurnInfo) -> str:
        await second_done.wait()  # finishes only after the second-ranked tool
        return "best"

    @context_tool(relevance=80)
    async def quick(query: str, ctx: TurnInfo) -> str:
        second_done.set()
        return "  second\n"

    client, result = await run_agent([quick, slow_best])
    assert [e.tool_name for e in completions(result.events)] == ["quick", "slow_best"]
    sent = client.requests[0].messages[-1].content
    assert sent == "<context>\n[slow_best]\nbest\n---\n[quick]\nsecond\n</context>\n\nhello"


async def test_every_request_of_the_run_carries_the_context() -> None:
    @context_tool
    def facts(query: str, ctx: TurnInfo) -> str:
        return "2 + 2 = 4"

    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    client = ScriptedClient(
        [LLMResponse(tool_calls=[ToolCall("c1", "add", {"a": 2, "b": 2})]), "4"]
    )
    result = await Agent(client, [add], context_tools=[facts]).run("2 + 2?")
    assert len(client.requests) == 2
    for request in client.requests:
        assert request.messages[0].content == "<context>\n[facts]\n2 + 2 = 4\n</context>\n\n2 + 2?"
    assert result.text == "4"


async def test_the_stored_user_message_stays_the_users_own_text() -> None:
    history = History()
    client = ScriptedClient(["answer"])
    agent = Agent(client, context_tools=[fixed("kb", 90, "From the knowledge base.")])
    result = await agent.run("What is new?", history=history, append_to_history=True)
    assert result.new_messages[0].content == "What is new?"
    assert result.all_messages[0].content == "What is new?"
    assert [m.content for m in history.to_messages()] == ["What is new?", "answer"]
    request = next(e for e in result.events if e.type == "llm_request")
    assert request.messages[0].content.startswith("<context>\n[kb]\nFrom the knowledge base.")


async def test_placement_in_the_system_prompt() -> None:
    tools = [fixed("kb", 90, "Fact one.")]
    settings = ContextSettings(placement="system")
    client, _ = await run_agent(tools, system="Be brief.", context_settings=settings)
    request = client.requests[0]
    assert request.system == "Be brief.\n\n<context>\n[kb]\nFact one.\n</context>"
    assert request.messages[-1].content == "hello"


async def test_placement_in_the_system_prompt_without_instructions() -> None:
    settings = ContextSettings(placement="system")
    client, _ = await run_agent([fixed("kb", 90, "Fact.")], context_settings=settings)
    assert client.requests[0].system == "<context>\n[kb]\nFact.\n</context>"


async def test_placement_in_the_message_keeps_its_attachments() -> None:
    from glassagent.llm import Attachment

    client = ScriptedClient(["ok"])
    agent = Agent(client, context_tools=[fixed("kb", 90, "Fact.")])
    picture = Attachment(data=b"\x89PNG", mime_type="image/png")
    await agent.run("look", attachments=[picture])
    sent = client.requests[0].messages[-1]
    assert sent.attachments == (picture,)
    assert sent.content.endswith("\n\nlook")


async def test_nothing_selected_leaves_the_request_alone() -> None:
    client, result = await run_agent([fixed("kb", 10, "Fact.")], system="S")
    assert client.requests[0].messages[-1].content == "hello"
    assert client.requests[0].system == "S"
    assert completions(result.events) == []


async def test_empty_and_none_outputs_are_left_out() -> None:
    @context_tool(relevance=90)
    def nothing(query: str, ctx: TurnInfo) -> None:
        return None

    tools = [nothing, fixed("blank", 80, "  \n"), fixed("kb", 70, "Fact.")]
    client, result = await run_agent(tools, context_settings=ContextSettings(max_tools=3))
    assert client.requests[0].messages[-1].content == "<context>\n[kb]\nFact.\n</context>\n\nhello"
    assert not any(e.is_error for e in completions(result.events))


async def test_an_agent_without_context_tools_emits_no_context_events() -> None:
    client = ScriptedClient(["answer"])
    result = await Agent(client).run("hello")
    assert next(e.type for e in result.events) == "llm_request"
    assert client.requests[0].messages[-1].content == "hello"


# ---- sync and async, subclasses, what ctx holds --------------------------------------------


class AsyncTasks(ContextTool):
    """The user's open tasks."""

    name = "open_tasks"
    priority = 80

    async def relevance(self, query: str, ctx: TurnInfo[Any]) -> int:
        await asyncio.sleep(0)
        return 90 if "task" in query else 0

    async def run(self, query: str, ctx: TurnInfo[Any]) -> str:
        return "; ".join(ctx.deps["tasks"])


class SyncNotes(ContextTool):
    name = "notes"
    description = "The user's notes."

    def __init__(self) -> None:
        self.thread: str | None = None

    def relevance(self, query: str, ctx: TurnInfo[Any]) -> int:
        return 70

    def run(self, query: str, ctx: TurnInfo[Any]) -> str:
        self.thread = threading.current_thread().name
        return f"notes about {query!r}"


async def test_sync_and_async_relevance_and_run() -> None:
    notes = SyncNotes()

    @context_tool(relevance=lambda query, ctx: asyncio.sleep(0, result=60))
    async def awaited(query: str, ctx: TurnInfo) -> str:
        return "async run"

    client = ScriptedClient(["ok"])
    agent = Agent(
        client,
        context_tools=[AsyncTasks(), notes, awaited],
        context_settings=ContextSettings(max_tools=3),
    )
    result = await agent.run("my tasks", deps={"tasks": ["report", "call Bob"]})
    assert statuses(result.events) == {
        "open_tasks": "selected",
        "notes": "selected",
        "awaited": "selected",
    }
    assert client.requests[0].messages[-1].content == (
        "<context>\n[open_tasks]\nreport; call Bob\n---\n[notes]\nnotes about 'my tasks'"
        "\n---\n[awaited]\nasync run\n</context>\n\nmy tasks"
    )
    assert notes.thread is not None
    assert notes.thread.startswith("glassagent-tool-notes")


async def test_ctx_holds_the_run_the_conversation_before_and_deps() -> None:
    seen: list[TurnInfo[Any]] = []

    @context_tool
    def spy(query: str, ctx: TurnInfo) -> str:
        seen.append(ctx)
        return ""

    earlier = [Message(role="user", content="hi"), Message(role="assistant", content="hello")]
    client = ScriptedClient(["ok"])
    run = Agent(client, context_tools=[spy]).run("again", messages=earlier, deps="db")
    await run
    (ctx,) = seen
    assert ctx.run_id == run.run_id
    assert ctx.messages == tuple(earlier)
    assert ctx.deps == "db"
    assert ctx.call_id is None


def test_a_subclass_takes_its_description_from_its_docstring() -> None:
    assert AsyncTasks().definition.description == "The user's open tasks."
    assert SyncNotes().definition.description == "The user's notes."


def test_a_decorated_function_stays_callable_and_described() -> None:
    @context_tool(priority=80)
    def tasks(query: str, ctx: TurnInfo) -> str:
        """Open tasks."""
        return query.upper()

    assert tasks("x", None) == "X"  # type: ignore[operator, arg-type]
    assert (tasks.name, tasks.priority, tasks.description) == ("tasks", 80, "Open tasks.")
    assert tasks.relevance("anything", None) == 100  # type: ignore[arg-type]


# ---- failures and timeouts -----------------------------------------------------------------


async def test_a_failing_run_is_skipped_and_recorded() -> None:
    @context_tool(relevance=95)
    def broken(query: str, ctx: TurnInfo) -> str:
        raise ValueError("no index")

    client, result = await run_agent([broken, fixed("kb", 80, "Fact.")])
    assert result.text == "answer"
    failed = next(e for e in completions(result.events) if e.tool_name == "broken")
    assert (failed.is_error, failed.error, failed.output) == (True, "ValueError: no index", "")
    assert client.requests[0].messages[-1].content == "<context>\n[kb]\nFact.\n</context>\n\nhello"


async def test_a_run_raising_base_exceptions_or_returning_no_text_is_skipped() -> None:
    @context_tool(relevance=90)
    async def exits(query: str, ctx: TurnInfo) -> str:
        raise SystemExit(3)

    @context_tool(relevance=90)
    async def cancels(query: str, ctx: TurnInfo) -> str:
        raise asyncio.CancelledError

    @context_tool(relevance=90)
    def number(query: str, ctx: TurnInfo) -> int:
        return 42

    settings = ContextSettings(max_tools=3)
    client, result = await run_agent([exits, cancels, number], context_settings=settings)
    errors = {e.tool_name: e.error for e in completions(result.events)}
    assert errors == {
        "exits": "SystemExit: 3",
        "cancels": "cancelled from within",
        "number": "TypeError: run returned a int, not a str or a ContextResult",
    }
    assert client.requests[0].messages[-1].content == "hello"
    assert result.stop_reason == "end_turn"


async def test_a_run_that_times_out_is_skipped() -> None:
    never = asyncio.Event()

    @context_tool(relevance=90, timeout=0.05)
    async def hangs(query: str, ctx: TurnInfo) -> str:
        await never.wait()
        return "too late"

    release = threading.Event()

    @context_tool(relevance=90)
    def blocks(query: str, ctx: TurnInfo) -> str:
        release.wait(10)
        return "too late"

    settings = ContextSettings(timeout=0.05)
    try:
        client, result = await run_agent([hangs, blocks], context_settings=settings)
    finally:
        release.set()
    errors = {e.tool_name: e.error for e in completions(result.events)}
    assert errors == {"hangs": "timed out after 0.05 s", "blocks": "timed out after 0.05 s"}
    assert client.requests[0].messages[-1].content == "hello"


async def test_a_failing_relevance_counts_as_zero_and_is_recorded() -> None:
    def raises(query: str, ctx: TurnInfo) -> int:
        raise KeyError("profile")

    async def hangs(query: str, ctx: TurnInfo) -> int:
        await asyncio.Event().wait()
        return 100

    def exits(query: str, ctx: TurnInfo) -> int:
        raise SystemExit(1)

    tools = [
        context_tool(name="raises", relevance=raises)(lambda q, c: "R"),
        context_tool(name="too_high", relevance=150)(lambda q, c: "T"),
        context_tool(name="words", relevance=lambda q, c: "high")(lambda q, c: "W"),  # type: ignore[arg-type, return-value]
        context_tool(name="hangs", relevance=hangs, timeout=0.05)(lambda q, c: "H"),
        context_tool(name="exits", relevance=exits)(lambda q, c: "E"),
        fixed("kb", 60, "Fact."),
    ]
    settings = ContextSettings(min_relevance=0, max_tools=6)
    client, result = await run_agent(tools, context_settings=settings)
    scores = {s.tool_name: s for s in selection(result.events).scores}
    assert scores["raises"].error == "KeyError: 'profile'"
    assert (
        scores["too_high"].error == "ValueError: relevance returned 150, not a number from 0 to 100"
    )
    assert scores["words"].error is not None
    assert "'high'" in scores["words"].error
    assert scores["hangs"].error == "relevance timed out after 0.05 s"
    assert scores["exits"].error == "SystemExit: 1"
    for name in ("raises", "too_high", "words", "hangs", "exits"):
        assert (scores[name].score, scores[name].status) == (0, "relevance_failed")
    assert [e.tool_name for e in completions(result.events)] == ["kb"]
    assert client.requests[0].messages[-1].content == "<context>\n[kb]\nFact.\n</context>\n\nhello"


async def test_a_float_relevance_is_rounded() -> None:
    _, result = await run_agent([context_tool(name="f", relevance=49.6)(lambda q, c: "F")])
    assert (selection(result.events).scores[0].score, statuses(result.events)["f"]) == (
        50,
        "selected",
    )


async def test_aborting_while_context_is_gathered_stops_the_run_before_any_request() -> None:
    started = asyncio.Event()

    @context_tool
    async def slow(query: str, ctx: TurnInfo) -> str:
        started.set()
        await asyncio.Event().wait()
        return "never"

    client = ScriptedClient(["answer"])
    run = Agent(client, context_tools=[slow]).run("hello")
    task = asyncio.ensure_future(run)
    await started.wait()
    run.abort("user left")
    with pytest.raises(RunAborted):
        await task
    assert client.requests == []
    assert [e.type for e in run.result.events] == ["context_selection", "aborted"]  # type: ignore[union-attr]


async def test_the_run_timeout_covers_gathering_context() -> None:
    @context_tool
    async def hangs(query: str, ctx: TurnInfo) -> str:
        await asyncio.Event().wait()
        return "never"

    client = ScriptedClient(["answer"])
    settings = ContextSettings(timeout=None)
    agent = Agent(client, context_tools=[hangs], context_settings=settings, run_timeout=0.1)
    with pytest.raises(RunTimeoutError) as caught:
        await agent.run("hello")
    assert client.requests == []
    assert caught.value.result is not None
    assert [e.type for e in caught.value.result.events] == ["context_selection", "error"]


# ---- events --------------------------------------------------------------------------------


async def test_events_show_scores_selection_outputs_and_durations() -> None:
    tools = [
        fixed("tasks", 90, "T", priority=80),
        fixed("docs", 90, "D", priority=20),
        fixed("news", 10, "N"),
    ]
    _, result = await run_agent(tools, context_settings=ContextSettings(max_tools=1))
    types = [e.type for e in result.events]
    assert types[:3] == ["context_selection", "context_tool_complete", "llm_request"]
    assert [e.seq for e in result.events] == list(range(len(types)))
    event = selection(result.events)
    assert [(s.tool_name, s.score, s.priority, s.status, s.error) for s in event.scores] == [
        ("tasks", 90, 80, "selected", None),
        ("docs", 90, 20, "over_cap", None),
        ("news", 10, 50, "below_threshold", None),
    ]
    assert all(s.duration_ms >= 0 for s in event.scores)
    (done,) = completions(result.events)
    assert (done.tool_name, done.score, done.output, done.is_error) == ("tasks", 90, "T", False)
    assert done.duration_ms >= 0


async def test_context_events_round_trip_through_json() -> None:
    @context_tool(relevance=80)
    def broken(query: str, ctx: TurnInfo) -> str:
        raise RuntimeError("down")

    _, result = await run_agent([fixed("kb", 90, "Fact."), broken])
    events = [e for e in result.events if e.type.startswith("context")]
    assert len(events) == 3
    for event in events:
        assert parse_event(json.loads(json.dumps(event.to_dict()))) == event
    assert events[0].to_dict()["scores"][0] == {
        "tool_name": "kb",
        "score": 90,
        "priority": 50,
        "status": "selected",
        "error": None,
        "duration_ms": selection(result.events).scores[0].duration_ms,
    }
    assert isinstance(selection(result.events).scores[0], ContextScore)


# ---- offered to the model as a tool ------------------------------------------------------


async def test_a_context_tool_is_also_a_tool_the_model_can_call() -> None:
    seen: list[TurnInfo[Any]] = []

    @context_tool(relevance=0)
    async def search(query: str, ctx: TurnInfo) -> str:
        """Search the knowledge base."""
        seen.append(ctx)
        return f"results for {query}"

    schema = {
        "type": "object",
        "properties": {"query": {"type": "string", "description": "What to look up."}},
        "required": ["query"],
        "additionalProperties": False,
    }
    assert search.definition.name == "search"
    assert search.definition.parameters == schema
    assert to_openai_tools([search])[0]["function"]["description"] == "Search the knowledge base."
    assert to_anthropic_tools([AsyncTasks()])[0]["name"] == "open_tasks"

    call = ToolCall("c1", "search", {"query": "refunds"})
    client = ScriptedClient([LLMResponse(tool_calls=[call]), "done"])
    agent = Agent(client, [search], context_tools=[search])
    result = await agent.run("hello", deps="db")
    assert client.requests[0].tools == (search.definition,)
    tool_message = result.new_messages[2]
    assert (tool_message.role, tool_message.content) == ("tool", "results for refunds")
    (ctx,) = seen
    assert (ctx.call_id, ctx.messages, ctx.deps) == ("c1", (), "db")
    assert search.as_tool() is search.as_tool()


async def test_a_sync_context_tool_called_by_the_model_runs_in_a_thread() -> None:
    notes = SyncNotes()
    client = ScriptedClient(
        [LLMResponse(tool_calls=[ToolCall("c1", "notes", {"query": "q"})]), "ok"]
    )
    result = await Agent(client, [notes]).run("hello")
    assert result.new_messages[2].content == "notes about 'q'"
    assert notes.thread is not None
    assert notes.thread.startswith("glassagent-tool-notes")


# ---- configuration errors ------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"min_relevance": 101},
        {"min_relevance": -1},
        {"max_tools": 0},
        {"placement": "user"},
        {"timeout": 0},
        {"timeout": True},
        {"min_relevance": 50.5},
    ],
)
def test_bad_settings_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(UserError):
        ContextSettings(**kwargs)


def test_bad_context_tools_are_refused() -> None:
    client = ScriptedClient([])
    with pytest.raises(UserError, match="must be 1-64"):
        context_tool(name="no spaces")(lambda q, c: "")
    with pytest.raises(UserError, match="priority"):
        context_tool(name="x", priority=101)(lambda q, c: "")
    with pytest.raises(UserError, match="timeout"):
        context_tool(name="x", timeout=-1)(lambda q, c: "")
    with pytest.raises(UserError, match="unique"):
        Agent(client, context_tools=[fixed("kb", 1, ""), fixed("kb", 2, "")])
    with pytest.raises(UserError, match="ContextTool"):
        Agent(client, context_tools=[lambda q, c: ""])  # type: ignore[list-item]

    class Nameless(ContextTool):
        def run(self, query: str, ctx: TurnInfo[Any]) -> str:
            return ""

    with pytest.raises(UserError, match="must be 1-64"):
        Agent(client, context_tools=[Nameless()])
