"""One `ModelRequest` per model call: built once by the agent, read whole by the clients."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

from glassagent import Agent, ModelSettings, tool
from glassagent._core import tool_choice
from glassagent._local.client import LOCAL_CALL_SECONDS, SlowCallHint, local_client
from glassagent._providers.wire_client import WireClient
from glassagent.errors import ConfigurationError
from glassagent.events import LLMRequestEvent
from glassagent.llm import (
    BaseLLMClient,
    GeminiClient,
    LLMResponse,
    Message,
    ModelRequest,
    OpenAICompatibleClient,
    RetryPolicy,
    StreamPart,
    TextDelta,
    ToolCall,
    ToolDefinition,
)
from glassagent.profiles import profile_file_name, reload_profiles

BASE = "http://127.0.0.1:8080/v1"
URL = BASE + "/chat/completions"
NO_RETRY = RetryPolicy(max_retries=0)


@tool
def add(a: int) -> int:
    """Add one.

    Args:
        a: The number.
    """
    return a + 1


def required() -> ModelSettings:
    return ModelSettings(tool_choice="required")


# ---- (a) a client written against chat(messages, tools, system, *, settings) ---------------

Seen = tuple[tuple[Message, ...], tuple[ToolDefinition, ...], "str | None", "ModelSettings | None"]


class ChatOnly(BaseLLMClient):
    """An old-style client: `chat` only; it calls `add` once, then answers."""

    def __init__(self) -> None:
        self.seen: list[Seen] = []

    async def chat(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        system: str | None = None,
        *,
        settings: ModelSettings | None = None,
    ) -> LLMResponse:
        self.seen.append((tuple(messages), tuple(tools), system, settings))
        if len(self.seen) == 1:
            return LLMResponse(tool_calls=(ToolCall("c1", "add", {"a": 1}),))
        return LLMResponse(f"It is {messages[-1].content}.")


class ChatAndStream(ChatOnly):
    """An old-style client that streams its answers itself, word by word."""

    def __init__(self) -> None:
        super().__init__()
        self.streamed = 0

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        system: str | None = None,
        *,
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[StreamPart]:
        self.streamed += 1
        response = await self.chat(messages, tools, system, settings=settings)
        for word in response.text.split():
            yield TextDelta(word + " ")
        yield response


@pytest.mark.parametrize("kind", [ChatOnly, ChatAndStream])
async def test_an_old_style_client_serves_a_run_with_tools_and_a_tool_choice(
    kind: type[ChatOnly],
) -> None:
    client = kind()
    run = Agent(client, [add], system="Be brief.", settings=required()).run("1 + 1?")
    events = [event async for event in run]
    assert events[-1].type == "complete"
    (messages, tools, system, settings), second = client.seen
    assert [(m.role, m.content) for m in second[0][-1:]] == [("tool", "2")]  # the tool ran
    assert [m.content for m in messages] == ["1 + 1?"]
    assert tools == (add.definition,)
    assert system == "Be brief."
    assert settings is not None
    assert settings.tool_choice == "required"
    assert second[3] is not None
    assert second[3].tool_choice == "auto"  # tools ran: the model may answer
    chunks = [e.text for e in events if e.type == "text_chunk"]
    if isinstance(client, ChatAndStream):
        assert client.streamed == 2
        assert chunks == ["It ", "is ", "2. "]
    else:
        assert chunks == ["It is 2."]


async def test_an_old_style_client_awaited_and_sent_a_request_directly() -> None:
    client = ChatOnly()
    result = await Agent(client, [add], settings=ModelSettings(tool_choice="add")).run("1 + 1?")
    assert result.text == "It is 2."
    assert [s.tool_choice for *_, s in client.seen if s is not None] == ["add", "auto"]
    request = ModelRequest.build([Message(role="user", content="hi")], [add.definition])
    client.seen.clear()
    assert (await client.send(request)).tool_calls[0].name == "add"  # send -> chat
    assert client.seen == [(request.messages, request.tools, None, request.settings)]


# ---- (b) the agent's request reaches a built-in client whole -------------------------------


def sse(*chunks: dict[str, Any]) -> httpx.Response:
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    return httpx.Response(200, text=body, headers={"content-type": "text/event-stream"})


def delta(finish: str | None = None, **fields: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": fields, "finish_reason": finish}], "model": "m"}


def call_then_answer() -> Iterator[httpx.Response]:
    call = {"index": 0, "id": "call_1", "type": "function"}
    call["function"] = {"name": "add", "arguments": '{"a": 1}'}
    yield sse(delta(tool_calls=[call]), delta("tool_calls"))
    yield sse(delta(content="It is 2."), delta("stop"))


class Spy(OpenAICompatibleClient):
    """Keeps every request `send` and `send_stream` are given, and counts `chat`/`stream`."""

    def __init__(self, **options: Any) -> None:
        super().__init__("m", base_url=BASE, retry=NO_RETRY, **options)
        self.sent: list[ModelRequest] = []
        self.old_calls = 0

    async def chat(self, *args: Any, **kwargs: Any) -> LLMResponse:
        self.old_calls += 1
        return await super().chat(*args, **kwargs)

    async def stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[StreamPart]:
        self.old_calls += 1
        async for part in super().stream(*args, **kwargs):
            yield part

    async def send(self, request: ModelRequest) -> LLMResponse:
        self.sent.append(request)
        return await super().send(request)

    async def send_stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        self.sent.append(request)
        async for part in super().send_stream(request):
            yield part


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[ModelRequest]:
    """Every `ModelRequest` that `ModelRequest.build` makes while the test runs."""
    made: list[ModelRequest] = []
    build = ModelRequest.build.__func__  # type: ignore[attr-defined]

    def recording(cls: type[ModelRequest], *args: Any, **kwargs: Any) -> ModelRequest:
        made.append(build(cls, *args, **kwargs))
        return made[-1]

    monkeypatch.setattr(ModelRequest, "build", classmethod(recording))
    return made


@respx.mock
async def test_the_agent_builds_one_request_per_call_and_the_client_gets_that_object(
    built: list[ModelRequest],
) -> None:
    route = respx.post(URL).mock(side_effect=call_then_answer())
    client = Spy()
    events = [e async for e in Agent(client, [add], settings=required()).run("1 + 1?")]
    assert events[-1].type == "complete"
    calls = [e for e in events if isinstance(e, LLMRequestEvent)]
    assert client.old_calls == 0  # the agent sends its request: chat/stream build none
    assert len(calls) == len(built) == len(client.sent) == 2
    assert all(got is made for got, made in zip(client.sent, built, strict=True))
    assert [r.tool_choice for r in built] == ["required", "auto"]
    assert [r.offered for r in built] == [(add.definition,)] * 2
    assert [r.settings for r in built] == [e.settings for e in calls]
    bodies = [json.loads(call.request.content) for call in route.calls]
    assert [b["tool_choice"] for b in bodies] == ["required", "auto"]


@respx.mock
async def test_chat_builds_one_request_and_hands_it_to_send(built: list[ModelRequest]) -> None:
    respx.post(URL).respond(json={"choices": [{"message": {"content": "ok"}}], "model": "m"})
    client = Spy()
    response = await client.chat([Message(role="user", content="hi")], [add.definition])
    assert response.text == "ok"
    assert client.old_calls == 1
    assert len(built) == 1
    assert client.sent == built
    assert client.sent[0] is built[0]


# ---- (c) the tool choice is resolved once per model call ------------------------------------


@pytest.fixture
def resolved(monkeypatch: pytest.MonkeyPatch) -> list[str | None]:
    """The choice of every `tool_choice.resolve` call while the test runs."""
    seen: list[str | None] = []
    resolve = tool_choice.resolve

    def counting(settings: ModelSettings | None, tools: Sequence[ToolDefinition]) -> str | None:
        seen.append(resolve(settings, tools))
        return seen[-1]

    monkeypatch.setattr(tool_choice, "resolve", counting)
    return seen


@pytest.fixture
def no_function_calling(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A model whose profile says it has no function calling: runs wrap it in the protocol."""
    profile = {
        "basic_info": {"id": "acme-text", "name": "acme-text", "provider": "local"},
        "capabilities": {"context_length": 8192},
        "features": {
            "supports_function_calling": False,
            "supports_streaming": True,
            "is_multimodal": False,
            "supports_reasoning": False,
        },
    }
    (tmp_path / profile_file_name("acme-text")).write_text(json.dumps(profile))
    monkeypatch.setenv("GLASSAGENT_PROFILE_PATH", str(tmp_path))
    reload_profiles()
    yield "acme-text"
    reload_profiles()


