import asyncio
import dataclasses
import threading
from collections.abc import AsyncIterator, Sequence

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
from glassagent.errors import (
    MaxIterationsExceeded,
    ProviderError,
    RateLimitError,
    RunAborted,
    UserError,
)
from glassagent.events import Event
from glassagent.llm import Attachment, StreamPart, TextDelta, ToolDefinition
from glassagent.testing import FunctionClient, ScriptedClient


def call(name: str, call_id: str = "c1", **args: object) -> ToolCall:
    return ToolCall(call_id, name, dict(args))


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: First addend.
        b: Second addend.
    """
    return a + b


async def collect(run) -> list[Event]:
    return [event async for event in run]


def types(events: Sequence[Event]) -> list[str]:
    return [e.type for e in events]


async def test_two_tool_rounds_emit_the_full_event_sequence() -> None:
    client = ScriptedClient(
        [
            LLMResponse("Let me add.", [call("add", a=17, b=25)], usage=Usage(10, 5)),
            LLMResponse(
                "", [call("add", "c2", a=42, b=1)], thinking="Now one more.", usage=Usage(20, 5, 3)
            ),
            LLMResponse("The total is 43.", usage=Usage(30, 6)),
        ]
    )
    agent = Agent(client, [add], system="Be brief.")
    run = agent.run("What is 17 + 25 + 1?")
    events = await collect(run)

    assert types(events) == [
        "llm_request",
        "text_chunk",
        "text_chunk",
        "text_chunk",
        "llm_response",
        "function_call_start",
        "function_execution_start",
        "function_execution_complete",
        "sending_function_response",
        "llm_request",
        "thinking_chunk",
        "thinking_chunk",
        "thinking_chunk",
        "llm_response",
        "function_call_start",
        "function_execution_start",
        "function_execution_complete",
        "sending_function_response",
        "llm_request",
        "text_chunk",
        "text_chunk",
        "llm_response",
        "complete",
    ]
    assert [e.seq for e in events] == list(range(len(events)))
    assert {e.run_id for e in events} == {run.run_id}

    first_text = [e for e in events[:5] if e.type == "text_chunk"]
    assert "".join(e.text for e in first_text) == "Let me add."
    assert not any(e.is_follow_up for e in first_text)
    last_text = [e for e in events[18:] if e.type == "text_chunk"]
    assert "".join(e.text for e in last_text) == "The total is 43."
    assert all(e.is_follow_up for e in last_text)

    start = events[5]
    assert (start.function_name, start.tool_name, start.args, start.call_id) == (
        "add",
        "add",
        {"a": 17, "b": 25},
        "c1",
    )
    execution = events[7].execution
    assert (execution.result, execution.is_error, execution.call_id) == ("42", False, "c1")
    assert events[6].count == events[8].count == 1

    complete = events[-1]
    assert complete.text == "The total is 43."
    assert complete.iterations == 3
    assert complete.usage == Usage(60, 16, 3)

    result = run.result
    assert result is not None
    assert result.text == "The total is 43."
    assert result.stop_reason == "end_turn"
    assert result.iterations == 3
    assert result.events == tuple(events)
    assert [m.role for m in result.new_messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert result.new_messages[2] == Message(
        role="tool", content="42", tool_call_id="c1", name="add"
    )
    assert result.new_messages[3].thinking == "Now one more."

    # The model saw the tool results, and the request events show exactly what was sent.
    second = client.requests[1]
    assert second.messages[-1].content == "42"
    assert second.system == "Be brief."
    assert second.tools == (add.definition,)
    assert events[9].messages == second.messages


async def test_awaiting_returns_the_result() -> None:
    agent = Agent(ScriptedClient(["Hello!"]))
    result = await agent.run("Hi")
    assert result.text == "Hello!"
    assert types(result.events) == ["llm_request", "text_chunk", "llm_response", "complete"]
    assert result.all_messages == result.new_messages


async def test_iterating_then_awaiting_gives_the_same_result() -> None:
    run = Agent(ScriptedClient(["Hello there"])).run("Hi")
    events = await collect(run)
    result = await run
    assert result.events == tuple(events)


async def test_a_run_is_consumed_once() -> None:
    run = Agent(ScriptedClient(["a", "b"])).run("Hi")
    await run
    with pytest.raises(UserError, match="only once"):
        await collect(run)


async def test_concurrent_calls_run_together_and_return_in_call_order() -> None:
    slow_started = asyncio.Event()

    @tool(timeout=5)
    async def slow(x: int) -> str:
        """Waits for fast to start, then finishes last."""
        slow_started.set()
        await asyncio.sleep(0.05)
        return f"slow {x}"

    @tool(timeout=5)
    async def fast(x: int) -> str:
        """Only finishes once slow is running: proves concurrency."""
        await slow_started.wait()
        return f"fast {x}"

    client = ScriptedClient(
        [LLMResponse("", [call("slow", "c1", x=1), call("fast", "c2", x=2)]), "done"]
    )
    result = await Agent(client, [slow, fast]).run("go")
    completions = [
        e.execution.call_id for e in result.events if e.type == "function_execution_complete"
    ]
    assert completions == ["c2", "c1"]  # finished fast first ...
    tool_messages = [m for m in result.new_messages if m.role == "tool"]
    assert [(m.tool_call_id, m.content) for m in tool_messages] == [
        ("c1", "slow 1"),
        ("c2", "fast 2"),
    ]
    starts = [e for e in result.events if e.type == "function_execution_start"]
    assert starts[0].count == 2


async def test_tool_failures_are_fed_back_and_the_run_finishes() -> None:
    @tool
    def explode() -> str:
        """Always fails."""
        raise RuntimeError("kaboom")

    @tool(timeout=0.05)
    async def hang() -> str:
        """Never returns in time."""
        await asyncio.sleep(10)
        return "late"

    client = ScriptedClient(
        [
            LLMResponse(
                "",
                [
                    call("explode", "c1"),
                    call("hang", "c2"),
                    call("add", "c3", a="not a number", b=2),
                    call("nope", "c4"),
                    call("add", "c5", a=1, b=2, c=3),
                ],
            ),
            "Sorry, several tools failed.",
        ]
    )
    result = await Agent(client, [explode, hang, add]).run("go")
    assert result.text == "Sorry, several tools failed."
    outputs = {m.tool_call_id: m for m in result.new_messages if m.role == "tool"}
    assert all(m.is_error for m in outputs.values())
    assert outputs["c1"].content == "Error: tool 'explode' raised RuntimeError: kaboom"
    assert outputs["c2"].content == "Error: tool 'hang' timed out after 0.05 s."
    assert outputs["c3"].content.startswith(
        "Error: invalid arguments for tool 'add': a: Input should"
    )
    assert (
        outputs["c4"].content == "Error: unknown tool 'nope'. Available tools: explode, hang, add."
    )
    assert "c: Extra inputs are not permitted" in outputs["c5"].content
    start = next(e for e in result.events if e.type == "function_call_start" and e.call_id == "c4")
    assert start.tool_name is None
    # The model saw every error in its next request.
    assert [m.content for m in client.requests[1].messages[-5:]] == [
        outputs[f"c{i}"].content for i in range(1, 6)
    ]


async def test_tool_error_message_reaches_the_model_verbatim() -> None:
    from glassagent.errors import ToolError

    @tool
    async def lookup(key: str) -> str:
        """Look up a key."""
        raise ToolError(f"no such key {key!r}; try one of: a, b")

    client = ScriptedClient([LLMResponse("", [call("lookup", key="z")]), "ok"])
    result = await Agent(client, [lookup]).run("go")
    assert result.new_messages[2].content == "Error: no such key 'z'; try one of: a, b"


async def test_agent_tool_timeout_applies_when_the_tool_has_none() -> None:
    async def sleepy() -> str:
        """Sleeps."""
        await asyncio.sleep(10)
        return "late"

    client = ScriptedClient([LLMResponse("", [call("sleepy")]), "ok"])
    result = await Agent(client, [sleepy], tool_timeout=0.05).run("go")
    assert result.new_messages[2].content == "Error: tool 'sleepy' timed out after 0.05 s."


async def test_progress_events_arrive_live_before_the_tool_completes() -> None:
    seen_progress = asyncio.Event()

    @tool
    async def crawl(url: str, ctx: ToolContext) -> str:
        """Crawl a site."""
        await ctx.progress(f"fetching {url}")
        await asyncio.wait_for(seen_progress.wait(), 5)  # the consumer already saw it
        await ctx.progress("parsing")
        return "3 pages"

    client = ScriptedClient([LLMResponse("", [call("crawl", url="example.org")]), "done"])
    received: list[str] = []
    async for event in Agent(client, [crawl]).run("go"):
        if event.type == "tool_progress":
            assert (event.tool, event.call_id) == ("crawl", "c1")
            received.append(event.message)
            seen_progress.set()
        elif event.type == "function_execution_complete":
            assert received == ["fetching example.org", "parsing"]
            assert event.execution.result == "3 pages"
    assert received == ["fetching example.org", "parsing"]


async def test_sync_tools_run_in_a_worker_thread_and_can_report_progress() -> None:
    loop_thread = threading.get_ident()

    @tool
    def blocking(n: int, ctx: ToolContext) -> dict[str, int]:
        """A blocking tool."""
        ctx.progress_nowait("working")
        return {"n": n, "same_thread": int(threading.get_ident() == loop_thread)}

    client = ScriptedClient([LLMResponse("", [call("blocking", n=3)]), "ok"])
    result = await Agent(client, [blocking]).run("go")
    assert result.new_messages[2].content == '{"n":3,"same_thread":0}'
    progress = [e for e in result.events if e.type == "tool_progress"]
    assert [p.message for p in progress] == ["working"]
    complete = next(e for e in result.events if e.type == "function_execution_complete")
    assert progress[0].seq < complete.seq


async def test_context_carries_deps_ids_and_ui_info() -> None:
    @dataclasses.dataclass
    class Deps:
        user: str

    @tool(ui_info={"icon": "user"})
    async def whoami(ctx: ToolContext[Deps]) -> str:
        """Who is asking."""
        ctx.ui_info = {"icon": "user", "badge": ctx.deps.user}
        return f"{ctx.deps.user} {ctx.tool_name} {ctx.call_id} {ctx.run_id}"

    client = ScriptedClient([LLMResponse("", [call("whoami")]), "ok"])
    run = Agent(client, [whoami]).run("go", deps=Deps("ada"))
    result = await run
    assert result.new_messages[2].content == f"ada whoami c1 {run.run_id}"
    start = next(e for e in result.events if e.type == "function_call_start")
    assert start.ui_info == {"icon": "user"}
    execution = next(e for e in result.events if e.type == "function_execution_complete").execution
    assert execution.has_ui
    assert execution.ui_info == {"icon": "user", "badge": "ada"}


async def test_return_values_are_json_serialised() -> None:
    @dataclasses.dataclass
    class Forecast:
        city: str
        temps: list[float]

    @tool
    def forecast(city: str) -> Forecast:
        """Forecast."""
        return Forecast(city, [1.5, 2.0])

    client = ScriptedClient([LLMResponse("", [call("forecast", city="Oslo")]), "ok"])
    result = await Agent(client, [forecast]).run("go")
    assert result.new_messages[2].content == '{"city":"Oslo","temps":[1.5,2.0]}'


async def test_plain_functions_are_wrapped_automatically() -> None:
    def multiply(a: int, b: int) -> int:
        """Multiply."""
        return a * b

    client = ScriptedClient([LLMResponse("", [call("multiply", a=6, b=7)]), "42"])
    agent = Agent(client, [multiply])
    assert agent.tools[0].name == "multiply"
    result = await agent.run("6*7?")
    assert result.new_messages[2].content == "42"
    assert client.requests[0].tools[0].parameters["required"] == ["a", "b"]


def test_agent_rejects_bad_configuration() -> None:
    with pytest.raises(UserError, match="unique"):
        Agent(ScriptedClient([]), [add, add])
    with pytest.raises(UserError, match="BaseLLMClient"):
        Agent(object())  # type: ignore[arg-type]
    with pytest.raises(UserError, match="max_iterations"):
        Agent(ScriptedClient([]), max_iterations=0)
    with pytest.raises(UserError, match="tool_timeout"):
        Agent(ScriptedClient([]), tool_timeout=-1)


async def test_max_iterations_ends_with_an_error_event_and_a_typed_error() -> None:
    client = FunctionClient(lambda messages, *_: LLMResponse("again", [call("add", a=1, b=1)]))
    agent = Agent(client, [add], max_iterations=2)
    events = await collect(agent.run("loop"))  # iterating never raises
    assert events[-1].type == "error"
    assert events[-1].error_type == "MaxIterationsExceeded"
    assert len(client.requests) == 2

    with pytest.raises(MaxIterationsExceeded) as info:
        await agent.run("loop")
    partial = info.value.result
    assert partial is not None
    assert partial.stop_reason == "max_iterations"
    assert partial.iterations == 2
    assert [m.role for m in partial.new_messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]


async def test_provider_errors_end_the_run_with_the_typed_error() -> None:
    def failing(messages, *_):
        if len(messages) > 1:
            raise RateLimitError("slow down", retry_after=1.0, provider="function")
        return LLMResponse("", [call("add", a=1, b=2)])

    agent = Agent(FunctionClient(failing), [add])
    events = await collect(agent.run("go"))
    assert events[-1].type == "error"
    assert (events[-1].error, events[-1].error_type) == ("slow down", "RateLimitError")

    with pytest.raises(RateLimitError) as info:
        await agent.run("go")
    assert info.value.retry_after == 1.0
    assert info.value.result is not None
    assert info.value.result.stop_reason == "error"
    assert [m.role for m in info.value.result.new_messages] == ["user", "assistant", "tool"]


async def test_unexpected_client_exceptions_become_provider_errors() -> None:
    def broken(*_):
        raise KeyError("candidates")

    with pytest.raises(ProviderError, match="function client failed: KeyError") as info:
        await Agent(FunctionClient(broken)).run("go")
    assert isinstance(info.value.__cause__, KeyError)


async def test_running_out_of_script_is_a_clear_error() -> None:
    events = await collect(Agent(ScriptedClient([])).run("go"))
    assert events[-1].type == "error"
    assert events[-1].error_type == "UserError"
    assert "ran out of responses" in events[-1].error


async def test_conversation_settings_and_attachments_reach_the_client(tmp_path) -> None:
    image = tmp_path / "chart.png"
    image.write_bytes(b"\x89PNG")
    client = ScriptedClient(["first", "second"])
    agent = Agent(client, settings=ModelSettings(temperature=0.1, max_tokens=100))
    first = await agent.run("one", attachments=[image])
    assert first.new_messages[0].attachments == (Attachment.from_path(image),)
    second = await agent.run(
        "two", messages=first.all_messages, settings=ModelSettings(max_tokens=5)
    )
    assert [m.content for m in second.all_messages] == ["one", "first", "two", "second"]
    assert [m.content for m in second.new_messages] == ["two", "second"]
    assert client.requests[1].settings == ModelSettings(temperature=0.1, max_tokens=5)
    assert [m.content for m in client.requests[1].messages] == ["one", "first", "two"]


class SlowStreamClient(BaseLLMClient):
    """Streams one chunk, then waits forever; records whether its stream was closed."""

    provider_name = "slow"
    model = "slow-1"

    def __init__(self) -> None:
        self.closed = asyncio.Event()

    async def chat(self, messages, tools=(), system=None, *, settings=None) -> LLMResponse:
        raise NotImplementedError

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        system: str | None = None,
        *,
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[StreamPart]:
        try:
            yield TextDelta("The answer is")
            await asyncio.sleep(30)
            yield LLMResponse("never")
        finally:
            self.closed.set()


async def test_abort_mid_stream_keeps_the_partial_answer() -> None:
    client = SlowStreamClient()
    run = Agent(client).run("question")
    events = []
    async for event in run:
        events.append(event)
        if event.type == "text_chunk":
            run.abort("user pressed stop")
    assert types(events) == ["llm_request", "text_chunk", "aborted"]
    assert (events[-1].text, events[-1].reason) == ("The answer is", "user pressed stop")
    assert client.closed.is_set()  # the model stream was closed
    result = run.result
    assert result is not None
    assert result.stop_reason == "aborted"
    assert result.text == "The answer is"
    assert result.new_messages[-1] == Message(
        role="assistant", content="The answer is", status="aborted"
    )
    with pytest.raises(RunAborted) as info:
        await run
    assert info.value.reason == "user pressed stop"
    assert info.value.result is result


async def test_abort_from_another_task_while_awaiting() -> None:
    client = SlowStreamClient()
    run = Agent(client).run("question")
    task = asyncio.ensure_future(run)
    await asyncio.sleep(0.05)
    run.abort("timeout in the UI")
    with pytest.raises(RunAborted):
        await asyncio.wait_for(task, 5)
    assert client.closed.is_set()


async def test_abort_mid_tool_signals_tools_then_cancels_stragglers() -> None:
    cooperative_saw_abort = asyncio.Event()
    stubborn_cancelled = asyncio.Event()

    @tool
    async def cooperative(ctx: ToolContext) -> str:
        """Watches the abort flag."""
        await ctx.progress("started")
        await asyncio.wait_for(ctx.abort_event.wait(), 5)
        cooperative_saw_abort.set()
        return f"stopped early (aborted={ctx.is_aborted})"

    @tool
    async def stubborn() -> str:
        """Ignores the abort flag."""
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            stubborn_cancelled.set()
            raise
        return "never"

    @tool
    async def quick() -> str:
        """Finishes at once."""
        return "quick result"

    client = ScriptedClient(
        [
            LLMResponse(
                "Working on it.",
                [call("cooperative", "c1"), call("stubborn", "c2"), call("quick", "c3")],
            )
        ]
    )
    run = Agent(client, [cooperative, stubborn, quick]).run("go")
    events = []
    async for event in run:
        events.append(event)
        if event.type == "tool_progress":
            run.abort("stop")
    assert events[-1].type == "aborted"
    assert events[-1].text == "Working on it."
    assert cooperative_saw_abort.is_set()
    assert stubborn_cancelled.is_set()
    result = run.result
    assert result is not None
    tools = {m.tool_call_id: m for m in result.new_messages if m.role == "tool"}
    assert tools["c1"].content == "stopped early (aborted=True)"
    assert tools["c1"].status == "completed"
    assert tools["c2"].content == "Error: tool call aborted (stop)."
    assert (tools["c2"].status, tools["c2"].is_error) == ("aborted", True)
    assert tools["c3"].content == "quick result"
    assert [m.role for m in result.new_messages] == ["user", "assistant", "tool", "tool", "tool"]


async def test_cancelling_the_consumer_aborts_the_run() -> None:
    client = SlowStreamClient()
    run = Agent(client).run("question")
    first_chunk = asyncio.Event()

    async def consume() -> None:
        async for event in run:
            if event.type == "text_chunk":
                first_chunk.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first_chunk.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert client.closed.is_set()
    assert run.result is not None
    assert run.result.stop_reason == "aborted"
    assert run.result.new_messages[-1].status == "aborted"


async def test_abort_before_start_aborts_at_once() -> None:
    client = ScriptedClient(["never asked"])
    run = Agent(client).run("question")
    run.abort("changed my mind")
    events = await collect(run)
    assert types(events) == ["aborted"]
    assert client.requests == []


async def test_breaking_out_of_the_loop_stops_the_run() -> None:
    client = SlowStreamClient()
    async with Agent(client).run("question") as run:
        async for event in run:
            if event.type == "text_chunk":
                break
    assert client.closed.is_set()
    assert run.result is not None
    assert run.result.stop_reason == "aborted"


async def test_run_sync_works_inside_a_running_event_loop() -> None:
    agent = Agent(ScriptedClient([LLMResponse("", [call("add", a=2, b=2)]), "4"]), [add])
    result = agent.run_sync("2+2?")  # pydantic-ai and openai-agents raise here
    assert result.text == "4"
    assert result.new_messages[2].content == "4"


def test_run_sync_in_plain_code_matches_the_async_run() -> None:
    script = [LLMResponse("", [call("add", a=2, b=3)]), "5"]
    sync_result = Agent(ScriptedClient(script), [add]).run_sync("2+3?")
    async_result = asyncio.run(_run(Agent(ScriptedClient(script), [add]), "2+3?"))
    assert sync_result.text == async_result.text == "5"
    assert sync_result.new_messages == async_result.new_messages
    assert types(sync_result.events) == types(async_result.events)


async def _run(agent: Agent, prompt: str):
    return await agent.run(prompt)


def test_run_sync_raises_typed_errors_with_the_partial_result() -> None:
    agent = Agent(
        FunctionClient(lambda *_: LLMResponse("", [call("add", a=1, b=1)])), [add], max_iterations=1
    )
    with pytest.raises(MaxIterationsExceeded) as info:
        agent.run_sync("loop")
    assert info.value.result is not None
    assert info.value.result.iterations == 1


async def test_cancelling_an_awaiting_task_aborts_the_run() -> None:
    client = SlowStreamClient()
    run = Agent(client).run("question")
    task = asyncio.ensure_future(run)
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert client.closed.is_set()
    assert run.result is not None
    assert run.result.stop_reason == "aborted"
    assert run.result.events[-1].type == "aborted"
