"""What each policy sends: whole turns, the messages always kept, summaries, token counts."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from glassagent import Agent, LLMResponse, Message, ToolCall, tool
from glassagent.context import ESTIMATE, MESSAGE_OVERHEAD, FitWindow, KeepTurns, Summarize
from glassagent.errors import UserError
from glassagent.events import ContextCompactedEvent
from glassagent.history import History
from glassagent.testing import FunctionClient, ScriptedClient


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"{key} is 42"


def turn(n: int, *, calls: int = 0) -> list[Message]:
    """One earlier turn: a question, `calls` rounds of one call and its result, an answer."""
    messages = [Message(role="user", content=f"question {n}")]
    for c in range(calls):
        call = ToolCall(f"t{n}c{c}", "lookup", {"key": f"k{n}"})
        messages += [
            Message(role="assistant", tool_calls=(call,)),
            Message(role="tool", content="42", tool_call_id=call.id, name="lookup"),
        ]
    return [*messages, Message(role="assistant", content=f"answer {n}")]


def contents(messages: Sequence[Message]) -> list[str]:
    return [m.content or ",".join(c.id for c in m.tool_calls) for m in messages]


async def test_keep_turns_sends_the_last_n_turns_with_the_system_prompt_and_pinned_messages() -> (
    None
):
    note = Message(role="user", content="my name is Ada", pinned=True)
    rule = Message(role="system", content="Answer in French.")
    earlier = [*turn(0), note, Message(role="assistant", content="hi Ada"), *turn(1, calls=1)]
    earlier += [rule, *turn(2, calls=2), *turn(3)]
    client = ScriptedClient(["ok"])
    agent = Agent(client, [lookup], system="Be brief.", context_policy=KeepTurns(2))
    result = await agent.run("question 4", messages=earlier)
    [request] = client.requests
    assert request.system == "Be brief."
    assert contents(request.messages) == [
        "my name is Ada",  # pinned: it stays, but not the answer after it
        "Answer in French.",  # a system message stays where it is
        "question 3",
        "answer 3",
        "question 4",
    ]
    [event] = [e for e in result.events if isinstance(e, ContextCompactedEvent)]
    assert event.policy == "keep_turns"
    assert event.window is None
    assert event.messages_before == len(earlier) + 1
    assert event.messages_after == 5
    kept = [earlier.index(m) for m in (note, rule)] + [len(earlier) - 2, len(earlier) - 1]
    assert sorted(set(range(len(earlier))) - set(event.dropped)) == sorted(kept)
    assert result.all_messages[: len(earlier)] == tuple(earlier)  # nothing changed or lost


async def test_keep_turns_counts_the_current_turn() -> None:
    client = ScriptedClient(["ok"])
    agent = Agent(client, context_policy=KeepTurns(1))
    await agent.run("question 2", messages=[*turn(0), *turn(1)])
    assert contents(client.requests[0].messages) == ["question 2"]


async def test_fit_window_drops_whole_turns_oldest_first_and_keeps_pinned_messages() -> None:
    pinned = Message(role="user", content="remember: blue", pinned=True)
    earlier = [pinned, Message(role="assistant", content="noted")]
    for n in range(10):
        earlier += turn(n, calls=1)
    client = ScriptedClient(["ok"])
    agent = Agent(client, [lookup], context_policy=FitWindow(window=100, reserve=0))
    result = await agent.run("last question", messages=earlier)
    sent = client.requests[0].messages
    assert sent[0] is pinned
    assert sent[1].content.startswith("question")
    assert contents(sent)[-1] == "last question"
    questions = [m.content for m in sent if m.content.startswith("question")]
    first = int(questions[0].split()[1])
    assert questions == [f"question {n}" for n in range(first, 10)]
    assert 0 < first < 9
    [event] = [e for e in result.events if isinstance(e, ContextCompactedEvent)]
    assert event.tokens_after <= 100 < event.tokens_before


async def test_fit_window_drops_old_rounds_of_the_current_turn_last() -> None:
    answers: list[LLMResponse | str] = [
        LLMResponse(tool_calls=[ToolCall(f"c{i}", "lookup", {"key": "k" * 200})]) for i in range(6)
    ]
    client = ScriptedClient([*answers, "done"])
    agent = Agent(client, [lookup], context_policy=FitWindow(window=330, reserve=0))
    result = await agent.run("look it all up")
    assert result.text == "done"
    last = client.requests[-1].messages
    assert last[0].content == "look it all up"  # the user's message stays
    assert last[-2].tool_calls[0].id == "c5"
    assert last[-1].tool_call_id == "c5"
    assert len(last) < 1 + 2 * 6  # older rounds went, each call with its result
    assert [m.tool_call_id for m in last if m.role == "tool"] == [
        c.id for m in last for c in m.tool_calls
    ]


async def test_without_a_policy_summaries_are_not_sent_and_nothing_else_is_left_out() -> None:
    summary = Message(role="system", content="They talked.", summary_of=4)
    earlier = [*turn(0), summary, *turn(1)]
    client = ScriptedClient(["ok"])
    await Agent(client).run("question 2", messages=earlier)
    assert contents(client.requests[0].messages) == [
        "question 0",
        "answer 0",
        "question 1",
        "answer 1",
        "question 2",
    ]
    assert client.requests[0].system is None


async def test_summarize_sends_the_latest_summary_in_the_system_instructions() -> None:
    old = Message(role="system", content="An old summary.", summary_of=2)
    new = Message(role="system", content="They asked 0 and 1.", summary_of=4)
    earlier = [*turn(0), old, *turn(1), new, *turn(2)]
    client = ScriptedClient(["ok"])
    policy = Summarize(window=10_000)  # far from full: no new summary
    await Agent(client, system="Be brief.", context_policy=policy).run("q", messages=earlier)
    [request] = client.requests
    summary = "Summary of the earlier conversation:\nThey asked 0 and 1."
    assert request.system == f"Be brief.\n\n{summary}"
    assert contents(request.messages) == ["question 2", "answer 2", "q"]


class WordCounter(FunctionClient):
    """A client whose tokenizer counts words; it records each batch it was asked to count."""

    def __init__(self, working: bool = True) -> None:
        super().__init__(lambda *_: "fine")
        self.working = working
        self.asked: list[list[str]] = []

    @property
    def tokenizer(self) -> str | None:
        return "words"

    async def count_tokens(self, texts: Sequence[str]) -> list[int] | None:
        self.asked.append(list(texts))
        return [len(text.split()) for text in texts] if self.working else None


async def test_a_client_tokenizer_counts_each_text_once() -> None:
    client = WordCounter()
    agent = Agent(client, system="Be brief.", context_policy=FitWindow(window=60, reserve=0))
    history = History()
    events: list[ContextCompactedEvent] = []
    for n in range(8):
        ask = f"question {n} " + "word " * 10
        result = await agent.run(ask, history=history, append_to_history=True)
        events += [e for e in result.events if isinstance(e, ContextCompactedEvent)]
    assert events
    assert all(e.tokenizer == "words" for e in events)
    request = client.requests[-1]
    words = sum(len(m.content.split()) + MESSAGE_OVERHEAD for m in request.messages)
    assert events[-1].tokens_after == words + 2  # and "Be brief."
    asked = [text for batch in client.asked for text in batch]
    assert len(asked) == len(set(asked))  # the next turn's history is not counted again


async def test_a_failing_tokenizer_falls_back_to_the_estimate() -> None:
    client = WordCounter(working=False)
    agent = Agent(client, context_policy=KeepTurns(1))
    result = await agent.run("question 1", messages=turn(0))
    [event] = [e for e in result.events if isinstance(e, ContextCompactedEvent)]
    assert event.tokenizer == ESTIMATE
    assert event.tokens_after == len("question 1") // 4


async def test_a_client_without_a_tokenizer_counts_nothing() -> None:
    client = ScriptedClient(["ok"])
    assert client.tokenizer is None
    assert await client.count_tokens(["some text"]) is None


@pytest.mark.parametrize(
    "make",
    [
        lambda: KeepTurns(0),
        lambda: KeepTurns(True),
        lambda: FitWindow(reserve=-1),
        lambda: FitWindow(window=0),
        lambda: Summarize(trigger=0),
        lambda: Summarize(trigger=1.5),
        lambda: Summarize(keep_turns=0),
        lambda: Summarize(instructions=" "),
        lambda: Summarize(client="gpt"),  # type: ignore[arg-type]
        lambda: Summarize(max_summary_tokens=0),
        lambda: Agent(ScriptedClient([]), context_policy="fit"),  # type: ignore[arg-type]
    ],
)
def test_bad_policies_are_refused(make: object) -> None:
    with pytest.raises(UserError):
        make()  # type: ignore[operator]


async def test_a_user_message_the_run_adds_belongs_to_the_runs_turn() -> None:
    client = ScriptedClient(["not json", '{"city": "Paris"}'])
    agent = Agent(client, output_type=dict[str, str], context_policy=KeepTurns(1))
    result = await agent.run("Where is the Louvre?", messages=turn(0))
    assert result.output == {"city": "Paris"}
    retry = client.requests[1].messages
    assert retry[0].content == "Where is the Louvre?"  # still sent with the request to retry
    assert [m.role for m in retry] == ["user", "assistant", "user"]


def valid_on_the_second_try(
    messages: tuple[Message, ...], tools: object, system: str | None, settings: object
) -> str:
    """A model whose first answer to a question is not JSON, and the second is."""
    retried = messages[-1].content.startswith("That is not a valid answer")
    return '{"city": "Paris"}' if retried else "not json"


async def test_a_retry_for_valid_output_starts_no_turn_in_later_runs() -> None:
    structured = Agent(FunctionClient(valid_on_the_second_try), output_type=dict[str, str])
    history = History()
    await structured.run("question 1", history=history, append_to_history=True)
    assert [m.role for m in history.to_messages()] == ["user", "assistant", "user", "assistant"]
    client = ScriptedClient(["ok"])
    await Agent(client, context_policy=KeepTurns(2)).run("question 2", history=history)
    sent = client.requests[0].messages
    assert contents(sent)[0] == "question 1"  # its turn goes on to the valid answer
    assert contents(sent)[1:] == [*contents(history.to_messages())[1:], "question 2"]


async def test_summarize_does_not_cut_a_turn_at_a_retry_for_valid_output() -> None:
    structured = Agent(FunctionClient(valid_on_the_second_try), output_type=dict[str, str])
    earlier = []
    for n in range(3):
        earlier += [
            Message(role="user", content=f"question {n}"),
            Message(role="assistant", content=f"answer {n} " + "word " * 60),
        ]
    retried = await structured.run("question 3", messages=earlier)
    summarizer = ScriptedClient(["They asked 0 to 2."] * 5)
    client = ScriptedClient(["ok"])
    policy = Summarize(
        client=summarizer,
        window=200,
        reserve=0,
        keep_turns=2,
        max_summary_tokens=20,
        instructions="Summarize the conversation.",
    )
    result = await Agent(client, context_policy=policy).run(
        "question 4", messages=list(retried.all_messages)
    )
    [summary] = [m for m in result.new_messages if m.summary_of is not None]
    assert summary.summary_of == len(earlier)  # turns 0 to 2, not the question of turn 3
    transcript = "".join(r.messages[0].content for r in summarizer.requests)  # in pieces
    assert "question 2" in transcript
    assert "question 3" not in transcript
    assert contents(client.requests[0].messages) == [
        "question 3",
        "not json",
        retried.new_messages[2].content,
        '{"city": "Paris"}',
        "question 4",
    ]
