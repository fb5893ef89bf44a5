"""Private internals of httpcore and google-genai, used only where they still fit.

The owned connection pools replace a private method of httpcore's pool: that can be turned
off (``GLASSAGENT_FAST_POOL=0``, ``fast_pool=False``) and is left off by itself where
httpcore lacks a member it calls. GeminiClient's fast route rests on google-genai internals:
it is taken only where it sends and reads the recorded exchanges of `gemini_check` exactly
as google-genai's public route does, checked once per process; otherwise the public route
answers.
"""

import asyncio
import logging
from types import SimpleNamespace
from typing import Any

import httpcore
import httpx
import pytest
import respx
from google import genai

from glassagent._providers import connection_pool, gemini_check, gemini_sdk, gemini_wire
from glassagent._providers.transport import HTTPTransport, new_http_client
from glassagent.errors import ConfigurationError
from glassagent.llm import GeminiClient, Message, OpenAICompatibleClient, RetryPolicy
from tests.support.loopback_server import read_request

KEY = "AIzaSyD3adB33fTestKey0000000000x9Qk"
GENERATE = r".*/models/gemini-2\.5-flash:generateContent$"
ANSWER = b'{"choices": [{"index": 0, "message": {"content": "hi"}, "finish_reason": "stop"}]}'
REPLY = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
    + str(len(ANSWER)).encode() + b"\r\n\r\n" + ANSWER
)  # fmt: skip


def pool_of(http: httpx.AsyncClient) -> Any:
    return http._transport._pool  # type: ignore[attr-defined]


def is_fast(http: httpx.AsyncClient) -> bool:
    return type(pool_of(http)).__name__ == "SweepingConnectionPool"


@pytest.fixture
def fresh_pool_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """httpcore is looked at again (and may be told about again) from here on."""
    monkeypatch.setattr(connection_pool, "_said", set())
    connection_pool._pool_class.cache_clear()
    yield
    connection_pool._pool_class.cache_clear()


# ---- the fast pool: switched off, or left off by itself --------------------------------


@pytest.mark.parametrize("value", ["0", "false", "No", " off "])
async def test_the_environment_variable_turns_the_fast_pool_off(monkeypatch, value) -> None:
    monkeypatch.setenv(connection_pool.ENV, value)
    async with new_http_client() as http:
        assert type(pool_of(http)) is httpcore.AsyncConnectionPool
    gemini = GeminiClient(api_key=KEY)
    http, _ = await gemini._pools.get()
    assert type(pool_of(http)) is httpcore.AsyncConnectionPool
    await gemini.aclose()


@pytest.mark.parametrize("value", [None, "", "1", "true", "on"])
async def test_the_fast_pool_is_on_unless_turned_off(monkeypatch, value) -> None:
    if value is None:
        monkeypatch.delenv(connection_pool.ENV, raising=False)
    else:
        monkeypatch.setenv(connection_pool.ENV, value)
    async with new_http_client() as http:
        assert is_fast(http)


async def test_the_transport_setting_wins_over_the_environment(monkeypatch) -> None:
    for env, setting in (("1", False), ("0", True)):
        monkeypatch.setenv(connection_pool.ENV, env)
        transport = HTTPTransport(
            provider="p",
            base_url="http://127.0.0.1:9",
            headers={},
            http_client=None,
            secret=None,
            start_hint="",
            fast_pool=setting,
        )
        assert is_fast(await transport._client()) is setting
        await transport.aclose()


def test_a_value_that_is_neither_on_nor_off_is_refused_when_a_client_is_made(monkeypatch):
    monkeypatch.setenv(connection_pool.ENV, "sometimes")
    with pytest.raises(ConfigurationError, match=r"GLASSAGENT_FAST_POOL.*'sometimes'"):
        OpenAICompatibleClient("m", base_url="http://127.0.0.1:9/v1", api_key="")
    with pytest.raises(ConfigurationError, match="GLASSAGENT_FAST_POOL"):
        GeminiClient(api_key=KEY)


async def test_with_the_fast_pool_off_connections_are_reused_by_httpcores_pool(
    monkeypatch,
) -> None:
    connections: list[asyncio.StreamWriter] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer)
        try:
            while True:
                await read_request(reader)
                writer.write(REPLY)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    monkeypatch.setenv(connection_pool.ENV, "0")
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = OpenAICompatibleClient("m", base_url=f"http://127.0.0.1:{port}/v1", api_key="")
    hello = [Message(role="user", content="hello")]
    async with server, client:
        for _ in range(2):
            answers = await asyncio.gather(*(client.chat(hello) for _ in range(5)))
            assert {a.text for a in answers} == {"hi"}
        http = await client._transport._client()
        assert type(pool_of(http)) is httpcore.AsyncConnectionPool
        assert 1 <= len(connections) <= 5  # the second round reused the first one's


