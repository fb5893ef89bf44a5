"""The design's plugin folder: ``ai_client/<provider>/<provider>_client.py``, checked and loaded.

Each provider folder holds a ``requirements.txt``, the entry point ``<provider>_client.py``
with a class ``<Provider>Client`` that follows the contract, and an ``ai_profile/`` folder
of model profiles. Loading one imports its entry point (the application's own code); what it
needs is reported, never installed.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from glassagent._contract.client import ContractClient
from glassagent._core.errors import ConfigurationError

REQUIRED_METHODS = (
    "get_provider_name",
    "get_profile_dir",
    "send_request",
    "send_request_stream",
    "extract_response_text",
    "handle_function_calls",
    "handle_function_calls_stream",
)
"""The methods the design requires of a client class."""

_FOLDER_NAME = re.compile(r"[a-z0-9_]+")
_REQUIREMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_WORDS = {"openai": "OpenAI", "ai": "AI", "api": "API", "llm": "LLM"}


@dataclass(frozen=True)
class AIClientPlugin:
    """One provider folder of an ``ai_client/`` folder, as found.

    `problems` keep it from loading (no entry point, no class, a failed import, a missing
    method); `warnings` are the design's checklist items it misses but can do without (no
    ``requirements.txt``, no profile). `missing_requirements` lists what its
    ``requirements.txt`` names and this Python lacks: install them yourself
    (``pip install -r <folder>/requirements.txt``).
    """

    provider: str
    """The folder's name, the provider's."""
    folder: Path
    """The provider folder."""
    client_class: type | None
    """The class following the contract, `None` when it could not be loaded."""
    requirements: tuple[str, ...] = ()
    """The requirement lines of ``requirements.txt``."""
    missing_requirements: tuple[str, ...] = ()
    """Those whose distribution is not installed (names only; versions are not checked)."""
    problems: tuple[str, ...] = ()
    """Why it cannot be used."""
    warnings: tuple[str, ...] = ()
    """Checklist items it misses."""

    @property
    def ok(self) -> bool:
        """Whether its class loaded and follows the contract."""
        return self.client_class is not None and not self.problems


def class_name(provider: str) -> str:
    """The design's class name for `provider`: ``azure_openai`` -> ``AzureOpenAIClient``."""
    return "".join(_WORDS.get(p, p.capitalize()) for p in provider.split("_")) + "Client"


def find_ai_clients(folder: str | Path) -> list[AIClientPlugin]:
    """Check and load every provider folder of an ``ai_client/`` folder, by name.

    One broken folder does not stop the others: each result says what is wrong with it.

    Raises:
        ConfigurationError: When `folder` is not a folder.
    """
    root = Path(folder)
    if not root.is_dir():
        raise ConfigurationError(f"No ai_client folder at {str(root)!r}.")
    found = []
    for entry in sorted(root.iterdir()):
        if entry.is_dir() and not entry.name.startswith((".", "_")):
            found.append(_inspect(entry))
    return found


def load_ai_client(folder: str | Path, provider: str) -> type:
    """The client class of `provider` in the ``ai_client/`` folder `folder`.

    Raises:
        ConfigurationError: When the provider folder is missing or has problems (all named).
    """
    path = Path(folder) / provider
    if not path.is_dir():
        raise ConfigurationError(f"No provider folder {provider!r} in {str(folder)!r}.")
    plugin = _inspect(path)
    if not plugin.ok or plugin.client_class is None:
        raise ConfigurationError(f"AI client {provider!r}: " + "; ".join(plugin.problems))
    return plugin.client_class


def _inspect(folder: Path) -> AIClientPlugin:
    provider = folder.name
    if not _FOLDER_NAME.fullmatch(provider):
        problem = "the folder name must be lowercase letters, digits and underscores"
        return AIClientPlugin(provider, folder, None, problems=(problem,))
    requirements, warnings = _requirements(folder)
    missing = tuple(r for r in requirements if not _installed(r))
    cls, problems = _load_class(folder, provider)
    if cls is not None:
        problems += _check_class(cls, provider)
    profiles = folder / "ai_profile"
    if not profiles.is_dir() or not any(profiles.glob("*.json")):
        warnings += ("ai_profile/ holds no model profile",)
    if missing and cls is None:
        problems += (f"install its requirements: pip install -r {folder / 'requirements.txt'}",)
    return AIClientPlugin(
        provider, folder, cls if not problems else None, requirements, missing,
        tuple(problems), tuple(warnings),
    )  # fmt: skip


def _requirements(folder: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
    path = folder / "requirements.txt"
    if not path.is_file():
        return (), ("requirements.txt is missing",)
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    kept = tuple(
        line.split("#", 1)[0].strip()
        for line in lines
        if line.split("#", 1)[0].strip() and not line.lstrip().startswith("-")
    )
    return kept, ()


def _installed(requirement: str) -> bool:
    match = _REQUIREMENT.match(requirement)
    if match is None:
        return True  # not a plain name (a URL, a path): not ours to judge
    try:
        importlib.metadata.distribution(match.group())
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def _load_class(folder: Path, provider: str) -> tuple[type | None, tuple[str, ...]]:
    entry = folder / f"{provider}_client.py"
    if not entry.is_file():
        return None, (f"the entry point {entry.name} is missing",)
    name = f"_glassagent_ai_client_{provider}"
    spec = importlib.util.spec_from_file_location(name, entry)
    if spec is None or spec.loader is None:
        return None, (f"{entry.name} cannot be imported",)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        return None, (f"importing {entry.name} failed: {type(exc).__name__}: {exc}",)
    wanted = class_name(provider).lower()
    for attribute, value in vars(module).items():
        if isinstance(value, type) and attribute.lower() == wanted:
            return value, ()
    return None, (f"{entry.name} has no class {class_name(provider)}",)


def _check_class(cls: type, provider: str) -> tuple[str, ...]:
    missing = [m for m in REQUIRED_METHODS if not callable(getattr(cls, m, None))]
    if missing:
        return (f"{cls.__name__} lacks {', '.join(missing)}",)
    try:
        named = cls.get_provider_name()  # type: ignore[attr-defined]
    except Exception as exc:
        return (f"{cls.__name__}.get_provider_name() failed: {exc}",)
    if named != provider:
        return (f"get_provider_name() returns {named!r}, not the folder name {provider!r}",)
    return ()


def contract_class(
    provider: str, *, profile_dir: str | Path | None = None, **client_options: Any
) -> type[ContractClient]:
    """A client class of the design's form for a glassagent provider: no arguments, key from env.

    One line makes a glassagent provider a plugin of the design's folder layout:

    ```python
    # ai_client/gemini/gemini_client.py
    GeminiClient = contract_class("gemini", profile_dir=Path(__file__).parent / "ai_profile")
    ```

    Args:
        provider: A glassagent provider name (`glassagent.llm.create_llm_client`).
        profile_dir: What ``get_profile_dir()`` returns (default: the shipped profiles).
        **client_options: Keyword arguments for `create_llm_client`.
    """
    folder = Path(profile_dir).resolve() if profile_dir is not None else None

    class Made(ContractClient):
        def __init__(self) -> None:
            super().__init__(provider, profile_dir=folder, **client_options)

        @staticmethod
        def get_provider_name() -> str:
            return provider

        @staticmethod
        def get_profile_dir() -> Path:
            return folder or ContractClient.shipped_profiles()

    Made.__name__ = Made.__qualname__ = class_name(provider)
    Made.__doc__ = f"The design's client class of the glassagent provider {provider!r}."
    return Made
