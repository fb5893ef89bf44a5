"""Agents that use agents: a writer that asks a researcher (a sub-agent), and a handoff."""

from __future__ import annotations

from typing import Any

from glassagent import Agent, LLMResponse, ToolCall, Usage, tool
from glassagent.testing import ScriptedClient

CHILD_ANSWER = "Paris, says the atlas."
PARENT_ANSWER = "The capital of France is Paris."


def ask(tool_name: str, call_id: str, usage: Usage | None = None, **args: Any) -> LLMResponse:
    """An answer that calls one tool."""
    return LLMResponse(tool_calls=[ToolCall(call_id, tool_name, args)], usage=usage or Usage())


@tool
def capital(country: str) -> str:
    """The capital of a country."""
    return {"France": "Paris"}.get(country, "unknown")


def researcher_script(answer: str = CHILD_ANSWER) -> list[Any]:
    """The researcher's model: looks the capital up, then answers."""
    return [
        ask("capital", "k1", Usage(100, 10), country="France"),
        LLMResponse(answer, usage=Usage(200, 5)),
    ]


def writer_script(answer: str = PARENT_ANSWER) -> list[Any]:
    """The writer's model: asks the researcher, then answers."""
    return [
        ask("researcher", "p1", Usage(50, 7), task="Find the capital of France."),
        LLMResponse(answer, usage=Usage(80, 4)),
    ]


def researcher(client: Any) -> Agent:
    """The sub-agent: an agent named ``researcher`` with the `capital` tool."""
    return Agent(client, [capital], name="researcher", description="Looks facts up.")


def writer(client: Any, child_client: Any) -> Agent:
    """The parent: an agent named ``writer`` that uses the researcher as a tool."""
    return Agent(client, [researcher(child_client).as_tool()], name="writer")


def scripted_writer(
    child_answer: str = CHILD_ANSWER, parent_answer: str = PARENT_ANSWER, model: str = "scripted"
) -> Agent:
    """The two-level setup with scripted models."""
    child = ScriptedClient(researcher_script(child_answer), model=model)
    return writer(ScriptedClient(writer_script(parent_answer), model=model), child)


def triage_and_billing(triage_client: Any = None, billing_client: Any = None) -> Agent:
    """``triage`` hands the conversation to ``billing``, which answers."""
    billing = Agent(
        billing_client or ScriptedClient(["Billing here: refunded."]),
        name="billing",
        system="You do billing.",
    )
    return Agent(
        triage_client or ScriptedClient([ask("transfer_to_billing", "h1")]),
        name="triage",
        handoffs=[billing],
    )
