"""`create_llm_client`: a client by provider name, imported only when asked for."""

from __future__ import annotations

import importlib
from typing import Any

from glassagent._core.client import BaseLLMClient
from glassagent._core.errors import ConfigurationError

# provider name -> (module, class); modules are imported lazily so `import glassagent` stays cheap.
PROVIDERS: dict[str, tuple[str, str]] = {
    "gemini": ("glassagent._providers.gemini", "GeminiClient"),
}


def create_llm_client(
    provider: str, *, api_key: str | None = None, model: str | None = None, **options: Any
) -> BaseLLMClient:
    """Create the client for `provider` (case-insensitive), e.g. ``"gemini"``.

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
