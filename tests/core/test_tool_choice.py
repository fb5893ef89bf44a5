"""`ModelSettings.tool_choice` on every wire, in the JSON tool protocol and in agent runs."""

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

from glassagent import Agent, ModelSettings, tool
from glassagent.errors import (
    ConfigurationError,
    MaxIterationsExceeded,
    ProviderUnavailableError,
    ResponseParseError,
    ToolCallFormatError,
    UserError,
)
from glassagent.events import LLMRequestEvent, parse_event
from glassagent.llm import (
    AnthropicClient,
    GeminiClient,
    LLMResponse,
    Message,
    OllamaClient,
    OpenAICompatibleClient,
    RetryPolicy,
    ToolCall,
    ToolDefinition,
)
from glassagent.profiles import profile_file_name, reload_profiles
from glassagent.testing import FunctionClient, ScriptedClient

HI = (Message(role="user", content="Hi"),)
OPENAI_URL = "http://127.0.0.1:8080/v1/chat/completions"
OLLAMA_URL = "http://127.0.0.1:11434/api/chat"
ANTHROPIC_URL = "https://api.anthropic.com/v1/messages"
GEMINI = r".*/models/gemini-2\.5-flash:generateContent$"
NO_RETRY = RetryPolicy(max_retries=0)
SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
ADD = ToolDefinition("add", "Add.", SCHEMA)
SUB = ToolDefinition("sub", "Subtract.", SCHEMA)
TOOLS = (ADD, SUB)

COMPLETION = {
    "id": "c",
    "object": "chat.completion",
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
    ],
}
OLLAMA_DONE = {
    "model": "m",
    "message": {"role": "assistant", "content": "ok"},
    "done": True,
    "done_reason": "stop",
}
ANTHROPIC_MESSAGE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "content": [{"type": "text", "text": "ok"}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 3, "output_tokens": 1},
}
GEMINI_BODY = {
    "candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]}, "index": 0}],
    "modelVersion": "gemini-2.5-flash",
}


def openai(**options: Any) -> OpenAICompatibleClient:
    options.setdefault("retry", NO_RETRY)
    return OpenAICompatibleClient("m", base_url="http://127.0.0.1:8080/v1", **options)


def sent(route: respx.Route) -> dict[str, Any]:
    return json.loads(route.calls[-1].request.content)


def choice(value: str) -> ModelSettings:
    return ModelSettings(tool_choice=value)


# ---- the setting -----------------------------------------------------------------------


@pytest.mark.parametrize("value", ["", "  ", 3, ("add",)])
def test_a_tool_choice_that_is_not_a_name_is_a_user_error(value: Any) -> None:
    with pytest.raises(UserError, match=r"ModelSettings\.tool_choice must be"):
        ModelSettings(tool_choice=value)


def test_a_later_tool_choice_overrides_an_earlier_one() -> None:
    assert choice("required").merge(choice("none")).tool_choice == "none"
    assert choice("add").merge(ModelSettings(temperature=0)).tool_choice == "add"


# ---- OpenAI-compatible -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "wire"),
    [
        ("auto", "auto"),
        ("required", "required"),
        ("none", "none"),
        ("sub", {"type": "function", "function": {"name": "sub"}}),
    ],
)
@respx.mock
async def test_openai_sends_the_tool_choice_with_all_tools(value: str, wire: Any) -> None:
    route = respx.post(OPENAI_URL).respond(json=COMPLETION)
    await openai().chat(HI, TOOLS, settings=choice(value))
    body = sent(route)
    assert [t["function"]["name"] for t in body["tools"]] == ["add", "sub"]
    assert body["tool_choice"] == wire


@respx.mock
async def test_openai_sends_no_tool_choice_without_tools_or_without_a_choice() -> None:
    route = respx.post(OPENAI_URL).respond(json=COMPLETION)
    await openai().chat(HI, settings=choice("none"))
    assert "tool_choice" not in sent(route)
    assert "tools" not in sent(route)
    await openai().chat(HI, TOOLS)
    assert "tool_choice" not in sent(route)


@respx.mock
async def test_a_name_that_is_no_tool_of_the_request_is_refused_before_sending() -> None:
    route = respx.post(OPENAI_URL).respond(json=COMPLETION)
    with pytest.raises(UserError, match=r"tool_choice='mul' names no tool .* add, sub\.$"):
        await openai().chat(HI, TOOLS, settings=choice("mul"))
    with pytest.raises(UserError, match="'required' needs at least one tool"):
        await openai().chat(HI, settings=choice("required"))
    with pytest.raises(UserError, match="'mul' names no tool"):
        await openai(tool_protocol="json").chat(HI, TOOLS, settings=choice("mul"))
    assert not route.called


