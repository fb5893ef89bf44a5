"""Numbers over attempts: percentiles and pass@k."""

from __future__ import annotations

import math
from collections.abc import Sequence
from math import comb


def percentile(values: Sequence[float], share: float) -> float:
    """The `share` (0..1) percentile of `values`, interpolated linearly (0.0 for none)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    position = (len(ordered) - 1) * share
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def pass_at_k(attempts: int, passed: int, k: int) -> float:
    """The chance that at least one of `k` attempts passes, from `passed` of `attempts`.

    The unbiased estimator of the HumanEval paper: ``1 - C(n - c, k) / C(n, k)``.
    """
    if attempts - passed < k:
        return 1.0
    return 1.0 - comb(attempts - passed, k) / comb(attempts, k)
