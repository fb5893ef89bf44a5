"""Long conversations keep running: 200 turns on a 4,096-token model, with a context policy.

Each turn is a run appended to one `History`; the scripted model records every request, so
"every request fits" and "no call is sent without its result" are checked on what was sent.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from glassagent import Agent, Message, RunResult, tool
from glassagent.agent import estimate_tokens
from glassagent.context import SUMMARY_HEADING, FitWindow, Summarize
from glassagent.errors import ContextLengthError, ProviderUnavailableError
from glassagent.events import ContextCompactedEvent, LLMRequestEvent, parse_event
from glassagent.history import History
from glassagent.testing import FunctionClient, RecordedRequest
from tests.support.context import WINDOW, Model, is_summarizer, question, sent_pairs

TURNS = 200


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"The value of {key} is " + "x" * 300


def asked(turn: int) -> str:
    """Every third turn asks for a lookup (two rounds of tool calls)."""
    return ("look up " if turn % 3 == 0 else "") + question(turn)


async def converse(agent: Agent[None, str], history: History, turns: int) -> list[Message]:
    """Run `turns` turns on `history`; return every message the runs produced, in order."""
    produced: list[Message] = []
    for turn in range(turns):
        result = await agent.run(asked(turn), history=history, append_to_history=True)
        assert result.stop_reason == "end_turn"
        produced += result.new_messages
    return produced


def model_requests(model: Model) -> list[RecordedRequest]:
    return [r for r in model.client.requests if not is_summarizer(r.system)]


def assert_calls_kept_with_results(requests: list[RecordedRequest]) -> None:
    """In every request, each tool call has its results right after it, and the reverse."""
    for request in requests:
        calls, results = sent_pairs(request.messages)
        assert calls == results
        for i, message in enumerate(request.messages):
            if message.tool_calls:
                answers = request.messages[i + 1 : i + 1 + len(message.tool_calls)]
                assert [m.tool_call_id for m in answers] == [c.id for c in message.tool_calls]


@pytest.mark.parametrize("policy", [FitWindow(), Summarize()], ids=["fit_window", "summarize"])
async def test_a_200_turn_conversation_keeps_running_on_a_4096_token_model(
    small_model: str, policy: FitWindow | Summarize
) -> None:
    model = Model(calls=2)
    agent = Agent(model.client, [lookup], context_policy=policy)
    history = History()
    produced = await converse(agent, history, TURNS)
    requests = model_requests(model)
    assert len(requests) == TURNS + 2 * len(range(0, TURNS, 3))
    sizes = [estimate_tokens(r.messages, r.tools, r.system) for r in requests]
    assert max(sizes) <= WINDOW * 3 // 4  # the window, less a quarter left for the answer
    if isinstance(policy, FitWindow):  # only whole turns go: what is sent stays near the limit
        assert min(sizes[len(sizes) // 2 :]) > WINDOW // 2
    assert_calls_kept_with_results(requests)
    # the stored tree keeps every message, summaries included
    thread = history.thread()
    assert len(history) == len(thread) == len(produced)
    assert [(m.role, m.content, m.summary_of) for m in thread] == [
        (m.role, m.content, m.summary_of) for m in produced
    ]
    summaries = [m for m in thread if m.summary_of is not None]
    if isinstance(policy, Summarize):
        assert len(summaries) >= 5  # written as the window filled, not for every call
        assert model.summaries <= 2 * len(summaries)  # a long transcript goes in two pieces
        assert all(m.role == "system" for m in summaries)
        assert summaries[-1].summary_of is not None
        assert summaries[-1].summary_of > TURNS
    else:
        assert summaries == []
        assert model.summaries == 0


async def test_without_a_policy_the_same_conversation_is_refused_for_length(
    small_model: str,
) -> None:
    model = Model(calls=2)
    agent = Agent(model.client, [lookup])
    with pytest.raises(ContextLengthError):
        await converse(agent, History(), TURNS)


async def test_a_summary_round_trips_through_both_versions_and_a_later_turn_reuses_it(
    small_model: str, tmp_path: Path
) -> None:
    model = Model()
    agent = Agent(model.client, context_policy=Summarize(keep_turns=2))
    history = History()
    await converse(agent, history, 20)
    assert model.summaries >= 1
    [summary] = [m for m in history.thread() if m.summary_of is not None][-1:]
    for version in ("1", "2.0"):
        path = tmp_path / f"chat-{version}.json"
        history.save(path, version=version)
        loaded = History.load(path)
        assert len(loaded) == len(history)
        assert loaded[summary.id].summary_of == summary.summary_of
        assert loaded[summary.id].to_message().summary_of == summary.summary_of
        assert loaded.to_messages() == history.to_messages()  # summaries included
    # the next turn, on the loaded history, sends the summary instead of what it covers
    calls = model.summaries
    loaded = History.load(tmp_path / "chat-1.json")
    result = await agent.run("And then?", history=loaded, append_to_history=True)
    assert model.summaries == calls  # reused, not written again
    request = model.client.requests[-1]
    assert f"{SUMMARY_HEADING}\n{summary.content}" in (request.system or "")
    assert all(m.summary_of is None for m in request.messages)
    assert len(request.messages) < len(loaded.to_messages()) - (summary.summary_of or 0) + 5
    [event] = [e for e in result.events if isinstance(e, ContextCompactedEvent)]
    assert (event.new_summary, event.summary, event.summary_of) == (
        False,
        summary.content,
        summary.summary_of,
    )


async def test_the_context_compacted_event_counts_and_round_trips(small_model: str) -> None:
    model = Model(calls=3)
    agent = Agent(model.client, [lookup], context_policy=Summarize(keep_turns=1))
    history = History()
    await converse(agent, history, 9)
    prior = sum(1 for m in history.to_messages() if m.summary_of is None)  # not summaries
    result = await agent.run("look up " + question(99), history=history, append_to_history=True)
    events = [e for e in result.events if isinstance(e, ContextCompactedEvent)]
    requests = [e for e in result.events if isinstance(e, LLMRequestEvent)]
    assert len(requests) == 4  # three rounds of calls, then the answer
    assert 1 <= len(events) < len(requests)  # only when what is left out changes
    for event in events:
        request = result.events[result.events.index(event) + 1]
        assert isinstance(request, LLMRequestEvent)
        assert request.iteration == event.iteration
        assert event.policy == "summarize"
        assert event.window == WINDOW
        # the user's message, then an answer and a result per round before this call
        assert event.messages_before == prior + 1 + 2 * (event.iteration - 1)
        assert event.messages_after == len(request.messages)
        assert event.messages_before - event.messages_after == len(event.dropped)
        assert event.tokens_after < event.tokens_before
        estimate = estimate_tokens(request.messages, request.tools, request.system)
        assert estimate - len(request.messages) - 2 <= event.tokens_after <= estimate
        assert event.tokenizer == "estimate"
        assert event.summary is not None
        assert parse_event(event.to_dict()) == event


async def summarizing_turn(agent: Agent[None, str], history: History) -> RunResult[str]:
    """Run turns until one writes a summary; return that turn's result."""
    for turn in range(40):
        result = await agent.run(question(turn), history=history, append_to_history=True)
        if any(isinstance(e, ContextCompactedEvent) and e.new_summary for e in result.events):
            return result
    raise AssertionError("no turn wrote a summary")