# ---- the JSON tool protocol ------------------------------------------------------------


def system_of(body: dict[str, Any]) -> str:
    first = body["messages"][0]
    return first["content"] if first["role"] == "system" else ""


@respx.mock
async def test_json_protocol_offers_only_the_chosen_tool_and_says_it_must_be_called() -> None:
    route = respx.post(OPENAI_URL).respond(json=COMPLETION)
    await openai(tool_protocol="json").chat(HI, TOOLS, settings=choice("sub"))
    body = sent(route)
    system = system_of(body)
    assert "- sub: Subtract." in system
    assert "- add:" not in system
    assert system.endswith(
        'This reply must call the tool sub: reply with a "tool_call" object, not a "response".'
    )
    assert body["response_format"] == {"type": "json_object"}
    assert "tool_choice" not in body
    assert "tools" not in body


@respx.mock
async def test_json_protocol_required_lists_every_tool_and_asks_for_a_call() -> None:
    route = respx.post(OPENAI_URL).respond(json=COMPLETION)
    await openai(tool_protocol="json").chat(HI, TOOLS, settings=choice("required"))
    system = system_of(sent(route))
    assert "- add: Add." in system
    assert "- sub: Subtract." in system
    assert system.endswith(
        'This reply must call one of these tools: reply with a "tool_call" object, '
        'not a "response".'
    )


@respx.mock
async def test_json_protocol_none_offers_no_tools_and_asks_for_an_answer() -> None:
    answer = {"thought": "t", "response": "ok"}
    reply = {**COMPLETION, "choices": [{**COMPLETION["choices"][0]}]}  # type: ignore[index]
    reply["choices"][0]["message"] = {"role": "assistant", "content": json.dumps(answer)}
    route = respx.post(OPENAI_URL).respond(json=reply)
    client = openai(tool_protocol="json", json_grammar=True)
    response = await client.chat(HI, TOOLS, system="Be brief.", settings=choice("none"))
    body = sent(route)
    system = body["messages"][0]["content"]
    assert system.startswith("Be brief.\n\nNo tool can be called now")
    assert "No tool can be called now" in system
    assert "- add:" not in system
    # the reply can only be an answer, read as every protocol reply is
    schema = body["response_format"]["json_schema"]["schema"]
    assert schema["required"] == ["thought", "response"]
    assert (response.text, response.thinking, response.tool_calls) == ("ok", "t", ())
    assert response.protocol_error is None


@respx.mock
async def test_json_protocol_auto_is_the_plain_protocol() -> None:
    route = respx.post(OPENAI_URL).respond(json=COMPLETION)
    client = openai(tool_protocol="json")
    await client.chat(HI, TOOLS, settings=choice("auto"))
    with_auto = system_of(sent(route))
    await client.chat(HI, TOOLS)
    assert with_auto == system_of(sent(route))
    assert "must call" not in with_auto


# ---- Anthropic -------------------------------------------------------------------------


def anthropic() -> AnthropicClient:
    return AnthropicClient(
        "claude-sonnet-4-5", api_key="sk-ant-api03-test0123456789abcdef", retry=NO_RETRY
    )


@pytest.mark.parametrize(
    ("value", "wire"),
    [
        ("auto", {"type": "auto"}),
        ("required", {"type": "any"}),
        ("none", {"type": "none"}),
        ("sub", {"type": "tool", "name": "sub"}),
    ],
)
@respx.mock
async def test_anthropic_sends_the_tool_choice(value: str, wire: dict[str, Any]) -> None:
    route = respx.post(ANTHROPIC_URL).respond(json=ANTHROPIC_MESSAGE)
    await anthropic().chat(HI, TOOLS, settings=choice(value))
    body = sent(route)
    assert [t["name"] for t in body["tools"]] == ["add", "sub"]
    assert body["tool_choice"] == wire


@pytest.mark.parametrize("value", ["required", "sub"])
@respx.mock
async def test_anthropic_refuses_a_forced_call_with_extended_thinking(value: str) -> None:
    route = respx.post(ANTHROPIC_URL).respond(json=ANTHROPIC_MESSAGE)
    settings = ModelSettings(tool_choice=value, thinking_budget=2048)
    with pytest.raises(ConfigurationError, match=f"^anthropic cannot honour .*={value!r}"):
        await anthropic().chat(HI, TOOLS, settings=settings)
    assert not route.called
    await anthropic().chat(
        HI, TOOLS, settings=ModelSettings(tool_choice="none", thinking_budget=2048)
    )
    assert sent(route)["tool_choice"] == {"type": "none"}


