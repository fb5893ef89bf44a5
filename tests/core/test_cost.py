"""`cost_of`: pricing by profile (thinking, cached and tiered), genai-prices, and no price."""

from __future__ import annotations

import importlib
import os
import sys
from datetime import date
from decimal import Decimal
from types import ModuleType
from typing import Any

import pytest

from glassagent import Usage
from glassagent._core import pricing as cost_module
from glassagent.profiles import Cost, ModelProfile, cost_of, get_profile, list_profiles

AS_OF = "2026-01-02"


def genai_prices() -> ModuleType:
    """genai-prices, an optional test dependency: skipped without it, except in CI."""
    try:
        import genai_prices
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail('CI must install genai-prices (pip install -e ".[dev]")')
        pytest.skip("genai-prices is not installed")
    return genai_prices


def profile(pricing: dict[str, Any] | None = None, **basic: Any) -> ModelProfile:
    return ModelProfile.model_validate(
        {
            "basic_info": {"id": "acme-1", "name": "Acme", "provider": "acme", **basic},
            "capabilities": {"context_length": 1_000_000},
            "features": {
                "supports_function_calling": True,
                "supports_streaming": True,
                "is_multimodal": False,
                "supports_reasoning": True,
            },
            "pricing": pricing and {"as_of": AS_OF, **pricing},
        }
    )


PLAIN = {"input_per_1m_tokens": 2, "output_per_1m_tokens": 8}


def test_input_and_output_tokens_are_priced_per_million() -> None:
    cost = cost_of(Usage(input_tokens=1000, output_tokens=500), profile(PLAIN))
    assert cost == Cost(
        Decimal("0.006"),
        "USD",
        "profile",
        priced_as="acme-1 (acme profile)",
        as_of=date(2026, 1, 2),
    )
    assert cost.priced
    assert str(cost) == "0.006 USD (profile)"


def test_thinking_tokens_cost_the_thinking_price_else_the_output_price() -> None:
    usage = Usage(input_tokens=0, output_tokens=100, thinking_tokens=1000)
    assert cost_of(usage, profile(PLAIN)).amount == Decimal("0.0088")  # 1100 * 8
    billed_apart = profile({**PLAIN, "thinking_per_1m_tokens": 3})
    assert cost_of(usage, billed_apart).amount == Decimal("0.0038")  # 100 * 8 + 1000 * 3


def test_cached_tokens_cost_their_prices_and_are_part_of_the_input() -> None:
    usage = Usage(input_tokens=10_000, cache_read_tokens=6000, cache_write_tokens=1000)
    assert cost_of(usage, profile(PLAIN)).amount == Decimal("0.02")  # all at the input price
    cached = profile(
        {**PLAIN, "cached_input_per_1m_tokens": "0.5", "cache_write_per_1m_tokens": "2.5"}
    )
    # 3000 uncached * 2 + 6000 read * 0.5 + 1000 written * 2.5
    assert cost_of(usage, cached).amount == Decimal("0.0115")


def test_a_price_of_zero_is_a_price() -> None:
    usage = Usage(input_tokens=1000, thinking_tokens=1000, cache_read_tokens=1000)
    free_extras = profile({**PLAIN, "cached_input_per_1m_tokens": 0, "thinking_per_1m_tokens": 0})
    assert cost_of(usage, free_extras).amount == 0
    local = get_profile("llama3.1:8b")
    assert cost_of(Usage(input_tokens=5000, output_tokens=10), local) == Cost(
        Decimal(0),
        "USD",
        "profile",
        priced_as="llama3.1:8b (ollama profile)",
        as_of=date(2026, 11, 24),
    )


def test_a_tier_prices_the_whole_call_once_the_prompt_exceeds_it() -> None:
    tiered = profile(
        {
            **PLAIN,
            "cached_input_per_1m_tokens": 1,
            "tiers": [
                {"above_input_tokens": 1000, "input_per_1m_tokens": 4},
                {"above_input_tokens": 2000, "input_per_1m_tokens": 6, "output_per_1m_tokens": 9},
            ],
        }
    )
    assert cost_of(Usage(input_tokens=1000, output_tokens=1000), tiered).amount == Decimal("0.01")
    assert cost_of(Usage(input_tokens=1001), tiered).amount == Decimal("0.004004")
    # the last tier exceeded; prices it leaves out are the base ones (cached input: 1)
    usage = Usage(input_tokens=3000, output_tokens=1000, cache_read_tokens=1000)
    assert cost_of(usage, tiered).amount == Decimal("0.022")  # 2000 * 6 + 1000 * 1 + 1000 * 9


