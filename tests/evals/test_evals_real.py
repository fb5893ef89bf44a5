"""A five-case dataset with expected tool calls on the embedded model (``pytest -m real_model``).

What is checked is the report, not the model: every case and attempt is there, with its
scores, reasons, usage, latency and recorded events, and the trajectory scores agree with
the calls the recorded events hold.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from glassagent import Agent, ModelSettings
from glassagent._evals.model import Case, Dataset
from glassagent._evals.report import Report
from glassagent._evals.runner import evaluate
from glassagent._evals.trajectory import match_calls
from glassagent.events import load_events
from glassagent.local import LocalServer, ensure_default_model

pytestmark = pytest.mark.real_model

CASES = [
    {
        "name": "weather",
        "input": "What is the weather in Paris? Use the tool.",
        "expected_tool_calls": [
            {"name": "get_weather", "arguments": {"city": "Paris"}, "optional": ["unit"]}
        ],
        "tags": ["one-call"],
    },
    {
        "name": "sum",
        "input": "Add 17 and 25 with the add tool.",
        "expected_tool_calls": [{"name": "add", "arguments": {"a": 17, "b": 25}}],
        "tags": ["one-call"],
    },
    {
        "name": "two-cities",
        "input": "Get the weather in Oslo and in Rome.",
        "expected_tool_calls": [
            {"name": "get_weather", "arguments": {"city": "Oslo"}},
            {"name": "get_weather", "any_of": {"city": ["Rome", "Roma"]}},
        ],
        "tool_order": "any_order",
        "tags": ["many-calls"],
    },
    {
        "name": "weather-unit",
        "input": "What is the weather in Tokyo, in celsius?",
        "expected_tool_calls": [
            {
                "name": "get_weather",
                "arguments": {"city": "Tokyo"},
                "any_of": {"unit": ["celsius", "c"]},
                "optional": ["unit"],
            }
        ],
        "tags": ["one-call"],
    },
    {
        "name": "no-tool",
        "input": "What is the capital of France? Answer in one word, without tools.",
        "expected_output": "Paris",
        "expected_tool_calls": [],
        "evaluators": ["contains", "trajectory"],
        "tags": ["no-call"],
    },
]


def get_weather(city: str, unit: str = "celsius") -> str:
    """The current weather in a city.

    Args:
        city: The city's name.
        unit: ``celsius`` or ``fahrenheit``.
    """
    return f"Sunny, 21 degrees {unit} in {city}."


def add(a: int, b: int) -> int:
    """The sum of two integers."""
    return a + b


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    ensure_default_model()
    with LocalServer(context_size=2048) as running:
        yield running


async def test_five_cases_on_the_embedded_model_give_a_complete_report(
    server: LocalServer, tmp_path: Path
) -> None:
    path = tmp_path / "tools.jsonl"
    path.write_text("".join(json.dumps(case) + "\n" for case in CASES), encoding="utf-8")
    dataset = Dataset.load(path)
    settings = ModelSettings(temperature=0, max_tokens=96)
    async with server.client() as client:

        def agent(case: Case) -> Agent:
            return Agent(
                client, [get_weather, add], settings=settings, max_iterations=4, stop_repeats=True
            )

        report = await evaluate(
            agent, dataset, concurrency=2, record_dir=tmp_path / "run", progress=False
        )
        provider, model = client.provider_name, client.model

    assert (report.name, report.dataset) == ("tools", "tools")
    assert [case.name for case in report.cases] == [case["name"] for case in CASES]
    assert (report.config["provider"], report.config["model"]) == (provider, model)
    summary = report.summary
    assert (summary.cases, summary.attempts) == (5, 5)
    assert summary.passed == sum(case.attempts[0].passed for case in report.cases)
    assert summary.input_tokens > 0
    assert summary.model_calls >= 5
    for written, case in zip(CASES, report.cases, strict=True):
        assert case.tags == tuple(written["tags"])
        (attempt,) = case.attempts
        assert attempt.latency_ms > 0
        if attempt.error is not None:  # a run that failed is reported, with nothing scored
            assert (attempt.passed, attempt.score, attempt.scores) == (False, 0.0, ())
            continue
        named = written.get("evaluators", ["trajectory"])
        assert [score.evaluator for score in attempt.scores] == named, case.name
        for score in attempt.scores:
            assert 0.0 <= score.score <= 1.0
            assert score.reason
        assert attempt.passed == all(score.passed for score in attempt.scores)
        assert attempt.input_tokens > 0
        assert attempt.model_calls >= 1
        # the trajectory score is what the recorded calls give
        assert attempt.events is not None
        events = load_events(tmp_path / "run" / attempt.events)
        calls = [
            c for e in events if e.type == "llm_response" and not e.depth for c in e.tool_calls
        ]
        assert attempt.tool_calls == len(calls)
        expected = dataset.cases[report.cases.index(case)]
        trajectory = next(s for s in attempt.scores if s.evaluator == "trajectory")
        again = match_calls(expected.expected_tool_calls or (), calls, order=expected.tool_order)
        assert (trajectory.score, trajectory.reason) == (again.score, again.reason)
    saved = Report.load(tmp_path / "run" / "report.json")
    assert saved.to_dict() == report.to_dict()
