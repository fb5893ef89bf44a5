"""What every HTTP provider shares: status -> error mapping, Retry-After, key masking."""

from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping
from typing import Any

from glassagent._core.errors import (
    AuthenticationError,
    ConfigurationError,
    ProviderError,
    ProviderUnavailableError,
    RateLimitError,
)

RETRYABLE_STATUSES = frozenset({408, 500, 502, 503, 504, 529})
"""Statuses that mean "try again later": `ProviderUnavailableError` (429 is `RateLimitError`)."""
_BODY_LIMIT = 2000


def is_loopback(host: str) -> bool:
    """Whether `host` names this machine only: ``localhost``, 127.0.0.0/8 or ``::1``."""
    import ipaddress

    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False


def mask_key(key: str | None) -> str:
    """The only printable form of an API key: its first 4 and last 4 characters."""
    if not key:
        return "<none>"
    if len(key) <= 12:
        return "***"
    return f"{key[:4]}...{key[-4:]}"


def redact(text: str, secret: str | None) -> str:
    """`text` with every occurrence of `secret` (also as escaped in a repr) masked."""
    if not secret:
        return text
    for form in {secret, secret.strip(), repr(secret)[1:-1]}:
        if form and form in text:
            text = text.replace(form, mask_key(secret))
    return text


class UpstreamError(Exception):
    """Stands in for an exception of a library under a client, with any API key masked.

    A typed error's ``__cause__`` is this, not the original: the original may hold the key
    in its message, its body or the request it carries (a provider echoing the key back).
    The original's traceback is kept; its own causes are masked the same way.
    """


_MAX_CAUSES = 8


def masked_cause(exc: BaseException | None, secret: str | None, depth: int = 0) -> Any:
    """A key-free `UpstreamError` for `exc` (with its chained causes), or `None`."""
    if exc is None or depth >= _MAX_CAUSES:
        return None
    kind = type(exc)
    stand_in = UpstreamError(redact(f"{kind.__module__}.{kind.__qualname__}: {exc}", secret))
    stand_in.__cause__ = masked_cause(exc.__cause__ or exc.__context__, secret, depth + 1)
    stand_in.__suppress_context__ = True
    return stand_in.with_traceback(exc.__traceback__)


def clean_key(key: str | None, variable: str) -> str | None:
    """`key` without surrounding white space (keys read from files end in a newline).

    Raises:
        ConfigurationError: When the key still holds white space or control characters, which
            no HTTP header can carry (the message never shows the key).
    """
    if key is None:
        return None
    key = key.strip()
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in key):
        raise ConfigurationError(
            f"The API key (from the argument or {variable}) contains white space or control "
            "characters; check how it was read."
        )
    return key


def retry_after_seconds(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or an HTTP date), if present."""
    value = headers.get("retry-after") or headers.get("Retry-After")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def error_for_status(
    status: int,
    body: str,
    *,
    provider: str,
    message: str | None = None,
    retry_after: float | None = None,
    secret: str | None = None,
) -> ProviderError:
    """The typed error for an HTTP error status (the caller raises it).

    Args:
        status: The HTTP status code.
        body: The response body text (truncated and redacted here).
        provider: The provider name.
        message: The provider's own error message, when it was parsed from the body.
        retry_after: Seconds the provider asked to wait (kept for 429 and retryable statuses).
        secret: An API key to remove from the body and message.
    """
    body = redact(body, secret)[:_BODY_LIMIT]
    detail = redact(message or body or "no details", secret)
    text = f"{provider} returned HTTP {status}: {detail}"
    if status in (401, 403):
        return AuthenticationError(text, status=status, body=body, provider=provider)
    if status == 429:
        if retry_after is not None:
            text = f"{text.rstrip()} Retry after {retry_after:g} seconds."
        return RateLimitError(
            text, retry_after=retry_after, status=status, body=body, provider=provider
        )
    if status in RETRYABLE_STATUSES:
        return ProviderUnavailableError(
            text, retry_after=retry_after, status=status, body=body, provider=provider
        )
    return ProviderError(text, status=status, body=body, provider=provider)
