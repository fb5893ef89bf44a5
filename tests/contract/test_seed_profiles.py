"""Profiles in the design document's format load unchanged; a bad file spoils only itself.

The seed's example profile (``shared/design/ai_client_rule.txt`` §7) is copied verbatim into
``tests/support/fixtures/seed_ai_profile/gemini-2.5-flash.json``; every profile here is a real file
read from a real directory, found as an application's would be.
"""

from __future__ import annotations

import functools
import json
import shutil
import warnings
from collections.abc import Iterator
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from glassagent import Usage
from glassagent._providers.factory import PROVIDERS
from glassagent.errors import ConfigurationError
from glassagent.llm import create_llm_client
from glassagent.local import DEFAULT_MODEL
from glassagent.profiles import (
    ModelProfile,
    ProfileWarning,
    cost_of,
    get_profile,
    list_profiles,
    load_profile,
    profile_file_name,
    reload_profiles,
)
from tests.support.profiles import profile_data

FIXTURES = Path(__file__).parents[1] / "support" / "fixtures"
SEED = FIXTURES / "seed_ai_profile" / "gemini-2.5-flash.json"
DESIGN = Path(__file__).parents[3] / "shared" / "design" / "ai_client_rule.txt"


@pytest.fixture(autouse=True)
def _fresh_profiles(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    monkeypatch.delenv("GLASSAGENT_PROFILE_PATH", raising=False)
    monkeypatch.chdir(tmp_path)  # no ai_profile folder unless a test makes one
    reload_profiles()
    yield
    reload_profiles()


def write(directory: Path, data: dict[str, Any]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / profile_file_name(data["basic_info"]["id"])
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


# -- the seed's format ---------------------------------------------------------------------


def test_the_fixture_is_the_design_documents_example_verbatim() -> None:
    if not DESIGN.is_file():
        pytest.skip("the design document is not beside this checkout")
    section = DESIGN.read_text(encoding="utf-8").split("7. モデルプロファイル仕様", 1)[1]
    example = section.split("```json\n", 1)[1].split("```", 1)[0]
    assert SEED.read_text(encoding="utf-8") == example


def test_the_seeds_example_profile_loads_unchanged() -> None:
    profile = load_profile(SEED)
    assert profile.id == "gemini-2.5-flash"
    assert profile.basic_info.description == "高速で効率的な汎用モデル"
    assert profile.capabilities.max_completion_tokens == 8192
    assert "top_k" in profile.capabilities.supported_parameters
    assert profile.features.input_modalities == ("text", "image", "video", "audio")
    assert profile.pricing is not None
    assert profile.pricing.input_per_1m_tokens == Decimal("0.075")
    assert profile.pricing.as_of is None  # the seed's prices carry no date
    assert profile.limitations.rate_limit_tpm == 4_000_000
    assert profile.notes == {
        "best_for": ["一般的な質問応答", "コード生成", "要約"],
        "release_date": "2025-01-01",
    }
    assert profile.unknown_fields == {}
    # and it reads back as the same profile
    again = ModelProfile.model_validate_json(profile.model_dump_json())
    assert again.model_dump() == profile.model_dump()


def test_only_the_seeds_required_sections_are_required() -> None:
    data = json.loads(SEED.read_text(encoding="utf-8"))
    for optional in ("pricing", "limitations", "notes"):
        del data[optional]
    profile = ModelProfile.model_validate(data)
    assert profile.pricing is None
    assert profile.notes == ()
    assert ModelProfile.model_validate(profile_data(notes=["a", "b"])).notes == ("a", "b")


def test_unknown_keys_are_kept_and_shown() -> None:
    pricing = {"input_per_1m_tokens": 1, "output_per_1m_tokens": 2, "tier_name": "paid"}
    pricing["tiers"] = [{"above_input_tokens": 1000, "note": "long prompts"}]
    data = profile_data(pricing=pricing, x_vendor={"sku": 7})
    data["basic_info"]["family"] = "acme"
    profile = ModelProfile.model_validate(data)
    assert profile.unknown_fields == {
        "x_vendor": {"sku": 7},
        "basic_info.family": "acme",
        "pricing.tier_name": "paid",
        "pricing.tiers.0.note": "long prompts",
    }
    assert repr(profile) == (
        "ModelProfile(id='acme-1', provider='acme', unknown_fields=['basic_info.family', "
        "'pricing.tier_name', 'pricing.tiers.0.note', 'x_vendor'])"
    )
    assert profile.model_dump(mode="json")["basic_info"]["family"] == "acme"  # written back


def test_undated_prices_are_priced_and_said_to_be_undated() -> None:
    profile = load_profile(SEED)
    cost = cost_of(Usage(input_tokens=1_000_000, output_tokens=100_000), profile)
    assert cost.amount == Decimal("0.105")  # 0.075 + 0.1 * 0.30
    assert cost.source == "profile"
    assert cost.as_of is None
    assert cost.priced_as == "gemini-2.5-flash (gemini profile, prices undated)"
    dated = cost_of(Usage(input_tokens=1000), get_profile("gemini-2.5-flash"))
    assert dated.as_of == date(2026, 11, 24)
    assert dated.priced_as == "gemini-2.5-flash (gemini profile)"


# -- a bad file spoils only itself ---------------------------------------------------------


def test_a_bad_file_is_reported_and_every_other_profile_loads(tmp_path: Path) -> None:
    folder = tmp_path / "profiles"
    write(folder, profile_data("acme-good"))
    bad = write(folder, profile_data("acme-bad", capabilities={"context_length": 0}))
    with pytest.warns(ProfileWarning) as caught:
        good = get_profile("acme-good", profile_dirs=folder)
    assert [str(w.message) for w in caught] == [
        f"Model profile {bad} is invalid: capabilities.context_length: Input should be greater "
        "than 0 It is skipped; the other profiles load."
    ]
    assert good is not None
    # read once: later lookups neither warn again nor raise
    assert get_profile("no-such-model", profile_dirs=folder) is None
    assert get_profile("gemini-2.5-flash", profile_dirs=folder) is not None
    listed = list_profiles(profile_dirs=folder)
    assert "acme-good" in {p.id for p in listed}
    assert "acme-bad" not in {p.id for p in listed}
    assert [(p.path, p.model_id) for p in listed.problems] == [(str(bad), "acme-bad")]
    assert "capabilities.context_length" in listed.problems[0].message
    with pytest.raises(ConfigurationError) as info:
        get_profile("acme-bad", profile_dirs=folder)
    assert str(bad) in str(info.value)
    assert "capabilities.context_length" in str(info.value)
    assert list_profiles().problems == ()  # without the folder, nothing is wrong


def test_a_bad_file_of_a_shipped_model_is_not_replaced_by_the_shipped_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "env"
    (folder).mkdir()
    (folder / "gemini-2.5-pro.json").write_text('{"basic_info": ', encoding="utf-8")
    monkeypatch.setenv("GLASSAGENT_PROFILE_PATH", str(folder))
    with pytest.warns(ProfileWarning, match=r"gemini-2\.5-pro\.json is invalid: Invalid JSON"):
        flash = get_profile("gemini-2.5-flash")
    assert flash is not None
    with pytest.raises(ConfigurationError, match=r"gemini-2\.5-pro\.json is invalid"):
        get_profile("gemini-2.5-pro", "gemini")
    # a directory of higher precedence with a valid profile of it wins
    mine = profile_data("gemini-2.5-pro")
    mine["basic_info"]["provider"] = "gemini"
    write(tmp_path / "mine", mine)
    fixed = get_profile("gemini-2.5-pro", profile_dirs=tmp_path / "mine")
    assert fixed is not None
    assert fixed.origin == str(tmp_path / "mine" / "gemini-2.5-pro.json")


def test_the_shipped_profiles_never_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        profiles = list_profiles()
    assert profiles.problems == ()
    assert all(not p.unknown_fields for p in profiles)


# -- an application's ai_profile folder ----------------------------------------------------


def _seed_folder(parent: Path) -> Path:
    folder = parent / "ai_profile"
    folder.mkdir(parents=True)
    shutil.copy(SEED, folder / SEED.name)
    return folder


def test_ai_profile_in_the_working_folder_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = tmp_path / "app"
    folder = _seed_folder(app)
    shipped = get_profile("gemini-2.5-flash", "gemini")
    assert shipped is not None
    assert shipped.pricing is not None
    assert shipped.pricing.as_of is not None
    monkeypatch.chdir(app)
    assert get_profile("gemini-2.5-flash", "gemini") == shipped  # looked for once, already
    reload_profiles()
    profile = get_profile("gemini-2.5-flash", "gemini")
    assert profile is not None
    assert profile.origin == str(folder / "gemini-2.5-flash.json")
    assert profile.capabilities.max_completion_tokens == 8192
    assert create_llm_client("gemini", api_key="k").profile == profile
    # GLASSAGENT_PROFILE_PATH wins over the working folder's
    env = tmp_path / "env"
    write(env, {**json.loads(SEED.read_text(encoding="utf-8")), "notes": ["from env"]})
    monkeypatch.setenv("GLASSAGENT_PROFILE_PATH", str(env))
    assert get_profile("gemini-2.5-flash").notes == ("from env",)  # type: ignore[union-attr]
    monkeypatch.delenv("GLASSAGENT_PROFILE_PATH")
    monkeypatch.chdir(tmp_path)  # another working folder: the shipped one again
    reload_profiles()
    assert get_profile("gemini-2.5-flash", "gemini") == shipped


def test_an_ai_profile_folder_made_during_a_run_changes_nothing(tmp_path: Path) -> None:
    # A run's tools may write in the working folder: a profile there must not lift a
    # price (a budget) or a limit of the running process.
    shipped = get_profile("gemini-2.5-flash", "gemini")
    folder = tmp_path / "ai_profile"
    free = json.loads(SEED.read_text(encoding="utf-8"))
    free["pricing"] = {"input_per_1m_tokens": 0, "output_per_1m_tokens": 0, "currency": "USD"}
    write(folder, free)
    assert get_profile("gemini-2.5-flash", "gemini") == shipped


def test_ai_profile_is_found_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _seed_folder(tmp_path / "app")
    by_argument = get_profile("gemini-2.5-flash", profile_dirs=folder)
    assert by_argument is not None
    assert by_argument.origin == str(folder / "gemini-2.5-flash.json")
    monkeypatch.chdir(tmp_path / "app")
    relative = get_profile("gemini-2.5-flash", profile_dirs="ai_profile")
    assert relative == by_argument
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GLASSAGENT_PROFILE_PATH", str(folder))
    by_environment = get_profile("gemini-2.5-flash")
    assert by_environment is not None
    assert by_environment.origin == by_argument.origin
    # a relative name means the working folder of the lookup, not of the first one
    with pytest.raises(ConfigurationError, match="not a directory"):
        get_profile("gemini-2.5-flash", profile_dirs="ai_profile")


# -- a profile for each built-in provider --------------------------------------------------


def test_each_built_in_providers_default_model_has_a_profile_of_that_provider() -> None:
    options: dict[str, dict[str, str]] = {
        # no default model: the one glassagent itself serves at such an address
        "openai_compatible": {"base_url": "http://127.0.0.1:1/v1", "model": DEFAULT_MODEL.name},
    }
    covered = set()
    for provider in PROVIDERS:
        if provider == "azure_openai":  # no default model: deployments are named by their owners
            continue
        client = create_llm_client(provider, api_key="k", **options.get(provider, {}))
        profile = get_profile(client.model, provider)
        assert profile is not None, provider
        assert profile.provider == provider, provider
        assert client.profile is not None, provider
        assert profile.pricing is not None
        assert profile.pricing.as_of is not None
        covered.add(provider)
    assert covered == {"anthropic", "gemini", "llama", "ollama", "openai", "openai_compatible"}
    # a lookup without a provider still finds the model's first profile
    assert get_profile("llama3.1:8b").provider == "ollama"  # type: ignore[union-attr]
    assert get_profile(DEFAULT_MODEL.name).provider == "local"  # type: ignore[union-attr]


# -- notes as an object, and misspelt keys -------------------------------------------------


def test_a_profile_with_the_seeds_dict_notes_hashes_like_any_other(tmp_path: Path) -> None:
    seed = load_profile(SEED)
    listed = ModelProfile.model_validate(profile_data(notes=["a list of notes"]))
    assert isinstance(seed.notes, dict)
    assert hash(seed) == hash(load_profile(SEED))  # equal profiles, equal hashes
    assert len({seed, load_profile(SEED), listed}) == 2
    other = json.loads(SEED.read_text(encoding="utf-8"))
    other["notes"]["best_for"] = ["something else"]
    changed = load_profile(write(tmp_path / "other", other))
    assert changed != seed
    assert len({seed, changed}) == 2
    # a cache keyed by the profile, as an application's price or limit lookups would be
    calls = []

    @functools.lru_cache
    def context_of(profile: ModelProfile) -> int:
        calls.append(profile.id)
        return profile.capabilities.context_length

    assert context_of(seed) == context_of(load_profile(SEED)) == 1048576
    assert calls == ["gemini-2.5-flash"]
    assert hash(get_profile("gemini-2.5-flash", profile_dirs=SEED.parent))


def test_nested_dict_and_list_notes_hash_too() -> None:
    notes = {"best_for": [{"task": "code", "langs": ["py", "go"]}], "n": None, "x": 1.5}
    profile = ModelProfile.model_validate(profile_data(notes=notes))
    assert hash(profile) == hash(ModelProfile.model_validate(profile_data(notes=notes)))


@pytest.mark.parametrize(
    ("section", "key", "known"),
    [
        (None, "pricng", "pricing"),
        (None, "limitation", "limitations"),
        ("pricing", "cached_input_per_1m_token", "cached_input_per_1m_tokens"),
        ("features", "input_modalitis", "input_modalities"),
        ("capabilities", "max_completion_token", "max_completion_tokens"),
    ],
)
def test_a_misspelt_optional_key_warns_naming_the_file_and_the_close_name(
    tmp_path: Path, section: str | None, key: str, known: str
) -> None:
    data = profile_data()
    value: Any = {"rate_limit_rpm": 10} if key == "limitation" else 1
    if section is None:
        data[key] = value
    else:
        data.setdefault(section, {"input_per_1m_tokens": 1, "output_per_1m_tokens": 2})
        data[section][key] = ["text"] if key == "input_modalitis" else value
    path = write(tmp_path / "profiles", data)
    where = key if section is None else f"{section}.{key}"
    with pytest.warns(ProfileWarning) as caught:
        profile = load_profile(path)
    assert [str(w.message) for w in caught] == [
        f"Model profile {path}: unknown key {where!r}, kept as an unknown field; "
        f"did you mean {known!r}?"
    ]
    assert profile.unknown_fields == {where: data[key] if section is None else data[section][key]}
    # found in a directory, the same warning, once
    reload_profiles()
    with pytest.warns(ProfileWarning, match=f"did you mean {known!r}"):
        assert get_profile("acme-1", profile_dirs=tmp_path / "profiles") is not None


def test_a_misspelt_key_in_a_pricing_tier_warns(tmp_path: Path) -> None:
    tier = {"above_input_tokens": 1000, "output_per_1m_token": 5}
    pricing = {"input_per_1m_tokens": 1, "output_per_1m_tokens": 2, "tiers": [tier]}
    path = write(tmp_path, profile_data(pricing=pricing))
    with pytest.warns(ProfileWarning, match=r"'pricing\.tiers\.0\.output_per_1m_token'.*"
                      r"did you mean 'output_per_1m_tokens'\?"):  # fmt: skip
        load_profile(path)


def test_a_misspelt_required_key_names_the_close_key_in_the_error(tmp_path: Path) -> None:
    pricing = {"input_per_1m_token": 1, "output_per_1m_tokens": 2}
    path = write(tmp_path, profile_data(pricing=pricing))
    with pytest.raises(ConfigurationError) as info:
        load_profile(path)
    assert str(info.value) == (
        f"Model profile {path} is invalid: pricing.input_per_1m_tokens: Field required "
        "(the file has 'input_per_1m_token')"
    )


def test_unknown_keys_far_from_any_known_name_stay_silent(tmp_path: Path) -> None:
    data = profile_data(x_vendor={"sku": 7}, family="acme")
    data["basic_info"]["family"] = "acme"
    data["limitations"] = {"rate_limit_rpm": 10, "rate_limit_rpd": 100}  # rpm is given
    data["pricing"] = {"input_per_1m_tokens": 1, "output_per_1m_tokens": 2, "region": "eu"}
    path = write(tmp_path, data)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        profile = load_profile(path)
    assert set(profile.unknown_fields) == {
        "x_vendor",
        "family",
        "basic_info.family",
        "limitations.rate_limit_rpd",
        "pricing.region",
    }
