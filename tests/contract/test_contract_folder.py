"""The design's plugin folder ``ai_client/<provider>/<provider>_client.py`` (§1, §2, §11)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from glassagent.contract import (
    ContractClient,
    class_name,
    contract_class,
    find_ai_clients,
    load_ai_client,
)
from glassagent.errors import ConfigurationError

# The design's skeleton (§10), its SDK calls left out: a class following the contract.
SKELETON = """
import os
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional
from threading import Event


class ExampleClient:
    @staticmethod
    def get_provider_name() -> str:
        return "example"

    @staticmethod
    def get_profile_dir() -> Path:
        return Path(__file__).parent / "ai_profile"

    def __init__(self):
        self.api_key = os.environ.get("EXAMPLE_API_KEY")
        if not self.api_key:
            raise ValueError("EXAMPLE_API_KEY が設定されていません。")

    def send_request(self, model_id, history, current_text_input, current_file_paths,
                     temperature=0.7, thinking_budget=None, tools=None, system_prompt=None,
                     **kwargs):
        return {"text": current_text_input}

    def send_request_stream(self, model_id, history, current_text_input, current_file_paths,
                            temperature=0.7, thinking_budget=None, tools=None,
                            abort_signal=None, system_prompt=None, **kwargs):
        yield {"type": "complete", "text": current_text_input}

    def extract_response_text(self, response):
        return response["text"]

    def handle_function_calls(self, response, model_id, history, context):
        return response, []

    def handle_function_calls_stream(self, stream_response, model_id, history, context):
        yield from stream_response
"""

PROFILE = {"basic_info": {"id": "example-1", "name": "Example", "description": "x",
                          "provider": "example"}}  # fmt: skip


def plugin(root: Path, name: str, code: str, *, requirements: str | None = "") -> Path:
    folder = root / name
    (folder / "ai_profile").mkdir(parents=True)
    (folder / f"{name}_client.py").write_text(textwrap.dedent(code), encoding="utf-8")
    (folder / "ai_profile" / "example-1.json").write_text(json.dumps(PROFILE), encoding="utf-8")
    if requirements is not None:
        (folder / "requirements.txt").write_text(requirements, encoding="utf-8")
    return folder


def test_the_design_skeleton_loads_and_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plugin(tmp_path, "example", SKELETON, requirements="httpx>=0.27\n# a comment\n")
    (found,) = find_ai_clients(tmp_path)
    assert found.ok
    assert found.problems == ()
    assert found.warnings == ()
    assert found.requirements == ("httpx>=0.27",)
    assert found.missing_requirements == ()
    cls = load_ai_client(tmp_path, "example")
    assert cls.__name__ == "ExampleClient"
    with pytest.raises(ValueError, match="EXAMPLE_API_KEY"):
        cls()
    monkeypatch.setenv("EXAMPLE_API_KEY", "k")
    client = cls()
    assert client.extract_response_text(client.send_request("m", {}, "hi", [])) == "hi"
    assert cls.get_profile_dir() == tmp_path / "example" / "ai_profile"


def test_missing_requirements_are_reported_not_installed(tmp_path: Path) -> None:
    plugin(tmp_path, "example", SKELETON, requirements=None)
    code = "import glassagent_no_such_sdk\n" + SKELETON.replace("example", "other")
    plugin(tmp_path, "other", code, requirements="glassagent-no-such-sdk==1.0\n-r extra.txt\n")
    example, other = find_ai_clients(tmp_path)
    assert example.ok
    assert example.warnings == ("requirements.txt is missing",)
    assert not other.ok
    assert other.client_class is None
    assert other.missing_requirements == ("glassagent-no-such-sdk==1.0",)
    assert any("No module named 'glassagent_no_such_sdk'" in p for p in other.problems)
    assert any("pip install -r" in p for p in other.problems)
    with pytest.raises(ConfigurationError, match="glassagent_no_such_sdk"):
        load_ai_client(tmp_path, "other")


def test_a_folder_breaking_the_rules_is_named_and_others_still_load(tmp_path: Path) -> None:
    plugin(tmp_path, "example", SKELETON)
    plugin(tmp_path, "wrong", SKELETON.replace("class ExampleClient", "class WrongClient"))
    plugin(tmp_path, "noclass", "X = 1\n")
    half = SKELETON.replace("example", "half").replace("Example", "Half")
    half = half.split("    def extract_response_text")[0]
    plugin(tmp_path, "half", half)
    (tmp_path / "Bad-Name").mkdir()
    found = {p.provider: p for p in find_ai_clients(tmp_path)}
    assert found["example"].ok
    assert "returns 'example', not the folder name 'wrong'" in found["wrong"].problems[0]
    assert found["noclass"].problems == ("noclass_client.py has no class NoclassClient",)
    assert "lacks extract_response_text, handle_function_calls" in found["half"].problems[0]
    assert "lowercase" in found["Bad-Name"].problems[0]
    with pytest.raises(ConfigurationError, match="No provider folder"):
        load_ai_client(tmp_path, "absent")


def test_one_line_makes_a_glassagent_provider_a_design_plugin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code = """
        from pathlib import Path
        from glassagent.contract import contract_class

        OpenAIClient = contract_class("openai", profile_dir=Path(__file__).parent / "ai_profile")
    """
    plugin(tmp_path, "openai", code, requirements="glassagent\n")
    cls = load_ai_client(tmp_path, "openai")
    assert cls.__name__ == "OpenAIClient"
    assert issubclass(cls, ContractClient)
    assert cls.get_provider_name() == "openai"
    assert cls.get_profile_dir() == (tmp_path / "openai" / "ai_profile").resolve()
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        cls()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key-123456")
    client = cls()
    assert client.get_provider_name() == "openai"
    client.close()
    assert contract_class("gemini").get_profile_dir() == ContractClient.shipped_profiles()


@pytest.mark.parametrize(
    ("provider", "expected"),
    [("gemini", "GeminiClient"), ("openai", "OpenAIClient"),
     ("azure_openai", "AzureOpenAIClient"), ("anthropic", "AnthropicClient")],
)  # fmt: skip
def test_class_names_follow_the_design(provider: str, expected: str) -> None:
    assert class_name(provider) == expected
