"""`OllamaClient` and `LlamaClient` against respx, with bodies shaped as Ollama documents them."""

import json
import socket
from typing import Any

import httpx
import pytest
import respx

from glassagent import Agent, ModelSettings, tool
from glassagent.errors import (
    ConfigurationError,
    ProviderError,
    ProviderUnavailableError,
    RateLimitError,
    UserError,
)
from glassagent.llm import (
    Attachment,
    LlamaClient,
    LLMResponse,
    Message,
    OllamaClient,
    RetryPolicy,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    ToolDefinition,
)

BASE = "http://127.0.0.1:11434"
CHAT = f"{BASE}/api/chat"
SHOW = f"{BASE}/api/show"
ADD = ToolDefinition(
    "add",
    "Add two integers.",
    {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
)
HI = (Message(role="user", content="Hi"),)
STATS = {
    "total_duration": 4883583458,
    "load_duration": 1334875,
    "prompt_eval_count": 26,
    "prompt_eval_duration": 342546000,
    "eval_count": 282,
    "eval_duration": 4535599000,
}
TIMINGS = {
    "total_ms": 4883.583458,
    "load_ms": 1.334875,
    "prompt_eval_ms": 342.546,
    "eval_ms": 4535.599,
}


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: First addend.
        b: Second addend.
    """
    return a + b


def line(message: dict[str, Any], done: bool = False, **extra: Any) -> dict[str, Any]:
    """One /api/chat object as Ollama sends it (a whole body, or one NDJSON line)."""
    return {
        "model": "llama3.1:8b",
        "created_at": "2024-11-23T08:00:00.123456Z",
        "message": {"role": "assistant", "content": "", **message},
        "done": done,
        **extra,
    }


def final(message: dict[str, Any] | None = None, reason: str = "stop") -> dict[str, Any]:
    return line(message or {}, True, done_reason=reason, **STATS)


def ndjson(*lines: dict[str, Any]) -> httpx.Response:
    body = "".join(json.dumps(item) + "\n" for item in lines)
    return httpx.Response(200, text=body, headers={"content-type": "application/x-ndjson"})


def show(capabilities: list[str] | None, template: str = "{{ .Prompt }}") -> httpx.Response:
    body: dict[str, Any] = {
        "modelfile": "FROM llama3.1:8b",
        "parameters": 'stop "<|eot_id|>"',
        "template": template,
        "details": {"format": "gguf", "family": "llama", "parameter_size": "8.0B"},
        "model_info": {"general.architecture": "llama"},
        "modified_at": "2024-11-20T10:00:00Z",
    }
    if capabilities is not None:
        body["capabilities"] = capabilities
    return httpx.Response(200, json=body)


def add_call(a: int, b: int) -> dict[str, Any]:
    return {"function": {"name": "add", "arguments": {"a": a, "b": b}}}


def body_of(route: respx.Route, n: int = 0) -> dict[str, Any]:
    return json.loads(route.calls[n].request.content)


async def stream_all(client: OllamaClient, *args: Any, **kwargs: Any) -> list[Any]:
    return [part async for part in client.stream(*args, **kwargs)]


def native() -> OllamaClient:
    return OllamaClient(base_url=BASE, tool_protocol="native")


# ---- the wire --------------------------------------------------------------------------


@respx.mock
async def test_chat_sends_ollamas_shape_and_reads_usage_and_timings() -> None:
    route = respx.post(CHAT).mock(
        return_value=httpx.Response(200, json=final({"content": "Hello!"}))
    )
    history = (
        Message(
            role="user",
            content="Look.",
            attachments=(
                Attachment(data=b"\x89PNG", mime_type="image/png"),
                Attachment(data=b"notes", mime_type="text/plain", name="a.txt"),
            ),
        ),
        Message(
            role="assistant", content="", tool_calls=(ToolCall("c1", "add", {"a": 1, "b": 2}),)
        ),
        Message(role="tool", content="3", tool_call_id="c1", name="add"),
    )
    settings = ModelSettings(
        temperature=0.1, max_tokens=50, stop_sequences=("END",), thinking_budget=0
    )
    response = await native().chat(history, [ADD], "Be brief.", settings=settings)
    sent = body_of(route)
    assert sent == {
        "model": "llama3.1:8b",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Look.\n\n[a.txt]\nnotes", "images": ["iVBORw=="]},
            {"role": "assistant", "content": "", "tool_calls": [add_call(1, 2)]},
            {"role": "tool", "content": "3", "tool_name": "add"},
        ],
        "stream": False,
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "add",
                    "description": "Add two integers.",
                    "parameters": ADD.parameters,
                },
            }
        ],
        "think": False,
        "options": {"temperature": 0.1, "num_predict": 50, "stop": ["END"]},
    }
    assert response.text == "Hello!"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (26, 282)
    assert response.timings == TIMINGS
    assert response.model == "llama3.1:8b"
    assert response.raw_request == sent
    assert response.raw_response["eval_count"] == 282


@respx.mock
async def test_chat_reads_native_tool_calls() -> None:
    respx.post(CHAT).mock(
        return_value=httpx.Response(
            200, json=final({"tool_calls": [add_call(17, 25), add_call(1, 2)]})
        )
    )
    response = await native().chat(HI, [ADD])
    assert [(c.name, c.input) for c in response.tool_calls] == [
        ("add", {"a": 17, "b": 25}),
        ("add", {"a": 1, "b": 2}),
    ]
    assert len({c.id for c in response.tool_calls}) == 2
    assert response.stop_reason == "tool_use"


@respx.mock
async def test_stream_yields_thinking_and_text_then_the_response() -> None:
    route = respx.post(CHAT).mock(
        return_value=ndjson(
            line({"thinking": "Greet "}),
            line({"thinking": "back."}),
            line({"content": "Hel"}),
            line({"content": "lo!"}),
            final(),
        )
    )
    parts = await stream_all(native(), HI)
    assert parts[:4] == [
        ThinkingDelta("Greet "),
        ThinkingDelta("back."),
        TextDelta("Hel"),
        TextDelta("lo!"),
    ]
    response = parts[4]
    assert isinstance(response, LLMResponse)
    assert (response.text, response.thinking) == ("Hello!", "Greet back.")
    assert response.usage.output_tokens == 282
    assert response.timings == TIMINGS
    assert len(response.raw_response) == 5
    assert body_of(route)["stream"] is True


@respx.mock
async def test_string_arguments_are_parsed_and_bad_ones_marked() -> None:
    calls = [
        {"function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}},
        {"id": "call_x", "function": {"name": "add", "arguments": "{a: 1"}},
    ]
    respx.post(CHAT).mock(return_value=httpx.Response(200, json=final({"tool_calls": calls})))
    good, bad = (await native().chat(HI, [ADD])).tool_calls
    assert good.input == {"a": 1, "b": 2}
    assert bad.id == "call_x"
    assert bad.arguments_error is not None
    assert "not valid JSON" in bad.arguments_error


async def test_unsupported_attachments_are_refused() -> None:
    message = Message(
        role="user",
        content="x",
        attachments=(Attachment(data=b"%PDF", mime_type="application/pdf"),),
    )
    with pytest.raises(UserError, match="image and text attachments only"):
        await native().chat([message])


def test_base_url_comes_from_the_argument_then_the_environment(monkeypatch) -> None:
    assert OllamaClient().base_url == "http://localhost:11434"
    monkeypatch.setenv("OLLAMA_BASE_URL", "http://127.0.0.1:9999/")
    assert OllamaClient().base_url == "http://127.0.0.1:9999"
    assert OllamaClient(base_url=BASE).base_url == BASE
    with pytest.raises(ConfigurationError, match="tool_protocol"):
        OllamaClient(tool_protocol="xml")


# ---- auto protocol ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("show_response", "protocol"),
    [
        (show(["completion", "tools"]), "native"),
        (show(["completion"]), "json"),
        (show(None, "{{- if .Tools }}{{ .Tools }}{{ end }}"), "native"),
        (show(None), "json"),
    ],
    ids=[
        "tools-capability",
        "no-tools-capability",
        "old-server-tools-template",
        "old-server-plain",
    ],
)
@respx.mock
async def test_auto_asks_the_server_once_and_picks_the_protocol(show_response, protocol) -> None:
    show_route = respx.post(SHOW).mock(return_value=show_response)
    chat = respx.post(CHAT).mock(
        return_value=httpx.Response(200, json=final({"content": '{"response": "hi"}'}))
    )
    client = OllamaClient("llama3.1:8b", base_url=BASE)
    assert client.tool_protocol == "auto"
    await client.chat(HI)  # no tools: nothing to decide
    assert show_route.call_count == 0
    await client.chat(HI, [ADD])
    await client.chat(HI, [ADD])
    assert show_route.call_count == 1
    assert body_of(show_route) == {"model": "llama3.1:8b"}
    assert client.tool_protocol == protocol
    sent = body_of(chat, 2)
    if protocol == "native":
        assert "tools" in sent
        assert "format" not in sent
    else:
        assert "tools" not in sent
        tool_call = sent["format"]["anyOf"][0]["properties"]["tool_call"]
        assert tool_call["properties"]["input"] == ADD.parameters
        assert '"tool_call"' in sent["messages"][0]["content"]


@respx.mock
async def test_a_missing_model_says_how_to_pull_it() -> None:
    missing = {"error": 'model "llama3.1:8b" not found, try pulling it first'}
    respx.post(SHOW).mock(return_value=httpx.Response(404, json=missing))
    respx.post(CHAT).mock(return_value=httpx.Response(404, json=missing))
    for call in (OllamaClient(base_url=BASE).chat(HI, [ADD]), stream_all(native(), HI)):
        with pytest.raises(ProviderError, match=r"ollama pull llama3\.1:8b") as info:
            await call
        assert info.value.status == 404


# ---- errors ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (429, RateLimitError),
        (503, ProviderUnavailableError),
        (400, ProviderError),
    ],
)
@respx.mock
async def test_error_statuses_map_to_typed_errors(status, error) -> None:
    respx.post(CHAT).mock(return_value=httpx.Response(status, json={"error": "nope"}))
    client = OllamaClient(base_url=BASE, tool_protocol="native", retry=RetryPolicy(max_retries=0))
    with pytest.raises(error, match="nope"):  # retries have their own tests (test_retries.py)
        await client.chat(HI)


async def test_a_refused_connection_says_how_to_start_ollama() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    base_url = f"http://127.0.0.1:{port}"
    no_retry = RetryPolicy(max_retries=0)
    async with OllamaClient(base_url=base_url, tool_protocol="native", retry=no_retry) as client:
        with pytest.raises(ProviderUnavailableError) as info:
            await client.chat(HI)
    assert f"http://127.0.0.1:{port}/api/chat" in str(info.value)
    assert "ollama serve" in str(info.value)


# ---- full agent runs -------------------------------------------------------------------


@respx.mock
async def test_agent_runs_two_native_tool_rounds() -> None:
    respx.post(SHOW).mock(return_value=show(["completion", "tools", "thinking"]))
    route = respx.post(CHAT).mock(
        side_effect=[
            ndjson(line({"tool_calls": [add_call(17, 25)]}), final()),
            ndjson(
                line({"thinking": "One more."}), line({"tool_calls": [add_call(42, 1)]}), final()
            ),
            ndjson(line({"content": "The total "}), line({"content": "is 43."}), final()),
        ]
    )
    async with OllamaClient(base_url=BASE) as client:
        run = Agent(client, [add], system="Be brief.").run("What is 17 + 25 + 1?")
        events = [event async for event in run]
    assert [e.type for e in events] == [
        "llm_request",
        "llm_response",
        "function_call_start",
        "function_execution_start",
        "function_execution_complete",
        "sending_function_response",
        "llm_request",
        "thinking_chunk",
        "llm_response",
        "function_call_start",
        "function_execution_start",
        "function_execution_complete",
        "sending_function_response",
        "llm_request",
        "text_chunk",
        "text_chunk",
        "llm_response",
        "complete",
    ]
    assert [e.tool_protocol for e in events if e.type == "llm_request"] == ["native"] * 3
    assert run.result.text == "The total is 43."
    assert run.result.usage.input_tokens == 3 * 26
    third = body_of(route, 2)
    assert third["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 17 + 25 + 1?"},
        {"role": "assistant", "content": "", "tool_calls": [add_call(17, 25)]},
        {"role": "tool", "content": "42", "tool_name": "add"},
        {"role": "assistant", "content": "", "tool_calls": [add_call(42, 1)]},
        {"role": "tool", "content": "43", "tool_name": "add"},
    ]
    assert third["tools"][0]["function"]["name"] == "add"


@respx.mock
async def test_llama_client_runs_two_rounds_with_the_json_protocol() -> None:
    replies = [
        'Here you go: {"thought": "Add first.", '
        '"tool_call": {"name": "add", "input": {"a": 17, "b": 25}}}',
        '[{"tool_call": {"name": "add", "input": {"a": 42, "b": 1}}}, '
        '{"tool_call": {"name": "add", "input": {"a": 0, "b": 0}}}]',
        '{"thought": "Done.", "response": "The total is 43."}',
    ]
    route = respx.post(CHAT).mock(
        side_effect=[
            ndjson(line({"content": r[:15]}), line({"content": r[15:]}), final()) for r in replies
        ]
    )
    client = LlamaClient(base_url=BASE)
    assert (client.model, client.tool_protocol, client.provider_name) == (
        "llama3.1:8b",
        "json",
        "ollama",
    )
    run = Agent(client, [add]).run("What is 17 + 25 + 1?")
    events = [event async for event in run]
    assert [e.type for e in events] == [
        "llm_request",
        "thinking_chunk",
        "llm_response",
        "function_call_start",
        "function_execution_start",
        "function_execution_complete",
        "sending_function_response",
        "llm_request",
        "llm_response",
        "function_call_start",
        "function_call_start",
        "function_execution_start",
        "function_execution_complete",
        "function_execution_complete",
        "sending_function_response",
        "llm_request",
        "thinking_chunk",  # the thought and the answer stream as they are written
        "thinking_chunk",
        "text_chunk",
        "llm_response",
        "complete",
    ]
    chunks = [(e.type, e.text) for e in events[-5:-2] if e.type.endswith("_chunk")]
    assert chunks == [
        ("thinking_chunk", "Do"),
        ("thinking_chunk", "ne."),
        ("text_chunk", "The total is 43."),
    ]
    assert {e.tool_protocol for e in events if e.type == "llm_request"} == {"json"}
    assert run.result.text == "The total is 43."
    third = body_of(route, 2)
    tool_call = third["format"]["anyOf"][0]["properties"]["tool_call"]
    assert tool_call["properties"]["name"] == {"type": "string", "enum": ["add"]}
    assert "tools" not in third
    messages = third["messages"]
    assert messages[0]["role"] == "system"
    assert "- add: Add two integers." in messages[0]["content"]
    assert [m["role"] for m in messages[1:]] == ["user", "assistant", "user", "assistant", "user"]
    assert json.loads(messages[3]["content"]) == {"tool_result": {"name": "add", "result": "42"}}
    assert json.loads(messages[4]["content"]) == [
        {"tool_call": {"name": "add", "input": {"a": 42, "b": 1}}},
        {"tool_call": {"name": "add", "input": {"a": 0, "b": 0}}},
    ]
    assert [json.loads(part) for part in messages[5]["content"].split("\n")] == [
        {"tool_result": {"name": "add", "result": "43"}},
        {"tool_result": {"name": "add", "result": "0"}},
    ]


class SlowLines(httpx.AsyncByteStream):
    """An NDJSON body that sends one line, then waits forever; records whether it was closed."""

    def __init__(self) -> None:
        self.closed = False

    async def __aiter__(self):
        import asyncio

        yield (json.dumps(line({"content": "Once"})) + "\n").encode()
        await asyncio.Event().wait()

    async def aclose(self) -> None:
        self.closed = True


@respx.mock
async def test_aborting_a_run_closes_the_ollama_stream() -> None:
    body = SlowLines()
    respx.post(CHAT).mock(return_value=httpx.Response(200, stream=body))
    run = Agent(native()).run("Tell me a story.")
    async for event in run:
        if event.type == "text_chunk":
            run.abort("enough")
    assert body.closed
    assert run.result.stop_reason == "aborted"
    assert run.result.text == "Once"
