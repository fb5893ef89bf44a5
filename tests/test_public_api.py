import importlib
import subprocess
import sys

import pytest

import glassagent

PUBLIC_MODULES = ["llm", "tools", "events", "agent", "errors", "testing", "history", "local"]


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
        "'docstring_parser', 'httpx') if m in sys.modules]\n"
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_version_is_the_package_version() -> None:
    from importlib.metadata import version

    assert glassagent.__version__ == version("glassagent")
