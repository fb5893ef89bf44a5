import subprocess
import sys

import pytest

from glassagent.errors import ConfigurationError
from glassagent.llm import (
    LlamaClient,
    OllamaClient,
    OpenAICompatibleClient,
    create_llm_client,
)

KEY = "sk-factory-0123456789abcdef"


def test_known_providers_case_insensitive(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    openai = create_llm_client(" OpenAI ")
    assert isinstance(openai, OpenAICompatibleClient)
    assert (openai.provider_name, openai.model) == ("openai", "gpt-4o-mini")
    assert create_llm_client("openai", model="gpt-4.1").model == "gpt-4.1"

    ollama = create_llm_client("OLLAMA", model="qwen2.5:7b")
    assert isinstance(ollama, OllamaClient)
    assert (ollama.model, ollama.tool_protocol) == ("qwen2.5:7b", "auto")

    llama = create_llm_client("llama")
    assert isinstance(llama, LlamaClient)
    assert (llama.model, llama.tool_protocol) == ("llama3.1:8b", "json")


def test_unknown_provider_lists_the_known_ones() -> None:
    known = "anthropic, azure_openai, gemini, llama, ollama, openai, openai_compatible"
    with pytest.raises(ConfigurationError, match=known):
        create_llm_client("mistral")


def test_anthropic_without_a_key_names_the_variable() -> None:
    with pytest.raises(ConfigurationError, match="ANTHROPIC_API_KEY"):
        create_llm_client("anthropic")


def test_openai_without_a_key_names_the_variable() -> None:
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        create_llm_client("openai")


async def test_openai_compatible_needs_a_base_url_and_never_borrows_openais_key(
    monkeypatch,
) -> None:
    with pytest.raises(ConfigurationError, match="base_url"):
        create_llm_client("openai_compatible", model="qwen")
    with pytest.raises(ConfigurationError, match="model"):
        create_llm_client("openai_compatible", base_url="http://127.0.0.1:8080/v1")

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    client = create_llm_client(
        "openai_compatible", model="qwen", base_url="http://127.0.0.1:8080/v1"
    )
    assert client.provider_name == "openai_compatible"
    assert KEY not in repr(vars(client._transport))

    monkeypatch.setenv("OPENAI_COMPATIBLE_API_BASE", "http://127.0.0.1:8000/v1")
    monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", "vllm-key-0123456789")
    client = create_llm_client("openai_compatible", model="qwen", tool_protocol="json")
    assert client.base_url == "http://127.0.0.1:8000/v1"
    assert client.tool_protocol == "json"


def test_ollama_and_llama_honour_their_environment(monkeypatch) -> None:
    monkeypatch.setenv("OLLAMA_BASE_URL", "http://127.0.0.1:1111")
    assert create_llm_client("ollama").base_url == "http://127.0.0.1:1111"
    assert create_llm_client("llama").base_url == "http://127.0.0.1:1111"
    monkeypatch.setenv("LLAMA_API_BASE", "http://127.0.0.1:2222")
    assert create_llm_client("llama").base_url == "http://127.0.0.1:2222"
    monkeypatch.delenv("OLLAMA_BASE_URL")
    monkeypatch.setenv("OLLAMA_API_BASE", "http://127.0.0.1:3333")
    assert create_llm_client("ollama").base_url == "http://127.0.0.1:3333"
    assert (
        create_llm_client("ollama", base_url="http://127.0.0.1:4444").base_url
        == "http://127.0.0.1:4444"
    )


def test_importing_the_clients_does_not_import_httpx() -> None:
    code = "import sys, glassagent.llm\nprint('httpx' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
