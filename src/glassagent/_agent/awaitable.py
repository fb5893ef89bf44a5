"""`AwaitableRun`: the coroutine face of a run handle (`AgentRun`, `DurableAgentRun`).

A run handle is awaited for its result and is also a coroutine, so ``asyncio.run(run)`` and
``asyncio.create_task(run)`` work. Nothing happens until it is awaited, iterated or
scheduled; a handle dropped unused warns as a coroutine never awaited does.
"""

from __future__ import annotations

import warnings
from collections.abc import Coroutine
from types import TracebackType
from typing import Any, ClassVar, TypeVar

_T_co = TypeVar("_T_co", covariant=True)


class AwaitableRun(Coroutine[Any, Any, _T_co]):
    """``send``, ``throw`` and the unused-handle warning, over one awaiting coroutine."""

    _coroutine: Coroutine[Any, Any, _T_co] | None = None
    _claimed: bool = False  # awaited, iterated, scheduled or closed
    _how_to_use: ClassVar[str] = "await it"
    """How to use the handle, for the warning about one never used."""

    def _awaiting(self) -> Coroutine[Any, Any, _T_co]:  # pragma: no cover - overridden
        """A new coroutine that waits for the run's result (what awaiting does)."""
        raise NotImplementedError

    def _as_coroutine(self) -> Coroutine[Any, Any, _T_co]:
        if self._coroutine is None:
            self._claimed = True
            self._coroutine = self._awaiting()
        return self._coroutine

    def send(self, value: Any) -> Any:
        """Coroutine protocol, for ``asyncio.run`` and tasks: the same as awaiting the run.

        Args:
            value: The value to send (asyncio sends `None`).
        """
        return self._as_coroutine().send(value)

    def throw(self, typ: Any, val: Any = None, tb: TracebackType | None = None, /) -> Any:
        """Coroutine protocol: raise an exception where the awaiting is suspended.

        Args:
            typ: The exception (or its type).
            val: The exception value, with a type as `typ` (deprecated form).
            tb: A traceback for the exception (deprecated form).
        """
        coroutine = self._as_coroutine()
        if val is None and tb is None:
            return coroutine.throw(typ)
        return coroutine.throw(typ, val, tb)  # pragma: no cover - the deprecated form

    def __del__(self) -> None:
        if not getattr(self, "_claimed", True):
            warnings.warn(
                f"{self!r} was never awaited or iterated, so it did not run: use "
                f"{self._how_to_use}",
                RuntimeWarning,
                stacklevel=2,
                source=self,
            )
