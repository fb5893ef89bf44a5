"""`cost_of`: what a model call cost, from its usage and the model's pricing.

Prices come from the model's profile; a model whose profile has no pricing (or that has no
profile) is priced by genai-prices when it is installed (``pip install "glassagent[prices]"``).
Every `Cost` says which source priced it, or why nothing could.
"""

from __future__ import annotations

import importlib
from decimal import Decimal
from functools import cache
from typing import TYPE_CHECKING, Any

from glassagent._core.cost import Cost

if TYPE_CHECKING:
    from glassagent._core.client import BaseLLMClient
    from glassagent._core.messages import Usage
    from glassagent._core.profiles.model import ModelProfile, Pricing

_MILLION = Decimal(1_000_000)
_PRICE_NAMES = ("input", "output", "thinking", "cached_input", "cache_write")

# glassagent provider name -> genai-prices provider id
_GENAI_PROVIDERS = {
    "anthropic": "anthropic",
    "azure_openai": "azure",
    "gemini": "google",
    "openai": "openai",
}
# providers that run models on the user's own machine: no price database knows their price
_LOCAL_PROVIDERS = frozenset({"local", "llama", "ollama"})
_UNKNOWN: dict[tuple[str, str | None], tuple[object, str]] = {}
"""Models genai-prices does not know, by (model, provider id): the price data asked and why.
Asking again costs an exception per call; the answer holds while genai-prices' data is the
same object (an update of its prices replaces it)."""
_UNKNOWN_SIZE = 256


def cost_of(
    usage: Usage,
    profile: ModelProfile | None,
    *,
    model: str | None = None,
    provider: str | None = None,
) -> Cost:
    """What a call with `usage` cost, priced by `profile`, else by genai-prices.

    Input tokens read from the provider's prompt cache (``usage.cache_read_tokens``) and
    written into it (``usage.cache_write_tokens``), both counted in ``usage.input_tokens``,
    cost the profile's cached-input and cache-write prices where it gives them, and thinking
    tokens its thinking price; otherwise the input and output prices. When the prompt is
    longer than a pricing tier's threshold, that tier's prices apply to the whole call. Price
    each call's usage and add the `Cost`s: a usage summed over calls would miss the tiers.

    Without pricing in `profile`, genai-prices (the ``prices`` extra) prices the call when it
    knows the model. This function never raises for a call it cannot price: it returns a
    `Cost` with ``amount=None`` and the reason.

    Args:
        usage: The call's token counts.
        profile: The model's profile (`get_profile`, `BaseLLMClient.profile`), if any.
        model: The model id for genai-prices; by default the profile's id.
        provider: The glassagent provider name for genai-prices (``gemini``, ``openai``,
            ``anthropic``...); by default the profile's provider.
    """
    problem = _check_usage(usage)
    if problem is not None:
        return Cost(None, reason=problem)
    if profile is not None and profile.pricing is not None:
        return _from_pricing(usage, profile.pricing, f"{profile.id} ({profile.provider} profile)")
    model = model or (profile.id if profile is not None else None)
    provider = provider or (profile.provider if profile is not None else None)
    if model is None:
        return Cost(None, reason="no profile and no model id to price the call by")
    return _from_genai_prices(usage, model, provider)


def client_cost(client: BaseLLMClient, usage: Usage) -> Cost:
    """What a call of `client` with `usage` cost, priced as the agent prices it.

    By the client's profile (`BaseLLMClient.profile`) when it has pricing, else by
    genai-prices under the client's model and provider names; never raises for a call it
    cannot price (see `cost_of`).

    Raises:
        ConfigurationError: For an invalid profile file.
    """
    profile = client.profile
    if profile is not None:
        return cost_of(usage, profile)
    return cost_of(usage, None, model=client.model, provider=client.provider_name)


def _check_usage(usage: Usage) -> str | None:
    counts = (
        usage.input_tokens,
        usage.output_tokens,
        usage.thinking_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
    )
    if any(count < 0 for count in counts):
        return f"the usage has negative token counts: {usage!r}"
    if usage.cache_read_tokens + usage.cache_write_tokens > usage.input_tokens:
        return f"the usage counts more cached tokens than input tokens: {usage!r}"
    return None