@respx.mock
async def test_one_agent_step_over_the_openai_client_resolves_the_choice_once(
    resolved: list[str | None],
) -> None:
    route = respx.post(URL).mock(return_value=sse(delta(content="ok"), delta("stop")))
    client = OpenAICompatibleClient("m", base_url=BASE, retry=NO_RETRY)
    result = await Agent(client, [add], settings=required(), max_iterations=1).run("hi")
    assert result.text == "ok"
    assert resolved == ["required"]
    assert json.loads(route.calls[0].request.content)["tool_choice"] == "required"


@pytest.mark.parametrize("how", ["client's own json protocol", "profile without tool calls"])
@respx.mock
async def test_one_json_protocol_step_resolves_the_choice_once(
    how: str, resolved: list[str | None], no_function_calling: str
) -> None:
    route = respx.post(URL).mock(
        return_value=sse(delta(content='{"response": "ok"}'), delta("stop"))
    )
    if how == "client's own json protocol":
        client = OpenAICompatibleClient("m", base_url=BASE, retry=NO_RETRY, tool_protocol="json")
    else:  # the agent wraps the client in JsonToolsClient
        client = OpenAICompatibleClient(no_function_calling, base_url=BASE, retry=NO_RETRY)
    run = Agent(client, [add], settings=required(), max_iterations=1).run("hi")
    events = [e async for e in run]
    assert events[-1].type == "complete"
    assert [e.tool_protocol for e in events if isinstance(e, LLMRequestEvent)] == ["json"]
    assert resolved == ["required"]
    body = json.loads(route.calls[0].request.content)
    assert "tools" not in body
    assert "tool_choice" not in body
    assert "This reply must call one of these tools" in body["messages"][0]["content"]


