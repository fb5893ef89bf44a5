"""`Agent(stop_repeats=True)`: a model that repeats its calls is made to answer."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from glassagent import Agent, LLMResponse, Message, ModelSettings, ToolCall, tool
from glassagent.errors import MaxIterationsExceeded
from glassagent.llm import ToolDefinition
from glassagent.testing import FunctionClient

CALLS: list[str] = []


@tool
def list_files(path: str) -> str:
    """List the files of a folder.

    Args:
        path: The folder.
    """
    CALLS.append(path)
    return "README.md\nhello.py"


def looping(seen: list[ModelSettings | None]) -> FunctionClient:
    """A model that lists the same folder until it is offered no tools, then answers."""

    def answer(
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        system: str | None,
        settings: ModelSettings | None,
    ) -> LLMResponse:
        seen.append(settings)
        if settings is not None and settings.tool_choice == "none":
            return LLMResponse("README.md and hello.py")
        return LLMResponse(tool_calls=(ToolCall(f"c{len(seen)}", "list_files", {"path": "."}),))

    return FunctionClient(answer)


async def test_a_repeated_round_runs_once_more_then_the_model_must_answer() -> None:
    CALLS.clear()
    seen: list[ModelSettings | None] = []
    result = await Agent(looping(seen), [list_files], stop_repeats=True).run("List the files.")
    assert result.text == "README.md and hello.py"
    assert result.stop_reason == "end_turn"
    assert CALLS == [".", "."]  # the repeat ran (its result is real), then no more
    choices = [s.tool_choice if s is not None else None for s in seen]
    assert choices == [None, None, "none"]
    requests = [e for e in result.events if e.type == "llm_request"]
    assert requests[-1].settings.tool_choice == "none"  # the events show why it answered


async def test_without_stop_repeats_the_model_loops_until_max_iterations() -> None:
    CALLS.clear()
    seen: list[ModelSettings | None] = []
    agent = Agent(looping(seen), [list_files], max_iterations=4)
    with pytest.raises(MaxIterationsExceeded):
        await agent.run("List the files.")
    assert CALLS == ["."] * 4


async def test_different_arguments_are_no_repeat() -> None:
    calls = iter([("a",), ("b",), ()])

    def answer(
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        system: str | None,
        settings: ModelSettings | None,
    ) -> LLMResponse:
        assert settings is None or settings.tool_choice is None
        folders = next(calls)
        if not folders:
            return LLMResponse("done")
        return LLMResponse(tool_calls=(ToolCall(folders[0], "list_files", {"path": folders[0]}),))

    result = await Agent(FunctionClient(answer), [list_files], stop_repeats=True).run("List")
    assert result.text == "done"
