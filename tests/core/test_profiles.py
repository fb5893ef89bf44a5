"""Model profiles: the shipped files, validation, user directories, plugins and lookups.

Profiles are real files in temporary directories; the plugin is a real distribution (a
``*.dist-info`` directory with ``entry_points.txt`` on ``sys.path``), found by
`importlib.metadata` as an installed package would be.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from glassagent import BaseLLMClient, LLMResponse
from glassagent._core.profiles import load
from glassagent.errors import ConfigurationError, UserError
from glassagent.llm import GeminiClient, LlamaClient, OllamaClient, OpenAICompatibleClient
from glassagent.local import DEFAULT_MODEL
from glassagent.profiles import (
    ModelProfile,
    ProfileWarning,
    get_profile,
    list_profiles,
    load_profile,
    profile_file_name,
    reload_profiles,
)
from tests.support.profiles import profile_data

SHIPPED = {
    "claude-sonnet-4-5",
    "gemini-2.5-flash",
    "gemini-2.5-flash-lite",
    "gemini-2.5-pro",
    "gpt-4o-mini",
    "llama3.1:8b",
    "qwen2.5-coder-0.5b-instruct",
}


@pytest.fixture(autouse=True)
def _fresh_profiles(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("GLASSAGENT_PROFILE_PATH", raising=False)
    reload_profiles()
    yield
    reload_profiles()


def write(directory: Path, data: dict[str, Any], name: str | None = None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / (name or profile_file_name(data["basic_info"]["id"]))
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


# -- the shipped profiles ------------------------------------------------------------------


def test_the_shipped_profiles_cover_the_models_glassagent_names() -> None:
    profiles = list_profiles()
    assert {p.id for p in profiles} == SHIPPED
    assert profiles.problems == ()
    data = Path(load.__file__).parent / "data"
    # data/ holds one file per id; data/<provider>/ the same model served by another provider
    for p in profiles:
        name = profile_file_name(p.id)
        assert p.origin in {str(data / name), str(data / p.provider / name)}
    assert all(p.pricing is not None and p.pricing.as_of for p in profiles)
    assert [(p.id, p.provider) for p in profiles] == sorted((p.id, p.provider) for p in profiles)


def test_the_shipped_profiles_match_the_clients_defaults() -> None:
    assert GeminiClient(api_key="k").profile == get_profile("gemini-2.5-flash")
    assert OllamaClient().profile == get_profile("llama3.1:8b", "ollama")
    assert LlamaClient().profile == get_profile("llama3.1:8b")
    embedded = get_profile(DEFAULT_MODEL.name)
    assert embedded is not None
    assert embedded.provider == "local"
    assert embedded.capabilities.context_length == 4096  # LocalServer's default context_size


def test_a_shipped_profile_reads_as_its_sections() -> None:
    profile = get_profile("gemini-2.5-pro", "gemini")
    assert profile is not None
    assert profile.basic_info.name == "Gemini 2.5 Pro"
    assert profile.capabilities.context_length == 1_048_576
    assert profile.features.supports_function_calling
    assert "image" in profile.features.input_modalities
    assert profile.pricing is not None
    assert [t.above_input_tokens for t in profile.pricing.tiers] == [200_000]
    assert repr(profile) == "ModelProfile(id='gemini-2.5-pro', provider='gemini')"


def test_unknown_models_have_no_profile() -> None:
    assert get_profile("no-such-model") is None
    assert get_profile("no-such-model", "gemini") is None


def test_an_alias_finds_the_profile() -> None:
    profile = get_profile("claude-sonnet-4-5-20250929", "anthropic")
    assert profile is not None
    assert profile.id == "claude-sonnet-4-5"


def test_another_provider_of_the_same_model_falls_back_to_its_profile() -> None:
    client = OpenAICompatibleClient("llama3.1:8b", base_url="http://127.0.0.1:11434/v1")
    assert client.provider_name == "openai_compatible"
    assert client.profile is not None
    assert client.profile.provider == "ollama"


def test_profiles_are_read_once_and_reload_reads_them_again(tmp_path: Path) -> None:
    path = write(tmp_path, profile_data())
    first = get_profile("acme-1", profile_dirs=[tmp_path])
    assert first is not None
    path.write_text(json.dumps(profile_data(capabilities={"context_length": 1})))
    assert get_profile("acme-1", profile_dirs=[tmp_path]) is first  # kept for the process
    reload_profiles()
    again = get_profile("acme-1", profile_dirs=[tmp_path])
    assert again is not None
    assert again.capabilities.context_length == 1


def test_importing_glassagent_reads_no_profile() -> None:
    code = (
        "import sys, glassagent, glassagent.llm\n"
        "print('glassagent._core.profiles.model' in sys.modules)\n"
        "import glassagent.profiles\n"
        "from glassagent._core.profiles import load\n"
        "print(load._base is None)\n"
        "glassagent.llm.OllamaClient().profile\n"
        "print(load._base is None)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True", "False"]


# -- file names ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model_id", "name"),
    [
        ("gemini-2.5-flash", "gemini-2.5-flash.json"),
        ("llama3.1:8b", "llama3.1%3A8b.json"),
        ("meta-llama/llama-3.1-8b-instruct", "meta-llama%2Fllama-3.1-8b-instruct.json"),
        ("50%_off", "50%25_off.json"),
    ],
)
def test_file_names_are_percent_encoded_ids(tmp_path: Path, model_id: str, name: str) -> None:
    assert profile_file_name(model_id) == name
    path = write(tmp_path, profile_data(model_id))
    assert path.name == name
    assert load_profile(path).id == model_id


def test_a_colon_in_the_file_name_is_accepted_where_the_system_allows_it(tmp_path: Path) -> None:
    path = write(tmp_path, profile_data("llama3.1:8b"), name="llama3.1:8b.json")
    assert load_profile(path).id == "llama3.1:8b"


@pytest.mark.parametrize("model_id", ["", "../x", "a/../../b", "/etc/passwd", "a b", "a\\b", "."])
def test_ids_that_could_leave_a_directory_are_refused(tmp_path: Path, model_id: str) -> None:
    with pytest.raises(UserError, match="not a valid model id"):
        profile_file_name(model_id)
    path = write(tmp_path, profile_data(model_id), name="x.json")
    with pytest.raises(ConfigurationError, match=r"x\.json.*basic_info\.id"):
        load_profile(path)


def test_a_file_name_that_does_not_match_the_id_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, profile_data("acme-1"), name="acme-2.json")
    with pytest.raises(ConfigurationError) as info:
        load_profile(path)
    assert str(path) in str(info.value)
    assert "does not match basic_info.id 'acme-1'" in str(info.value)
    assert "'acme-1.json'" in str(info.value)


def test_two_files_of_one_id_in_a_directory_are_refused(tmp_path: Path) -> None:
    write(tmp_path, profile_data("llama3.1:8b"))
    write(tmp_path, profile_data("llama3.1:8b"), name="llama3.1:8b.json")
    with pytest.warns(ProfileWarning, match=r"two profiles of 'llama3\.1:8b'"):
        profiles = list_profiles(profile_dirs=tmp_path)
    assert [p.model_id for p in profiles.problems] == ["llama3.1:8b"]
    with pytest.raises(ConfigurationError, match=r"two profiles of 'llama3\.1:8b'"):
        get_profile("llama3.1:8b", profile_dirs=tmp_path)
    assert get_profile("gpt-4o-mini", profile_dirs=tmp_path) is not None


# -- validation ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda d: d["capabilities"].pop("context_length"), "capabilities.context_length"),
        (lambda d: d["capabilities"].update(context_length=0), "capabilities.context_length"),
        (lambda d: d["features"].update(supports_streaming="maybe"), "supports_streaming"),
        (lambda d: d["features"].update(input_modalities=["smell"]), "input_modalities.0"),
        (lambda d: d["features"].update(is_multimodal=True), "features: Value error"),
        (lambda d: d.pop("features"), "features: Field required"),
        (
            lambda d: d.update(pricing={"input_per_1m_tokens": -1, "output_per_1m_tokens": 1}),
            "pricing.input_per_1m_tokens",
        ),
        (
            lambda d: d.update(
                pricing={
                    "input_per_1m_tokens": 1,
                    "output_per_1m_tokens": 1,
                    "as_of": "2026-01-01",
                    "currency": "dollars",
                }
            ),
            "pricing.currency",
        ),
        (lambda d: d.update(limitations={"rate_limit_rpm": -5}), "limitations.rate_limit_rpm"),
    ],
)
def test_a_bad_file_names_the_file_and_the_field(tmp_path: Path, change: Any, field: str) -> None:
    data = profile_data()
    change(data)
    path = write(tmp_path, data)
    with pytest.raises(ConfigurationError) as info:
        load_profile(path)
    message = str(info.value)
    assert f"Model profile {path} is invalid" in message
    assert field in message


def test_a_file_that_is_not_json_is_a_configuration_error(tmp_path: Path) -> None:
    path = tmp_path / "acme-1.json"
    path.write_text('{"basic_info": ')
    with pytest.raises(ConfigurationError, match=r"acme-1\.json is invalid: Invalid JSON"):
        load_profile(path)
    with pytest.raises(ConfigurationError, match="cannot be read"):
        load_profile(tmp_path / "missing.json")


def test_notes_and_optional_sections() -> None:
    profile = ModelProfile.model_validate(profile_data(notes="one note"))
    assert profile.notes == ("one note",)
    assert profile.pricing is None
    assert profile.limitations.rate_limit_rpm is None
    assert profile.features.input_modalities == ("text",)
    with pytest.raises(ValueError, match="frozen"):
        profile.basic_info.name = "other"  # type: ignore[misc]


def test_tiers_must_be_distinct_and_ascending() -> None:
    pricing = {"input_per_1m_tokens": 1, "output_per_1m_tokens": 1, "as_of": "2026-01-01"}
    tiers = [{"above_input_tokens": 2000}, {"above_input_tokens": 1000}]
    with pytest.raises(ValueError, match="lowest first"):
        ModelProfile.model_validate(profile_data(pricing={**pricing, "tiers": tiers}))


# -- user directories ----------------------------------------------------------------------


def test_a_user_directory_adds_and_overrides_profiles(tmp_path: Path) -> None:
    write(tmp_path, profile_data())
    mine = profile_data("gemini-2.5-flash", capabilities={"context_length": 1000})
    mine["basic_info"]["provider"] = "gemini"
    write(tmp_path, mine)
    (tmp_path / "README.md").write_text("not a profile")
    (tmp_path / ".hidden.json").write_text("{")
    (tmp_path / "sub.json").mkdir()

    flash = get_profile("gemini-2.5-flash", "gemini", profile_dirs=[tmp_path])
    assert flash is not None
    assert flash.capabilities.context_length == 1000
    assert flash.origin == str(tmp_path / "gemini-2.5-flash.json")
    assert get_profile("acme-1", profile_dirs=str(tmp_path)) is not None
    ids = [p.id for p in list_profiles(profile_dirs=[tmp_path])]
    assert set(ids) == SHIPPED | {"acme-1"}
    assert ids.count("gemini-2.5-flash") == 1  # the shipped flash is replaced
    shipped = get_profile("gemini-2.5-flash")  # other lookups are not affected
    assert shipped is not None
    assert shipped.capabilities.context_length == 1_048_576


def test_a_profile_of_another_provider_sits_beside_the_shipped_one(tmp_path: Path) -> None:
    data = profile_data("gpt-4o-mini")
    data["basic_info"]["provider"] = "azure"
    write(tmp_path, data)
    assert get_profile("gpt-4o-mini", "azure", profile_dirs=[tmp_path]).provider == "azure"  # type: ignore[union-attr]
    assert get_profile("gpt-4o-mini", "openai", profile_dirs=[tmp_path]).provider == "openai"  # type: ignore[union-attr]
    # without a provider, the one of highest precedence
    assert get_profile("gpt-4o-mini", profile_dirs=[tmp_path]).provider == "azure"  # type: ignore[union-attr]
    assert len([p for p in list_profiles(profile_dirs=[tmp_path]) if p.id == "gpt-4o-mini"]) == 2


def test_the_environment_variable_adds_directories_the_first_winning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    write(first, profile_data(capabilities={"context_length": 1}))
    write(second, profile_data(capabilities={"context_length": 2}))
    write(second, profile_data("acme-2"))
    monkeypatch.setenv("GLASSAGENT_PROFILE_PATH", os.pathsep.join([str(first), "", str(second)]))
    assert get_profile("acme-1").capabilities.context_length == 1  # type: ignore[union-attr]
    assert get_profile("acme-2") is not None
    client = _Client("acme-2", "acme")
    assert client.profile is not None
    assert client.profile.id == "acme-2"

    # profile_dirs= wins over the environment
    third = tmp_path / "third"
    write(third, profile_data(capabilities={"context_length": 3}))
    assert get_profile("acme-1", profile_dirs=[third]).capabilities.context_length == 3  # type: ignore[union-attr]

    monkeypatch.delenv("GLASSAGENT_PROFILE_PATH")
    assert get_profile("acme-1") is None


def test_a_directory_that_does_not_exist_is_a_configuration_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ConfigurationError, match=r"profile_dirs names .*missing.*not a directory"):
        get_profile("x", profile_dirs=[tmp_path / "missing"])
    monkeypatch.setenv("GLASSAGENT_PROFILE_PATH", str(tmp_path / "gone"))
    with pytest.raises(ConfigurationError, match=r"GLASSAGENT_PROFILE_PATH names .*gone"):
        get_profile("x")


class _Client(BaseLLMClient):
    def __init__(self, model: str, provider: str) -> None:
        self.model = model
        self.provider_name = provider

    async def chat(self, messages: Any, tools: Any = (), system: Any = None, **_: Any) -> Any:
        return LLMResponse("")


def test_client_profile_is_the_lookup_of_its_model_and_provider() -> None:
    assert _Client("gemini-2.5-flash-lite", "gemini").profile == get_profile(
        "gemini-2.5-flash-lite"
    )
    assert _Client("unknown", "custom").profile is None


# -- plugins -------------------------------------------------------------------------------

PLUGIN = """
from pathlib import Path

