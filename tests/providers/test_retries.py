"""Retries of the built-in clients against a real server on 127.0.0.1 playing faults."""

from __future__ import annotations

import email.utils
import json
import random
import time
from collections.abc import Callable

import pytest

from glassagent import Agent
from glassagent.errors import (
    AuthenticationError,
    ProviderError,
    ProviderUnavailableError,
    RateLimitError,
)
from glassagent.events import LLMRetryEvent, parse_event
from glassagent.llm import (
    GeminiClient,
    LlamaClient,
    Message,
    ModelSettings,
    OllamaClient,
    OpenAICompatibleClient,
    RetryNotice,
    RetryPolicy,
    TextDelta,
)
from tests.support.loopback_server import LoopbackServer, Reply, Request, openai_answer

HI = [Message(role="user", content="hi")]
FAST = RetryPolicy(max_retries=2, initial_delay=0.01, max_delay=0.05)
KEY = "AIzaSyD-fake-key-for-tests-0123456789"


def scripted(*replies: Reply) -> Callable[[Request], Reply]:
    """Answers requests with `replies` in order; the last one repeats."""
    queue = list(replies)

    def handle(request: Request) -> Reply:
        return queue.pop(0) if len(queue) > 1 else queue[0]

    return handle


def error(status: int, message: str = "try later", **headers: str) -> Reply:
    body = json.dumps({"error": {"message": message, "code": status}}).encode()
    return Reply.body(body, status, Content_Type="application/json", **headers)


OK = Reply.body(openai_answer("hi"))


def openai(server: LoopbackServer, **options: object) -> OpenAICompatibleClient:
    return OpenAICompatibleClient("m", base_url=server.url + "/v1", api_key="", **options)  # type: ignore[arg-type]


async def drain(client, seen: list[object]) -> None:
    """Stream `HI`, keeping every part in `seen` (also the ones before a failure)."""
    async for part in client.stream(HI):
        seen.append(part)


async def collect(client: OpenAICompatibleClient | OllamaClient | GeminiClient, **kw: object):
    return [part async for part in client.stream(HI, **kw)]  # type: ignore[arg-type]


@pytest.mark.parametrize("status", [408, 500, 502, 504, 529])  # 429, 503: contract suite
async def test_retryable_statuses_are_retried_and_announced(status: int) -> None:
    with LoopbackServer(scripted(error(status), OK)) as server:
        async with openai(server, retry=FAST) as client:
            parts = await collect(client)
    notices = [p for p in parts if isinstance(p, RetryNotice)]
    assert len(notices) == 1
    assert notices[0].attempt == 1
    assert notices[0].status == status
    assert parts[-1].text == "hi"
    assert len(server.requests) == 2


@pytest.mark.parametrize(("status", "kind"), [(401, AuthenticationError), (400, ProviderError)])
async def test_authentication_and_invalid_requests_are_never_retried(status, kind) -> None:
    with LoopbackServer(scripted(error(status), OK)) as server:
        async with openai(server, retry=FAST) as client:
            with pytest.raises(kind):
                await collect(client)
    assert len(server.requests) == 1


async def test_529_is_provider_unavailable() -> None:
    with LoopbackServer(scripted(error(529, "overloaded"))) as server:
        async with openai(server, retry=RetryPolicy(max_retries=0)) as client:
            with pytest.raises(ProviderUnavailableError, match="overloaded"):
                await client.chat(HI)


async def test_retries_stop_after_max_retries_with_the_last_error() -> None:
    with LoopbackServer(scripted(error(503, "still down"))) as server:
        async with openai(server, retry=FAST) as client:
            with pytest.raises(ProviderUnavailableError, match="still down"):
                await client.chat(HI)
    assert len(server.requests) == 3


async def test_the_default_policy_retries_twice() -> None:
    assert RetryPolicy().max_retries == 2
    settings = ModelSettings(retry=RetryPolicy(initial_delay=0.01))
    with LoopbackServer(scripted(error(503))) as server:
        async with openai(server) as client:
            with pytest.raises(ProviderUnavailableError):
                await client.chat(HI, settings=settings)
    assert len(server.requests) == 3