def _from_pricing(usage: Usage, pricing: Pricing, priced_as: str) -> Cost:
    prices = {name: getattr(pricing, f"{name}_per_1m_tokens") for name in _PRICE_NAMES}
    for tier in pricing.tiers:  # lowest threshold first: the last one exceeded applies
        if usage.input_tokens > tier.above_input_tokens:
            for name in _PRICE_NAMES:
                tier_price = getattr(tier, f"{name}_per_1m_tokens")
                if tier_price is not None:
                    prices[name] = tier_price
    input_price: Decimal = prices["input"]
    output_price: Decimal = prices["output"]

    def price(name: str, default: Decimal) -> Decimal:
        given: Decimal | None = prices[name]
        return default if given is None else given

    uncached = usage.input_tokens - usage.cache_read_tokens - usage.cache_write_tokens
    amount = (
        uncached * input_price
        + usage.cache_read_tokens * price("cached_input", input_price)
        + usage.cache_write_tokens * price("cache_write", input_price)
        + usage.output_tokens * output_price
        + usage.thinking_tokens * price("thinking", output_price)
    ) / _MILLION
    if pricing.as_of is None:  # say so where a dated profile names its date
        priced_as = priced_as.removesuffix(")") + ", prices undated)"
    return Cost(amount, pricing.currency, "profile", priced_as=priced_as, as_of=pricing.as_of)


def _from_genai_prices(usage: Usage, model: str, provider: str | None) -> Cost:
    if provider is not None and provider.lower() in _LOCAL_PROVIDERS:
        return Cost(
            None,
            reason=f"{model!r} runs locally ({provider}) and its profile has no pricing; "
            "add pricing to a profile of it",
        )
    genai_prices = _genai_prices()
    if genai_prices is None:
        return Cost(
            None,
            reason=f"no pricing for {model!r} in a profile, and genai-prices is not installed "
            '(pip install "glassagent[prices]")',
        )
    counts = {
        "input_tokens": usage.input_tokens,
        "cache_read_tokens": usage.cache_read_tokens,
        "cache_write_tokens": usage.cache_write_tokens,
        "output_tokens": usage.output_tokens + usage.thinking_tokens,
        "output_reasoning_tokens": usage.thinking_tokens,
    }
    provider_id = _GENAI_PROVIDERS.get((provider or "").lower())
    snapshot = _price_data(genai_prices)
    known = _UNKNOWN.get((model, provider_id))
    if known is not None and snapshot is not None and known[0] is snapshot:
        return Cost(None, reason=known[1])
    try:
        calculation = genai_prices.calc_price(
            genai_prices.Usage(**{key: value for key, value in counts.items() if value}),
            model,
            provider_id=provider_id,
        )
    except Exception as exc:  # genai-prices raises LookupError for a model it does not know
        reason = f"no pricing for {model!r} in a profile, nor in genai-prices: {exc}"
        if isinstance(exc, LookupError) and snapshot is not None:
            if len(_UNKNOWN) >= _UNKNOWN_SIZE:
                _UNKNOWN.clear()
            _UNKNOWN[(model, provider_id)] = (snapshot, reason)
        return Cost(None, reason=reason)
    version = getattr(genai_prices, "__version__", "?")
    return Cost(
        Decimal(calculation.total_price),
        "USD",
        "genai-prices",
        priced_as=f"{calculation.provider.id}/{calculation.model.id} (genai-prices {version})",
    )


@cache
def _genai_prices() -> Any:
    """The genai-prices module, or `None` when it is not installed.

    Asked once: a failed import searches every path entry again, which costs more than the
    rest of a model call.
    """
    try:
        return importlib.import_module("genai_prices")
    except ImportError:
        return None


def _price_data(genai_prices: Any) -> object | None:
    """genai-prices' current price data (replaced when its prices update), if it says."""
    snapshots = getattr(genai_prices, "data_snapshot", None)
    get_snapshot = getattr(snapshots, "get_snapshot", None)
    if get_snapshot is None:
        return None
    try:
        data: object = get_snapshot()
    except Exception:  # an installation we do not know: ask it every time
        return None
    return data