MEMBERS = [  # the classes that define the member (a connection's also on its interface)
    ((httpcore.AsyncConnectionPool,), "_assign_requests_to_connections"),
    ((httpcore._async.connection_pool.AsyncPoolRequest,), "is_queued"),
    ((httpcore.AsyncHTTPConnection, httpcore.AsyncConnectionInterface), "has_expired"),
]


@pytest.mark.parametrize(("owners", "name"), MEMBERS, ids=[n for _, n in MEMBERS])
def test_an_httpcore_without_a_member_the_pool_calls_keeps_its_own_pool(
    monkeypatch, caplog, fresh_pool_check, owners, name
) -> None:
    for owner in owners:
        monkeypatch.delattr(owner, name)
    owner = owners[0]
    with caplog.at_level(logging.DEBUG, logger="glassagent"):
        clients = [new_http_client() for _ in range(2)]
    assert [type(pool_of(c)) for c in clients] == [httpcore.AsyncConnectionPool] * 2
    said = [r for r in caplog.records if "httpcore's own connection pool" in r.getMessage()]
    assert len(said) == 1  # once, however many pools are made
    assert said[0].levelno == logging.DEBUG
    assert f"{owner.__name__}.{name}" in said[0].getMessage()


def test_a_pool_without_a_field_the_pool_reads_is_left_as_it_is(caplog, fresh_pool_check):
    http = httpx.AsyncClient()
    del pool_of(http)._keepalive_expiry
    with caplog.at_level(logging.DEBUG, logger="glassagent"):
        connection_pool.speed_up(http)
        connection_pool.speed_up(httpx.AsyncClient())
    assert type(pool_of(http)) is httpcore.AsyncConnectionPool
    said = [r.getMessage() for r in caplog.records if r.name == "glassagent"]
    assert len(said) == 1
    assert "_keepalive_expiry" in said[0]


# ---- the fast Gemini route: checked against the public one -----------------------------