async def test_a_separate_summarizer_is_used_and_its_calls_count_as_the_runs(
    small_model: str,
) -> None:
    writer, model = Model(), Model()
    agent = Agent(model.client, context_policy=Summarize(client=writer.client))
    result = await summarizing_turn(agent, History())
    assert model.summaries == 0
    assert writer.summaries == len(writer.client.requests) >= 1
    [event] = [e for e in result.events if isinstance(e, ContextCompactedEvent)]
    assert event.usage.output_tokens == 12 * writer.summaries  # what the writer reported
    assert result.usage == event.usage  # the run's own model reports no usage
    assert event.cost is not None
    assert not event.cost.priced


async def test_a_failed_summary_leaves_the_oldest_turns_out_instead(small_model: str) -> None:
    def broken(*_: object) -> str:
        raise ProviderUnavailableError("the summarizer is down", provider="function")

    model = Model()
    agent = Agent(model.client, context_policy=Summarize(client=FunctionClient(broken)))
    history = History()
    events: list[ContextCompactedEvent] = []
    for turn in range(30):
        result = await agent.run(question(turn), history=history, append_to_history=True)
        events += [e for e in result.events if isinstance(e, ContextCompactedEvent)]
    assert events
    assert all(e.summary is None for e in events)
    assert any(e.dropped for e in events)
    assert all("the summarizer is down" in (e.summary_error or "") for e in events)
    assert max(model.sizes) <= WINDOW * 3 // 4
    assert all(m.summary_of is None for m in history.thread())


async def test_a_request_that_cannot_fit_is_still_refused(small_model: str) -> None:
    model = Model()
    agent = Agent(model.client, context_policy=FitWindow())
    history = History()
    await converse(agent, history, 3)
    with pytest.raises(ContextLengthError):  # the user's message alone is over the window
        await agent.run("x" * 4 * (WINDOW + 10), history=history)
    assert len(model.sizes) == 3