# ---- Gemini ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "wire"),
    [
        ("auto", {"mode": "AUTO"}),
        ("required", {"mode": "ANY"}),
        ("none", {"mode": "NONE"}),
        ("sub", {"mode": "ANY", "allowedFunctionNames": ["sub"]}),
    ],
)
@respx.mock
async def test_gemini_sends_a_function_calling_config(value: str, wire: dict[str, Any]) -> None:
    route = respx.post(url__regex=GEMINI).respond(json=GEMINI_BODY)
    client = GeminiClient(api_key="AIzaSyD3adB33fTestKey0000000000x9Qk", retry=NO_RETRY)
    await client.chat(HI, TOOLS, settings=choice(value))
    body = sent(route)
    names = [d["name"] for d in body["tools"][0]["functionDeclarations"]]
    assert names == ["add", "sub"]
    assert body["toolConfig"] == {"functionCallingConfig": wire}


# ---- Ollama ----------------------------------------------------------------------------


def ollama(protocol: Any = "native") -> OllamaClient:
    return OllamaClient("m", base_url="http://127.0.0.1:11434", tool_protocol=protocol)


@respx.mock
async def test_ollama_honours_auto_and_none_natively() -> None:
    route = respx.post(OLLAMA_URL).respond(json=OLLAMA_DONE)
    await ollama().chat(HI, TOOLS, settings=choice("auto"))
    assert [t["function"]["name"] for t in sent(route)["tools"]] == ["add", "sub"]
    await ollama().chat(HI, TOOLS, settings=choice("none"))
    body = sent(route)
    assert "tools" not in body
    assert "tool_choice" not in body


@pytest.mark.parametrize("value", ["required", "sub"])
@respx.mock
async def test_ollama_refuses_a_forced_call_natively(value: str) -> None:
    route = respx.post(OLLAMA_URL).respond(json=OLLAMA_DONE)
    with pytest.raises(ConfigurationError, match=f"^ollama cannot honour .*tool_choice={value!r}"):
        await ollama().chat(HI, TOOLS, settings=choice(value))
    assert not route.called


@respx.mock
async def test_ollama_honours_every_choice_with_the_json_protocol() -> None:
    route = respx.post(OLLAMA_URL).respond(json=OLLAMA_DONE)
    await ollama("json").chat(HI, TOOLS, settings=choice("sub"))
    body = sent(route)
    # the reply's grammar: a call of sub, and nothing else
    assert body["format"]["properties"]["tool_call"]["properties"]["name"]["enum"] == ["sub"]
    assert "tools" not in body
    assert "- sub: Subtract." in system_of(body)
    assert "- add:" not in system_of(body)
    assert "must call the tool sub" in system_of(body)
    response = await ollama("json").chat(HI, TOOLS, settings=choice("none"))
    assert sent(route)["format"]["required"] == ["thought", "response"]
    assert "No tool can be called now" in system_of(sent(route))
    assert response.text == "ok"  # a reply that is not protocol JSON is the answer as it is


# ---- agent runs ------------------------------------------------------------------------


@tool
def add(a: int) -> int:
    """Add one.

    Args:
        a: The number.
    """
    return a + 1


def test_an_agent_refuses_a_choice_naming_a_tool_it_does_not_have() -> None:
    with pytest.raises(UserError, match=r"'mul' names no tool .* add"):
        Agent(ScriptedClient([]), [add], settings=choice("mul"))
    agent = Agent(ScriptedClient([]), [add])
    with pytest.raises(UserError, match="'mul' names no tool"):
        agent.run("hi", settings=choice("mul"))


async def test_a_forcing_choice_holds_until_tools_ran_then_the_model_may_answer() -> None:
    client = ScriptedClient([LLMResponse(tool_calls=[ToolCall("c1", "add", {"a": 1})]), "It is 2."])
    agent = Agent(client, [add], settings=choice("add"))
    events = [e async for e in agent.run("Add one to 1.")]
    assert events[-1].type == "complete"
    requests = [e for e in events if isinstance(e, LLMRequestEvent)]
    assert [r.settings.tool_choice for r in requests] == ["add", "auto"]
    assert [r.settings.tool_choice for r in client.requests] == ["add", "auto"]  # type: ignore[union-attr]
    assert parse_event(json.loads(json.dumps(requests[0].to_dict()))) == requests[0]