async def test_the_protocol_wrapper_hands_the_inner_client_one_request_without_tools(
    no_function_calling: str, resolved: list[str | None]
) -> None:
    class Inner(ChatOnly):
        model = no_function_calling

        def __init__(self) -> None:
            super().__init__()
            self.sent: list[ModelRequest] = []

        def send_stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
            self.sent.append(request)
            return super().send_stream(request)

        async def chat(self, *args: Any, **kwargs: Any) -> LLMResponse:
            await super().chat(*args, **kwargs)
            return LLMResponse('{"thought": "t", "response": "done"}')

    inner = Inner()
    result = await Agent(inner, [add], settings=ModelSettings(tool_choice="add")).run("hi")
    assert result.text == "done"
    (request,) = inner.sent
    assert (request.tools, request.offered, request.tool_choice) == ((), (), None)
    assert request.settings.tool_choice is None
    assert request.system is not None
    assert "This reply must call the tool add" in request.system
    assert resolved == ["add"]  # by the agent; the wrapper read the request's choice


GEMINI_ANSWER = {
    "candidates": [
        {
            "content": {"role": "model", "parts": [{"text": "ok"}]},
            "index": 0,
            "finishReason": "STOP",
        }
    ],
    "modelVersion": "gemini-2.5-flash",
}


class GeminiSpy(GeminiClient):
    """Keeps every request `send_stream` is given, and counts `chat`/`stream`."""

    def __init__(self) -> None:
        super().__init__(api_key="AIzaSyD3adB33fTestKey0000000000x9Qk", retry=NO_RETRY)
        self.sent: list[ModelRequest] = []
        self.old_calls = 0

    async def chat(self, *args: Any, **kwargs: Any) -> LLMResponse:
        self.old_calls += 1
        return await super().chat(*args, **kwargs)

    async def send_stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        self.sent.append(request)
        async for part in super().send_stream(request):
            yield part


