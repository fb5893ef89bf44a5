import importlib
import json
import pickle
import subprocess
import sys
import traceback

import pytest

import glassagent

PUBLIC_MODULES = [
    "llm",
    "tools",
    "events",
    "agent",
    "errors",
    "testing",
    "history",
    "local",
    "workspace",
    "profiles",
    "server",
    "mcp",
    "otel",
]


def test_top_level_all_is_sorted_and_resolves() -> None:
    assert glassagent.__all__ == sorted(glassagent.__all__)
    for name in glassagent.__all__:
        assert getattr(glassagent, name) is not None


def test_the_quickstart_names_import_from_the_top_level() -> None:
    from glassagent import Agent, BaseLLMClient, LLMResponse, ToolCall, tool  # noqa: F401


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_public_modules_have_sorted_all_that_resolves(name: str) -> None:
    module = importlib.import_module(f"glassagent.{name}")
    assert module.__all__ == sorted(module.__all__)
    for attr in module.__all__:
        assert getattr(module, attr) is not None, attr
    assert module.__doc__


def test_every_top_level_name_is_also_public_in_a_module() -> None:
    homes = {n for m in PUBLIC_MODULES for n in importlib.import_module(f"glassagent.{m}").__all__}
    assert set(glassagent.__all__) - {"__version__"} <= homes | {"Event"}


def test_import_is_cheap_and_imports_no_provider_sdk() -> None:
    code = (
        "import sys, glassagent\n"
        "heavy = [m for m in ('google.genai', 'openai', 'anthropic', 'pydantic.main', "
        "'docstring_parser', 'httpx', 'mcp', 'jsonschema') if m in sys.modules]\n"
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_version_is_the_package_version() -> None:
    from importlib.metadata import version

    assert glassagent.__version__ == version("glassagent")


_HOMES = """
import importlib, inspect, json, sys
modules = ["glassagent"] + [f"glassagent.{m}" for m in sys.argv[1:]]
found = {}
for module in modules:
    face = importlib.import_module(module)
    for name in face.__all__:
        obj = getattr(face, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            found[f"{module}.{name}"] = obj.__module__
print(json.dumps(found))
"""


def _homes(*modules: str) -> dict[str, str]:
    out = subprocess.run(
        [sys.executable, "-c", _HOMES, *modules], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


@pytest.mark.slow
def test_exported_names_carry_their_public_module_whatever_was_imported() -> None:
    everything = _homes(*PUBLIC_MODULES)
    for name in PUBLIC_MODULES:  # each face imported alone gives the same answer
        alone = _homes(name)
        assert alone == {k: everything[k] for k in alone}, name
    for exported, home in everything.items():
        name = exported.rpartition(".")[2]
        assert not any(part.startswith("_") for part in home.split(".")), exported
        face = importlib.import_module(home)
        assert name in face.__all__, f"{exported} says {home}, which does not export it"
        assert getattr(face, name) is getattr(
            importlib.import_module(exported[: -len(name) - 1]), name
        )


def test_errors_show_and_pickle_under_their_public_names() -> None:
    from glassagent.errors import ProviderError

    error = ProviderError("boom", status=500, provider="x")
    assert type(error).__module__ == "glassagent.errors"
    assert b"glassagent.errors" in pickle.dumps(error)
    assert b"_core" not in pickle.dumps(error).replace(b"_rebuild", b"")
    try:
        raise error
    except ProviderError:
        assert "glassagent.errors.ProviderError: boom" in traceback.format_exc()
    assert repr(glassagent.Message) == "<class 'glassagent.llm.Message'>"
    clone = pickle.loads(pickle.dumps(glassagent.Message(role="user", content="hi")))
    assert clone == glassagent.Message(role="user", content="hi")


def test_published_classes_keep_their_annotations_resolvable() -> None:
    from typing import get_type_hints

    from glassagent.events import LLMRequestEvent, parse_event

    hints = get_type_hints(LLMRequestEvent)
    assert hints["settings"] is glassagent.ModelSettings
    event = LLMRequestEvent(
        run_id="r",
        seq=0,
        iteration=1,
        provider="p",
        model="m",
        messages=(),
        tools=(),
        system=None,
        settings=glassagent.ModelSettings(temperature=0.5),
    )
    assert parse_event(event.to_dict()) == event
