"""Providers added from outside: `register_provider` and the ``glassagent.providers`` group.

The plugin is a real distribution: a ``*.dist-info`` directory with ``entry_points.txt`` on
``sys.path``, found by `importlib.metadata` as an installed package would be.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from glassagent import Agent
from glassagent._providers import factory
from glassagent.errors import ConfigurationError
from glassagent.llm import BaseLLMClient, create_llm_client, register_provider
from glassagent.testing import ScriptedClient

PLUGIN = '''
from glassagent import LLMResponse
from glassagent.llm import BaseLLMClient


class AcmeClient(BaseLLMClient):
    """A provider shipped by another package."""

    provider_name = "acme"

    def __init__(self, model="acme-1", api_key=None, **options):
        self.model = model
        self.api_key = api_key
        self.options = options

    async def chat(self, messages, tools=(), system=None, *, settings=None):
        return LLMResponse("acme says " + messages[-1].content)


def make(**options):
    return AcmeClient(**options)


def not_a_client(**options):
    return "a string"


class NotAClient:
    pass
'''
ENTRY_POINTS = """
[glassagent.providers]
acme = acme_glass:AcmeClient
Acme_Factory = acme_glass:make
broken = acme_glass_missing:Nothing
wrong_type = acme_glass:NotAClient
wrong_result = acme_glass:not_a_client
"""


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    site = tmp_path / "site"
    info = site / "acme_glass-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-glass\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    (site / "acme_glass.py").write_text(textwrap.dedent(PLUGIN))
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, "acme_glass", raising=False)
    yield site
    sys.modules.pop("acme_glass", None)


def test_an_installed_plugin_class_is_found_by_name(plugin: Path) -> None:
    assert "acme_glass" not in sys.modules  # found by its metadata, imported only when asked
    client = create_llm_client("ACME", api_key="k", model="acme-2", region="eu")
    assert type(client).__name__ == "AcmeClient"
    assert (client.model, client.api_key, client.options) == ("acme-2", "k", {"region": "eu"})
    assert Agent(client).run_sync("hi").text == "acme says hi"


def test_an_installed_plugin_factory_gets_only_the_given_options(plugin: Path) -> None:
    client = create_llm_client("acme_factory")
    assert (client.model, client.api_key, client.options) == ("acme-1", None, {})


def test_unknown_names_list_builtins_plugins_and_registrations(plugin: Path) -> None:
    register_provider("scripted", lambda **_: ScriptedClient(["ok"]))
    with pytest.raises(ConfigurationError) as info:
        create_llm_client("nope")
    message = str(info.value)
    assert "Unknown provider 'nope'" in message
    for name in ("acme", "acme_factory", "broken", "gemini", "openai_compatible", "scripted"):
        assert name in message


def test_a_plugin_that_fails_to_load_is_a_configuration_error_naming_it(plugin: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"'broken'.*acme_glass_missing.*acme-glass") as e:
        create_llm_client("broken")
    assert isinstance(e.value.__cause__, ModuleNotFoundError)
    with pytest.raises(ConfigurationError, match=r"'wrong_type'.*not a BaseLLMClient subclass"):
        create_llm_client("wrong_type")
    with pytest.raises(ConfigurationError, match="returned a str, not a BaseLLMClient"):
        create_llm_client("wrong_result")
    assert create_llm_client("acme").model == "acme-1"  # one broken plugin spoils no other


def test_builtins_win_over_a_plugin_of_the_same_name(plugin: Path) -> None:
    (plugin / "acme_glass-1.0.dist-info" / "entry_points.txt").write_text(
        "[glassagent.providers]\nollama = acme_glass:AcmeClient\n"
    )
    assert type(create_llm_client("ollama")).__name__ == "OllamaClient"


def test_register_provider_at_run_time() -> None:
    register_provider("Scripted", lambda **options: ScriptedClient(["hello"], **options))
    client = create_llm_client("scripted")
    assert isinstance(client, ScriptedClient)
    assert Agent(client).run_sync("hi").text == "hello"

    class Echo(ScriptedClient):
        pass

    with pytest.raises(ConfigurationError, match="exists already"):
        register_provider("scripted", Echo)
    register_provider("scripted", Echo, replace=True)
    assert type(create_llm_client("scripted", responses=["x"])) is Echo


def test_register_provider_can_replace_a_builtin_only_on_purpose() -> None:
    with pytest.raises(ConfigurationError, match="replace=True"):
        register_provider("openai", ScriptedClient)
    register_provider("openai", ScriptedClient, replace=True)
    assert isinstance(create_llm_client("openai", responses=["x"]), ScriptedClient)


@pytest.mark.parametrize(
    ("name", "target", "message"),
    [
        ("my-provider", ScriptedClient, "lower-case letters"),
        ("", ScriptedClient, "lower-case letters"),
        ("dict", dict, "not a BaseLLMClient subclass"),
        ("thing", "ScriptedClient", "not callable"),
    ],
)
def test_register_provider_refuses_bad_names_and_factories(name, target, message) -> None:
    with pytest.raises(ConfigurationError, match=message):
        register_provider(name, target)
    assert factory._registered == {}


def test_an_unregistered_factory_result_must_be_a_client() -> None:
    register_provider("nothing", lambda **_: None)
    with pytest.raises(ConfigurationError, match="'nothing' returned a NoneType"):
        create_llm_client("nothing")
    assert issubclass(ScriptedClient, BaseLLMClient)
