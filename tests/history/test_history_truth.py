"""The history is the truth: what the user typed, what the model said, what the protocol added.

A reply the server could not read is kept as an unreadable assistant attempt (with what came of
it), the correction the agent sends back is a ``protocol`` message, never a user message, and a
turn left mid-answer keeps the partial answer marked aborted. Every history here is saved in
both versions, read back, and its user messages counted against what the user typed.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from glassagent import Agent, BaseLLMClient, LLMResponse, Message, ToolCall, tool
from glassagent.errors import ToolCallFormatError
from glassagent.history import History, HistoryMessage
from glassagent.llm import ModelSettings, StreamPart, TextDelta, ToolDefinition


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: First addend.
        b: Second addend.
    """
    return a + b


class StumblingClient(BaseLLMClient):
    """Streams a broken tool call the server cannot read, then calls `add`, then answers."""

    provider_name = "stumbling"
    model = "stumbling-1"

    def __init__(self) -> None:
        self.sent: list[list[Message]] = []

    async def chat(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        system: str | None = None,
        *,
        settings: ModelSettings | None = None,
    ) -> LLMResponse:
        raise AssertionError("the agent streams")

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        system: str | None = None,
        *,
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[StreamPart]:
        self.sent.append(list(messages))
        call = len(self.sent)
        if call == 1:
            yield TextDelta('<tool_call>{"name": "ad')
            raise ToolCallFormatError("the server could not read the model's reply", status=500)
        if call == 2:
            yield LLMResponse(tool_calls=(ToolCall("c1", "add", {"a": 1, "b": 1}),))
        else:
            yield TextDelta("It is 2.")
            yield LLMResponse("It is 2.")


def typed_by_user(messages: Sequence[HistoryMessage | Message]) -> list[str]:
    return [m.content for m in messages if m.role == "user" and not m.protocol]


@pytest.mark.parametrize("version", ["1", "2.0"])
async def test_an_unreadable_reply_is_kept_and_its_correction_is_not_the_users(
    version: str, tmp_path: Path
) -> None:
    client = StumblingClient()
    history = History()
    result = await Agent(client, [add]).run(
        "What is 1 plus one?", history=history, append_to_history=True
    )
    assert result.text == "It is 2."
    path = tmp_path / "chat.json"
    history.save(path, version=version)  # type: ignore[arg-type]
    thread = History.load(path).thread()

    assert typed_by_user(thread) == ["What is 1 plus one?"]
    attempt, correction = thread[1], thread[2]
    assert (attempt.role, attempt.status, attempt.content) == (
        "assistant",
        "unreadable",
        '<tool_call>{"name": "ad',
    )
    assert correction.role == "user"
    assert correction.protocol
    assert "The tools that exist are: add." in correction.content
    assert [m.role for m in thread[3:]] == ["assistant", "tool", "assistant"]
    # within the run the model saw its own attempt and the correction
    assert [(m.role, m.status) for m in client.sent[1]] == [
        ("user", "completed"),
        ("assistant", "unreadable"),
        ("user", "completed"),
    ]
    # a later turn does not send the protocol's traffic again
    later = History.load(path).to_messages()
    assert [m.role for m in later] == ["user", "assistant", "tool", "assistant"]
    assert typed_by_user(later) == ["What is 1 plus one?"]


async def test_the_events_show_the_attempt_and_the_protocol_message() -> None:
    run = Agent(StumblingClient(), [add]).run("What is 1 plus one?")
    events = [event async for event in run]
    requests = [e for e in events if e.type == "llm_request"]
    second = requests[1].to_dict()["messages"]
    assert [(m["role"], m["status"], m["protocol"]) for m in second] == [
        ("user", "completed", False),
        ("assistant", "unreadable", False),
        ("user", "completed", True),
    ]
    first = next(e for e in events if e.type == "llm_response")
    assert first.text == '<tool_call>{"name": "ad'
    assert first.protocol_error is not None


class HangingClient(BaseLLMClient):
    """Streams the start of an answer, then waits forever (until the run is aborted)."""

    provider_name = "hanging"
    model = "hanging-1"

    def __init__(self) -> None:
        self.started = asyncio.Event()

    async def chat(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        system: str | None = None,
        *,
        settings: ModelSettings | None = None,
    ) -> LLMResponse:
        raise AssertionError("the agent streams")

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        system: str | None = None,
        *,
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[StreamPart]:
        yield TextDelta("The sea is ")
        self.started.set()
        await asyncio.Event().wait()
        yield LLMResponse("never")  # pragma: no cover


async def test_a_turn_left_mid_answer_keeps_the_partial_answer_and_nothing_else(
    tmp_path: Path,
) -> None:
    client = HangingClient()
    history = History()
    history.append(Message(role="user", content="hi"))
    history.append(Message(role="assistant", content="Hello."))
    run = Agent(client, [add]).run("A poem about the sea", history=history, append_to_history=True)
    consumer = asyncio.create_task(_consume(run))
    await asyncio.wait_for(client.started.wait(), 5)
    run.abort("the client left")
    with pytest.raises(Exception, match="aborted"):
        await asyncio.wait_for(consumer, 5)
    path = tmp_path / "chat.json"
    history.save(path)
    thread = History.load(path).thread()
    assert typed_by_user(thread) == ["hi", "A poem about the sea"]
    assert [(m.role, m.status, m.content) for m in thread[2:]] == [
        ("user", "completed", "A poem about the sea"),
        ("assistant", "aborted", "The sea is "),
    ]


async def _consume(run: object) -> None:
    async for _ in run:  # type: ignore[attr-defined]
        pass
    await run  # type: ignore[misc]


def test_a_protocol_flag_that_is_not_a_boolean_is_refused(tmp_path: Path) -> None:
    history = History()
    history.append(Message(role="user", content="hi", protocol=True))
    path = tmp_path / "chat.json"
    history.save(path)
    assert History.load(path).thread()[0].protocol
    text = path.read_text("utf-8").replace('"protocol":true', '"protocol":"yes"')
    path.write_text(text, "utf-8")
    with pytest.raises(ValueError, match="protocol: must be a boolean"):
        History.load(path)


async def test_a_next_turn_on_the_results_messages_does_not_resend_the_protocols_traffic() -> None:
    first = await Agent(StumblingClient(), [add]).run("What is 1 plus one?")
    assert [m.status for m in first.all_messages].count("unreadable") == 1
    later = StumblingClient()
    later.sent.append([])  # past its stumble: it calls `add`, then answers
    later.sent.append([])
    second = await Agent(later, [add]).run("And 2 plus 2?", messages=first.all_messages)
    assert second.text == "It is 2."
    sent = later.sent[-1]
    assert not [m for m in sent if m.protocol or m.status == "unreadable"]
    assert [m.content for m in sent if m.role == "user"] == ["What is 1 plus one?", "And 2 plus 2?"]
    # the earlier turn's record is still whole in what the run returns
    assert [m.status for m in second.all_messages].count("unreadable") == 1


async def test_a_run_that_ends_after_an_unreadable_reply_does_not_answer_with_it() -> None:
    from glassagent import Budget

    agent = Agent(StumblingClient(), [add], budget=Budget(max_model_calls=1))
    result = await agent.run("What is 1 plus one?")
    assert result.stop_reason == "budget"
    assert result.text == ""  # not the broken reply
