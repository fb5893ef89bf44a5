"""GeminiClient's fast route: each message converted once, the same bytes on the wire.

The client sends google-genai a body made from each message's REST form, kept while the
message lives (`gemini_wire.RestContents`), and a config google-genai converted once
(`gemini_sdk.Route`). These tests count conversions through that seam, compare every body
with the one google-genai's public ``generate_content`` sends for the same call, and check
what the caches keep.
"""

import base64
import gc
import json
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from google import genai

from glassagent import Agent, ModelSettings, ToolCall, tool
from glassagent._providers import gemini_sdk, gemini_wire
from glassagent.errors import ConfigurationError
from glassagent.llm import Attachment, GeminiClient, GeminiOptions, Message, RetryPolicy

KEY = "AIzaSyD3adB33fTestKey0000000000x9Qk"
SIG_1 = base64.b64encode(b"\x0a\x24\x01\xfb\xff signature one").decode()
SIG_2 = base64.b64encode(b"\x0a\x24\x02\xfe\xef signature two").decode()
USAGE = {"promptTokenCount": 12, "candidatesTokenCount": 7, "totalTokenCount": 19}


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: First addend.
        b: Second addend.
    """
    return a + b


def answer(parts: list[dict[str, Any]], finish: str = "STOP", **candidate: Any) -> dict[str, Any]:
    return {
        "candidates": [
            {
                "content": {"role": "model", "parts": parts},
                "finishReason": finish,
                "index": 0,
                **candidate,
            }
        ],
        "usageMetadata": USAGE,
        "modelVersion": "gemini-2.5-flash",
    }


def call_part(a: int, b: int, signature: str | None = None) -> dict[str, Any]:
    part: dict[str, Any] = {"functionCall": {"name": "add", "args": {"a": a, "b": b}}}
    if signature:
        part["thoughtSignature"] = signature
    return part


class Server:
    """A scripted Gemini API behind httpx.MockTransport; keeps each request."""

    def __init__(self, replies: list[dict[str, Any]], stream: bool = False) -> None:
        self.replies = replies
        self.stream = stream
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        reply = self.replies[min(len(self.requests), len(self.replies)) - 1]
        if self.stream:
            content = b"data: " + json.dumps(reply).encode() + b"\r\n\r\n"
            return httpx.Response(
                200, content=content, headers={"content-type": "text/event-stream"}
            )
        return httpx.Response(200, json=reply)

    def client(self, **options: Any) -> GeminiClient:
        http = httpx.AsyncClient(transport=httpx.MockTransport(self))
        return GeminiClient(
            api_key=KEY,
            http_client=http,
            streaming=self.stream,
            retry=RetryPolicy(max_retries=0),
            **options,
        )

    def bodies(self) -> list[bytes]:
        return [r.content for r in self.requests]


@pytest.fixture
def public(monkeypatch: pytest.MonkeyPatch) -> None:
    """Clients made from here on take google-genai's public ``generate_content``."""
    monkeypatch.setattr(gemini_sdk, "route", lambda sdk: None)


@pytest.fixture
def conversions(monkeypatch: pytest.MonkeyPatch) -> list[Message]:
    """The messages converted to their REST form, one entry per conversion."""
    converted: list[Message] = []
    real = gemini_wire.rest_content

    def counting(message: Message, call: ToolCall | None) -> dict[str, Any]:
        converted.append(message)
        return real(message, call)

    monkeypatch.setattr(gemini_wire, "rest_content", counting)
    return converted


async def ask(client: GeminiClient, messages: list[Message], **kwargs: Any) -> Any:
    if client.streaming:
        return [p async for p in client.stream(messages, **kwargs)][-1]
    return await client.chat(messages, **kwargs)


