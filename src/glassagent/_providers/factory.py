"""`create_llm_client`: a client by provider name, imported only when asked for."""

from __future__ import annotations

import importlib
import os
from typing import Any

from glassagent._core.client import BaseLLMClient
from glassagent._core.errors import ConfigurationError

# provider name -> (module, class or factory function); modules are imported lazily so
# `import glassagent` stays cheap.
PROVIDERS: dict[str, tuple[str, str]] = {
    "gemini": ("glassagent._providers.gemini", "GeminiClient"),
    "llama": ("glassagent._providers.factory", "_llama"),
    "ollama": ("glassagent._providers.factory", "_ollama"),
    "openai": ("glassagent._providers.factory", "_openai"),
    "openai_compatible": ("glassagent._providers.factory", "_openai_compatible"),
}


DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
"""The model `create_llm_client("openai")` uses when none is given."""


def _from_env(options: dict[str, Any], option: str, *names: str) -> None:
    """Fill `option` from the first environment variable set, unless it was given."""
    if options.get(option) is None:
        value = next((os.environ[n] for n in names if os.environ.get(n)), None)
        if value is not None:
            options[option] = value


def _ollama(**options: Any) -> BaseLLMClient:
    from glassagent._providers.ollama import OllamaClient

    _from_env(options, "base_url", "OLLAMA_BASE_URL", "OLLAMA_API_BASE")
    return OllamaClient(**options)


def _llama(**options: Any) -> BaseLLMClient:
    from glassagent._providers.ollama import LlamaClient

    _from_env(options, "base_url", "LLAMA_API_BASE", "OLLAMA_BASE_URL")
    return LlamaClient(**options)


def _openai(**options: Any) -> BaseLLMClient:
    from glassagent._providers.openai_compat import OpenAICompatibleClient

    options.setdefault("model", DEFAULT_OPENAI_MODEL)
    if options["model"] is None:
        options["model"] = DEFAULT_OPENAI_MODEL
    return OpenAICompatibleClient(**options)


def _openai_compatible(**options: Any) -> BaseLLMClient:
    from glassagent._providers.openai_compat import OpenAICompatibleClient

    _from_env(options, "base_url", "OPENAI_COMPATIBLE_API_BASE")
    if not options.get("base_url"):
        raise ConfigurationError(
            "The openai_compatible provider needs the server's address: pass base_url=... "
            "(e.g. 'http://127.0.0.1:8080/v1') or set OPENAI_COMPATIBLE_API_BASE."
        )
    _from_env(options, "api_key", "OPENAI_COMPATIBLE_API_KEY")
    options.setdefault("api_key", "")  # never fall back to OpenAI's own key
    if options.get("model") is None:
        raise ConfigurationError("The openai_compatible provider needs model=... .")
    return OpenAICompatibleClient(**options)


def create_llm_client(
    provider: str, *, api_key: str | None = None, model: str | None = None, **options: Any
) -> BaseLLMClient:
    """Create the client for `provider` (case-insensitive), e.g. ``"gemini"``.

    Known providers: ``gemini``, ``llama`` (an Ollama model through the JSON tool protocol),
    ``ollama``, ``openai`` and ``openai_compatible`` (any chat-completions server; needs
    ``base_url``). Each reads ``[PROVIDER]_API_KEY`` and ``[PROVIDER]_API_BASE`` from the
    environment when the argument is not given; Ollama also honours ``OLLAMA_BASE_URL``.

    Args:
        provider: The provider's name.
        api_key: The API key; by default each client reads its own environment variable.
        model: The model; by default each client's default model.
        **options: Further keyword arguments for the client's constructor.

    Raises:
        ConfigurationError: For an unknown provider (the message lists the known ones), or
            when the client's own configuration is missing.
    """
    key = provider.strip().lower()
    if key not in PROVIDERS:
        known = ", ".join(sorted(PROVIDERS))
        raise ConfigurationError(f"Unknown provider {provider!r}. Known providers: {known}.")
    module_name, class_name = PROVIDERS[key]
    cls = getattr(importlib.import_module(module_name), class_name)
    if api_key is not None:
        options["api_key"] = api_key
    if model is not None:
        options["model"] = model
    client: BaseLLMClient = cls(**options)
    return client
