"""A glassagent agent as a pydantic-evals task or an inspect-ai solver.

Neither package is imported until an adapter is made: importing this module (or
`glassagent.evals`) imports neither.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from glassagent._agent.agent import Agent
from glassagent._core.errors import ConfigurationError, UserError
from glassagent._core.events import to_jsonable
from glassagent._core.messages import Message

if TYPE_CHECKING:
    from glassagent._core.result import RunResult

PromptFunction = Callable[[Any], "str | Sequence[Message]"]
"""Makes the agent's input (a prompt, or a conversation ending with the user's message)
from a case's inputs."""


def _check_agent(agent: object) -> None:
    if not isinstance(agent, Agent):
        raise UserError(f"`agent` must be an Agent, got {type(agent).__name__}.")


def _missing(package: str, extra: str) -> ConfigurationError:
    return ConfigurationError(f'This needs {package}: pip install "glassagent[{extra}]"')


def _inspect_module(name: str) -> Any:
    """A module of inspect-ai (untyped here: it is not among the packages checked)."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise _missing("inspect-ai", "inspect") from exc


async def _run(agent: Agent[Any, Any], given: object) -> RunResult[Any]:
    """Run the agent on a prompt or on a conversation ending with the user's message."""
    if isinstance(given, str):
        return await agent.run(given)
    if (
        isinstance(given, Sequence)
        and given
        and all(isinstance(message, Message) for message in given)
    ):
        *earlier, last = given
        if last.role != "user":
            raise UserError(f"The conversation must end with a user message, not {last.role!r}.")
        return await agent.run(last.content, messages=earlier, attachments=last.attachments)
    raise UserError(
        "The inputs must be a prompt (str) or a conversation (a non-empty sequence of "
        f"Messages), got {type(given).__name__}; pass `prompt` to make one from them."
    )


def _output(result: RunResult[Any]) -> Any:
    """The run's output: the validated value with an output type, else the text."""
    return result.text if result.output is None else result.output


def _output_text(result: RunResult[Any]) -> str:
    output = _output(result)
    if isinstance(output, str):
        return output
    return json.dumps(to_jsonable(output), ensure_ascii=False)


def _model_calls(result: RunResult[Any]) -> int:
    return sum(1 for event in result.events if event.type == "llm_response" and event.depth == 0)


def _run_id(result: RunResult[Any]) -> str | None:
    return next((event.run_id for event in result.events if event.depth == 0), None)


def _facts(result: RunResult[Any]) -> dict[str, Any]:
    """What a run used, as plain values: run id, stop reason, tokens, model calls, cost."""
    amount = result.cost.amount
    return {
        "run_id": _run_id(result),
        "stop_reason": result.stop_reason,
        "input_tokens": result.usage.input_tokens,
        "output_tokens": result.usage.output_tokens,
        "model_calls": _model_calls(result),
        "cost": None if amount is None else float(amount),
        "currency": result.cost.currency,
    }


def pydantic_evals_task(
    agent: Agent[Any, Any],
    *,
    prompt: PromptFunction | None = None,
    metrics: bool = True,
) -> Callable[[Any], Awaitable[Any]]:
    """Make an agent a pydantic-evals task: ``await dataset.evaluate(pydantic_evals_task(agent))``.

    The task runs the agent once per case and returns the run's output (the validated value
    with ``Agent(output_type=...)``, else the text). A case's inputs are the prompt (a str)
    or a conversation (a sequence of `Message`s ending with the user's message); for any
    other inputs, `prompt` makes one of those from them. A run that raises fails its case
    (pydantic-evals reports the error and goes on with the other cases); a run that ends
    without a final answer (see `RunResult.stop_reason`) returns what it has.

    With `metrics`, each case records, through pydantic-evals' ``increment_eval_metric`` and
    ``set_eval_attribute``, the metrics ``input_tokens``, ``output_tokens``, ``model_calls``
    and ``cost`` (when priced) and the attributes ``run_id``, ``stop_reason`` and
    ``currency``. Turn them off when the runs are also traced into pydantic-evals' span tree
    (`glassagent.otel` with an OpenTelemetry SDK): pydantic-evals then counts the spans'
    tokens into the same metrics. Needs ``pip install "glassagent[pydantic-evals]"``.

    Args:
        agent: The agent to run (each case is a new run; cases may run at once).
        prompt: Makes the agent's input from a case's inputs; `None` takes them as they are.
        metrics: Record the run's tokens, model calls, cost and run id on the case.

    Returns:
        An async function of a case's inputs.

    Raises:
        UserError: When `agent` is not an Agent.
        ConfigurationError: When pydantic-evals is not installed.
    """
    _check_agent(agent)
    try:
        from pydantic_evals import increment_eval_metric, set_eval_attribute
    except ImportError as exc:
        raise _missing("pydantic-evals", "pydantic-evals") from exc

    async def glassagent_task(inputs: Any) -> Any:
        result = await _run(agent, inputs if prompt is None else prompt(inputs))
        if metrics:
            facts = _facts(result)
            for name in ("run_id", "stop_reason", "currency"):
                set_eval_attribute(name, facts[name])
            for name in ("input_tokens", "output_tokens", "model_calls", "cost"):
                if facts[name] is not None:
                    increment_eval_metric(name, facts[name])
        return _output(result)

    return glassagent_task


def inspect_solver(agent: Agent[Any, Any]) -> Any:
    """Make an agent an inspect-ai solver: ``Task(dataset=..., solver=inspect_solver(agent))``.

    The solver runs the agent on the sample's input text (``TaskState.input_text``: the input,
    or the last user message of a conversation), appends the answer to the state's messages
    as an assistant message and sets ``state.output`` (its ``completion`` is the output as
    text: a str as it is, a structured output as JSON) with the run's token usage. The run's
    id, stop reason, tokens, model calls and cost go to the sample's store under
    ``"glassagent"``. It does not call inspect's ``generate``: the agent calls its own model,
    so the task needs no model of inspect's (``model="none"``). A run that raises fails the
    sample. Needs ``pip install "glassagent[inspect]"``.

    Args:
        agent: The agent to run (each sample is a new run).

    Returns:
        An inspect-ai ``Solver``.

    Raises:
        UserError: When `agent` is not an Agent.
        ConfigurationError: When inspect-ai is not installed.
    """
    _check_agent(agent)
    solver = _inspect_module("inspect_ai.solver").solver
    model = _inspect_module("inspect_ai.model")

    def glassagent() -> Any:
        async def solve(state: Any, generate: Any) -> Any:
            result = await _run(agent, state.input_text)
            text = _output_text(result)
            name = agent.client.model
            usage = result.usage
            state.messages.append(
                model.ChatMessageAssistant(content=text, model=name, source="generate")
            )
            state.output = model.ModelOutput.from_content(model=name, content=text)
            state.output.usage = model.ModelUsage(
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                total_tokens=usage.input_tokens + usage.output_tokens,
            )
            state.store.set("glassagent", _facts(result))
            return state

        return solve

    # inspect's registry knows it as "glassagent"; @solver checks that the solver is async
    return solver(name="glassagent")(glassagent)()