def conversation() -> list[Message]:
    """Every kind of message and part the client sends."""
    signed = {"thought_signature": SIG_1}
    return [
        Message(role="system", content="Answer briefly."),
        Message(
            role="user",
            content="Add these, and look at the pictures.",
            attachments=(
                Attachment(data=b"\x89PNG fake \xfb\xff", mime_type="image/png"),
                Attachment.from_url("https://example.com/report.pdf"),
            ),
        ),
        Message(
            role="assistant",
            content="Adding.",
            provider_metadata=signed,
            tool_calls=(
                ToolCall("call-1", "add", {"a": 1, "b": [2, {"c": None}]}, signed),
                ToolCall("gen-2", "add", {"a": 3, "b": 4}, {"generated_id": True}),
            ),
        ),
        Message(role="tool", content="3", tool_call_id="call-1", name="add"),
        Message(role="system", content="Keep going."),
        Message(role="tool", content="bad b", tool_call_id="gen-2", name="add", is_error=True),
        Message(role="tool", content="orphan", tool_call_id="nobody", name="lost"),
        Message(role="user", content="And?"),
        Message(role="assistant", content="", status="aborted"),  # nothing to send
    ]


SETTINGS = ModelSettings(
    temperature=0.2,
    max_tokens=300,
    stop_sequences=("END",),
    thinking_budget=256,
    provider_options=GeminiOptions(top_k=5, seed=7, extra_config={"candidate_count": 1}),
)


# ---- (a) a call converts only what is new ------------------------------------------------


async def test_a_grown_conversation_converts_only_its_new_messages(conversions) -> None:
    server = Server([answer([{"text": "ok"}])])
    client = server.client()
    messages = [
        Message(role="system", content="Be brief."),
        Message(role="user", content="1 + 2?"),
        Message(role="assistant", tool_calls=(ToolCall("c1", "add", {"a": 1, "b": 2}),)),
        Message(role="tool", content="3", tool_call_id="c1", name="add"),
    ]
    await client.chat(messages, [add.definition])
    assert conversions == messages[1:]  # a system message joins the instruction as text
    conversions.clear()

    grown = [
        *messages,
        Message(role="assistant", tool_calls=(ToolCall("c2", "add", {"a": 3, "b": 4}),)),
        Message(role="tool", content="7", tool_call_id="c2", name="add"),
    ]
    await client.chat(grown, [add.definition])
    assert conversions == grown[4:]
    conversions.clear()

    await client.chat(grown, [add.definition])
    assert conversions == []
    assert len(server.requests) == 3


@pytest.mark.parametrize("streaming", [False, True], ids=["generate", "stream"])
async def test_an_agent_run_converts_each_message_once(conversions, streaming) -> None:
    replies = [
        answer([call_part(1, 2, SIG_1)]),
        answer([call_part(3, 4), call_part(5, 6)]),
        answer([{"text": "done"}]),
    ]
    server = Server(replies, stream=streaming)
    result = await Agent(server.client(), [add]).run("Add some numbers.")
    assert result.text == "done"
    # user, call, result, two calls, two results (one turn): each converted once, where a
    # conversion per message per call would make 1 + 3 + 6 = 10
    assert len(conversions) == 6
    assert [m.role for m in conversions] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "tool",
    ]
    assert len({id(m) for m in conversions}) == 6


# ---- (b) the same bytes on the wire as google-genai's public route -----------------------


async def two_calls(server: Server, tools: bool) -> list[Any]:
    """Two calls of a conversation (the second from what the first kept), and their answers."""
    client = server.client()
    messages = conversation()
    options: dict[str, Any] = {"system": "Be kind.", "settings": SETTINGS}
    if tools:
        options["tools"] = [add.definition]
    first = await ask(client, messages, **options)
    messages.append(Message(role="assistant", content="Still here."))
    second = await ask(client, messages, **options)
    return [first, second]


def answered(response: Any) -> tuple[Any, ...]:
    calls = [(c.name, c.input, dict(c.provider_metadata)) for c in response.tool_calls]
    raw = response.raw_response
    dumped = [c.model_dump() for c in raw] if isinstance(raw, list) else raw.model_dump()
    summary = (response.text, response.thinking, response.stop_reason, response.usage, calls)
    return summary, response.raw_request, dumped


