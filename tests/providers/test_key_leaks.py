"""Keys never leak, also when a server echoes them back: errors, causes, tracebacks, events."""

from __future__ import annotations

import json
import traceback

import pytest
import respx

from glassagent import Agent
from glassagent.errors import ConfigurationError, GlassAgentError, ProviderUnavailableError
from glassagent.llm import (
    AzureOpenAIClient,
    GeminiClient,
    Message,
    OpenAICompatibleClient,
    RetryPolicy,
)
from tests.support.loopback_server import LoopbackServer, Reply, Request

HI = [Message(role="user", content="hi")]
GEMINI_KEY = "AIzaSyD-echoed-key-0123456789abcdefghij"
OPENAI_KEY = "sk-echoed-key-0123456789abcdefghijklmnop"
NO_RETRY = RetryPolicy(max_retries=0)
KEY = "sk-SECRET0123456789abcdefSECRET"
AZURE_KEY = "8f2c1e0d9b7a4c3e8f2c1e0d9b7a4c3e"


def everything_about(error: BaseException) -> str:
    """All an application could print or log about `error`: text, body, causes, traceback."""
    texts = ["".join(traceback.format_exception(error))]
    seen: set[int] = set()
    pending: list[BaseException | None] = [error]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        texts += [str(current), repr(current), repr(vars(current))]
        texts += [repr(a) for a in current.args]
        request = getattr(current, "request", None)  # httpx errors carry their request
        texts.append(repr(getattr(getattr(request, "headers", None), "raw", None)))
        pending += [current.__cause__, current.__context__]  # both links, never only one
    return "\n".join(texts)


def gemini_suspended(request: Request) -> Reply:
    body = {
        "error": {
            "code": 403,
            "message": f"Consumer 'api_key:{GEMINI_KEY}' has been suspended.",
            "status": "PERMISSION_DENIED",
        }
    }
    return Reply.body(json.dumps(body).encode(), 403, Content_Type="application/json")


@pytest.mark.parametrize("streaming", [True, False])
async def test_a_key_gemini_echoes_is_masked_everywhere(streaming: bool) -> None:
    with LoopbackServer(gemini_suspended) as server:
        client = GeminiClient(
            api_key=GEMINI_KEY, base_url=server.url, streaming=streaming, retry=NO_RETRY
        )
        async with client:
            with pytest.raises(GlassAgentError) as direct:
                _ = [p async for p in client.stream(HI)]
            with pytest.raises(GlassAgentError) as via_agent:
                await Agent(client).run("hi")
    for error in (direct.value, via_agent.value):
        assert "has been suspended" in str(error)
        assert GEMINI_KEY not in everything_about(error)
        assert GEMINI_KEY not in (getattr(error, "body", None) or "")
    assert via_agent.value.result is not None
    events = json.dumps([e.to_dict() for e in via_agent.value.result.events])
    assert GEMINI_KEY not in events
    assert "AIza...ghij" in events  # masked, still recognisable


def openai_error_mid_stream(request: Request) -> Reply:
    chunk = {"error": {"message": f"Incorrect API key provided: {OPENAI_KEY}", "code": 401}}
    return Reply.body(f"data: {json.dumps(chunk)}\n\n".encode())


async def test_a_key_echoed_in_a_stream_error_is_masked() -> None:
    with LoopbackServer(openai_error_mid_stream) as server:
        client = OpenAICompatibleClient(
            "m", base_url=server.url + "/v1", api_key=OPENAI_KEY, retry=NO_RETRY
        )
        async with client:
            with pytest.raises(GlassAgentError) as info:
                _ = [p async for p in client.stream(HI)]
            with pytest.raises(GlassAgentError) as via_agent:
                await Agent(client).run("hi")
    for error in (info.value, via_agent.value):
        assert "Incorrect API key provided" in str(error)
        assert OPENAI_KEY not in everything_about(error)
        assert OPENAI_KEY not in (getattr(error, "body", None) or "")
    assert via_agent.value.result is not None
    assert OPENAI_KEY not in json.dumps([e.to_dict() for e in via_agent.value.result.events])


def azure_refusing_the_key(request: Request) -> Reply:
    body = {"error": {"code": "401", "message": f"Access denied for key {AZURE_KEY}."}}
    return Reply.body(json.dumps(body).encode(), 401, Content_Type="application/json")


