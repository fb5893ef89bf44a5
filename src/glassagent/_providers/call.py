"""One model call of a built-in client: its deadline, stall timeout, size limit and retries.

Every built-in client makes a call as *attempts*: async generators of stream parts that each
get a fresh `CallLimits`. `with_retries` runs attempts until one succeeds or the
`RetryPolicy` says stop, yielding a `RetryNotice` before each retry; `final_response` is the
non-streamed form. `CallLimits.wait` bounds every await of the network by the call's
deadline and stall timeout; `CallLimits.guard` bounds an httpx response body by size (and
each read of it by time) before httpx buffers it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import aclosing, suppress
from dataclasses import dataclass, field, replace
from functools import cache
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from glassagent._core.errors import ProviderError, ProviderTimeoutError, ResponseParseError
from glassagent._core.messages import LLMResponse, ModelSettings, RetryNotice, StreamPart
from glassagent._core.retry import DEFAULT_RETRY, RetryPolicy

if TYPE_CHECKING:
    import httpx

DEFAULT_STALL_SECONDS = 300.0
"""Seconds without a byte before a call stalls, unless `ModelSettings.stall_timeout` says."""
DEFAULT_MAX_RESPONSE_BYTES = 32 * 1024 * 1024
"""The largest answer body, unless `ModelSettings.max_response_bytes` says."""

IDENTITY = "identity"
"""``Accept-Encoding`` of every request: answers come uncompressed, so the size limit counts
the bytes that are held in memory (a compressed body could expand far past it)."""

_T = TypeVar("_T")
_NO_SETTINGS = ModelSettings()
logger = logging.getLogger("glassagent")


@dataclass(kw_only=True)
class CallLimits:
    """The limits of one attempt of a model call.

    Every `wait` of the attempt shares one timer: it is armed once and, when it fires
    before the running wait's end (a later read moved the end on), armed again for that end,
    so a read costs a few attribute writes instead of a timer of its own. `release` cancels
    it when the attempt ends.
    """

    provider: str
    """The provider's name, for errors."""
    deadline: float | None
    """``loop.time()`` at which the whole call (all attempts) must end, or `None`."""
    timeout: float | None
    """Seconds the whole call may take (`ModelSettings.timeout`), or `None`."""
    stall: float
    """Seconds without a byte before the call stalls."""
    max_bytes: int
    """The largest answer body, in bytes."""
    received: int = 0
    """Bytes of the answer received so far."""
    _timer: asyncio.TimerHandle | None = field(default=None, repr=False)
    _waiting: _Waiting | None = field(default=None, repr=False)

    @classmethod
    def first(cls, settings: ModelSettings, provider: str) -> CallLimits:
        """The limits of a call's first attempt, its deadline counted from now."""
        timeout = settings.timeout
        deadline = None if timeout is None else asyncio.get_running_loop().time() + timeout
        return cls(
            provider=provider,
            deadline=deadline,
            timeout=timeout,
            stall=settings.stall_timeout or DEFAULT_STALL_SECONDS,
            max_bytes=settings.max_response_bytes or DEFAULT_MAX_RESPONSE_BYTES,
        )

    def again(self) -> CallLimits:
        """The limits of the next attempt: the same deadline, a fresh byte count."""
        self.release()
        return replace(self, received=0, _timer=None, _waiting=None)

    def remaining(self) -> float | None:
        """Seconds left before the deadline (`None`: no deadline)."""
        if self.deadline is None:
            return None
        return self.deadline - asyncio.get_running_loop().time()

    def release(self) -> None:
        """Cancel the shared timer (the attempt is over)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    async def wait(self, awaitable: Awaitable[_T]) -> _T:
        """Await `awaitable` until the deadline or the stall timeout, whichever is first.

        Raises:
            ProviderTimeoutError: When either is reached first (`awaitable` is cancelled).
        """
        loop = asyncio.get_running_loop()
        stall_end = loop.time() + self.stall
        is_deadline = self.deadline is not None and self.deadline <= stall_end
        end = self.deadline if is_deadline and self.deadline is not None else stall_end
        outer = self._waiting
        if outer is not None and outer.end <= end:  # a wait within a wait: the first end holds
            end, is_deadline = outer.end, outer.is_deadline
        task = asyncio.current_task()
        assert task is not None
        waiting = self._waiting = _Waiting(task, end, is_deadline)
        if self._timer is None:
            self._timer = loop.call_at(end, self._fire)
        try:
            value = await awaitable
        except asyncio.CancelledError:
            if not waiting.fired:
                raise
        else:
            if not waiting.fired:
                return value
            with suppress(asyncio.CancelledError):  # it fired as the read completed:
                await asyncio.sleep(0)  # take back our cancellation, then expire
        finally:
            self._waiting = outer
            if waiting.fired and hasattr(task, "uncancel"):
                task.uncancel()
        if getattr(task, "cancelling", lambda: 0)():  # cancelled from outside as it fired:
            raise asyncio.CancelledError  # the cancellation wins over the timeout
        raise self._expired(waiting.is_deadline) from None

    def _fire(self) -> None:
        """The shared timer: cancel the running wait once its end has come, else re-arm."""
        self._timer = None
        waiting = self._waiting
        if waiting is None or waiting.fired:  # between reads: the next wait arms it again
            return
        loop = asyncio.get_running_loop()
        if loop.time() < waiting.end:
            self._timer = loop.call_at(waiting.end, self._fire)
            return
        waiting.fired = True
        waiting.task.cancel()

    def _expired(self, is_deadline: bool) -> ProviderTimeoutError:
        if is_deadline:
            message = f"{self.provider} did not finish the call within {self.timeout:g} s"
            return ProviderTimeoutError(
                message + " (ModelSettings.timeout).",
                kind="deadline",
                seconds=self.timeout or 0.0,
                provider=self.provider,
            )
        message = f"{self.provider} sent nothing for {self.stall:g} s"
        return ProviderTimeoutError(
            message + " (ModelSettings.stall_timeout).",
            kind="stall",
            seconds=self.stall,
            provider=self.provider,
        )

    def count(self, size: int) -> None:
        """Add `size` received bytes; fail once the body is larger than allowed.

        Raises:
            ResponseParseError: When the body exceeds the limit.
        """
        self.received += size
        if self.received > self.max_bytes:
            raise ResponseParseError(
                f"{self.provider} sent an answer larger than {self.max_bytes} bytes "
                "(ModelSettings.max_response_bytes); it was not read further.",
                provider=self.provider,
            )

    def guard(self, response: httpx.Response) -> None:
        """Bound `response`'s body: each read by time, the whole by size."""
        inner = cast("httpx.AsyncByteStream", response.stream)
        response.stream = _guarded_stream()(inner, self)  # type: ignore[call-arg]


