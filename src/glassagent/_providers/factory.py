"""`create_llm_client`: a client by provider name, imported only when asked for.

Besides the built-in providers, names come from `register_provider` (at run time) and from
the ``glassagent.providers`` entry-point group (installed packages), so another package adds
a provider without touching glassagent.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
from collections.abc import Callable
from typing import Any

from glassagent._core.client import BaseLLMClient
from glassagent._core.errors import ConfigurationError
from glassagent._providers.config import OPENAI_API_BASE, resolve

ENTRY_POINT_GROUP = "glassagent.providers"
"""The entry-point group in which installed packages register providers."""

# provider name -> (module, class or factory function); modules are imported lazily so
# `import glassagent` stays cheap.
PROVIDERS: dict[str, tuple[str, str]] = {
    "anthropic": ("glassagent._providers.factory", "_anthropic"),
    "azure_openai": ("glassagent._providers.factory", "_azure_openai"),
    "gemini": ("glassagent._providers.gemini", "GeminiClient"),
    "llama": ("glassagent._providers.ollama", "LlamaClient"),
    "ollama": ("glassagent._providers.ollama", "OllamaClient"),
    "openai": ("glassagent._providers.factory", "_openai"),
    "openai_compatible": ("glassagent._providers.factory", "_openai_compatible"),
}

_registered: dict[str, Callable[..., BaseLLMClient]] = {}
_NAME = re.compile(r"[a-z][a-z0-9_]*")

DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
"""The model `create_llm_client("openai")` uses when none is given."""

DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-4-5"
"""The model `create_llm_client("anthropic")` uses when none is given."""


def _anthropic(**options: Any) -> BaseLLMClient:
    from glassagent._providers.anthropic import AnthropicClient

    if options.get("model") is None:
        options["model"] = DEFAULT_ANTHROPIC_MODEL
    return AnthropicClient(**options)


def _openai(**options: Any) -> BaseLLMClient:
    from glassagent._providers.openai_compat import OpenAICompatibleClient

    if options.get("model") is None:
        options["model"] = DEFAULT_OPENAI_MODEL
    return OpenAICompatibleClient(**options)


def _azure_openai(**options: Any) -> BaseLLMClient:
    from glassagent._providers.azure import AzureOpenAIClient

    if options.get("model") is None:
        raise ConfigurationError(
            "The azure_openai provider needs model=...: the name of your deployment."
        )
    return AzureOpenAIClient(**options)


def _openai_compatible(**options: Any) -> BaseLLMClient:
    """The server of `base_url` or ``OPENAI_COMPATIBLE_API_BASE``, else of ``OPENAI_API_BASE``.

    Without an address of its own, the client is the one ``OpenAICompatibleClient(model)``
    makes from ``OPENAI_API_BASE`` (with the key, organization and version that go with it);
    an address of its own never gets OpenAI's key.
    """
    from glassagent._providers.openai_compat import OpenAICompatibleClient

    config = resolve(
        "openai_compatible",
        api_key=options.get("api_key"),
        base_url=options.get("base_url"),
        organization=options.get("organization"),
        api_version=options.get("api_version"),
    )
    if not config.base_url and resolve("openai").base_url == OPENAI_API_BASE:
        raise ConfigurationError(
            "The openai_compatible provider needs the server's address: pass base_url=... "
            "(e.g. 'http://127.0.0.1:8080/v1') or set OPENAI_COMPATIBLE_API_BASE."
        )
    if options.get("model") is None:
        raise ConfigurationError("The openai_compatible provider needs model=... .")
    if config.base_url:
        options["base_url"] = config.base_url
        options["api_key"] = config.api_key or ""  # never fall back to OpenAI's own key
        options["organization"] = config.organization
        options["api_version"] = config.api_version
    return OpenAICompatibleClient(**options)


def _normalise(name: str) -> str:
    if not isinstance(name, str):
        raise ConfigurationError(f"A provider name must be a string, got {type(name).__name__}.")
    return name.strip().lower()


def register_provider(
    name: str,
    factory: Callable[..., BaseLLMClient],
    *,
    replace: bool = False,
) -> None:
    """Make ``create_llm_client(name, ...)`` return ``factory(**options)``.

    This is the run-time form of the ``glassagent.providers`` entry-point group: a package
    that cannot declare an entry point (or a test) registers its client here.

    Args:
        name: The provider's name: lower-case letters, digits and underscores (it is matched
            case-insensitively, like the built-in names).
        factory: A `BaseLLMClient` subclass, or a function taking the keyword arguments of
            `create_llm_client` (``api_key`` and ``model`` only when given) and returning a
            `BaseLLMClient`.
        replace: Allow replacing a built-in or an already registered provider.

    Raises:
        ConfigurationError: For a malformed name (or one that is not a string), a name
            already taken (unless `replace`), or a factory that is not callable.
    """
    key = _normalise(name)
    if not _NAME.fullmatch(key):
        raise ConfigurationError(
            f"Provider name {name!r} must be lower-case letters, digits and underscores."
        )
    _check_factory(factory, f"register_provider({name!r})")
    if not replace and (key in PROVIDERS or key in _registered):
        raise ConfigurationError(
            f"A provider named {key!r} exists already; pass replace=True to replace it."
        )
    _registered[key] = factory


def _check_factory(obj: object, origin: str) -> Callable[..., BaseLLMClient]:
    """`obj` if it can make clients: a `BaseLLMClient` subclass or another callable."""
    if isinstance(obj, type) and not issubclass(obj, BaseLLMClient):
        raise ConfigurationError(f"{origin}: {obj.__qualname__} is not a BaseLLMClient subclass.")
    if not callable(obj):
        raise ConfigurationError(f"{origin}: {type(obj).__name__} object is not callable.")
    return obj


def _entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    """Installed provider plugins by normalised name (the first one found wins)."""
    found: dict[str, importlib.metadata.EntryPoint] = {}
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(_normalise(entry.name), entry)
    return found


def _load_plugin(key: str, entry: importlib.metadata.EntryPoint) -> Callable[..., BaseLLMClient]:
    """The factory an entry point names, imported now."""
    dist = getattr(entry, "dist", None)
    origin = f"The provider plugin {key!r} ({entry.value}" + (
        f", from {dist.name})" if dist is not None else ")"
    )
    try:
        obj = entry.load()
    except Exception as exc:
        raise ConfigurationError(f"{origin} failed to load: {type(exc).__name__}: {exc}") from exc
    return _check_factory(obj, origin)


def _factory(provider: str) -> Callable[..., BaseLLMClient]:
    """The factory for `provider`: registered, built-in, then installed plugins."""
    key = _normalise(provider)
    if key in _registered:
        return _registered[key]
    if key in PROVIDERS:
        module_name, attr = PROVIDERS[key]
        factory: Callable[..., BaseLLMClient] = getattr(importlib.import_module(module_name), attr)
        return factory
    plugins = _entry_points()
    if key in plugins:
        return _load_plugin(key, plugins[key])
    known = ", ".join(sorted({*PROVIDERS, *_registered, *plugins}))
    raise ConfigurationError(f"Unknown provider {provider!r}. Known providers: {known}.")


def create_llm_client(
    provider: str, *, api_key: str | None = None, model: str | None = None, **options: Any
) -> BaseLLMClient:
    """Create the client for `provider` (case-insensitive), e.g. ``"gemini"``.

    Built-in providers: ``anthropic``, ``azure_openai`` (a deployment on Azure OpenAI; ``model``
    is the deployment's name), ``gemini``, ``llama`` (an Ollama model through the JSON tool
    protocol), ``ollama``, ``openai`` and ``openai_compatible`` (any chat-completions server;
    needs ``base_url`` or ``OPENAI_API_BASE``). Each reads ``[PROVIDER]_API_KEY`` and
    ``[PROVIDER]_API_BASE`` from the environment when the argument is not given (the table
    is on the docs' Providers page). Other names come from `register_provider` or from
    installed packages that declare an entry point in the ``glassagent.providers`` group;
    those are imported only when asked for.

    Args:
        provider: The provider's name.
        api_key: The API key; by default each client reads its own environment variable.
        model: The model; by default each client's default model.
        **options: Further keyword arguments for the client's constructor.

    Raises:
        ConfigurationError: For an unknown provider (the message lists the known ones,
            plugins included), a plugin that fails to load or returns no `BaseLLMClient`,
            a `provider`, `api_key` or `model` that is not a string, or when the client's
            own configuration is missing.
    """
    for name, value in (("api_key", api_key), ("model", model)):
        if value is not None and not isinstance(value, str):
            raise ConfigurationError(f"`{name}` must be a string, got {type(value).__name__}.")
    factory = _factory(provider)
    if api_key is not None:
        options["api_key"] = api_key
    if model is not None:
        options["model"] = model
    client = factory(**options)
    if not isinstance(client, BaseLLMClient):
        raise ConfigurationError(
            f"The factory of provider {_normalise(provider)!r} returned a "
            f"{type(client).__name__}, not a BaseLLMClient."
        )
    return client
