"""`Cost`: what model calls cost, or why that is not known (priced by `pricing.cost_of`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Literal

CostSource = Literal["profile", "genai-prices", "mixed"]
"""Who priced a cost: the model's profile, genai-prices, or both (a sum of costs)."""


@dataclass(frozen=True)
class Cost:
    """What one or more model calls cost, or why that is not known.

    A priced cost has an `amount` and a `source`; an unpriced one has ``amount=None`` and a
    `reason`, never a silent zero. Costs of one currency add up with ``+``; a sum with an
    unpriced cost is unpriced (it keeps the first reason).
    """

    amount: Decimal | None
    """The cost in `currency` (exact, not rounded), or ``None`` when it is not known."""
    currency: str = "USD"
    """The ISO 4217 currency code."""
    source: CostSource | None = None
    """Who priced it; ``None`` when unpriced."""
    reason: str | None = None
    """Why the cost is not known; ``None`` when priced."""
    priced_as: str | None = None
    """The prices used: the profile's model and provider, or genai-prices' provider and model
    with its version."""
    as_of: date | None = None
    """The day the profile's prices were read; ``None`` for genai-prices and for a profile
    whose prices are undated (its `priced_as` then ends in ``prices undated``)."""

    def __post_init__(self) -> None:
        if (self.amount is None) != (self.reason is not None):
            raise ValueError("A Cost has either an amount or a reason, not both or neither.")

    @property
    def priced(self) -> bool:
        """Whether the amount is known."""
        return self.amount is not None

    def __add__(self, other: Cost) -> Cost:
        if not isinstance(other, Cost):
            return NotImplemented
        if self.amount is None or other.amount is None:
            return self if self.amount is None else other
        if self.currency != other.currency:
            return Cost(None, self.currency, reason="costs in different currencies do not add up")
        source = self.source if self.source == other.source else "mixed"
        return Cost(
            self.amount + other.amount,
            self.currency,
            source,
            priced_as=self.priced_as if self.priced_as == other.priced_as else None,
            as_of=self.as_of if self.as_of == other.as_of else None,
        )

    def __str__(self) -> str:
        if self.amount is None:
            return f"unpriced ({self.reason})"
        source = f" ({self.source})" if self.source else ""
        return f"{self.amount} {self.currency}{source}"


NOT_RECORDED = Cost(None, reason="no cost was recorded")
"""The cost of a result or event made without one (by hand, or read from an older dict)."""
