"""`AzureOpenAIClient` against Azure OpenAI's wire, as Azure documents it and clients record it.

The bodies below have the shapes of Azure's answers: ``prompt_filter_results`` on every
answer, ``content_filter_results`` on every choice, a first stream chunk with no choices, a
last one with ``content_filter_offsets`` after the finish reason, and Azure's error bodies
(``content_filter`` with its ``innererror``, ``DeploymentNotFound``, the 401 and 429 ones).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import httpx
import pytest
import respx

from glassagent import Agent, Message, tool
from glassagent.errors import (
    AuthenticationError,
    ConfigurationError,
    ContentBlockedError,
    ProviderError,
    RateLimitError,
)
from glassagent.llm import (
    AzureOpenAIClient,
    LLMResponse,
    OpenAICompatibleClient,
    RetryPolicy,
    TextDelta,
    Usage,
    create_llm_client,
)
from glassagent.profiles import cost_of

ENDPOINT = "https://my-resource.openai.azure.com"
DEPLOYMENT = "gpt-4o-mini-prod"
DEPLOYMENT_URL = f"{ENDPOINT}/openai/deployments/{DEPLOYMENT}/chat/completions"
V1_URL = f"{ENDPOINT}/openai/v1/chat/completions"
KEY = "0123456789abcdef0123456789abSECRET"
HI = [Message(role="user", content="Hi")]
NO_RETRY = RetryPolicy(max_retries=0)

SAFE = {"filtered": False, "severity": "safe"}
CATEGORIES = {"hate": SAFE, "self_harm": SAFE, "sexual": SAFE, "violence": SAFE}
PROMPT_FILTER = [
    {
        "prompt_index": 0,
        "content_filter_results": {
            **CATEGORIES,
            "jailbreak": {"filtered": False, "detected": False},
        },
    }
]


@pytest.fixture(autouse=True)
def _no_azure_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite's guard clears *_API_KEY and *_API_BASE; these names end otherwise."""
    for name in ("AZURE_OPENAI_ENDPOINT", "AZURE_OPENAI_API_VERSION", "OPENAI_API_VERSION"):
        monkeypatch.delenv(name, raising=False)


