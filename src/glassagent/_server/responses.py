"""Errors as HTTP answers: a status, a JSON body without stack traces or keys, and headers."""

from __future__ import annotations

import logging
import math
from typing import Any

from glassagent._core.errors import (
    AttachmentError,
    ConfigurationError,
    GlassAgentError,
    HistoryConflictError,
    HistoryValidationError,
    MaxIterationsExceeded,
    ProviderError,
    ProviderTimeoutError,
    ProviderUnavailableError,
    RateLimitError,
    RunTimeoutError,
    UserError,
)
from glassagent._server.request import InvokeError

logger = logging.getLogger("glassagent.server")

MAX_PROBLEMS = 20
"""The most problems an error answer lists (the first ones); ``problem_count`` tells all."""

# (error class, HTTP status, code): the first match wins, so subclasses come first.
_STATUSES: tuple[tuple[type[BaseException], int, str], ...] = (
    (HistoryValidationError, 422, "invalid_history"),
    (HistoryConflictError, 409, "conflict"),
    (AttachmentError, 422, "attachment_refused"),
    (RateLimitError, 429, "rate_limited"),
    (ProviderTimeoutError, 504, "provider_timeout"),
    (ProviderUnavailableError, 503, "provider_unavailable"),
    (ProviderError, 502, "provider_error"),
    (RunTimeoutError, 504, "run_timeout"),
    (MaxIterationsExceeded, 502, "max_iterations"),
    (ConfigurationError, 400, "invalid_settings"),
    (UserError, 400, "bad_request"),
)


def error_response(exc: BaseException) -> tuple[int, dict[str, Any], dict[str, str]]:
    """The status, JSON body and headers that answer a request that failed with `exc`.

    The body is ``{"error": {"code", "type", "message", "problems"?, "problem_count"?}}``:
    at most the first `MAX_PROBLEMS` problems, and how many there are. A provider's
    ``Retry-After`` is passed on with 429 and 503. Errors that are not glassagent's get a
    generic 500 (logged here with their traceback); nothing else is logged.
    """
    headers: dict[str, str] = {}
    if isinstance(exc, InvokeError):
        status, code = exc.status, exc.code
        if status == 401:
            headers["WWW-Authenticate"] = "Bearer"
    else:
        status, code = next(
            ((s, c) for kind, s, c in _STATUSES if isinstance(exc, kind)), (500, "internal_error")
        )
    kind = type(exc).__name__
    if isinstance(exc, GlassAgentError):
        message = exc.message
    else:
        logger.error("a request failed", exc_info=exc)
        kind, message = "InternalError", "The server failed to handle the request."
    error: dict[str, Any] = {"code": code, "type": kind, "message": message}
    problems = getattr(exc, "problems", None)
    if isinstance(exc, (InvokeError, HistoryValidationError)) and problems:
        shown = problems[:MAX_PROBLEMS]
        error["problems"] = [{"location": p.location, "message": p.message} for p in shown]
        error["problem_count"] = len(problems)
    retry_after = getattr(exc, "retry_after", None)
    if isinstance(exc, ProviderError) and retry_after is not None and status in (429, 503):
        seconds = max(0, math.ceil(retry_after))
        headers["Retry-After"] = str(seconds)
        error["retry_after"] = seconds
    return status, {"error": error}, headers