async def test_none_and_auto_hold_for_the_whole_run() -> None:
    client = ScriptedClient([LLMResponse(tool_calls=[ToolCall("c1", "add", {"a": 1})]), "It is 2."])
    agent = Agent(client, [add], settings=choice("none"))
    await agent.run("Add one to 1.")
    assert [r.settings.tool_choice for r in client.requests] == ["none", "none"]  # type: ignore[union-attr]


@respx.mock
async def test_a_run_on_ollama_with_a_forced_choice_fails_naming_provider_and_value() -> None:
    route = respx.post(OLLAMA_URL).respond(json=OLLAMA_DONE)
    agent = Agent(ollama(), [add], settings=choice("required"))
    with pytest.raises(ConfigurationError, match=r"ollama cannot honour .*'required'"):
        await agent.run("hi")
    assert not route.called


# ---- llama.cpp's "could not read the model's output" -----------------------------------

# What the embedded llama.cpp server (xllamacpp 2026.10) answered when Qwen2.5-Coder-0.5B
# called a tool the request did not offer: HTTP 500 without a stream, an error event in one.
UNREADABLE = {
    "error": {
        "code": 500,
        "message": "The model produced output that does not match the expected peg-native format",
        "type": "server_error",
    }
}
FIRST_CHUNK = {
    "choices": [
        {"finish_reason": None, "index": 0, "delta": {"role": "assistant", "content": None}}
    ],
    "created": 1795782508,
    "id": "chatcmpl-HhJKjjMTfHhN706BLIpWN0hNptWOrGoa",
    "model": "qwen2.5-coder-0.5b-instruct",
    "object": "chat.completion.chunk",
}
RETRY_FAST = RetryPolicy(max_retries=2, initial_delay=0, jitter=False)


def sse(*chunks: dict[str, Any], done: bool = True) -> httpx.Response:
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks)
    body += "data: [DONE]\n\n" if done else ""
    return httpx.Response(200, text=body, headers={"content-type": "text/event-stream"})


def delta(content: str | None = None, finish: str | None = None, **fields: Any) -> dict[str, Any]:
    message = {"content": content, **fields}
    return {"choices": [{"index": 0, "delta": message, "finish_reason": finish}], "model": "m"}


def call_chunk(name: str, arguments: str) -> dict[str, Any]:
    call = {"index": 0, "id": "call_1", "type": "function"}
    call["function"] = {"name": name, "arguments": arguments}
    return delta(tool_calls=[call])


@respx.mock
async def test_llama_cpp_unreadable_output_is_a_tool_call_format_error_not_retried() -> None:
    route = respx.post(OPENAI_URL).respond(500, json=UNREADABLE)
    client = openai(retry=RETRY_FAST)
    with pytest.raises(ToolCallFormatError) as caught:
        await client.chat(HI, TOOLS)
    assert route.call_count == 1
    assert isinstance(caught.value, ResponseParseError)
    assert caught.value.status == 500
    assert "does not match the expected peg-native format" in str(caught.value)
    assert json.loads(caught.value.body or "") == UNREADABLE


@respx.mock
async def test_a_key_echoed_in_the_unreadable_500_is_masked_before_it_is_cut() -> None:
    key = "sk-" + "A" * 20 + "SECRETTAIL" + "B" * 20
    error = {**UNREADABLE["error"], "echo": key}
    prefix = json.dumps({"error": error}).index(key)
    error["message"] += " " + "y" * (2000 - prefix - 30)  # the key now straddles the cut
    respx.post(OPENAI_URL).respond(500, json={"error": error})
    with pytest.raises(ToolCallFormatError) as caught:
        await openai(retry=RETRY_FAST, api_key=key).chat(HI, TOOLS)
    shown = f"{caught.value} {caught.value.body}"
    assert len(caught.value.body or "") <= 2000
    assert not any(key[:n] in shown for n in range(8, len(key) + 1))
    assert "SECRETTAIL" not in shown


@respx.mock
async def test_another_500_is_still_a_retried_provider_outage() -> None:
    other = {"error": {"code": 500, "message": "slot unavailable", "type": "server_error"}}
    route = respx.post(OPENAI_URL).respond(500, json=other)
    client = openai(retry=RETRY_FAST)
    with pytest.raises(ProviderUnavailableError) as caught:
        await client.chat(HI, TOOLS)
    assert not isinstance(caught.value, ToolCallFormatError)
    assert route.call_count == 3