def completion(
    content: str | None, finish: str = "stop", *, filters: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A chat.completion body as Azure sends it: filter results on the prompt and choice."""
    return {
        "choices": [
            {
                "content_filter_results": CATEGORIES if filters is None else filters,
                "finish_reason": finish,
                "index": 0,
                "logprobs": None,
                "message": {"content": content, "refusal": None, "role": "assistant"},
            }
        ],
        "created": 1739732755,
        "id": "chatcmpl-B1eFf135hgAWyKJT6ry5iFMcwAf4D",
        "model": "gpt-4o-mini-2024-07-18",
        "object": "chat.completion",
        "prompt_filter_results": PROMPT_FILTER,
        "system_fingerprint": "fp_f3927aa00d",
        "usage": {
            "completion_tokens": 9,
            "completion_tokens_details": {"reasoning_tokens": 0},
            "prompt_tokens": 18,
            "prompt_tokens_details": {"cached_tokens": 0},
            "total_tokens": 27,
        },
    }


def chunk(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> dict:
    """A chat.completion.chunk as Azure streams it."""
    filters = CATEGORIES if delta and delta.get("content") else {}
    choice = {
        "content_filter_results": filters,
        "delta": delta,
        "finish_reason": finish,
        "index": 0,
        "logprobs": None,
    }
    return {
        "choices": [choice],
        "created": 1750697159,
        "id": "chatcmpl-BleatwEUn3D8iXsgXpDqeOPEMuW3j",
        "model": "gpt-4o-2024-08-06",
        "object": "chat.completion.chunk",
        "system_fingerprint": "fp_ee1d74bde0",
        **extra,
    }


FIRST_CHUNK = {  # the prompt's filter results, before any choice
    "choices": [],
    "created": 0,
    "id": "",
    "model": "",
    "object": "",
    "prompt_filter_results": PROMPT_FILTER,
}
OFFSETS_CHUNK = {  # the asynchronous filter's last word, after the finish reason
    "choices": [
        {
            "content_filter_offsets": {"check_offset": 35, "start_offset": 35, "end_offset": 48},
            "content_filter_results": CATEGORIES,
            "finish_reason": None,
            "index": 0,
        }
    ],
    "created": 0,
    "id": "",
    "model": "",
    "object": "",
}
USAGE_CHUNK = {
    "choices": [],
    "created": 1750697159,
    "id": "chatcmpl-BleatwEUn3D8iXsgXpDqeOPEMuW3j",
    "model": "gpt-4o-2024-08-06",
    "object": "chat.completion.chunk",
    "usage": {"completion_tokens": 4, "prompt_tokens": 14, "total_tokens": 18},
}


def sse(*chunks: dict[str, Any]) -> httpx.Response:
    body = "".join(f"data: {json.dumps(c, separators=(',', ':'))}\n\n" for c in chunks)
    return httpx.Response(
        200, text=body + "data: [DONE]\n\n", headers={"content-type": "text/event-stream"}
    )


def error(status: int, body: dict[str, Any], **headers: str) -> httpx.Response:
    return httpx.Response(status, json=body, headers=headers)


PROMPT_REFUSED = {  # HTTP 400 for a prompt the filter refused (Azure's content filtering page)
    "error": {
        "message": "The response was filtered due to the prompt triggering Azure OpenAI's "
        "content management policy. Please modify your prompt and retry. To learn more about "
        "our content filtering policies please read our documentation: "
        "https://go.microsoft.com/fwlink/?linkid=2198766",
        "type": None,
        "param": "prompt",
        "code": "content_filter",
        "status": 400,
        "innererror": {
            "code": "ResponsibleAIPolicyViolation",
            "content_filter_result": {
                **CATEGORIES,
                "violence": {"filtered": True, "severity": "high"},
                "jailbreak": {"filtered": True, "detected": True},
            },
        },
    }
}


def azure(**options: Any) -> AzureOpenAIClient:
    options.setdefault("api_key", KEY)
    return AzureOpenAIClient(DEPLOYMENT, endpoint=ENDPOINT, retry=NO_RETRY, **options)


async def streamed(client: Any, *args: Any, **kwargs: Any) -> list[Any]:
    return [part async for part in client.stream(*args, **kwargs)]


# ---- addresses and credentials ----------------------------------------------------------


@respx.mock
async def test_a_deployment_path_with_the_api_key_header() -> None:
    route = respx.post(DEPLOYMENT_URL).respond(json=completion("Hello! How can I help?"))
    async with azure() as client:
        response = await client.chat(HI)
    request = route.calls[0].request
    assert request.url.params["api-version"] == "2024-10-21"
    assert request.headers["api-key"] == KEY
    assert "authorization" not in request.headers
    assert json.loads(request.content)["model"] == DEPLOYMENT
    assert response.text == "Hello! How can I help?"
    assert (response.stop_reason, response.model) == ("end_turn", "gpt-4o-mini-2024-07-18")
    assert response.usage == Usage(18, 9)
    assert response.raw_response["prompt_filter_results"] == PROMPT_FILTER
    assert (client.provider_name, client.base_url) == ("azure_openai", f"{ENDPOINT}/openai")
    assert client.get_masked_api_key() == "0123...CRET"
    assert KEY not in repr(client)


@pytest.mark.parametrize(
    ("endpoint", "api_version", "url"),
    [
        (ENDPOINT, "v1", V1_URL),
        (ENDPOINT + "/openai/v1/", None, V1_URL),
        (ENDPOINT + "/openai", "preview", V1_URL + "?api-version=preview"),
        (ENDPOINT + "/", "2025-04-01-preview", DEPLOYMENT_URL + "?api-version=2025-04-01-preview"),
    ],
)
@respx.mock
async def test_the_v1_api_and_dated_versions(endpoint, api_version, url) -> None:
    route = respx.post(url__eq=url).respond(json=completion("hi"))
    client = AzureOpenAIClient(DEPLOYMENT, base_url=endpoint, api_key=KEY, api_version=api_version)
    await client.chat(HI)
    assert route.called
    assert client.endpoint == ENDPOINT
    assert json.loads(route.calls[0].request.content)["model"] == DEPLOYMENT  # v1 reads it


@respx.mock
async def test_the_environment_and_create_llm_client(monkeypatch) -> None:
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY + "\n")
    monkeypatch.setenv("AZURE_OPENAI_API_BASE", ENDPOINT + "/")
    monkeypatch.setenv("AZURE_OPENAI_API_VERSION", "2024-06-01")
    route = respx.post(DEPLOYMENT_URL).respond(json=completion("hi"))
    client = create_llm_client("AZURE_OPENAI", model=DEPLOYMENT)
    assert isinstance(client, AzureOpenAIClient)
    await client.chat(HI)
    assert route.calls[0].request.url.params["api-version"] == "2024-06-01"
    assert route.calls[0].request.headers["api-key"] == KEY

    # the names the openai SDK's AzureOpenAI reads come after the standard ones
    monkeypatch.delenv("AZURE_OPENAI_API_BASE")
    monkeypatch.delenv("AZURE_OPENAI_API_VERSION")
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "https://other.openai.azure.com")
    monkeypatch.setenv("OPENAI_API_VERSION", "v1")
    client = AzureOpenAIClient(DEPLOYMENT)
    assert (client.endpoint, client.api_version) == ("https://other.openai.azure.com", "v1")
    # an endpoint in code still gets the key: every endpoint is taken to be Azure's
    assert AzureOpenAIClient("d", endpoint=ENDPOINT).get_masked_api_key() == "0123...CRET"


def test_configuration_mistakes_are_named(monkeypatch) -> None:
    with pytest.raises(ConfigurationError, match="AZURE_OPENAI_API_BASE"):
        AzureOpenAIClient(DEPLOYMENT, api_key=KEY)
    with pytest.raises(ConfigurationError, match=r"AZURE_OPENAI_API_KEY.*azure_ad_token_provider"):
        AzureOpenAIClient(DEPLOYMENT, endpoint=ENDPOINT)
    with pytest.raises(ConfigurationError, match="not both"):
        AzureOpenAIClient(DEPLOYMENT, endpoint=ENDPOINT, api_key=KEY, azure_ad_token_provider=str)
    with pytest.raises(ConfigurationError, match="same setting"):
        AzureOpenAIClient(DEPLOYMENT, endpoint=ENDPOINT, base_url="https://x.test", api_key=KEY)
    with pytest.raises(ConfigurationError, match="v1 API"):
        AzureOpenAIClient(
            DEPLOYMENT, endpoint=ENDPOINT + "/openai/v1", api_key=KEY, api_version="2024-10-21"
        )
    with pytest.raises(ConfigurationError, match="deployment"):
        create_llm_client("azure_openai", api_key=KEY, endpoint=ENDPOINT)
    with pytest.raises(ConfigurationError, match="white space") as info:
        AzureOpenAIClient(DEPLOYMENT, endpoint=ENDPOINT, api_key="0123 SECRET 456789")
    assert "SECRET" not in str(info.value)


# ---- Microsoft Entra ID ------------------------------------------------------------------


@respx.mock
async def test_a_token_provider_sync_or_async_is_asked_before_each_request(monkeypatch) -> None:
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)  # a token provider: the key is not read
    route = respx.post(DEPLOYMENT_URL).respond(json=completion("hi"))
    tokens = iter(["eyJ0eXAi.token-1", "eyJ0eXAi.token-2"])

    async def async_provider() -> str:
        await asyncio.sleep(0)
        return next(tokens)

    for provider in (async_provider, lambda: "eyJ0eXAi.token-3"):
        client = AzureOpenAIClient(DEPLOYMENT, endpoint=ENDPOINT, azure_ad_token_provider=provider)
        assert client.get_masked_api_key() == "<none>"
        await client.chat(HI)
        await client.chat(HI) if provider is async_provider else None
    sent = [call.request.headers for call in route.calls]
    assert [h["authorization"] for h in sent] == [
        "Bearer eyJ0eXAi.token-1",
        "Bearer eyJ0eXAi.token-2",
        "Bearer eyJ0eXAi.token-3",
    ]
    assert all("api-key" not in h for h in sent)


@pytest.mark.parametrize(
    ("provider", "match"),
    [
        (lambda: (_ for _ in ()).throw(RuntimeError("no credential")), "no credential"),
        (lambda: None, "returned null, not a token"),
        (lambda: "eyJ0eXAi.tok\r\nX-Injected: 1", "returned a string, not a token"),
    ],
    ids=["raises", "none", "header-injection"],
)
@respx.mock
async def test_a_failing_token_provider_is_an_authentication_error(provider, match) -> None:
    route = respx.post(DEPLOYMENT_URL).respond(json=completion("hi"))
    client = AzureOpenAIClient(DEPLOYMENT, endpoint=ENDPOINT, azure_ad_token_provider=provider)
    with pytest.raises(AuthenticationError, match=match) as info:
        await client.chat(HI)
    assert not route.called  # and not retried: AuthenticationError never is
    assert "Injected" not in str(info.value)


# ---- answers, streams and the content filter ---------------------------------------------


@respx.mock
async def test_a_stream_with_the_filters_chunks_as_azure_sends_it() -> None:
    respx.post(DEPLOYMENT_URL).mock(
        return_value=sse(
            FIRST_CHUNK,
            chunk({"content": "", "refusal": None, "role": "assistant"}),
            chunk({"content": "Hallo"}),
            chunk({"content": " Welt"}),
            chunk({"content": "!"}),
            chunk({}, "stop"),
            OFFSETS_CHUNK,
            USAGE_CHUNK,
        )
    )
    parts = await streamed(azure(), HI)
    assert [p.text for p in parts if isinstance(p, TextDelta)] == ["Hallo", " Welt", "!"]
    final = parts[-1]
    assert isinstance(final, LLMResponse)
    assert (final.text, final.stop_reason, final.raw_stop_reason) == (
        "Hallo Welt!",
        "end_turn",
        "stop",
    )
    assert (final.model, final.usage) == ("gpt-4o-2024-08-06", Usage(14, 4))


@respx.mock
async def test_an_answer_the_filter_cut_keeps_its_text_and_says_so() -> None:
    respx.post(DEPLOYMENT_URL).mock(
        return_value=sse(
            FIRST_CHUNK,
            chunk({"content": "Once upon a time"}),
            chunk({}, "content_filter"),
            USAGE_CHUNK,
        )
    )
    final = (await streamed(azure(), HI))[-1]
    assert (final.text, final.stop_reason) == ("Once upon a time", "content_filter")


@respx.mock
async def test_an_answer_the_filter_withheld_names_what_it_flagged() -> None:
    flagged = {**CATEGORIES, "violence": {"filtered": True, "severity": "medium"}}
    respx.post(DEPLOYMENT_URL).respond(json=completion(None, "content_filter", filters=flagged))
    with pytest.raises(ContentBlockedError, match=r"flagged violence \(medium\)") as info:
        await azure().chat(HI)
    assert info.value.reason == "content_filter"


@respx.mock
async def test_a_refused_prompt_is_content_blocked_and_not_retried() -> None:
    route = respx.post(DEPLOYMENT_URL).mock(return_value=error(400, PROMPT_REFUSED))
    client = AzureOpenAIClient(DEPLOYMENT, endpoint=ENDPOINT, api_key=KEY)  # default retries
    for call in (client.chat(HI), streamed(client, HI)):
        with pytest.raises(ContentBlockedError) as info:
            await call
        assert info.value.reason == "content_filter"
        assert info.value.status == 400
        assert "violence (high), jailbreak" in str(info.value)
        assert "content management policy" in str(info.value)
        assert "ResponsibleAIPolicyViolation" in (info.value.body or "")
    assert route.call_count == 2


@pytest.mark.parametrize(
    ("response", "kind", "match"),
    [
        (
            error(
                401,
                {
                    "error": {
                        "code": "401",
                        "message": "Access denied due to invalid subscription key or wrong API "
                        "endpoint. Make sure to provide a valid key for an active subscription "
                        "and use a correct regional API endpoint for your resource.",
                    }
                },
            ),
            AuthenticationError,
            "invalid subscription key",
        ),
        (
            error(
                404,
                {
                    "error": {
                        "code": "DeploymentNotFound",
                        "message": "The API deployment for this resource does not exist. If you "
                        "created the deployment within the last 5 minutes, please wait a moment "
                        "and try again.",
                    }
                },
            ),
            ProviderError,
            f"no deployment named '{DEPLOYMENT}'",
        ),
        (
            error(
                429,
                {
                    "error": {
                        "code": "429",
                        "message": "Requests to the ChatCompletions_Create Operation under Azure "
                        "OpenAI API version 2024-10-21 have exceeded token rate limit of your "
                        "current OpenAI S0 pricing tier. Please retry after 6 seconds.",
                    }
                },
                **{"retry-after": "6", "retry-after-ms": "6000"},
            ),
            RateLimitError,
            "Retry after 6 seconds",
        ),
    ],
    ids=["401", "deployment-not-found", "429"],
)
@respx.mock
async def test_azures_error_bodies_become_typed_errors(response, kind, match) -> None:
    respx.post(DEPLOYMENT_URL).mock(return_value=response)
    with pytest.raises(kind, match=match) as info:
        await azure().chat(HI)
    assert type(info.value) is kind
    assert info.value.provider == "azure_openai"


@respx.mock
async def test_a_key_azure_echoes_is_masked_everywhere() -> None:
    body = {"error": {"code": "content_filter", "message": f"bad key {KEY}", "innererror": {}}}
    respx.post(DEPLOYMENT_URL).mock(return_value=error(400, body))
    with pytest.raises(ContentBlockedError) as info:
        await azure().chat(HI)
    assert KEY not in str(info.value) + (info.value.body or "") + repr(vars(info.value))
    assert "0123...CRET" in str(info.value)


# ---- an agent run, structured output and cost ---------------------------------------------


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: First addend.
        b: Second addend.
    """
    return a + b


@dataclass
class Total:
    """The sum."""

    total: int


@respx.mock
async def test_an_agent_run_with_a_tool_and_a_structured_answer() -> None:
    call = {
        "index": 0,
        "id": "call_VSPBqOC4UUPx8y0eQNhwdLcE",
        "type": "function",
        "function": {"name": "add", "arguments": '{"a":17,"b":25}'},
    }
    route = respx.post(DEPLOYMENT_URL).mock(
        side_effect=[
            sse(
                FIRST_CHUNK,
                chunk({"role": "assistant", "tool_calls": [call]}),
                chunk({}, "tool_calls"),
            ),
            sse(FIRST_CHUNK, chunk({"content": '{"total": 42}'}), chunk({}, "stop"), USAGE_CHUNK),
        ]
    )
    result = await Agent(azure(), [add], output_type=Total).run("17 + 25?")
    assert result.output == Total(42)
    second = json.loads(route.calls[1].request.content)
    assert second["response_format"]["type"] == "json_schema"  # with tools, as on OpenAI
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": call["id"], "content": "42"}
    events = json.dumps([e.to_dict() for e in result.events])
    assert KEY not in events
    assert '"provider": "azure_openai"' in events


def test_cost_is_priced_under_azure() -> None:
    pytest.importorskip("genai_prices")
    cost = cost_of(Usage(1_000_000, 0), None, model="gpt-4o-mini", provider="azure_openai")
    assert cost.amount == Decimal("0.15")
    assert (cost.priced_as or "").startswith("azure/")


# ---- OPENAI_API_BASE and the openai_compatible provider -----------------------------------


def test_openai_api_base_is_read_alike_by_the_class_and_the_factory(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_API_BASE", "http://127.0.0.1:7/v1/")
    for client in (
        OpenAICompatibleClient("qwen"),
        create_llm_client("openai_compatible", model="qwen"),  # raised before: no address
    ):
        assert isinstance(client, OpenAICompatibleClient)
        assert (client.base_url, client.provider_name) == (
            "http://127.0.0.1:7/v1",
            "openai_compatible",
        )
        assert client.get_masked_api_key() == "0123...CRET"  # the key of that address
    # an address of its own wins, and never gets OpenAI's key
    monkeypatch.setenv("OPENAI_COMPATIBLE_API_BASE", "http://127.0.0.1:8/v1")
    own = create_llm_client("openai_compatible", model="qwen")
    assert (own.base_url, own.get_masked_api_key()) == ("http://127.0.0.1:8/v1", "<none>")


@respx.mock
async def test_openai_compatible_reads_its_org_id_and_api_version(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_COMPATIBLE_API_BASE", "http://127.0.0.1:8/v1")
    monkeypatch.setenv("OPENAI_COMPATIBLE_ORG_ID", "org-gateway")
    monkeypatch.setenv("OPENAI_COMPATIBLE_API_VERSION", "2024-10-21")
    monkeypatch.setenv("OPENAI_ORG_ID", "org-openai")  # OpenAI's: never sent elsewhere
    route = respx.post("http://127.0.0.1:8/v1/chat/completions").respond(json=completion("hi"))
    await create_llm_client("openai_compatible", model="qwen").chat(HI)
    request = route.calls[0].request
    assert request.headers["openai-organization"] == "org-gateway"
    assert request.url.params["api-version"] == "2024-10-21"
