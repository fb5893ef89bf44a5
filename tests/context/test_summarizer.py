"""The summarizer of `Summarize`: its budget, its failures, the size of its pieces, `trigger`."""

from __future__ import annotations

from decimal import Decimal

import pytest

from glassagent import Agent, Message, RunResult, tool
from glassagent._agent.budget import NextCall
from glassagent._agent.nesting import running
from glassagent._agent.summarize import summarize
from glassagent.agent import Budget
from glassagent.context import Summarize
from glassagent.errors import ProviderUnavailableError
from glassagent.events import ContextCompactedEvent
from glassagent.history import History
from glassagent.profiles import Cost
from glassagent.testing import FunctionClient, ScriptedClient
from tests.support.context import WINDOW, Model, question
from tests.support.many_agents import ask


def compactions(result: RunResult[str]) -> list[ContextCompactedEvent]:
    return [e for e in result.events if isinstance(e, ContextCompactedEvent)]


async def filled(agent: Agent[None, str], turns: int) -> History:
    """A history of `turns` turns, each of about 200 tokens."""
    history = History()
    for turn in range(turns):
        await agent.run(question(turn), history=history, append_to_history=True)
    return history


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"The value of {key} is " + "x" * 1200  # about 300 tokens


async def test_no_summarizer_call_is_made_that_the_budget_cannot_pay_with_the_call_after_it(
    small_model: str,
) -> None:
    model = Model()
    history = await filled(Agent(model.client), 11)  # the next request passes the trigger
    limited = Agent(model.client, context_policy=Summarize(), budget=Budget(max_model_calls=1))
    result = await limited.run(question(11), history=history)
    assert model.summaries == 0  # a summary would leave no call for the answer
    assert result.stop_reason == "end_turn"  # the one call allowed answered
    [event] = compactions(result)
    assert event.summary is None
    assert "budget (max_model_calls)" in (event.summary_error or "")


async def test_a_summary_is_not_written_when_it_would_pass_the_token_budget(
    small_model: str,
) -> None:
    model = Model(calls=1)
    history = await filled(Agent(model.client), 9)
    limited = Agent(
        model.client, [lookup], context_policy=Summarize(), budget=Budget(max_tokens=5000)
    )
    result = await limited.run("look up " + question(9), history=history)
    # the first call (about 2,250 tokens) left room for the second (about 2,570), which
    # passes the trigger, but not for a summary of the older turns (about 2,000) as well
    assert result.stop_reason == "end_turn"
    assert result.iterations == 2
    assert model.summaries == 0
    [event] = compactions(result)
    assert event.iteration == 2
    assert "budget (max_tokens)" in (event.summary_error or "")


async def test_a_summary_the_budget_allows_is_written_and_counted(small_model: str) -> None:
    model = Model()
    history = await filled(Agent(model.client), 11)
    limited = Agent(model.client, context_policy=Summarize(), budget=Budget(max_model_calls=3))
    result = await limited.run(question(11), history=history)
    assert result.stop_reason == "end_turn"
    assert model.summaries == 2  # two pieces, then the answer: the three calls allowed
    [event] = compactions(result)
    assert event.new_summary
    assert event.summary_error is None
    assert event.usage.output_tokens == 2 * 12  # what the summarizer reported
    assert result.usage == event.usage  # the run's own model reports no usage


@pytest.mark.parametrize(("most", "refused"), [(3, True), (4, False)])
async def test_a_parent_runs_budget_is_checked_for_a_sub_agents_summarizer(
    most: int, refused: bool
) -> None:
    refusals: list[str | None] = []

    @tool
    def probe() -> str:
        """Ask what a summarizer call of the sub-agent would be told."""
        run = running()
        assert run is not None
        refusals.append(run._summary_refusal(NextCall(10, Cost(Decimal(0))), 1))  # type: ignore[attr-defined]
        return "probed"

    child = Agent(ScriptedClient([ask("probe", "k1"), "done"]), [probe], name="child")
    parent = Agent(
        ScriptedClient([ask("child", "p1", task="probe"), "all done"]),
        [child.as_tool()],
        budget=Budget(max_model_calls=most),
    )
    await parent.run("go")
    # two calls were made (the parent's and the child's): a summarizer call and the call
    # after it would be the third and the fourth
    why = "its calls and the model call after them would pass a parent run's budget"
    assert refusals == [f"{why} (max_model_calls)" if refused else None]


async def test_a_summarizer_that_failed_is_not_asked_again_in_the_run(small_model: str) -> None:
    asked: list[int] = []

    def broken(*_: object) -> str:
        asked.append(1)
        raise ProviderUnavailableError("the summarizer is down", provider="function")

    model = Model(calls=5)
    agent = Agent(model.client, [lookup], context_policy=Summarize(client=FunctionClient(broken)))
    history = await filled(Agent(model.client), 15)
    result = await agent.run("look up " + question(99), history=history)
    assert result.iterations == 6
    assert len(asked) == 1  # not once before each of the six calls
    events = compactions(result)
    assert events[0].summary_error == "ProviderUnavailableError: the summarizer is down"
    assert all("not asked again" in (e.summary_error or "") for e in events[1:])
    assert all(e.summary is None for e in events)
    # the next run asks again
    await agent.run(question(100), history=history)
    assert len(asked) == 2


async def test_each_piece_fits_the_summarizers_window_with_the_summary_so_far() -> None:
    policy = Summarize(max_summary_tokens=1500)
    prompts: list[tuple[str, str]] = []

    def writer(messages: tuple[Message, ...], tools: object, system: str, settings: object) -> str:
        prompts.append((system, messages[0].content))
        return "s" * 4 * 1500  # a summary as long as it may be

    messages = [Message(role="user", content=f"{n} " + "word " * 200) for n in range(40)]
    written = await summarize(
        policy, FunctionClient(writer), None, messages, window=WINDOW, timeout=None
    )
    assert written.text is not None
    assert len(prompts) > 2
    assert all(prompt.startswith("The summary so far:") for _, prompt in prompts[1:])
    for system, prompt in prompts:  # three characters a token, cautiously
        assert (len(system) + len(prompt)) // 3 + policy.max_summary_tokens <= WINDOW
    for n in range(40):  # every message was read, none cut
        assert sum(f"User: {n} word" in prompt for _, prompt in prompts) == 1


async def test_a_summarizer_window_without_room_is_an_error_not_a_call() -> None:
    client = ScriptedClient(["never"])
    policy = Summarize(max_summary_tokens=2000)
    messages = [Message(role="user", content="word " * 100)]
    written = await summarize(policy, client, "s" * 8000, messages, window=WINDOW, timeout=None)
    assert written.text is None
    assert "leaves no room" in (written.error or "")
    assert client.requests == []


async def test_trigger_is_a_share_of_the_room_left_for_the_request(small_model: str) -> None:
    model = Model()
    agent = Agent(model.client, context_policy=Summarize())  # trigger 0.8, reserve 1/4
    history = History()
    room = WINDOW - WINDOW // 4
    for turn in range(30):
        result = await agent.run(question(turn), history=history, append_to_history=True)
        written = [e for e in compactions(result) if e.new_summary]
        if written:
            break
    else:
        raise AssertionError("no summary was written")
    # written once the request passed 0.8 of the room, before it was full
    assert 0.8 * room < written[0].tokens_before <= room
    assert model.summaries >= 1
    assert all(size <= 0.8 * room for size in model.sizes[:-1])
