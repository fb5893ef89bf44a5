"""`evaluate`: concurrency within its limit, repeats and pass@k, timeouts, budgets, failures,
custom evaluators, recorded events that replay, and the judge's cost in the report."""

from __future__ import annotations

import asyncio
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from glassagent import Agent, Budget, LLMResponse, Message, ToolCall, Usage, tool
from glassagent.errors import DatasetError, UserError
from glassagent.evals import Case, Dataset, EvalContext, ExpectedCall, Judge, Score, evaluate
from glassagent.events import load_events
from glassagent.testing import FunctionClient, ReplayClient, ScriptedClient
from tests.support.profiles import acme_profiles


def last_user(messages: tuple[Message, ...]) -> str:
    return next(m.content for m in reversed(messages) if m.role == "user")


def capitals(n: int) -> Dataset:
    return Dataset("capitals", [Case(f"c{i}", f"Say {i}", str(i)) for i in range(n)])


def echo(messages: tuple[Message, ...], *_: Any) -> str:
    return last_user(messages).removeprefix("Say ")


async def test_every_case_is_scored_and_summed_up() -> None:
    report = await evaluate(Agent(FunctionClient(echo)), capitals(3), progress=False)
    assert [case.name for case in report.cases] == ["c0", "c1", "c2"]
    assert all(case.pass_rate == 1.0 for case in report.cases)
    attempt = report.cases[0].attempts[0]
    assert attempt.scores == (Score("exact", 1.0, True, "the answer is the expected text"),)
    assert (attempt.output, attempt.stop_reason, attempt.model_calls) == ("0", "end_turn", 1)
    summary = report.summary
    assert (summary.cases, summary.attempts, summary.passed, summary.mean_score) == (3, 3, 3, 1.0)
    assert report.config["provider"] == "function"
    assert report.config["evaluators"] == ["exact"]
    assert report.dataset == report.name == "capitals"


@pytest.mark.parametrize("limit", [1, 3])
async def test_no_more_attempts_run_at_once_than_the_limit(limit: int) -> None:
    running = most = 0

    async def slow(messages: tuple[Message, ...], *_: Any) -> str:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.05)
        running -= 1
        return echo(messages)

    started = time.perf_counter()
    report = await evaluate(Agent(FunctionClient(slow)), capitals(9), concurrency=limit)
    elapsed = time.perf_counter() - started
    assert most == limit  # never more, and the limit is used
    assert report.summary.passed == 9
    assert elapsed >= 0.05 * 9 / limit * 0.9
    assert report.config["concurrency"] == limit


async def test_repeats_give_pass_at_k_mean_and_spread() -> None:
    answers = iter(["Paris", "Lyon", "Paris", "Nice"])
    client = FunctionClient(lambda *_: next(answers))
    case = Case("capital", "Capital of France?", "Paris")
    report = await evaluate(Agent(client), [case], repeat=4, concurrency=1)
    (result,) = report.cases
    assert [a.repeat for a in result.attempts] == [0, 1, 2, 3]
    assert [a.passed for a in result.attempts] == [True, False, True, False]
    assert (result.pass_rate, result.mean_score, result.score_stdev) == (0.5, 0.5, 0.5)
    assert result.pass_at_k == {1: 0.5, 2: pytest.approx(5 / 6), 3: 1.0, 4: 1.0}
    assert report.to_dict()["cases"][0]["pass_at_k"]["2"] == pytest.approx(5 / 6)
    assert report.config["repeat"] == 4


async def test_a_factory_makes_a_fresh_agent_per_attempt() -> None:
    made: list[str] = []

    def factory(case: Case) -> Agent[Any, Any]:
        made.append(case.name)
        return Agent(FunctionClient(echo, model=f"m-{case.name}"))

    report = await evaluate(factory, capitals(2), repeat=2)
    assert sorted(made) == ["c0", "c0", "c1", "c1"]
    assert report.summary.passed == 4
    assert report.config["model"].startswith("m-c")


