"""Unparsable tool arguments: a typed field of `ToolCall`, never saved in histories."""

import json

from glassagent import Agent, LLMResponse, ToolCall, tool
from glassagent.history import History
from glassagent.testing import ScriptedClient

ran: list[int] = []


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: First addend.
        b: Second addend.
    """
    ran.append(a + b)
    return a + b


BAD = ToolCall("c1", "add", {}, arguments_error="the arguments are not valid JSON: '{a: '")


async def test_a_call_with_an_arguments_error_is_not_run_and_the_model_is_told() -> None:
    ran.clear()
    client = ScriptedClient([LLMResponse("", [BAD]), "sorry"])
    result = await Agent(client, [add]).run("1+2?")
    assert ran == []
    (answer,) = [m for m in result.new_messages if m.role == "tool"]
    assert answer.is_error
    assert answer.content == (
        "Error: invalid arguments for tool 'add': the arguments are not valid JSON: '{a: '"
    )


async def test_a_saved_history_does_not_carry_the_arguments_error() -> None:
    history = History()
    client = ScriptedClient([LLMResponse("", [BAD]), "sorry"])
    await Agent(client, [add]).run("1+2?", history=history, append_to_history=True)
    saved = history.to_json().decode()
    assert "arguments_error" not in saved
    assert "invalid arguments for tool 'add'" in saved  # the error result holds the reason
    (call,) = History.from_json(saved).thread()[1].tool_calls
    assert call.to_tool_call() == ToolCall("c1", "add", {})


def test_old_histories_with_the_metadata_key_still_load_and_drop_it() -> None:
    history = History()
    client = ScriptedClient([LLMResponse("", [ToolCall("c1", "add", {}, {"sig": "s"})]), "x"])
    Agent(client, [add]).run_sync("1+2?", history=history, append_to_history=True)
    data = json.loads(history.to_json())
    (stored,) = [m for m in data["messages"] if m.get("tool_calls")]
    stored["tool_calls"][0]["provider_metadata"]["arguments_error"] = "not valid JSON"
    loaded = History.from_dict(data)
    (call,) = next(m for m in loaded.thread() if m.tool_calls).tool_calls
    assert call.provider_metadata == {"sig": "s"}
    assert call.to_tool_call().arguments_error is None
    assert b"arguments_error" not in loaded.to_json()