def test_a_shipped_profile_with_a_long_prompt_tier() -> None:
    pro = get_profile("gemini-2.5-pro")
    assert cost_of(Usage(input_tokens=200_000), pro).amount == Decimal("0.25")
    assert cost_of(Usage(input_tokens=200_001), pro).amount == Decimal("0.5000025")


@pytest.mark.parametrize(
    ("usage", "reason"),
    [
        (Usage(input_tokens=10, cache_read_tokens=8, cache_write_tokens=4), "more cached tokens"),
        (Usage(input_tokens=-1), "negative token counts"),
    ],
)
def test_inconsistent_usage_is_unpriced_with_the_reason(usage: Usage, reason: str) -> None:
    cost = cost_of(usage, profile(PLAIN))
    assert cost.amount is None
    assert cost.source is None
    assert reason in (cost.reason or "")
    assert str(cost).startswith("unpriced (")


def test_no_profile_and_no_model_is_unpriced() -> None:
    cost = cost_of(Usage(input_tokens=1), None)
    assert cost == Cost(None, reason="no profile and no model id to price the call by")
    assert not cost.priced


def test_a_local_model_without_pricing_is_not_looked_up_in_a_price_database() -> None:
    cost = cost_of(Usage(input_tokens=1), profile(provider="ollama"))
    assert cost.amount is None
    assert "runs locally (ollama)" in (cost.reason or "")


def test_without_genai_prices_a_model_without_pricing_is_unpriced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "genai_prices", None)  # import fails as when absent
    imports: list[str] = []
    import_module = importlib.import_module

    def counting(name: str, package: str | None = None) -> ModuleType:
        imports.append(name)
        return import_module(name, package)

    monkeypatch.setattr(importlib, "import_module", counting)
    cost_module._genai_prices.cache_clear()
    try:
        for _ in range(3):
            cost = cost_of(Usage(input_tokens=1), None, model="gemini-2.5-flash", provider="gemini")
            assert cost.amount is None
            assert "genai-prices is not installed" in (cost.reason or "")
            assert 'pip install "glassagent[prices]"' in (cost.reason or "")
    finally:
        cost_module._genai_prices.cache_clear()
    # a failed import searches every path entry: it is tried once, not on every call
    assert imports == ["genai_prices"]


def test_genai_prices_prices_a_model_whose_profile_has_no_pricing() -> None:
    version = genai_prices().__version__
    usage = Usage(
        input_tokens=1_000_000,
        output_tokens=100_000,
        thinking_tokens=50_000,
        cache_read_tokens=400_000,
    )
    cost = cost_of(usage, profile(id="gemini-2.5-flash", provider="gemini"))
    assert cost.source == "genai-prices"
    assert cost.priced_as == f"google/gemini-2.5-flash (genai-prices {version})"
    assert cost.as_of is None
    # what the shipped profile says, thinking and cache reads included
    assert cost.amount == cost_of(usage, get_profile("gemini-2.5-flash")).amount
    no_profile = cost_of(usage, None, model="gemini-2.5-flash", provider="gemini")
    assert no_profile == cost


def test_a_model_genai_prices_does_not_know_is_unpriced() -> None:
    genai_prices()
    cost = cost_of(Usage(input_tokens=1), None, model="acme-unknown-9", provider="openai")
    assert cost.amount is None
    assert "nor in genai-prices" in (cost.reason or "")


