"""A glassagent agent as a pydantic-evals task and as an inspect-ai solver: outputs, scores,
the run's metrics and attributes on each case, failures as the other package reports them,
and neither package imported by ``import glassagent.evals``."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic_evals import Case, Dataset
from pydantic_evals.evaluators import EqualsExpected, Evaluator, EvaluatorContext

from glassagent import Agent, LLMResponse, Message, ToolCall, Usage, tool
from glassagent.errors import ConfigurationError, UserError
from glassagent.evals import inspect_solver, pydantic_evals_task
from glassagent.events import Event
from glassagent.testing import FunctionClient, ScriptedClient
from tests.support.profiles import acme_profiles


def say(messages: tuple[Message, ...], *_: Any) -> LLMResponse:
    """Answers "Say X" with X, except "Say 2" (with 3), for 10 tokens in and 2 out."""
    prompt = next(m.content for m in reversed(messages) if m.role == "user")
    answer = prompt.removeprefix("Say ")
    return LLMResponse("3" if answer == "2" else answer, usage=Usage(10, 2))


@dataclass
class Closeness(Evaluator[Any, Any, Any]):
    """1.0 for the expected number, less the further the output is from it."""

    def evaluate(self, ctx: EvaluatorContext[Any, Any, Any]) -> float:
        return 1 / (1 + abs(int(ctx.output) - int(ctx.expected_output)))


def numbers() -> Dataset[Any, Any, Any]:
    return Dataset(
        name="numbers",
        cases=[
            Case(name="one", inputs="Say 1", expected_output="1"),
            Case(name="two", inputs="Say 2", expected_output="2"),
        ],
        evaluators=[EqualsExpected(), Closeness()],
    )


async def test_a_dataset_evaluated_with_the_task_gets_the_outputs_and_scores() -> None:
    report = await numbers().evaluate(
        pydantic_evals_task(Agent(FunctionClient(say))), progress=False
    )
    assert report.failures == []
    cases = {case.name: case for case in report.cases}
    assert {name: case.output for name, case in cases.items()} == {"one": "1", "two": "3"}
    assert [cases[n].assertions["EqualsExpected"].value for n in ("one", "two")] == [True, False]
    assert [cases[n].scores["Closeness"].value for n in ("one", "two")] == [1.0, 0.5]


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


async def test_each_case_records_the_runs_tokens_cost_model_calls_and_run_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_ids: set[str] = set()

    def note(event: Event) -> None:
        run_ids.add(event.run_id)

    with acme_profiles(tmp_path / "profiles", monkeypatch):
        client = ScriptedClient(
            [
                LLMResponse(
                    tool_calls=[ToolCall("c1", "add", {"a": 1, "b": 2})], usage=Usage(1000, 100)
                ),
                LLMResponse("3", usage=Usage(2000, 50)),
            ],
            model="acme-priced",
        )
        agent = Agent(client, tools=[add], on_event=note)
        dataset = Dataset[Any, Any, Any](
            name="sum", cases=[Case(name="sum", inputs="1 + 2?", expected_output="3")]
        )
        report = await dataset.evaluate(pydantic_evals_task(agent), progress=False)
    (case,) = report.cases
    assert case.output == "3"
    assert case.metrics == {
        "input_tokens": 3000,
        "output_tokens": 150,
        "model_calls": 2,
        "cost": pytest.approx(0.0036),  # 3000 x $1 + 150 x $4 per 1M
    }
    (run_id,) = run_ids
    assert case.attributes == {"run_id": run_id, "stop_reason": "end_turn", "currency": "USD"}


async def test_without_metrics_nothing_is_recorded_and_an_unpriced_run_has_no_cost() -> None:
    dataset = Dataset[Any, Any, Any](name="one", cases=[Case(name="one", inputs="Say 1")])
    quiet = await dataset.evaluate(
        pydantic_evals_task(Agent(FunctionClient(say)), metrics=False), progress=False
    )
    assert (quiet.cases[0].metrics, quiet.cases[0].attributes) == ({}, {})
    loud = await dataset.evaluate(pydantic_evals_task(Agent(FunctionClient(say))), progress=False)
    assert loud.cases[0].metrics == {"input_tokens": 10, "output_tokens": 2, "model_calls": 1}


async def test_a_failing_run_and_unusable_inputs_are_reported_as_task_errors() -> None:
    dataset = Dataset[Any, Any, Any](
        name="failing",
        cases=[
            Case(name="runs out", inputs="Say 1"),
            Case(name="a number", inputs=7),
            Case(
                name="ends with the answer",
                inputs=[
                    Message(role="user", content="Hi"),
                    Message(role="assistant", content="Hello"),
                ],
            ),
        ],
    )
    report = await dataset.evaluate(pydantic_evals_task(Agent(ScriptedClient([]))), progress=False)
    assert report.cases == []
    errors = {failure.name: failure.error_message for failure in report.failures}
    assert errors["runs out"].startswith("UserError: ScriptedClient ran out of responses")
    assert errors["a number"].startswith("UserError: The inputs must be a prompt (str)")
    assert errors["ends with the answer"] == (
        "UserError: The conversation must end with a user message, not 'assistant'."
    )


async def test_conversations_and_inputs_made_into_a_prompt() -> None:
    client = FunctionClient(say)
    conversation = [
        Message(role="user", content="Say 5"),
        Message(role="assistant", content="5"),
        Message(role="user", content="Say 6"),
    ]
    dataset = Dataset[Any, Any, Any](
        name="shapes",
        cases=[Case(name="conversation", inputs=conversation), Case(name="dict", inputs={"n": 4})],
    )

    def prompt(inputs: Any) -> Any:
        return f"Say {inputs['n']}" if isinstance(inputs, dict) else inputs

    report = await dataset.evaluate(
        pydantic_evals_task(Agent(client), prompt=prompt), progress=False
    )
    assert {case.name: case.output for case in report.cases} == {"conversation": "6", "dict": "4"}
    sent = sorted([[m.content for m in request.messages] for request in client.requests], key=len)
    assert sent == [["Say 4"], ["Say 5", "5", "Say 6"]]


def test_the_adapters_want_an_agent_and_name_the_missing_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(UserError, match="must be an Agent"):
        pydantic_evals_task(FunctionClient(say))  # type: ignore[arg-type]
    with pytest.raises(UserError, match="must be an Agent"):
        inspect_solver("agent")  # type: ignore[arg-type]
    monkeypatch.setitem(sys.modules, "pydantic_evals", None)  # importing it raises ImportError
    monkeypatch.setitem(sys.modules, "inspect_ai.solver", None)
    with pytest.raises(ConfigurationError, match=r'pip install "glassagent\[pydantic-evals\]"'):
        pydantic_evals_task(Agent(FunctionClient(say)))
    with pytest.raises(ConfigurationError, match=r'pip install "glassagent\[inspect\]"'):
        inspect_solver(Agent(FunctionClient(say)))


def test_importing_glassagent_evals_imports_neither_package() -> None:
    code = (
        "import sys, glassagent.evals\n"
        "names = ('pydantic_evals', 'inspect_ai')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in names))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
    imported = subprocess.run(
        [
            sys.executable,
            "-c",
            code.replace("glassagent.evals", "glassagent.evals, pydantic_evals"),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "'pydantic_evals'" in imported.stdout  # the check sees an import when there is one


INSPECT_MISSING = (
    "inspect-ai is not installed: with its dependencies it takes about 330 MB, so it is not in "
    'the dev extra (pip install "glassagent[inspect]" to run this test)'
)


# inspect's eval leaves anyio streams of its own unclosed (as it does with a solver of its own)
@pytest.mark.filterwarnings(
    "ignore:Exception ignored in.*MemoryObjectReceiveStream:pytest.PytestUnraisableExceptionWarning"
)
async def test_the_solver_answers_inspect_samples_without_a_model(tmp_path: Path) -> None:
    pytest.importorskip("inspect_ai", reason=INSPECT_MISSING)
    from inspect_ai import Task, eval_async
    from inspect_ai.dataset import Sample
    from inspect_ai.scorer import exact

    task = Task(
        dataset=[Sample(input="Say 1", target="1"), Sample(input="Say 2", target="2")],
        solver=inspect_solver(Agent(FunctionClient(say))),
        scorer=exact(),
    )
    (log,) = await eval_async(task, model="none", log_dir=str(tmp_path))
    assert log.status == "success", log.error
    assert log.samples is not None
    samples = sorted(log.samples, key=lambda s: str(s.input))
    assert [s.output.completion for s in samples] == ["1", "3"]
    assert [s.messages[-1].role for s in samples] == ["assistant", "assistant"]
    assert [s.messages[-1].text for s in samples] == ["1", "3"]
    assert [s.scores["exact"].value for s in samples] == ["C", "I"]  # type: ignore[index]
    assert samples[0].output.usage is not None
    assert (samples[0].output.usage.input_tokens, samples[0].output.usage.output_tokens) == (10, 2)
    facts = samples[0].store["glassagent"]
    assert (facts["model_calls"], facts["stop_reason"], len(facts["run_id"])) == (1, "end_turn", 32)