@respx.mock
async def test_the_error_event_of_a_stream_is_a_tool_call_format_error_too() -> None:
    respx.post(OPENAI_URL).mock(return_value=sse(FIRST_CHUNK, UNREADABLE, done=False))
    with pytest.raises(ToolCallFormatError, match="could not read the model's reply"):
        [part async for part in openai().stream(HI, TOOLS)]


@respx.mock
async def test_an_agent_tells_the_model_and_lets_it_correct_within_its_iterations() -> None:
    route = respx.post(OPENAI_URL).mock(
        side_effect=[
            sse(FIRST_CHUNK, UNREADABLE, done=False),
            sse(call_chunk("add", '{"a": 1}'), delta(finish="tool_calls")),
            sse(delta("It is 2."), delta(finish="stop")),
        ]
    )
    agent = Agent(openai(), [add], max_iterations=3)
    run = agent.run("What is 1 plus one?")
    events = [e async for e in run]
    assert events[-1].type == "complete"
    assert run.result is not None
    assert run.result.text == "It is 2."
    responses = [e for e in events if e.type == "llm_response"]
    assert responses[0].protocol_error is not None
    assert "could not read the model's reply" in responses[0].protocol_error
    assert (responses[0].text, responses[0].tool_calls) == ("", ())
    assert [r.protocol_error for r in responses[1:]] == [None, None]
    second = sent_at(route, 1)["messages"]
    assert second[-2] == {"role": "user", "content": "What is 1 plus one?"}
    assert second[-1]["role"] == "user"
    assert "The tools that exist are: add." in second[-1]["content"]
    kept = [(m.role, m.status, m.protocol) for m in run.result.new_messages]
    assert kept == [
        ("user", "completed", False),
        ("assistant", "unreadable", False),  # nothing of it came: kept, but not sent
        ("user", "completed", True),  # the correction is the protocol's, not the user's
        ("assistant", "completed", False),
        ("tool", "completed", False),
        ("assistant", "completed", False),
    ]
    assert route.call_count == 3
    assert not [e for e in events if e.type == "llm_retry"]


def sent_at(route: respx.Route, index: int) -> dict[str, Any]:
    return json.loads(route.calls[index].request.content)


async def test_a_model_that_never_corrects_itself_ends_at_max_iterations() -> None:
    def unreadable(*_: Any) -> LLMResponse:
        raise ToolCallFormatError("server could not read the reply", status=500)

    agent = Agent(FunctionClient(unreadable), [add], max_iterations=2)
    with pytest.raises(MaxIterationsExceeded) as caught:
        await agent.run("hi")
    result = caught.value.result
    assert result is not None
    assert result.stop_reason == "max_iterations"
    errors = [e.protocol_error for e in result.events if e.type == "llm_response"]
    assert len(errors) == 2
    assert all("server could not read the reply" in e for e in errors)


# ---- the agent's JSON tool protocol, for a model without function calling ---------------


@tool
def shout(text: str) -> str:
    """Repeat the text, louder.

    Args:
        text: What to repeat.
    """
    return text.upper()


async def test_a_model_without_function_calling_gets_the_choice_in_its_prompt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GLASSAGENT_PROFILE_PATH", str(tmp_path))
    profile = {
        "basic_info": {"id": "acme-text", "name": "acme-text", "provider": "acme"},
        "capabilities": {"context_length": 8192},
        "features": {
            "supports_function_calling": False,
            "supports_streaming": True,
            "is_multimodal": False,
            "input_modalities": ["text"],
            "supports_reasoning": False,
        },
    }
    (tmp_path / profile_file_name("acme-text")).write_text(json.dumps(profile))
    reload_profiles()
    try:
        client = ScriptedClient(
            [
                '{"tool_call": {"name": "shout", "input": {"text": "hi"}}}',
                '{"response": "HI"}',
            ],
            model="acme-text",
        )
        run = Agent(client, [add, shout], settings=choice("shout")).run("Shout hi.")
        events = [e async for e in run]
    finally:
        reload_profiles()
    assert events[-1].type == "complete"
    requests = [e for e in events if isinstance(e, LLMRequestEvent)]
    assert [(r.tool_protocol, r.settings.tool_choice) for r in requests] == [
        ("json", "shout"),
        ("json", "auto"),
    ]
    first, second = client.requests
    assert (first.tools, second.tools) == ((), ())
    assert [r.settings.tool_choice for r in client.requests] == [None, None]  # type: ignore[union-attr]
    assert first.system is not None
    assert "- shout:" in first.system
    assert "- add:" not in first.system
    assert "This reply must call the tool shout" in first.system
    assert second.system is not None
    assert "- add:" in second.system
    assert "must call" not in second.system