from glassagent.profiles import ModelProfile

HERE = Path(__file__).parent / "acme_profiles"
MISSING = str(HERE / "missing")


def directory():
    return HERE


def objects():
    return [ModelProfile.model_validate(DATA)]


def broken():
    raise RuntimeError("no profiles today")


DATA = {DATA}
"""


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    site = tmp_path / "site"
    info = site / "acme_glass_profiles-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: acme-glass-profiles\nVersion: 1.0\n"
    )
    (info / "entry_points.txt").write_text(
        "[glassagent.profiles]\n"
        "a_dir = acme_plugin:directory\n"
        "b_objects = acme_plugin:objects\n"
        "c_package = acme_plugin_data\n"
    )
    data = profile_data("acme-objects")
    (site / "acme_plugin.py").write_text(PLUGIN.replace("{DATA}", repr(data)))
    write(site / "acme_profiles", profile_data("acme-dir"))
    overriding = profile_data("gpt-4o-mini", capabilities={"context_length": 7})
    overriding["basic_info"]["provider"] = "openai"
    write(site / "acme_profiles", overriding)
    package = site / "acme_plugin_data"
    write(package, profile_data("acme-package"))
    (package / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(site))
    for name in ("acme_plugin", "acme_plugin_data"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    yield info
    for name in ("acme_plugin", "acme_plugin_data"):
        sys.modules.pop(name, None)


def test_plugins_ship_profiles_as_directories_objects_or_packages(plugin: Path) -> None:
    by_id = {p.id: p for p in list_profiles()}
    assert {"acme-dir", "acme-objects", "acme-package"} <= set(by_id)
    assert by_id["acme-objects"].origin is not None
    assert "'b_objects'" in by_id["acme-objects"].origin
    assert "acme-glass-profiles" in by_id["acme-objects"].origin
    assert by_id["acme-dir"].origin == str(plugin.parent / "acme_profiles" / "acme-dir.json")
    package = plugin.parent / "acme_plugin_data" / "acme-package.json"
    assert by_id["acme-package"].origin == str(package)
    # a plugin overrides a shipped profile of the same model and provider
    assert get_profile("gpt-4o-mini", "openai").capabilities.context_length == 7  # type: ignore[union-attr]


def test_a_user_directory_overrides_a_plugin(plugin: Path, tmp_path: Path) -> None:
    write(tmp_path / "mine", profile_data("acme-dir", capabilities={"context_length": 99}))
    profile = get_profile("acme-dir", profile_dirs=[tmp_path / "mine"])
    assert profile is not None
    assert profile.capabilities.context_length == 99


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("acme_plugin:broken", r"failed to load: RuntimeError: no profiles today"),
        ("acme_missing:nothing", r"failed to load: ModuleNotFoundError"),
        ("acme_plugin:DATA", r"gave a dict; expected a directory"),
        ("acme_plugin:Path", r"gave a type; expected a directory"),
        ("acme_plugin:HERE_MISSING", r"failed to load: AttributeError"),
        ("acme_plugin:MISSING", r"names '.*missing', not a directory"),
    ],
)
def test_a_broken_plugin_is_a_configuration_error_naming_it(
    plugin: Path, target: str, message: str
) -> None:
    (plugin / "entry_points.txt").write_text(f"[glassagent.profiles]\nbad = {target}\n")
    with pytest.raises(ConfigurationError, match=message) as info:
        get_profile("acme-dir")
    assert "The profile plugin 'bad'" in str(info.value)
    assert "acme-glass-profiles" in str(info.value)


def test_a_plugin_directory_with_a_bad_file_names_the_file(plugin: Path) -> None:
    bad = plugin.parent / "acme_profiles" / "acme-dir.json"
    bad.write_text(json.dumps(profile_data("acme-dir", capabilities={})))
    with pytest.warns(ProfileWarning, match="capabilities.context_length"):
        problems = list_profiles().problems
    assert [(p.path, p.model_id) for p in problems] == [(str(bad), "acme-dir")]
    with pytest.raises(ConfigurationError) as info:
        get_profile("acme-dir")
    assert str(bad) in str(info.value)
    assert "capabilities.context_length" in str(info.value)


def test_the_docs_example_profile_is_valid(tmp_path: Path) -> None:
    page = (Path(__file__).parents[2] / "docs" / "profiles.md").read_text(encoding="utf-8")
    example = page.split("```json\n", 1)[1].split("```", 1)[0]
    data = json.loads(example)
    path = tmp_path / profile_file_name(data["basic_info"]["id"])
    path.write_text(textwrap.dedent(example))
    profile = load_profile(path)
    assert profile.pricing is not None
