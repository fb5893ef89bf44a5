import asyncio
from collections.abc import AsyncIterator, Sequence

import pytest

from glassagent import Agent, BaseLLMClient, LLMResponse, Message, ToolCall, tool
from glassagent.errors import (
    HistoryAppendError,
    MaxIterationsExceeded,
    ProviderError,
    RunAborted,
    UserError,
)
from glassagent.history import History, HistoryMessage
from glassagent.llm import Attachment, ModelSettings, StreamPart, TextDelta, ToolDefinition
from glassagent.testing import FunctionClient, ScriptedClient


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: First addend.
        b: Second addend.
    """
    return a + b


def started_history() -> History:
    history = History(title="math")
    history.append(Message(role="user", content="Hi"))
    history.append(Message(role="assistant", content="Hello! Ask me a sum."))
    return history


def roles(messages: Sequence[HistoryMessage]) -> list[str]:
    return [m.role for m in messages]


class SlowStreamClient(BaseLLMClient):
    """Streams a first chunk, then hangs until aborted."""

    provider_name = "slow"

    async def chat(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        system: str | None = None,
        *,
        settings: ModelSettings | None = None,
    ) -> LLMResponse:
        raise NotImplementedError

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        system: str | None = None,
        *,
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[StreamPart]:
        yield TextDelta("The answer is")
        await asyncio.sleep(30)
        yield LLMResponse("never")


async def test_the_thread_is_the_context_and_the_turn_is_appended() -> None:
    history = started_history()
    before = history.current_node
    client = ScriptedClient(
        [LLMResponse("Let me add.", [ToolCall("c1", "add", {"a": 1, "b": 2})]), "1 + 2 = 3"]
    )
    picture = Attachment(data=b"\x89PNG", mime_type="image/png", name="sum.png")
    result = await Agent(client, [add]).run(
        "What is 1 + 2?", history=history, append_to_history=True, attachments=[picture]
    )
    assert client.requests[0].messages == (
        Message(role="user", content="Hi"),
        Message(role="assistant", content="Hello! Ask me a sum."),
        Message(role="user", content="What is 1 + 2?", attachments=(picture,)),
    )
    thread = history.thread()
    assert roles(thread) == ["user", "assistant", "user", "assistant", "tool", "assistant"]
    user, call, answer, final = thread[2], thread[3], thread[4], thread[5]
    assert user.parent_id == before
    assert user.attachments[0].url == "data:image/png;base64,iVBORw=="
    assert call.content == "Let me add."
    assert call.tool_calls[0].function_name == "add"
    assert call.tool_calls[0].arguments == {"a": 1, "b": 2}
    assert (answer.tool_call_id, answer.content, answer.name) == ("c1", "3", "add")
    assert final.content == "1 + 2 = 3" == result.text
    assert history.current_node == final.id
    assert history.to_messages()[2:] == list(result.new_messages)
    saved = History.from_json(history.to_json())
    assert saved.to_messages() == history.to_messages()


async def test_without_append_the_history_is_only_read() -> None:
    history = started_history()
    before = history.to_json()
    client = ScriptedClient(["Sure."])
    await Agent(client).run("Go on", history=history)
    assert len(client.requests[0].messages) == 3
    assert history.to_json() == before


async def test_an_empty_history_gets_its_root_from_the_first_run() -> None:
    history = History()
    await Agent(ScriptedClient(["Hello"])).run("Hi", history=history, append_to_history=True)
    assert roles(history.thread()) == ["user", "assistant"]
    assert history.root_id == history.thread()[0].id


async def test_an_aborted_run_appends_its_partial_answer_marked_aborted() -> None:
    history = started_history()
    run = Agent(SlowStreamClient()).run("question", history=history, append_to_history=True)
    async for event in run:
        if event.type == "text_chunk":
            run.abort("user pressed stop")
    thread = history.thread()
    assert roles(thread)[2:] == ["user", "assistant"]
    assert (thread[-1].content, thread[-1].status) == ("The answer is", "aborted")
    assert history.current_node == thread[-1].id
    loaded = History.from_dict(history.to_dict("1"))
    assert loaded.thread()[-1].status == "aborted"


async def test_an_abort_during_tools_keeps_the_tool_results_it_had() -> None:
    @tool
    async def slow() -> str:
        """Never finishes on its own."""
        await asyncio.sleep(30)
        return "never"

    history = History()
    client = ScriptedClient(
        [
            LLMResponse(
                "Working.", [ToolCall("c1", "add", {"a": 1, "b": 1}), ToolCall("c2", "slow", {})]
            )
        ]
    )
    run = Agent(client, [add, slow]).run("go", history=history, append_to_history=True)
    async for event in run:
        if event.type == "function_execution_complete":
            run.abort("stop")
    thread = history.thread()
    assert roles(thread) == ["user", "assistant", "tool", "tool"]
    assert [(m.tool_call_id, m.status) for m in thread[2:]] == [
        ("c1", "completed"),
        ("c2", "aborted"),
    ]
    assert History.from_json(history.to_json()).to_dict() == history.to_dict()


async def test_an_abort_before_the_model_answers_keeps_the_question() -> None:
    history = started_history()
    run = Agent(ScriptedClient(["never"])).run("question", history=history, append_to_history=True)
    run.abort("changed my mind")
    with pytest.raises(RunAborted):
        await run
    assert [m.content for m in history.thread()][-1] == "question"


async def test_a_failed_run_appends_nothing() -> None:
    history = started_history()
    before = history.to_json()

    def fail(*args: object) -> str:
        raise ProviderError("the model is down", provider="function")

    with pytest.raises(ProviderError):
        await Agent(FunctionClient(fail)).run("Hi", history=history, append_to_history=True)
    assert history.to_json() == before
    looping = ScriptedClient(
        [LLMResponse("", [ToolCall(f"c{i}", "add", {"a": 1, "b": 1})]) for i in range(2)]
    )
    agent = Agent(looping, [add], max_iterations=2)
    with pytest.raises(MaxIterationsExceeded):
        await agent.run("Loop", history=history, append_to_history=True)
    assert history.to_json() == before


async def test_running_twice_from_the_same_node_makes_sibling_branches() -> None:
    history = started_history()
    start = history.current_node
    assert start is not None
    agent = Agent(ScriptedClient(["first answer", "second answer"]))
    await agent.run("Tell me a joke", history=history, append_to_history=True)
    first_answer = history.current_node
    history.branch(start)
    await agent.run("Tell me a joke", history=history, append_to_history=True)
    first_question, second_question = history.children(start)
    assert history.siblings(first_question) == (second_question,)
    assert [m.content for m in history.thread()][-1] == "second answer"
    assert [m.content for m in history.thread(first_answer)][-1] == "first answer"


async def test_concurrent_runs_from_one_node_branch_beside_each_other() -> None:
    history = started_history()
    start = history.current_node
    assert start is not None
    agent = Agent(ScriptedClient(["a", "b"], chunk_delay=0.01))
    runs = [agent.run(p, history=history, append_to_history=True) for p in ("one", "two")]
    await asyncio.gather(*runs)
    questions = history.children(start)
    assert sorted(history[q].content for q in questions) == ["one", "two"]
    for question in questions:
        assert roles([history[c] for c in history.children(question)]) == ["assistant"]


def test_run_sync_takes_the_same_keywords() -> None:
    history = started_history()
    result = Agent(ScriptedClient(["4"])).run_sync(
        "2 + 2?", history=history, append_to_history=True
    )
    assert result.text == "4"
    assert [m.content for m in history.thread()][-2:] == ["2 + 2?", "4"]


def test_messages_and_history_together_are_a_user_error() -> None:
    agent = Agent(ScriptedClient(["x"]))
    with pytest.raises(UserError, match="not both"):
        agent.run("x", messages=[], history=History())
    with pytest.raises(UserError, match="needs a `history`"):
        agent.run("x", append_to_history=True)


class RefusingHistory(History):
    """Refuses to append assistant messages, like a history with a stricter rule would."""

    def append(self, message: Message | HistoryMessage, parent: str | None = None) -> str:
        if message.role == "assistant":
            raise ValueError("no assistant messages here")
        return super().append(message, parent)


async def test_a_refused_append_is_a_typed_error_when_awaited() -> None:
    history = RefusingHistory()
    run = Agent(ScriptedClient(["Hello."])).run("Hi", history=history, append_to_history=True)
    with pytest.raises(HistoryAppendError, match="could not be appended") as info:
        await asyncio.wait_for(run, 5)
    error = info.value
    assert isinstance(error.__cause__, ValueError)
    assert error.result is run.result
    assert error.result is not None
    assert error.result.stop_reason == "end_turn"
    assert error.appended == (history.root_id,)  # the question went in, the answer did not
    assert roles(history.thread()) == ["user"]


async def test_a_refused_append_ends_the_stream_once_then_raises() -> None:
    history = RefusingHistory()
    run = Agent(ScriptedClient(["Hello."])).run("Hi", history=history, append_to_history=True)
    seen: list[str] = []

    async def consume() -> None:
        async for event in run:
            seen.append(event.type)

    with pytest.raises(HistoryAppendError):
        await asyncio.wait_for(consume(), 5)  # the consumer is not left waiting
    terminal = [t for t in seen if t in ("complete", "error", "aborted")]
    assert terminal == ["complete"]
    assert seen[-1] == "complete"
    with pytest.raises(HistoryAppendError):  # awaiting afterwards reports it too
        await run


async def test_a_refused_append_of_an_aborted_run_is_a_typed_error() -> None:
    history = RefusingHistory()
    run = Agent(SlowStreamClient()).run("Hi", history=history, append_to_history=True)

    async def consume() -> None:
        async for event in run:
            if event.type == "text_chunk":
                run.abort("enough")

    with pytest.raises(HistoryAppendError) as info:
        await asyncio.wait_for(consume(), 5)
    assert info.value.result is not None
    assert info.value.result.stop_reason == "aborted"


def test_a_refused_append_fails_run_sync() -> None:
    agent = Agent(ScriptedClient(["Hello."]))
    with pytest.raises(HistoryAppendError) as info:
        agent.run_sync("Hi", history=RefusingHistory(), append_to_history=True)
    assert info.value.result is not None
    assert info.value.result.text == "Hello."
