"""`Budget`: limits on what one run may spend, checked before each model call."""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING

from glassagent._core.cost import Cost
from glassagent._core.errors import UserError

if TYPE_CHECKING:
    from glassagent._core.events import BudgetLimit

_CURRENCY = re.compile(r"^[A-Z]{3}$")


@dataclass(frozen=True, kw_only=True)
class Budget:
    """Limits on what one run may spend: money, tokens, model calls.

    The agent checks them before each model call, with the next call's prompt size known
    from the last call's usage or estimated. When the call would pass a limit, it is not
    made: the run ends with ``stop_reason="budget"`` and a ``budget_exceeded`` event, and
    keeps everything it produced. Each run has the whole budget.

    Example:
        ```python
        agent = Agent(client, tools, budget=Budget(max_cost="0.05", max_model_calls=8))
        ```

    A cost limit needs a model that can be priced (its profile's pricing, or genai-prices):
    a run on a model that cannot be priced is refused before any request.
    """

    max_cost: Decimal | None = None
    """The most the run's model calls may cost, in `currency`. Given as a `Decimal`, an int,
    or a string such as ``"0.05"`` (a float is taken by its shortest repr)."""
    max_tokens: int | None = None
    """The most tokens (input, output and thinking) the run's model calls may use."""
    max_model_calls: int | None = None
    """The most model calls the run may make."""
    currency: str = "USD"
    """The currency of `max_cost`; the model's prices must be in it."""

    def __post_init__(self) -> None:
        if self.max_cost is not None:
            object.__setattr__(self, "max_cost", _amount(self.max_cost))
        for name in ("max_tokens", "max_model_calls"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise UserError(f"Budget `{name}` must be a whole number of at least 1.")
        if not isinstance(self.currency, str) or not _CURRENCY.match(self.currency):
            raise UserError("Budget `currency` must be an ISO 4217 code such as 'USD'.")


def _amount(value: object) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, (Decimal, int, float, str)):
        raise UserError(
            f"Budget `max_cost` must be a Decimal, an int or a str, got {type(value).__name__}."
        )
    try:
        amount = Decimal(repr(value) if isinstance(value, float) else value)
    except InvalidOperation:
        raise UserError(f"Budget `max_cost` is not a number: {value!r}.") from None
    if not amount.is_finite() or amount < 0:
        raise UserError(f"Budget `max_cost` must be a finite amount of at least 0, got {value!r}.")
    return amount


@dataclass(frozen=True)
class BudgetStop:
    """Why the next model call would pass the budget."""

    limit: BudgetLimit
    reason: str


@dataclass(frozen=True)
class NextCall:
    """What the next model call is expected to add: its prompt, in tokens and money."""

    input_tokens: int
    input_cost: Cost


def check(
    budget: Budget, calls: int, tokens: int, cost: Cost, next_call: NextCall
) -> BudgetStop | None:
    """Whether a call after `calls` calls that used `tokens` and cost `cost` passes `budget`.

    Only the next call's prompt is counted: its answer is not known before it is made
    (`ModelSettings.max_tokens` bounds it).
    """
    if budget.max_model_calls is not None and calls >= budget.max_model_calls:
        return BudgetStop(
            "max_model_calls",
            f"the run has made {calls} model calls, its budget's max_model_calls",
        )
    if budget.max_tokens is not None:
        total = tokens + next_call.input_tokens
        if total > budget.max_tokens:
            return BudgetStop(
                "max_tokens",
                f"the run has used {tokens} tokens and the next call's prompt is "
                f"about {next_call.input_tokens} more: {total} is over the budget's max_tokens "
                f"of {budget.max_tokens}",
            )
    if budget.max_cost is not None:
        return _check_cost(budget.max_cost, budget.currency, cost, next_call)
    return None


def _check_cost(
    limit: Decimal, currency: str, cost: Cost, next_call: NextCall
) -> BudgetStop | None:
    for spent in (cost, next_call.input_cost):
        if spent.amount is None:
            return BudgetStop(
                "max_cost",
                f"the cost of the run cannot be known ({spent.reason}), so its max_cost of "
                f"{limit} {currency} cannot be kept",
            )
        if spent.currency != currency:
            return BudgetStop(
                "max_cost",
                f"the model is priced in {spent.currency}, the budget's max_cost in {currency}",
            )
    assert cost.amount is not None
    assert next_call.input_cost.amount is not None
    total = cost.amount + next_call.input_cost.amount
    if total <= limit:
        return None
    return BudgetStop(
        "max_cost",
        f"the run has cost {cost.amount} {currency} and the next call's prompt of about "
        f"{next_call.input_tokens} tokens {next_call.input_cost.amount} more: {total} is over "
        f"the budget's max_cost of {limit} {currency}",
    )