@respx.mock
async def test_gemini_reads_the_agents_request_and_resolves_nothing_itself(
    built: list[ModelRequest], resolved: list[str | None]
) -> None:
    answer = f"data: {json.dumps(GEMINI_ANSWER)}\n\n"
    stream = httpx.Response(200, text=answer, headers={"content-type": "text/event-stream"})
    route = respx.post(url__regex=r".*:streamGenerateContent.*").mock(return_value=stream)
    respx.post(url__regex=r".*:generateContent$").respond(json=GEMINI_ANSWER)
    client = GeminiSpy()
    await client.chat([Message(role="user", content="hi")])  # the fast route's self-check runs
    built.clear()
    resolved.clear()
    result = await Agent(client, [add], settings=required(), max_iterations=1).run("hi")
    assert result.text == "ok"
    assert client.old_calls == 1  # the warm-up only: the agent sent its request
    assert len(built) == len(client.sent) == 1
    assert client.sent[0] is built[0]
    assert resolved == ["required"]
    body = json.loads(route.calls[0].request.content)
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "ANY"}}
    await client.aclose()


# ---- a subclass that bounds its calls does so on the agent's path too ----------------------


@respx.mock
async def test_the_local_server_client_bounds_the_agents_requests(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    respx.post(URL).mock(return_value=sse(delta(content="ok"), delta("stop")))
    timeouts: list[float | None] = []
    send_stream = WireClient.send_stream

    def spy(self: WireClient, request: ModelRequest) -> AsyncIterator[StreamPart]:
        timeouts.append(request.settings.timeout)
        return send_stream(self, request)

    monkeypatch.setattr(WireClient, "send_stream", spy)
    client = local_client(BASE, "m", "k", SlowCallHint(1), {"retry": NO_RETRY}, None)
    assert (await Agent(client, [add]).run("hi")).text == "ok"
    assert (await Agent(client).run("hi", settings=ModelSettings(timeout=5))).text == "ok"
    assert timeouts == [LOCAL_CALL_SECONDS, 5]
    await client.aclose()


class Logging(OpenAICompatibleClient):
    """A user's subclass of a built-in client, written before `send_stream` existed."""

    def __init__(self) -> None:
        super().__init__("m", base_url=BASE, retry=NO_RETRY)
        self.streamed = 0

    async def stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[StreamPart]:
        self.streamed += 1
        async for part in super().stream(*args, **kwargs):
            yield part


@respx.mock
async def test_a_subclass_that_overrides_stream_is_still_called_by_the_agent() -> None:
    respx.post(URL).mock(side_effect=call_then_answer())
    client = Logging()
    result = await Agent(client, [add], settings=required()).run("1 + 1?")
    assert result.text == "It is 2."
    assert client.streamed == 2  # both model calls went through the override


@respx.mock
async def test_the_tool_protocol_and_grammar_set_after_construction_shape_the_next_body() -> None:
    reply = {"choices": [{"message": {"content": '{"response": "hi"}'}, "finish_reason": "stop"}]}
    route = respx.post(URL).mock(side_effect=[httpx.Response(200, json=reply)] * 2)
    client = OpenAICompatibleClient("m", base_url=BASE, retry=NO_RETRY, json_grammar=True)
    client.tool_protocol = "json"
    client.json_grammar = False
    await client.chat([Message(role="user", content="Hi")], [add.definition])
    body = json.loads(route.calls[0].request.content)
    assert "tools" not in body  # the JSON protocol: the tools are in the system prompt
    assert body["response_format"] == {"type": "json_object"}  # no grammar any more
    client.tool_protocol = "native"
    await client.chat([Message(role="user", content="Hi")], [add.definition])
    assert "tools" in json.loads(route.calls[1].request.content)
    with pytest.raises(ConfigurationError):
        client.tool_protocol = "xml"  # type: ignore[assignment]