async def test_retry_after_as_an_http_date_is_honoured() -> None:
    when = email.utils.formatdate(time.time() + 2, usegmt=True)
    with LoopbackServer(scripted(error(429, Retry_After=when), OK)) as server:
        async with openai(server, retry=FAST) as client:
            parts = await collect(client)
    notice = next(p for p in parts if isinstance(p, RetryNotice))
    assert 0.0 < notice.delay <= 2.0


async def test_a_wait_longer_than_max_wait_is_refused_at_once() -> None:
    policy = RetryPolicy(max_retries=3, max_wait=5.0)
    with LoopbackServer(scripted(error(429, Retry_After="3600"), OK)) as server:
        async with openai(server, retry=policy) as client:
            started = time.monotonic()
            with pytest.raises(RateLimitError) as info:
                await client.chat(HI)
    assert info.value.retry_after == 3600
    assert time.monotonic() - started < 5
    assert len(server.requests) == 1


async def test_a_stream_that_passed_text_on_is_never_retried() -> None:
    half = b'data: {"choices": [{"index": 0, "delta": {"content": "Hel"}}]}\n\n'
    cut = Reply(chunks=[(0, half), (0, b"data: {not json")], close=True)
    with LoopbackServer(scripted(cut, OK)) as server:
        async with openai(server, retry=FAST) as client:
            seen: list[object] = []
            with pytest.raises(ProviderError):
                await drain(client, seen)
    assert seen == [TextDelta("Hel")]
    assert len(server.requests) == 1


async def test_a_connection_lost_after_text_is_not_retried_either() -> None:
    half = b'data: {"choices": [{"index": 0, "delta": {"content": "Hel"}}]}\n\n'
    cut = Reply(chunks=[(0, half)], content_length=10_000)  # then the connection closes
    with LoopbackServer(scripted(cut, OK)) as server:
        async with openai(server, retry=FAST) as client:
            seen: list[object] = []
            with pytest.raises(ProviderUnavailableError, match="lost"):
                await drain(client, seen)
    assert seen == [TextDelta("Hel")]
    assert len(server.requests) == 1


async def test_refused_connections_are_retried() -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = OpenAICompatibleClient(
        "m", base_url=f"http://127.0.0.1:{port}/v1", api_key="", retry=FAST
    )
    async with client:
        parts: list[object] = []
        with pytest.raises(ProviderUnavailableError, match="Could not connect"):
            await drain(client, parts)
    assert [p.attempt for p in parts if isinstance(p, RetryNotice)] == [1, 2]


async def test_llama_client_takes_a_retry_policy_too() -> None:
    body = json.dumps({"message": {"content": "hi"}, "done": True}).encode()
    with LoopbackServer(scripted(error(503), Reply.body(body))) as server:
        async with LlamaClient("m", base_url=server.url, retry=FAST) as client:
            parts = await collect(client)
    assert parts[-1].text == "hi"
    assert len(server.requests) == 2
    with LoopbackServer(scripted(error(503), Reply.body(body))) as server:
        none = RetryPolicy(max_retries=0)
        async with LlamaClient("m", base_url=server.url, retry=none) as client:
            with pytest.raises(ProviderUnavailableError):
                await collect(client)
    assert len(server.requests) == 1


GEMINI_OK = {
    "candidates": [
        {"content": {"role": "model", "parts": [{"text": "hi"}]}, "finishReason": "STOP"}
    ]
}


def gemini_rate_limited(delay: str) -> Reply:
    body = {
        "error": {
            "code": 429,
            "message": "Resource has been exhausted.",
            "status": "RESOURCE_EXHAUSTED",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay}],
        }
    }
    return Reply.body(json.dumps(body).encode(), 429, Content_Type="application/json")


