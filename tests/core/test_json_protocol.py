"""The JSON tool protocol's reply parser, on a corpus of the replies models really write."""

import json
from typing import Any

import httpx
import pytest
import respx

from glassagent import tool
from glassagent.llm import Message, OllamaClient, OpenAICompatibleClient, ToolDefinition

BASE = "http://127.0.0.1:8080/v1"
ADD = ToolDefinition("add", "Add two integers.", {"type": "object", "properties": {}})
HI = [Message(role="user", content="Hi")]
CALL = {"name": "add", "input": {"a": 17, "b": 25}}
PROTOCOL_CALL = json.dumps({"thought": "I will add.", "tool_call": CALL})

# reply -> (calls as (name, input), text, thinking)
READABLE: dict[str, tuple[str, list[tuple[str, dict[str, Any]]], str, str | None]] = {
    "plain": (PROTOCOL_CALL, [("add", {"a": 17, "b": 25})], "", "I will add."),
    "fenced": (f"```json\n{PROTOCOL_CALL}\n```", [("add", {"a": 17, "b": 25})], "", "I will add."),
    "fenced-no-language": (
        f"```\n{PROTOCOL_CALL}```",
        [("add", {"a": 17, "b": 25})],
        "",
        "I will add.",
    ),
    "prose-around": (
        f"Sure! Here is my call:\n{PROTOCOL_CALL}\nLet me know.",
        [("add", {"a": 17, "b": 25})],
        "",
        "I will add.",
    ),
    "braces-in-prose-first": (
        f"I use {{curly}} braces. {PROTOCOL_CALL}",
        [("add", {"a": 17, "b": 25})],
        "",
        "I will add.",
    ),
    "list-of-calls": (
        json.dumps(
            [{"tool_call": CALL}, {"tool_call": {"name": "add", "input": {"a": 1, "b": 2}}}]
        ),
        [("add", {"a": 17, "b": 25}), ("add", {"a": 1, "b": 2})],
        "",
        None,
    ),
    "tool-calls-key": (
        json.dumps({"thought": "Both.", "tool_calls": [CALL, CALL]}),
        [("add", {"a": 17, "b": 25}), ("add", {"a": 17, "b": 25})],
        "",
        "Both.",
    ),
    "unquoted-argument-keys": (
        '{"thought": "add", "tool_call": {"name": "add", "input": {a: 17, b: 25}}}',
        [("add", {"a": 17, "b": 25})],
        "",
        "add",
    ),
    "unquoted-keys-everywhere": (
        '{thought: "add", tool_call: {name: "add", input: {a: 17, b: 25}}, meta: {"k": 1}}',
        [("add", {"a": 17, "b": 25})],
        "",
        "add",
    ),
    "single-quotes": (
        "{'tool_call': {'name': 'add', 'input': {'a': 17, 'b': 25}}}",
        [("add", {"a": 17, "b": 25})],
        "",
        None,
    ),
    "trailing-commas-and-python-literals": (
        '{"tool_call": {"name": "add", "input": {"a": 17, "b": 25, "c": True, "d": None,},},}',
        [("add", {"a": 17, "b": 25, "c": True, "d": None})],
        "",
        None,
    ),
    "bare-name-arguments": (
        '{"name": "add", "arguments": {"a": 17, "b": 25}}',
        [("add", {"a": 17, "b": 25})],
        "",
        None,
    ),
    "input-as-json-string": (
        json.dumps({"tool_call": {"name": "add", "input": json.dumps({"a": 17, "b": 25})}}),
        [("add", {"a": 17, "b": 25})],
        "",
        None,
    ),
    "answer": ('{"thought": "Easy.", "response": "It is 42."}', [], "It is 42.", "Easy."),
    "answer-not-a-string": ('{"response": {"sum": 42}}', [], '{"sum": 42}', None),
    "answer-after-prose": ('Answer: {"response": "42"} done', [], "42", None),
}

UNREADABLE = {
    "not-json": ("The answer is 42.", "no JSON object"),
    "empty": ("", "no JSON object"),
    "truncated": ('{"thought": "x", "tool_call": {"name": "add", "input": {"a": 1', "no JSON"),
    "no-protocol-keys": ('{"answer": 42}', "neither a 'tool_call' nor a 'response'"),
}


async def reply(text: str) -> Any:
    body = {
        "object": "chat.completion",
        "model": "qwen",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
    }
    with respx.mock:
        respx.post(f"{BASE}/chat/completions").mock(return_value=httpx.Response(200, json=body))
        client = OpenAICompatibleClient("qwen", base_url=BASE, tool_protocol="json")
        return await client.chat([Message(role="user", content="17 + 25?")], [ADD])


@pytest.mark.parametrize(
    ("text", "calls", "answer", "thinking"), READABLE.values(), ids=READABLE.keys()
)
async def test_readable_replies(text, calls, answer, thinking) -> None:
    response = await reply(text)
    assert response.protocol_error is None
    assert [(c.name, c.input) for c in response.tool_calls] == calls
    assert all(not c.provider_metadata for c in response.tool_calls)
    assert len({c.id for c in response.tool_calls}) == len(calls)
    assert response.text == answer
    assert response.thinking == thinking
    assert response.stop_reason == ("tool_use" if calls else "end_turn")


@pytest.mark.parametrize(("text", "why"), UNREADABLE.values(), ids=UNREADABLE.keys())
async def test_unreadable_replies_become_the_final_text_with_the_reason(text, why) -> None:
    response = await reply(text)
    assert response.text == text
    assert response.tool_calls == ()
    assert "did not follow the JSON tool protocol" in response.protocol_error
    assert why in response.protocol_error


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"tool_call": {"name": "add", "input": 5}}', "'input' must be a JSON object"),
        ('{"tool_call": {"input": {"a": 1}}}', "needs a string 'name'"),
        ('{"tool_call": "add(1, 2)"}', "needs a string 'name'"),
    ],
)
async def test_malformed_tool_calls_carry_an_error_for_the_model(text, problem) -> None:
    response = await reply(text)
    assert response.protocol_error is None
    (call,) = response.tool_calls
    assert call.input == {}
    assert call.arguments_error is not None
    assert problem in call.arguments_error


@tool
def lookup(meta: dict[str, object] | None = None) -> str:
    """Look something up."""
    return "ok"


@respx.mock
async def test_json_protocol_repair_keeps_python_words_inside_the_answer() -> None:
    reply = "{'thought': 'checked', 'response': 'None of the files match. True story.'}"
    respx.post("http://127.0.0.1:11434/api/chat").respond(
        json={"message": {"role": "assistant", "content": reply}, "done": True}
    )
    client = OllamaClient("m", base_url="http://127.0.0.1:11434", tool_protocol="json")
    response = await client.chat(HI, [lookup.definition])
    assert response.text == "None of the files match. True story."
    assert response.protocol_error is None
