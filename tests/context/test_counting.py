"""Token counts: what a policy counts of a long conversation, and what the process keeps."""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Sequence

import pytest

from glassagent import Agent, Message
from glassagent._agent import tokens
from glassagent._agent.tokens import Sizer
from glassagent.context import MESSAGE_OVERHEAD, FitWindow, KeepTurns
from glassagent.events import ContextCompactedEvent
from glassagent.testing import FunctionClient

LONG_WORD = "extraordinarily "  # 16 characters, one token: counts far below the estimate


class WordCounter(FunctionClient):
    """A tokenizer that counts words, on a model of its own (its counts are kept apart)."""

    def __init__(self) -> None:
        super().__init__(lambda *_: "fine", model=f"words-{uuid.uuid4().hex}")
        self.asked: list[str] = []

    @property
    def tokenizer(self) -> str | None:
        return "words"

    async def count_tokens(self, texts: Sequence[str]) -> list[int] | None:
        self.asked += texts
        return [len(text.split()) for text in texts]


@pytest.fixture(autouse=True)
def own_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts with no counts kept."""
    monkeypatch.setattr(tokens, "_counted", OrderedDict())


def conversation(turns: int, word: str = LONG_WORD) -> list[Message]:
    """`turns` turns of a question and an answer of 20 words each."""
    messages = [Message(role="user", content="remember: blue", pinned=True)]
    for n in range(turns):
        messages += [
            Message(role="user", content=f"question {n} " + word * 20),
            Message(role="assistant", content=f"answer {n} " + word * 20),
        ]
    return messages


def words(messages: Sequence[Message]) -> int:
    return sum(len(m.content.split()) + MESSAGE_OVERHEAD for m in messages)


@pytest.mark.parametrize("word", [LONG_WORD, "a "], ids=["below_the_estimate", "above_it"])
async def test_fit_window_counts_only_the_newest_messages_and_chooses_as_with_all_counted(
    word: str,
) -> None:
    client = WordCounter()
    earlier = conversation(150, word)
    agent = Agent(client, context_policy=FitWindow(window=600, reserve=0))
    result = await agent.run("the last question", messages=earlier)
    assert 0 < len(client.asked) < 60  # of 302 messages
    cold = client.requests[-1].messages
    assert cold[0].pinned  # always sent, and counted
    [event] = [e for e in result.events if isinstance(e, ContextCompactedEvent)]
    assert event.tokens_after == words(cold) <= 600  # every message sent was counted
    # the same choice once every message is counted
    await Sizer(client).messages([*earlier, Message(role="user", content="the last question")])
    await agent.run("the last question", messages=earlier)
    assert client.requests[-1].messages == cold


async def test_keep_turns_counts_only_the_turns_it_sends() -> None:
    client = WordCounter()
    agent = Agent(client, context_policy=KeepTurns(2))
    result = await agent.run("the last question", messages=conversation(150))
    assert len(client.asked) == 4  # the pinned message, the last turn's two, the question
    [event] = [e for e in result.events if isinstance(e, ContextCompactedEvent)]
    assert event.tokens_after == words(client.requests[-1].messages)


async def test_counts_are_kept_by_digest_not_text_and_no_more_than_cached_texts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tokens, "CACHED_TEXTS", 10)
    client = WordCounter()
    secret = uuid.uuid4().hex
    messages = [Message(role="user", content=f"{secret} {n} " + "word " * 50) for n in range(25)]
    assert [size for _, size in await Sizer(client).messages(messages)] == [
        52 + MESSAGE_OVERHEAD
    ] * 25
    kept = tokens._counted
    assert len(kept) == 10
    assert all(isinstance(key, bytes) and len(key) == 16 for key in kept)
    assert secret not in repr(kept)
    # a new run of the same tokenizer finds the last ten, and counts the others again
    client.asked.clear()
    await Sizer(client).messages(messages)
    assert len(client.asked) == 15
    # another tokenizer's counts of the same texts are its own
    other = WordCounter()
    await Sizer(other).messages(messages[-3:])
    assert len(other.asked) == 3