@pytest.mark.parametrize("streaming", [True, False])
async def test_gemini_honours_retry_info(streaming: bool) -> None:
    ok = (
        Reply.body(f"data: {json.dumps(GEMINI_OK)}\n\n".encode())
        if streaming
        else Reply.body(json.dumps(GEMINI_OK).encode(), Content_Type="application/json")
    )
    with LoopbackServer(scripted(gemini_rate_limited("0.2s"), ok)) as server:
        client = GeminiClient(api_key=KEY, base_url=server.url, streaming=streaming, retry=FAST)
        async with client:
            parts = await collect(client)
    notice = next(p for p in parts if isinstance(p, RetryNotice))
    assert notice.delay == pytest.approx(0.2)
    assert notice.error_type == "RateLimitError"
    assert KEY not in notice.error
    assert parts[-1].text == "hi"


async def test_each_retry_is_an_event_of_the_run() -> None:
    with LoopbackServer(scripted(error(503, "busy"), error(429), OK)) as server:
        async with openai(server, retry=FAST) as client:
            result = await Agent(client).run("hi")
    retries = [e for e in result.events if isinstance(e, LLMRetryEvent)]
    assert [(e.attempt, e.status, e.error_type) for e in retries] == [
        (1, 503, "ProviderUnavailableError"),
        (2, 429, "RateLimitError"),
    ]
    assert [e.type for e in result.events][:3] == ["llm_request", "llm_retry", "llm_retry"]
    assert parse_event(json.loads(json.dumps(retries[0].to_dict()))) == retries[0]
    assert result.text == "hi"


async def test_the_agents_settings_choose_the_policy() -> None:
    with LoopbackServer(scripted(error(503))) as server:
        async with openai(server, retry=FAST) as client:
            agent = Agent(client, settings=ModelSettings(retry=RetryPolicy(max_retries=0)))
            with pytest.raises(ProviderUnavailableError):
                await agent.run("hi")
    assert len(server.requests) == 1


def test_backoff_is_exponential_capped_and_jittered() -> None:
    policy = RetryPolicy(max_retries=10, initial_delay=1.0, max_delay=8.0)
    failure = ProviderUnavailableError("down")
    rng = random.Random(7)
    delays = [policy.delay(n, failure, rng=rng) for n in range(6)]
    for n, delay in enumerate(delays):
        full = min(8.0, 2.0**n)
        assert delay is not None
        assert full / 2 <= delay <= full
    exact = RetryPolicy(max_retries=10, initial_delay=1.0, max_delay=8.0, jitter=False)
    assert [exact.delay(n, failure) for n in range(5)] == [1.0, 2.0, 4.0, 8.0, 8.0]
    assert exact.delay(1, failure, remaining=1.5) is None  # past the call's deadline
    assert RetryPolicy(max_retries=0).delay(0, failure) is None


async def test_requests_ask_for_uncompressed_answers() -> None:
    with LoopbackServer(scripted(OK)) as server:
        async with openai(server) as client:
            await collect(client)
        ok = Reply.body(f"data: {json.dumps(GEMINI_OK)}\n\n".encode())
        server.handler = scripted(ok)
        async with GeminiClient(api_key=KEY, base_url=server.url) as gemini:
            await collect(gemini)
    assert [r.headers["accept-encoding"] for r in server.requests] == ["identity", "identity"]


async def test_errors_are_caught_as_the_design_documents_catch_them() -> None:
    # ai_client_rule.txt §9: a bad key is a ValueError, a rate limit a RuntimeError whose
    # message names the seconds to wait, other API errors RuntimeErrors.
    no_retry = RetryPolicy(max_retries=0)
    replies = scripted(error(401, "bad key"), error(429, Retry_After="20"), error(400, "bad"))
    with LoopbackServer(replies) as server:
        async with openai(server, retry=no_retry) as client:
            with pytest.raises(ValueError, match="bad key"):
                await client.chat(HI)
            with pytest.raises(RuntimeError, match="Retry after 20 seconds"):
                await client.chat(HI)
            with pytest.raises(RuntimeError, match="bad"):
                await client.chat(HI)
