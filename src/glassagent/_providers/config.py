"""Where every provider's environment variables are read: one table, one reader.

The names follow the provider rules: ``[PROVIDER]_API_KEY`` for the key and
``[PROVIDER]_API_BASE`` for the address, plus ``[PROVIDER]_ORG_ID`` and
``[PROVIDER]_API_VERSION`` where the wire has them. Older spellings (``OPENAI_BASE_URL``,
``OLLAMA_BASE_URL``), the names of the openai SDK's Azure client (``AZURE_OPENAI_ENDPOINT``,
``OPENAI_API_VERSION``) and Ollama's own ``OLLAMA_HOST`` (``host[:port]``, as the ``ollama``
command reads it) are read after the standard ones. Constructors and `create_llm_client`
both call `resolve`; nothing else in glassagent reads these variables.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from glassagent._core.errors import ConfigurationError
from glassagent._providers.http import clean_key, mask_key

OPENAI_API_BASE = "https://api.openai.com/v1"
"""OpenAI's own base URL, the default of the ``openai`` provider."""
OLLAMA_BASE_URL = "http://localhost:11434"
"""Where a local Ollama server listens by default."""
ANTHROPIC_API_BASE = "https://api.anthropic.com"
"""Anthropic's own base URL, the default of the ``anthropic`` provider."""


@dataclass(frozen=True)
class ProviderEnvironment:
    """The environment variables of one provider, each list read in order (first set wins)."""

    key: tuple[str, ...]
    base: tuple[str, ...]
    default_base: str | None = None
    key_follows_base: bool = True
    """A key from the environment goes only to the default address or the one the
    environment names, never to a ``base_url`` passed in code (pass its key with it)."""
    organization: tuple[str, ...] = ()
    api_version: tuple[str, ...] = ()


ENVIRONMENT: dict[str, ProviderEnvironment] = {
    "anthropic": ProviderEnvironment(
        key=("ANTHROPIC_API_KEY",),
        base=("ANTHROPIC_API_BASE",),
        default_base=ANTHROPIC_API_BASE,
    ),
    "azure_openai": ProviderEnvironment(
        key=("AZURE_OPENAI_API_KEY",),
        base=("AZURE_OPENAI_API_BASE", "AZURE_OPENAI_ENDPOINT"),
        key_follows_base=False,  # no default address: every endpoint is one of Azure's
        api_version=("AZURE_OPENAI_API_VERSION", "OPENAI_API_VERSION"),
    ),
    "gemini": ProviderEnvironment(
        key=("GEMINI_API_KEY",), base=("GEMINI_API_BASE",), key_follows_base=False
    ),
    "llama": ProviderEnvironment(
        key=("LLAMA_API_KEY", "OLLAMA_API_KEY"),
        base=("LLAMA_API_BASE", "OLLAMA_API_BASE", "OLLAMA_BASE_URL", "OLLAMA_HOST"),
        default_base=OLLAMA_BASE_URL,
    ),
    "ollama": ProviderEnvironment(
        key=("OLLAMA_API_KEY",),
        base=("OLLAMA_API_BASE", "OLLAMA_BASE_URL", "OLLAMA_HOST"),
        default_base=OLLAMA_BASE_URL,
    ),
    "openai": ProviderEnvironment(
        key=("OPENAI_API_KEY",),
        base=("OPENAI_API_BASE", "OPENAI_BASE_URL"),
        default_base=OPENAI_API_BASE,
        organization=("OPENAI_ORG_ID",),
        api_version=("OPENAI_API_VERSION",),
    ),
    "openai_compatible": ProviderEnvironment(
        key=("OPENAI_COMPATIBLE_API_KEY",),
        base=("OPENAI_COMPATIBLE_API_BASE",),
        key_follows_base=False,
        organization=("OPENAI_COMPATIBLE_ORG_ID",),
        api_version=("OPENAI_COMPATIBLE_API_VERSION",),
    ),
}
"""Provider name -> its environment variables (the table in the docs' Providers page)."""