@pytest.mark.parametrize("tools", [True, False], ids=["tools", "no-tools"])
@pytest.mark.parametrize("streaming", [False, True], ids=["generate", "stream"])
async def test_the_fast_route_sends_the_bytes_google_genai_sends(
    monkeypatch, streaming, tools
) -> None:
    thought = {"text": "Thinking.", "thought": True}
    replies = [answer([thought, {"text": "ok", "thoughtSignature": SIG_2}, call_part(1, 2)])]
    fast = Server(replies, stream=streaming)
    fast_answers = await two_calls(fast, tools)
    monkeypatch.setattr(gemini_sdk, "route", lambda sdk: None)
    public = Server(replies, stream=streaming)
    public_answers = await two_calls(public, tools)

    assert fast.bodies() == public.bodies()
    assert [r.url for r in fast.requests] == [r.url for r in public.requests]
    assert [r.headers.get("x-goog-api-key") for r in fast.requests] == [KEY, KEY]
    assert [answered(r) for r in fast_answers] == [answered(r) for r in public_answers]
    sent = json.loads(fast.bodies()[1])
    assert len(sent["contents"]) == 5  # user, model, results, user, and the new model turn
    assert sent["contents"][2]["parts"][1] == {
        "functionResponse": {"name": "add", "response": {"error": "bad b"}}
    }
    assert ("tools" in sent) is tools


async def test_a_config_changed_in_place_is_sent_changed(conversions) -> None:
    server = Server([answer([{"text": "ok"}])])
    client = server.client()
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    definition = add.definition.__class__("add", "Add.", schema)
    await client.chat([Message(role="user", content="hi")], [definition])
    schema["properties"]["b"] = {"type": "integer"}  # the same dict, changed
    await client.chat([Message(role="user", content="hi")], [definition])
    declared = [json.loads(b)["tools"][0]["functionDeclarations"][0] for b in server.bodies()]
    assert list(declared[0]["parameters_json_schema"]["properties"]) == ["a"]
    assert list(declared[1]["parameters_json_schema"]["properties"]) == ["a", "b"]


async def test_continuation_hops_go_the_fast_route_as_google_genai_makes_them(
    monkeypatch, conversions
) -> None:
    replies = [
        answer([{"text": "Hello "}], "CONTINUATION", continuationToken="dG9rZW4tMQ=="),
        answer([{"text": "world"}]),
    ]
    bodies = []
    for route in (gemini_sdk.route, lambda sdk: None):
        monkeypatch.setattr(gemini_sdk, "route", route)
        for streaming in (False, True):
            server = Server(replies, stream=streaming)
            response = await ask(server.client(), [Message(role="user", content="hi")])
            assert (response.text, response.stop_reason) == ("Hello world", "end_turn")
            assert response.usage.input_tokens == 24  # both hops
            bodies.append(server.bodies())
    assert len(conversions) == 2  # the fast route's two calls (one message each)
    assert bodies[0] == bodies[1] == bodies[2] == bodies[3]
    assert json.loads(bodies[0][1])["continuationToken"] == "dG9rZW4tMQ=="


# ---- (c) what is kept, and for how long ------------------------------------------------


async def test_kept_messages_go_with_their_conversation() -> None:
    server = Server([answer([{"text": "ok"}])])
    client = server.client()
    messages = [m for m in conversation() if not m.attachments]
    await client.chat(messages)
    kept = [m for m in messages if m.role != "system"]
    assert len(client._contents) == len(kept)
    del messages, kept
    gc.collect()
    assert len(client._contents) == 0