def test_an_unknown_model_is_looked_up_once_while_the_price_data_stays(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    prices = genai_prices()
    asked: list[str] = []
    calc_price = prices.calc_price

    def counting(usage: object, model: str, **options: object) -> object:
        asked.append(model)
        return calc_price(usage, model, **options)

    monkeypatch.setattr(prices, "calc_price", counting)
    first = cost_of(Usage(input_tokens=1), None, model="acme-unknown-10", provider="openai")
    again = cost_of(Usage(input_tokens=5), None, model="acme-unknown-10", provider="openai")
    assert first == again
    assert asked == ["acme-unknown-10"]
    monkeypatch.setattr(prices.data_snapshot, "get_snapshot", lambda: object())  # updated
    cost_of(Usage(input_tokens=1), None, model="acme-unknown-10", provider="openai")
    assert asked == ["acme-unknown-10"] * 2


def test_costs_add_up() -> None:
    a = cost_of(Usage(input_tokens=1000), profile(PLAIN))
    b = Cost(Decimal("0.5"), source="genai-prices", priced_as="x/y")
    assert a + a == Cost(Decimal("0.004"), "USD", "profile", priced_as=a.priced_as, as_of=a.as_of)
    assert (a + b).amount == Decimal("0.502")
    assert (a + b).source == "mixed"
    unpriced = Cost(None, reason="why")
    assert a + unpriced is unpriced
    assert unpriced + a is unpriced
    euros = Cost(Decimal(1), "EUR", "profile")
    assert (a + euros).reason == "costs in different currencies do not add up"
    assert sum([a, a], Cost(Decimal(0), source="profile")).amount == Decimal("0.004")


def test_a_cost_has_an_amount_or_a_reason() -> None:
    with pytest.raises(ValueError, match="either an amount or a reason"):
        Cost(None)
    with pytest.raises(ValueError, match="either an amount or a reason"):
        Cost(Decimal(1), reason="both")


# -- the shipped prices against the price database ----------------------------------------

_PROVIDER_IDS = {"gemini": "google", "openai": "openai", "anthropic": "anthropic"}
_USAGES = [
    {"input_tokens": 1_000_000},
    {"output_tokens": 1_000_000},
    {"input_tokens": 100_000, "output_tokens": 20_000, "thinking_tokens": 30_000},
    {"input_tokens": 150_000, "cache_read_tokens": 100_000},
    {"input_tokens": 150_000, "cache_read_tokens": 50_000, "cache_write_tokens": 60_000},
    {"input_tokens": 600_000, "output_tokens": 10_000, "cache_read_tokens": 300_000},
]


def test_shipped_prices_match_genai_prices() -> None:
    prices = genai_prices()
    checked = []
    for shipped in list_profiles():
        assert shipped.pricing is not None
        if shipped.provider in {"local", "ollama", "llama", "openai_compatible"}:  # yours: free
            assert shipped.pricing.input_per_1m_tokens == 0
            assert shipped.pricing.output_per_1m_tokens == 0
            continue
        for counts in _USAGES:
            usage = Usage(**counts)
            if usage.input_tokens > shipped.capabilities.context_length:
                continue
            expected = prices.calc_price(
                prices.Usage(
                    input_tokens=usage.input_tokens,
                    cache_read_tokens=usage.cache_read_tokens,
                    cache_write_tokens=usage.cache_write_tokens,
                    output_tokens=usage.output_tokens + usage.thinking_tokens,
                ),
                shipped.id,
                provider_id=_PROVIDER_IDS[shipped.provider],
            ).total_price
            assert cost_of(usage, shipped).amount == expected, (shipped.id, counts)
        checked.append(shipped.id)
    assert len(checked) == 5


def test_client_cost_prices_by_the_clients_profile_else_by_genai_prices() -> None:
    from glassagent.llm import OpenAICompatibleClient
    from glassagent.profiles import client_cost

    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000)
    shipped = OpenAICompatibleClient("gpt-4o-mini", base_url="http://127.0.0.1:1/v1")
    assert client_cost(shipped, usage) == cost_of(usage, get_profile("gpt-4o-mini"))
    assert client_cost(shipped, usage).amount is not None
    genai_prices()
    unknown = OpenAICompatibleClient("gpt-4o-2024-08-06", base_url="http://127.0.0.1:1/v1")
    assert get_profile("gpt-4o-2024-08-06") is None
    priced = client_cost(unknown, usage)
    assert priced.source == "genai-prices"
    assert priced.amount is not None
    assert priced.amount > 0
