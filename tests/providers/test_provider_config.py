"""Each provider's environment variables, read in one place (`_providers/config.py`)."""

from __future__ import annotations

import ast
from pathlib import Path

import httpx
import pytest
import respx

from glassagent import Message
from glassagent.errors import ConfigurationError
from glassagent.llm import (
    GeminiClient,
    LlamaClient,
    OllamaClient,
    OpenAICompatibleClient,
    create_llm_client,
)

SRC = Path(__file__).resolve().parents[2] / "src" / "glassagent"
HI = [Message(role="user", content="hi")]
KEY = "sk-config-0123456789abcdefWXYZ"
OLLAMA_REPLY = {
    "model": "m",
    "message": {"role": "assistant", "content": "hi"},
    "done": True,
    "done_reason": "stop",
}
COMPLETION = {
    "choices": [{"message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}]
}
GEMINI_REPLY = {
    "candidates": [{"content": {"role": "model", "parts": [{"text": "hi"}]}, "index": 0}],
    "modelVersion": "gemini-2.5-flash",
}


def test_only_the_config_module_reads_provider_variables() -> None:
    readers = []
    for path in sorted((SRC / "_providers").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any(isinstance(n, ast.Attribute) and n.attr == "environ" for n in ast.walk(tree)):
            readers.append(path.name)
    assert readers == ["config.py"]


@respx.mock
async def test_gemini_reads_its_api_base(monkeypatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    monkeypatch.setenv("GEMINI_API_BASE", "https://gemini-proxy.test/")
    route = respx.post(url__regex=r"^https://gemini-proxy\.test/.*:generateContent$").mock(
        return_value=httpx.Response(200, json=GEMINI_REPLY)
    )
    client = create_llm_client("gemini", streaming=False)
    assert isinstance(client, GeminiClient)
    assert (await client.chat(HI)).text == "hi"
    assert route.called
    assert route.calls[0].request.headers["x-goog-api-key"] == KEY
    await client.aclose()


@respx.mock
async def test_openai_sends_org_id_and_api_version_from_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_API_BASE", "https://azure.test/openai/v1/")
    monkeypatch.setenv("OPENAI_ORG_ID", "org-123")
    monkeypatch.setenv("OPENAI_API_VERSION", "2024-10-21")
    route = respx.post("https://azure.test/openai/v1/chat/completions").mock(
        return_value=httpx.Response(200, json=COMPLETION)
    )
    client = create_llm_client("openai")
    await client.chat(HI)
    request = route.calls[0].request
    assert request.url.params["api-version"] == "2024-10-21"
    assert request.headers["authorization"] == f"Bearer {KEY}"  # the environment's own base
    assert request.headers["openai-organization"] == "org-123"
    await client.aclose()


@respx.mock
async def test_an_address_passed_in_code_gets_no_key_from_the_environment(monkeypatch) -> None:
    for name in ("OPENAI_API_KEY", "OLLAMA_API_KEY", "LLAMA_API_KEY"):
        monkeypatch.setenv(name, KEY)
    monkeypatch.setenv("OPENAI_ORG_ID", "org-123")
    route = respx.post(url__regex=r"^http://127\.0\.0\.1:1/.*").mock(
        side_effect=lambda request: httpx.Response(
            200, json=OLLAMA_REPLY if "/api/chat" in str(request.url) else COMPLETION
        )
    )
    clients = [
        OpenAICompatibleClient("m", base_url="http://127.0.0.1:1/v1"),
        OllamaClient("m", base_url="http://127.0.0.1:1", tool_protocol="json"),
        LlamaClient("m", base_url="http://127.0.0.1:1"),
    ]
    for client in clients:
        assert client.get_masked_api_key() == "<none>"
        await client.chat(HI)
        await client.aclose()
    for call in route.calls:
        assert "authorization" not in call.request.headers
        assert "openai-organization" not in call.request.headers


@respx.mock
@pytest.mark.parametrize(
    ("provider", "variables", "base"),
    [
        ("ollama", {"OLLAMA_API_KEY": KEY, "OLLAMA_API_BASE": "https://ollama.test"}, None),
        ("llama", {"LLAMA_API_KEY": KEY, "LLAMA_API_BASE": "https://ollama.test/"}, None),
        ("llama", {"OLLAMA_API_KEY": KEY, "OLLAMA_BASE_URL": "https://ollama.test"}, None),
        ("llama", {}, "https://ollama.test"),
    ],
)
async def test_ollama_and_llama_take_a_key(monkeypatch, provider, variables, base) -> None:
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    route = respx.post("https://ollama.test/api/chat").mock(
        return_value=httpx.Response(200, json=OLLAMA_REPLY)
    )
    options = {"tool_protocol": "json"} if provider == "ollama" else {}
    if base:  # an address in code takes its key in code: create_llm_client("llama", api_key=)
        client = create_llm_client(provider, api_key=f" {KEY}\n", base_url=base, **options)
    else:
        client = create_llm_client(provider, **options)
    assert client.base_url == "https://ollama.test"
    assert client.get_masked_api_key() == "sk-c...WXYZ"
    assert KEY not in repr(client)
    await client.chat(HI)
    assert route.calls[0].request.headers["authorization"] == f"Bearer {KEY}"
    await client.aclose()


def test_the_standard_base_variable_wins_over_the_older_spelling(monkeypatch) -> None:
    monkeypatch.setenv("OLLAMA_BASE_URL", "http://127.0.0.1:1")
    monkeypatch.setenv("OLLAMA_API_BASE", "http://127.0.0.1:2")
    assert OllamaClient().base_url == "http://127.0.0.1:2"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:3/v1")
    monkeypatch.setenv("OPENAI_API_BASE", "http://127.0.0.1:4/v1")
    assert OpenAICompatibleClient("m").base_url == "http://127.0.0.1:4/v1"


def test_every_keyed_client_masks_its_key(monkeypatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    clients = [
        create_llm_client("gemini"),
        create_llm_client("openai"),
        create_llm_client(
            "openai_compatible", model="m", base_url="http://127.0.0.1:1/v1", api_key=KEY
        ),
        create_llm_client("ollama", api_key=KEY),
        create_llm_client("llama", api_key=KEY),
    ]
    for client in clients:
        assert client.get_masked_api_key() == "sk-c...WXYZ"  # type: ignore[attr-defined]
        assert KEY not in repr(client)


def test_a_key_with_inner_white_space_names_the_variable_not_the_key(monkeypatch) -> None:
    monkeypatch.setenv("LLAMA_API_KEY", "sk-broken key-0123456789")
    with pytest.raises(ConfigurationError, match="LLAMA_API_KEY") as info:
        create_llm_client("llama")
    assert "broken" not in str(info.value)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("127.0.0.1", "http://127.0.0.1:11434"),
        ("127.0.0.1:8080", "http://127.0.0.1:8080"),
        ("https://ollama.test", "https://ollama.test:11434"),
        ("http://ollama.test:9000/", "http://ollama.test:9000"),
        ("[::1]", "http://[::1]:11434"),
        ("[::1]:9000", "http://[::1]:9000"),
    ],
)
def test_ollama_host_is_read_as_the_ollama_command_reads_it(monkeypatch, value, expected) -> None:
    for name in ("OLLAMA_API_BASE", "OLLAMA_BASE_URL", "LLAMA_API_BASE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OLLAMA_HOST", value)
    assert OllamaClient().base_url == expected
    assert LlamaClient().base_url == expected
    assert create_llm_client("ollama", model="m").base_url == expected  # type: ignore[attr-defined]


def test_the_standard_base_variables_win_over_ollama_host(monkeypatch) -> None:
    monkeypatch.setenv("OLLAMA_HOST", "127.0.0.1:1")
    monkeypatch.setenv("OLLAMA_BASE_URL", "http://127.0.0.1:2")
    assert OllamaClient().base_url == "http://127.0.0.1:2"