async def test_an_attempt_past_its_timeout_fails_and_the_others_pass() -> None:
    async def answer(messages: tuple[Message, ...], *_: Any) -> str:
        if "1" in last_user(messages):
            await asyncio.sleep(30)
        return echo(messages)

    agent = Agent(FunctionClient(answer))
    started = time.perf_counter()
    report = await evaluate(agent, capitals(3), timeout=0.3)
    assert time.perf_counter() - started < 5
    slow = report.case("c1").attempts[0]
    assert not slow.passed
    assert slow.score == 0.0
    assert slow.error is not None
    assert slow.error.startswith("RunTimeoutError")
    assert slow.scores == ()
    assert slow.latency_ms == pytest.approx(300, abs=250)
    assert report.case("c0").pass_rate == report.case("c2").pass_rate == 1.0
    assert agent.run_timeout is None  # the caller's agent is left alone
    assert report.config["timeout_s"] == 0.3


@tool
def lookup(city: str) -> str:
    """Look a city up."""
    return f"{city}: 21 C"


async def test_the_budget_stops_each_attempt() -> None:
    def answer(messages: tuple[Message, ...], *_: Any) -> LLMResponse:
        if messages[-1].role == "tool":
            return LLMResponse("21 C in Paris")
        return LLMResponse(tool_calls=[ToolCall("t1", "lookup", {"city": "Paris"})])

    agent = Agent(FunctionClient(answer), [lookup])
    case = Case(
        "weather",
        "Weather in Paris?",
        "21 C in Paris",
        expected_tool_calls=[ExpectedCall("lookup", {"city": "Paris"})],
    )
    free = await evaluate(agent, [case])
    assert free.cases[0].attempts[0].passed
    assert [s.evaluator for s in free.cases[0].attempts[0].scores] == ["exact", "trajectory"]
    stopped = (await evaluate(agent, [case], budget=Budget(max_model_calls=1))).cases[0]
    attempt = stopped.attempts[0]
    assert (attempt.stop_reason, attempt.model_calls, attempt.tool_calls) == ("budget", 1, 1)
    assert not attempt.passed
    assert {s.evaluator: s.passed for s in attempt.scores} == {"exact": False, "trajectory": True}
    assert agent.budget is None


async def test_a_case_that_raises_is_an_attempt_with_its_error() -> None:
    def answer(messages: tuple[Message, ...], *_: Any) -> str:
        if "2" in last_user(messages):
            raise RuntimeError("the model fell over")
        return echo(messages)

    def factory(case: Case) -> Agent[Any, Any]:
        if case.name == "c0":
            raise ValueError("no agent for c0")
        return Agent(FunctionClient(answer))

    report = await evaluate(factory, capitals(4))
    errors = {case.name: case.attempts[0].error for case in report.cases}
    assert errors["c0"] == "ValueError: no agent for c0"
    assert errors["c1"] is None
    assert errors["c3"] is None
    assert errors["c2"] is not None
    assert "the model fell over" in errors["c2"]
    failed = report.case("c2").attempts[0]
    assert (failed.score, failed.passed, failed.stop_reason) == (0.0, False, None)
    assert report.summary.passed == 2


async def test_custom_evaluators_sync_and_async_and_one_that_raises() -> None:
    def short(ctx: EvalContext) -> bool:
        return len(ctx.text) < 3

    async def graded(ctx: EvalContext) -> float:
        await asyncio.sleep(0)
        return 0.25

    def broken(ctx: EvalContext) -> Score:
        raise KeyError("oops")

    report = await evaluate(
        Agent(FunctionClient(echo)), capitals(1), evaluators=[short, graded, broken]
    )
    attempt = report.cases[0].attempts[0]
    assert [(s.evaluator, s.score, s.passed) for s in attempt.scores] == [
        ("exact", 1.0, True),
        ("short", 1.0, True),
        ("graded", 0.25, False),
        ("broken", 0.0, False),
    ]
    assert attempt.scores[-1].reason == "the evaluator raised KeyError: 'oops'"
    assert attempt.score == pytest.approx((1 + 1 + 0.25 + 0) / 4)
    assert not attempt.passed