@dataclass(frozen=True, repr=False)
class ProviderConfig:
    """One client's settings: each from its argument, else the environment, else the default."""

    base_url: str | None
    api_key: str | None
    organization: str | None = None
    api_version: str | None = None

    def __repr__(self) -> str:
        return (
            f"ProviderConfig(base_url={self.base_url!r}, api_key={mask_key(self.api_key)!r}, "
            f"organization={self.organization!r}, api_version={self.api_version!r})"
        )


def _read(names: tuple[str, ...]) -> tuple[str | None, str | None]:
    """The first non-empty variable of `names`, and its name."""
    for name in names:
        value = os.environ.get(name)
        if value and value.strip():
            return value, name
    return None, None


def _ollama_host(value: str) -> str:
    """``OLLAMA_HOST`` as Ollama's own tools read it: scheme and port may be left out."""
    if "://" not in value:
        value = f"http://{value}"
    scheme, _, rest = value.partition("://")
    host = rest.split("/", 1)[0]
    if not host.rsplit("]", 1)[-1].count(":"):
        value = f"{scheme}://{host}:11434{rest[len(host) :]}"
    return value


def _same_address(a: str | None, b: str | None) -> bool:
    return a is not None and b is not None and a.rstrip("/") == b.rstrip("/")


def resolve(
    provider: str,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    organization: str | None = None,
    api_version: str | None = None,
) -> ProviderConfig:
    """The settings of `provider`'s client; arguments win over the environment.

    Raises:
        ConfigurationError: For a provider without a table entry, or a key that no HTTP
            header can carry (the message names the variable, never the key).
    """
    env = ENVIRONMENT.get(provider)
    if env is None:
        raise ConfigurationError(f"No environment table for provider {provider!r}.")
    base = base_url.strip() if base_url else None
    if not base:
        value, name = _read(env.base)
        base = (value or "").strip()
        if base and name == "OLLAMA_HOST":
            base = _ollama_host(base)
        base = base or env.default_base
        from_code = False
    else:
        from_code = not _same_address(base, env.default_base)
    own_address = not (env.key_follows_base and from_code)
    variable = env.key[0] if env.key else "the environment"
    if api_key is None and own_address:
        api_key, name = _read(env.key)
        variable = name or variable
    if own_address:
        organization = organization or _read(env.organization)[0]
        api_version = api_version or _read(env.api_version)[0]
    return ProviderConfig(
        base_url=base.rstrip("/") if base else None,
        api_key=clean_key(api_key, variable),
        organization=organization.strip() if organization else None,
        api_version=api_version.strip() if api_version else None,
    )


FAST_POOL_ENV = "GLASSAGENT_FAST_POOL"
"""Turns the owned pools' cheaper assignment off (``0``) or on (``1``, the default)."""
_FAST_POOL_OFF = ("0", "false", "no", "off")
_FAST_POOL_ON = ("", "1", "true", "yes", "on")


def fast_pool_from_env() -> bool:
    """``$GLASSAGENT_FAST_POOL``: whether owned pools assign without a scan (`connection_pool`).

    ``0``, ``false``, ``no`` or ``off`` turn it off; unset, empty, ``1``, ``true``, ``yes``
    or ``on`` leave it on (any case, spaces around ignored).

    Raises:
        ConfigurationError: When the variable holds anything else.
    """
    text = os.environ.get(FAST_POOL_ENV, "")
    value = text.strip().lower()
    if value in _FAST_POOL_OFF or value in _FAST_POOL_ON:
        return value not in _FAST_POOL_OFF
    raise ConfigurationError(
        f"{FAST_POOL_ENV} must be 0 (httpcore's own connection pool) or 1 (glassagent's "
        f"cheaper one), not {text!r}."
    )


def ca_locations() -> tuple[str | None, str | None]:
    """``SSL_CERT_FILE`` and ``SSL_CERT_DIR``: where a trusting client finds its CA bundle."""
    return os.environ.get("SSL_CERT_FILE") or None, os.environ.get("SSL_CERT_DIR") or None