@dataclass(eq=False)
class _Waiting:
    """The running `CallLimits.wait`: its task, its end, and whether the timer fired."""

    task: asyncio.Task[Any]
    end: float
    is_deadline: bool
    fired: bool = False


@cache
def _guarded_stream() -> type[httpx.AsyncByteStream]:
    """The class of guarded bodies (made on first use: httpx is imported lazily)."""
    import httpx

    class GuardedStream(httpx.AsyncByteStream):
        """An httpx byte stream whose reads are bounded by `CallLimits`."""

        def __init__(self, inner: httpx.AsyncByteStream, limits: CallLimits) -> None:
            self._inner = inner
            self._limits = limits

        async def __aiter__(self) -> AsyncIterator[bytes]:
            chunks = self._inner.__aiter__()
            limits = self._limits
            while True:
                try:
                    chunk = await limits.wait(chunks.__anext__())
                except StopAsyncIteration:
                    return
                limits.count(len(chunk))
                yield chunk

        async def aclose(self) -> None:
            await self._inner.aclose()

    return GuardedStream


Attempt = Callable[[CallLimits], AsyncGenerator[StreamPart, None]]
"""One try of a model call: stream parts under the given limits."""


async def with_retries(
    attempt: Attempt,
    *,
    settings: ModelSettings | None,
    policy: RetryPolicy | None,
    provider: str,
    streamed: bool = True,
) -> AsyncGenerator[StreamPart, None]:
    """Run `attempt` until it succeeds, retrying by the policy while nothing was passed on.

    The policy is ``settings.retry``, else `policy` (the client's), else `RetryPolicy()`. A
    stall of a call that is not `streamed` is not retried: the server sends nothing until it
    has generated the whole answer, so it may just be slow, and trying again costs as much.

    Yields:
        The parts of the successful attempt, and a `RetryNotice` before each retry.
    """
    settings = settings or _NO_SETTINGS
    policy = settings.retry or policy or DEFAULT_RETRY
    limits = CallLimits.first(settings, provider)
    retry = 0
    while True:
        passed_on = False
        try:
            async with aclosing(attempt(limits)) as parts:
                async for part in parts:
                    passed_on = passed_on or not isinstance(part, LLMResponse)
                    yield part
            return
        except ProviderError as exc:
            give_up = passed_on or (not streamed and isinstance(exc, ProviderTimeoutError))
            delay = None if give_up else policy.delay(retry, exc, remaining=limits.remaining())
            if delay is None:
                raise
            notice = RetryNotice(
                attempt=retry + 1,
                delay=delay,
                error=str(exc),
                error_type=type(exc).__name__,
                status=exc.status,
            )
        finally:
            limits.release()  # the attempt is over: its timer with it
        retry += 1
        logger.info("%s: retry %d in %.2f s after %s", provider, retry, delay, notice.error)
        yield notice
        await asyncio.sleep(delay)
        limits = limits.again()


class _Retrying(Protocol):
    """A client with a retry policy and a provider name."""

    @property
    def retry(self) -> RetryPolicy | None: ...

    @property
    def provider_name(self) -> str: ...


def retrying(
    client: _Retrying,
    attempt: Attempt,
    settings: ModelSettings | None,
    *,
    streamed: bool = True,
) -> AsyncGenerator[StreamPart, None]:
    """`with_retries` by `client`'s retry policy, named by its provider."""
    return with_retries(
        attempt,
        settings=settings,
        policy=client.retry,
        provider=client.provider_name,
        streamed=streamed,
    )


async def final_response(parts: AsyncGenerator[StreamPart, None]) -> LLMResponse:
    """The `LLMResponse` at the end of `parts` (deltas and notices are dropped)."""
    response: LLMResponse | None = None
    async with aclosing(parts):
        async for part in parts:
            if isinstance(part, LLMResponse):
                response = part
    if response is None:  # pragma: no cover - every attempt ends with its LLMResponse
        raise ResponseParseError("The model call ended without an answer.")
    return response
