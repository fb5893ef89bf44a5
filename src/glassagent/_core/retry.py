"""`RetryPolicy`: when a failed model call is tried again, and after how long (pure)."""

from __future__ import annotations

import random
from dataclasses import dataclass

from glassagent._core.errors import (
    ProviderTimeoutError,
    ProviderUnavailableError,
    RateLimitError,
    UserError,
)


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """How the built-in clients retry a model call that failed before any answer arrived.

    Retried: rate limits (HTTP 429), an overloaded or failing server (408, 500, 502, 503,
    504, 529), lost or refused connections and stalled calls. Never retried: rejected keys,
    invalid requests, unreadable answers, a call past its `ModelSettings.timeout`, and any
    call whose text or thinking was already passed on (so no text is ever duplicated).

    The wait before retry ``n`` (0-based) is ``initial_delay * 2**n``, capped at `max_delay`,
    with "equal jitter" (between half and all of it). When the provider says how long to wait
    (``Retry-After`` in seconds or as an HTTP date, Gemini's ``RetryInfo``), that wait is used
    instead, but only up to `max_wait`: a longer one ends the call with the error at once.
    """

    max_retries: int = 2
    """Retries after the first attempt; 0 turns retrying off."""
    initial_delay: float = 0.5
    """Seconds before the first retry (before jitter)."""
    max_delay: float = 8.0
    """The cap of the exponential backoff, in seconds."""
    max_wait: float = 60.0
    """The longest wait a provider may ask for; asking more ends the call with its error."""
    jitter: bool = True
    """Randomise each backoff between half and all of it, so clients do not retry in step."""

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise UserError("RetryPolicy.max_retries must be 0 or more.")
        if min(self.initial_delay, self.max_delay, self.max_wait) < 0:
            raise UserError("RetryPolicy delays must not be negative.")

    def delay(
        self,
        retry: int,
        error: BaseException,
        *,
        remaining: float | None = None,
        rng: random.Random | None = None,
    ) -> float | None:
        """Seconds to wait before retry number `retry` (0-based), or `None`: do not retry.

        Args:
            retry: How many retries were made before this one.
            error: What the last attempt failed with.
            remaining: Seconds left before the call's deadline, if it has one.
            rng: The random source for jitter (for reproducible tests).
        """
        if retry >= self.max_retries or not is_retryable(error):
            return None
        asked: float | None = getattr(error, "retry_after", None)  # 429, 503, 529...
        if asked is not None:
            if asked > self.max_wait:
                return None
            wait = asked
        else:
            wait = min(self.max_delay, self.initial_delay * 2**retry)
            if self.jitter:
                wait = wait / 2 + (rng or random).uniform(0, wait / 2)
        if remaining is not None and wait >= remaining:
            return None
        return wait


def is_retryable(error: BaseException) -> bool:
    """Whether a model call that failed with `error` (before any answer) may be tried again."""
    if isinstance(error, ProviderTimeoutError):
        return error.kind == "stall"
    return isinstance(error, RateLimitError | ProviderUnavailableError)


DEFAULT_RETRY = RetryPolicy()
"""The policy of a client that was given none: 2 retries, 0.5 s doubling up to 8 s."""