@pytest.fixture
def fresh_gemini_check(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The fast route is checked again from here on; counts the checks."""
    monkeypatch.setattr(gemini_sdk, "_verdicts", {})
    runs: list[int] = []
    real = gemini_check.differences

    async def counted(fast: Any) -> list[str]:
        runs.append(1)
        return await real(fast)

    monkeypatch.setattr(gemini_check, "differences", counted)
    return runs


def test_the_fast_route_matches_the_public_route_on_this_google_genai() -> None:
    assert asyncio.run(gemini_check.differences(gemini_sdk._fast_call)) == []


def test_the_check_covers_what_the_fast_route_sends_and_reads() -> None:
    cases = gemini_check._cases()
    configs = [c.config() for c in cases]
    keys = {key for config in configs for key in config}
    assert keys >= {
        "system_instruction",
        "tools",
        "tool_config",
        "thinking_config",
        "temperature",
        "max_output_tokens",
        "stop_sequences",
        "top_k",
        "seed",
        "safety_settings",
        "response_mime_type",
        "response_json_schema",
    }
    parts = {key for c in cases for m in c.messages for key in _part_keys(m)}
    assert parts >= {"text", "inline_data", "file_data", "function_call", "function_response"}
    replies = str([c.replies for c in cases] + [c.chunks for c in cases])
    for field in ("thoughtSignature", "functionCall", "inlineData", "promptFeedback"):
        assert field in replies
    for field in ("MAX_TOKENS", "CONTINUATION", "usageMetadata", "citationMetadata"):
        assert field in replies


def _part_keys(message: Message) -> set[str]:
    content = gemini_wire.to_contents([message])[0]
    return {key for c in content for part in c["parts"] for key in part}


def test_the_check_runs_once_per_process(fresh_gemini_check) -> None:
    routes = [gemini_sdk.route(genai.Client(api_key=KEY)) for _ in range(3)]
    assert all(isinstance(r, gemini_sdk.Route) for r in routes)
    assert fresh_gemini_check == [1]


def changed_models(**internals: Any) -> SimpleNamespace:
    """google-genai's models module as the fast route sees it, with `internals` changed."""
    members = {**vars(gemini_sdk.models), **internals}
    return SimpleNamespace(**{k: v for k, v in members.items() if v is not None})


def drops_thoughts_tokens(response: Any, *args: Any) -> Any:
    """The response converter, as if a release read usage differently."""
    converted = gemini_sdk.models._GenerateContentResponse_from_mldev(response, *args)
    converted.get("usageMetadata", {}).pop("thoughtsTokenCount", None)
    return converted


def forgets_top_k(api_client: Any, params: Any, *args: Any) -> Any:
    """The request converter, as if a release dropped a setting."""
    request = gemini_sdk.models._GenerateContentParameters_to_mldev(api_client, params, *args)
    request.get("generationConfig", {}).pop("topK", None)
    return request


CHANGES = {
    "response converter answers differently": {
        "_GenerateContentResponse_from_mldev": drops_thoughts_tokens
    },
    "request converter answers differently": {"_GenerateContentParameters_to_mldev": forgets_top_k},
    "response converter missing": {"_GenerateContentResponse_from_mldev": None},
}


@respx.mock
@pytest.mark.parametrize("change", sorted(CHANGES))
async def test_changed_internals_make_the_client_take_the_public_route(
    monkeypatch, caplog, fresh_gemini_check, change
) -> None:
    monkeypatch.setattr(gemini_sdk, "models", changed_models(**CHANGES[change]))
    usage = {"promptTokenCount": 12, "candidatesTokenCount": 7, "thoughtsTokenCount": 5}
    body = {
        "candidates": [{"content": {"role": "model", "parts": [{"text": "Hi!"}]}, "index": 0}],
        "usageMetadata": usage,
    }
    route = respx.post(url__regex=GENERATE).respond(json=body)
    with caplog.at_level(logging.WARNING, logger="glassagent"):
        clients = [GeminiClient(api_key=KEY, retry=RetryPolicy(max_retries=0)) for _ in range(2)]
        answers = [await c.chat([Message(role="user", content="Hi")]) for c in clients]
    assert [(await c._genai())[1] for c in clients] == [None, None]  # the public route
    assert [a.text for a in answers] == ["Hi!", "Hi!"]
    assert [a.usage.thinking_tokens for a in answers] == [5, 5]
    assert route.calls[0].request.url.path == "/v1/models/gemini-2.5-flash:generateContent"
    warned = [r for r in caplog.records if "fast route" in r.getMessage()]
    assert len(warned) == 1  # once, for every client of the process
    assert warned[0].levelno == logging.WARNING
    if "missing" in change:  # nothing to check: the warning names what is gone
        assert fresh_gemini_check == []
        assert "models._GenerateContentResponse_from_mldev" in warned[0].getMessage()
    else:
        assert fresh_gemini_check == [1]
    for client in clients:
        await client.aclose()


async def test_a_drifted_copy_of_google_genais_part_form_is_caught(
    monkeypatch, caplog, fresh_gemini_check
) -> None:
    # our REST form of a part (gemini_wire) mirrors google-genai's; were bytes written in
    # standard base64 where google-genai writes URL-safe base64, the check would see it
    import base64

    monkeypatch.setattr(gemini_wire, "_rest_bytes", lambda data: base64.b64encode(data).decode())
    with caplog.at_level(logging.WARNING, logger="glassagent"):
        assert gemini_sdk.route(genai.Client(api_key=KEY)) is None
    assert "every part, tools and settings" in caplog.text


def test_a_check_that_does_not_finish_in_time_leaves_the_public_route(
    monkeypatch, caplog, fresh_gemini_check
) -> None:
    async def stuck(fast: Any) -> list[str]:
        await asyncio.sleep(0.5)
        return []

    monkeypatch.setattr(gemini_check, "differences", stuck)
    monkeypatch.setattr(gemini_sdk, "CHECK_SECONDS", 0.05)
    with caplog.at_level(logging.WARNING, logger="glassagent"):
        assert gemini_sdk.route(genai.Client(api_key=KEY)) is None
    assert "the check took more than 0.05 s" in caplog.text


async def test_every_built_in_client_takes_the_fast_pool_setting(monkeypatch) -> None:
    from glassagent.llm import AnthropicClient, AzureOpenAIClient, LlamaClient, OllamaClient

    monkeypatch.setenv(connection_pool.ENV, "1")
    local = "http://127.0.0.1:9"
    makers = {
        "openai_compatible": lambda f: OpenAICompatibleClient("m", base_url=local, fast_pool=f),
        "azure_openai": lambda f: AzureOpenAIClient("d", endpoint=local, api_key="k", fast_pool=f),
        "anthropic": lambda f: AnthropicClient("m", base_url=local, fast_pool=f),
        "ollama": lambda f: OllamaClient("m", base_url=local, fast_pool=f),
        "llama": lambda f: LlamaClient("m", base_url=local, fast_pool=f),
    }
    for name, make in makers.items():
        for setting in (False, True):
            client = make(setting)
            assert is_fast(await client._transport._client()) is setting, name
            await client.aclose()
    for setting in (False, True):
        gemini = GeminiClient(api_key=KEY, fast_pool=setting)
        http, _ = await gemini._pools.get()
        assert is_fast(http) is setting
        await gemini.aclose()