async def test_a_key_azure_echoes_is_masked_everywhere() -> None:
    with LoopbackServer(azure_refusing_the_key) as server:
        client = AzureOpenAIClient("d", endpoint=server.url, api_key=AZURE_KEY, retry=NO_RETRY)
        async with client:
            with pytest.raises(GlassAgentError) as direct:
                _ = [p async for p in client.stream(HI)]
            with pytest.raises(GlassAgentError) as via_agent:
                await Agent(client).run("hi")
    assert server.requests[0].headers["api-key"] == AZURE_KEY
    for error in (direct.value, via_agent.value):
        assert "Access denied for key" in str(error)
        assert AZURE_KEY not in everything_about(error)
    assert via_agent.value.result is not None
    assert AZURE_KEY not in json.dumps([e.to_dict() for e in via_agent.value.result.events])


async def test_the_cause_of_a_transport_failure_holds_no_request_headers() -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = OpenAICompatibleClient(
        "m", base_url=f"http://127.0.0.1:{port}/v1", api_key=OPENAI_KEY, retry=NO_RETRY
    )
    async with client:
        with pytest.raises(GlassAgentError) as info:
            await client.chat(HI)
    cause = info.value.__cause__
    assert cause is not None
    assert "ConnectError" in str(cause)
    assert not hasattr(cause, "request")  # httpx's error carried the Authorization header
    assert OPENAI_KEY not in everything_about(info.value)


def echoing_key_in_a_broken_body(request: Request) -> Reply:
    return Reply.body(f"<html>bad key {OPENAI_KEY}</html>".encode(), Content_Type="text/html")


async def test_a_key_echoed_in_an_unreadable_body_is_not_kept_as_context() -> None:
    # a stream's unreadable event echoing the key: the contract suite, for every provider
    with LoopbackServer(echoing_key_in_a_broken_body) as server:
        client = OpenAICompatibleClient(
            "m", base_url=server.url + "/v1", api_key=OPENAI_KEY, retry=NO_RETRY
        )
        async with client:
            with pytest.raises(GlassAgentError) as info:
                await client.chat(HI)
    assert type(info.value).__name__ == "ResponseParseError"
    assert OPENAI_KEY not in everything_about(info.value)


@respx.mock
async def test_a_key_read_with_its_newline_is_cleaned() -> None:
    route = respx.post("http://127.0.0.1:8080/v1/chat/completions").respond(
        json={"choices": [{"index": 0, "message": {"content": "hi"}, "finish_reason": "stop"}]}
    )
    client = OpenAICompatibleClient("m", base_url="http://127.0.0.1:8080/v1", api_key=KEY + "\n")
    await client.chat(HI)
    assert route.calls[0].request.headers["authorization"] == f"Bearer {KEY}"


@pytest.mark.parametrize(
    "make",
    [
        lambda key: OpenAICompatibleClient("gpt-4o-mini", api_key=key),
        lambda key: GeminiClient(api_key=key),
        lambda key: AzureOpenAIClient("d", endpoint="https://r.openai.azure.com", api_key=key),
    ],
    ids=["openai", "gemini", "azure_openai"],
)
def test_a_key_with_inner_white_space_is_refused_without_showing_it(make) -> None:
    with pytest.raises(ConfigurationError, match="white space") as info:
        make("sk-SECRET 0123456789abcdef")
    assert "SECRET" not in str(info.value)


@respx.mock
async def test_openai_key_from_the_environment_goes_to_openai_only(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    route = respx.post("http://third-party.example/v1/chat/completions").respond(
        json={"choices": [{"index": 0, "message": {"content": "hi"}, "finish_reason": "stop"}]}
    )
    await OpenAICompatibleClient("m", base_url="http://third-party.example/v1").chat(HI)
    assert "authorization" not in route.calls[0].request.headers


@respx.mock
async def test_a_key_echoed_across_the_body_limit_is_still_masked() -> None:
    body = "x" * 1980 + f" key: {KEY} " + "y" * 100
    respx.post("http://127.0.0.1:8080/v1/chat/completions").respond(503, text=body)
    base_url = "http://127.0.0.1:8080/v1"
    client = OpenAICompatibleClient("m", base_url=base_url, api_key=KEY, retry=NO_RETRY)
    with pytest.raises(ProviderUnavailableError) as info:
        await client.chat(HI)
    assert KEY[:8] not in (info.value.body or "")
    assert KEY[:8] not in str(info.value)