async def test_a_case_with_nothing_to_check_passes_when_it_ends() -> None:
    report = await evaluate(Agent(ScriptedClient(["hi"])), [Case("free", "Say hi")])
    assert report.cases[0].attempts[0].scores[0].evaluator == "completed"
    assert report.summary.passed == 1


async def test_recorded_events_replay_with_the_replay_client(tmp_path: Path) -> None:
    def answer(messages: tuple[Message, ...], *_: Any) -> LLMResponse:
        if messages[-1].role == "tool":
            return LLMResponse(f"It is {messages[-1].content}")
        return LLMResponse(tool_calls=[ToolCall("t1", "lookup", {"city": "Paris"})])

    history = (Message(role="user", content="Hello"), Message(role="assistant", content="Hi"))
    case = Case("weather/paris", (*history, Message(role="user", content="Weather in Paris?")))
    report = await evaluate(
        Agent(FunctionClient(answer), [lookup]), [case], repeat=2, record_dir=tmp_path
    )
    first = report.cases[0].attempts[0]
    assert first.events is not None
    assert first.events.startswith("cases/weather_paris_")
    assert first.events.endswith("-0.jsonl")
    recording = tmp_path / first.events
    assert recording.is_file()
    assert (tmp_path / report.cases[0].attempts[1].events).is_file()  # type: ignore[operator]
    assert load_events(recording)[-1].type == "complete"
    assert (tmp_path / "report.json").is_file()
    replay = ReplayClient(recording)
    replayed = await Agent(replay, [lookup]).run("Weather in Paris?", messages=history)
    replay.check(replayed)
    assert replayed.text == first.output == "It is Paris: 21 C"


async def test_the_judges_cost_counts_in_the_attempt_and_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with acme_profiles(tmp_path / "profiles", monkeypatch):
        agent = Agent(
            ScriptedClient([LLMResponse("Paris", usage=Usage(1000, 0))], model="acme-priced")
        )
        verdict = ToolCall("v", "final_result", {"score": 1.0, "reason": "right"})
        judge_client = ScriptedClient(
            [LLMResponse(tool_calls=[verdict], usage=Usage(2000, 100))], model="acme-priced"
        )
        case = Case("capital", "Capital of France?", evaluators=["judge"])
        report = await evaluate(agent, [case], evaluators=[Judge(judge_client)])
    attempt = report.cases[0].attempts[0]
    assert [s.evaluator for s in attempt.scores] == ["judge"]
    assert attempt.evaluator_cost == Decimal("0.0024")  # 2000 x $1 + 100 x $4 per 1M
    assert attempt.cost == Decimal("0.0034")  # and the run's 1000 x $1
    assert report.summary.cost == Decimal("0.0034")


async def test_a_case_naming_the_judge_needs_one_and_arguments_are_checked() -> None:
    agent = Agent(ScriptedClient([]))
    with pytest.raises(DatasetError, match="'judge' needs a model"):
        await evaluate(agent, [Case("c", "q", evaluators=["judge"])])
    for bad in ({"concurrency": 0}, {"repeat": 0}, {"timeout": -1}, {"budget": 3}):
        with pytest.raises(UserError):
            await evaluate(agent, [Case("c", "q")], **bad)
    with pytest.raises(DatasetError, match="already"):
        await evaluate(agent, [Case("c", "q"), Case("c", "r")])


def test_the_progress_bar_shows_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    report = asyncio.run(evaluate(Agent(FunctionClient(echo)), capitals(2), progress=True))
    assert report.summary.passed == 2
    err = capsys.readouterr().err
    assert "eval" in err
    assert "2/2" in err
    assert "2 passed" in err