async def test_a_message_with_a_local_file_is_read_on_every_call(tmp_path, conversions) -> None:
    server = Server([answer([{"text": "Seen."}])])
    client = server.client()
    image = tmp_path / "chart.png"
    image.write_bytes(b"first")
    messages = [Message(role="user", content="Look.", attachments=(Attachment.from_path(image),))]
    await client.chat(messages)
    image.write_bytes(b"second")
    await client.chat(messages)
    sent = [json.loads(b)["contents"][0]["parts"][1]["inlineData"]["data"] for b in server.bodies()]
    assert [base64.urlsafe_b64decode(s) for s in sent] == [b"first", b"second"]
    assert len(conversions) == 2
    assert len(client._contents) == 0


async def test_a_tool_result_is_made_again_for_another_call(conversions) -> None:
    server = Server([answer([{"text": "ok"}])])
    client = server.client()
    user = Message(role="user", content="1 + 2?")
    result = Message(role="tool", content="3", tool_call_id="c1", name="add")
    mine = Message(role="assistant", tool_calls=(ToolCall("c1", "add", {"a": 1, "b": 2}),))
    generated = ToolCall("c1", "plus", {"a": 1, "b": 2}, {"generated_id": True})
    theirs = Message(role="assistant", tool_calls=(generated,))
    await client.chat([user, mine, result])
    await client.chat([user, theirs, result])
    responses = [json.loads(b)["contents"][2]["parts"][0] for b in server.bodies()]
    assert responses == [
        {"functionResponse": {"id": "c1", "name": "add", "response": {"result": "3"}}},
        {"functionResponse": {"name": "plus", "response": {"result": "3"}}},
    ]
    assert conversions == [user, mine, result, theirs, result]


# ---- where the fast route does not apply ----------------------------------------------


async def test_per_call_http_options_take_the_public_route(conversions) -> None:
    server = Server([answer([{"text": "ok"}])])
    options = GeminiOptions(extra_config={"http_options": {"headers": {"x-glass": "yes"}}})
    response = await server.client().chat(
        [Message(role="user", content="hi")], settings=ModelSettings(provider_options=options)
    )
    assert response.text == "ok"
    assert server.requests[0].headers["x-glass"] == "yes"
    assert conversions == []


@pytest.mark.parametrize(
    "internal", ["_GenerateContentParameters_to_mldev", "_GenerateContentResponse_from_mldev"]
)
async def test_where_google_genai_internals_changed_the_public_route_is_taken(
    monkeypatch, conversions, internal
) -> None:
    def changed(*args: Any, **kwargs: Any) -> Any:
        raise TypeError("a changed signature")

    # the fast route's view of google-genai's models module; google-genai itself is untouched
    moved = SimpleNamespace(**{**vars(gemini_sdk.models), internal: changed})
    monkeypatch.setattr(gemini_sdk, "models", moved)
    assert gemini_sdk.route(genai.Client(api_key=KEY)) is None
    server = Server([answer([{"text": "ok"}])])
    assert (await server.client().chat([Message(role="user", content="hi")])).text == "ok"
    assert conversions == []


def test_vertex_ai_takes_the_public_route() -> None:
    assert gemini_sdk.route(genai.Client(vertexai=True, api_key=KEY)) is None
    assert isinstance(gemini_sdk.route(genai.Client(api_key=KEY)), gemini_sdk.Route)


async def test_a_config_the_gemini_api_does_not_take_is_refused_before_sending() -> None:
    server = Server([answer([{"text": "ok"}])])
    options = GeminiOptions(extra_config={"audio_timestamp": True})  # Vertex AI only
    with pytest.raises(ConfigurationError, match="audio_timestamp"):
        await server.client().chat(
            [Message(role="user", content="hi")], settings=ModelSettings(provider_options=options)
        )
    assert server.requests == []


async def test_the_public_route_still_sends_every_kind_of_message(public, conversions) -> None:
    server = Server([answer([{"text": "ok"}])])
    response = await server.client().chat(conversation(), [add.definition], settings=SETTINGS)
    assert response.text == "ok"
    assert conversions == []
    assert json.loads(server.bodies()[0])["contents"][1]["role"] == "model"
