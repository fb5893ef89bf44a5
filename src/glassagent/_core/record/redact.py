"""The `redact` hook: what leaves the process (recordings, displays, exports) passes through it."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

from glassagent._core.errors import UserError

if TYPE_CHECKING:
    from glassagent._core.events import Event

Redact: TypeAlias = Callable[[dict[str, Any]], dict[str, Any]]
"""A hook that takes one standard event dict (a copy, it may change it) and returns the dict to
record, display or export. The agent's hook (``Agent(redact=...)``) is applied to every line of
`save_events`, to the notebook view and to exporters; the events the program sees are never
changed."""


def redacted(event: Event | Mapping[str, Any], redact: Redact | None = None) -> dict[str, Any]:
    """The standard dict of `event` (its `to_dict()`), passed through `redact`.

    Recorders, views and exporters call it for every event they let out, so one hook covers
    them all. The hook gets a copy: the event itself is never changed.

    Args:
        event: An event, or an event dict.
        redact: The hook; `None` returns the dict unchanged.

    Raises:
        UserError: When the hook raises or does not return a dict (nothing is let out then).
    """
    data = dict(event) if isinstance(event, Mapping) else event.to_dict()
    if redact is None:
        return data
    kind = data.get("type", "event")
    try:
        out = redact(copy.deepcopy(data))
    except Exception as exc:
        raise UserError(
            f"The redact hook failed on a {kind} event ({type(exc).__name__}); nothing of the "
            "event was let out."
        ) from exc
    if not isinstance(out, dict):
        raise UserError(
            f"The redact hook must return a dict, got {type(out).__name__} for a {kind} event."
        )
    return out


@dataclass(frozen=True)
class Redactor:
    """A ready-made `Redact` hook: hides matches of patterns, and whole fields, everywhere.

    Every string in the event dict (at any depth: messages, arguments, results, text) has each
    match of `patterns` replaced by `replacement`; the value of every key named in `fields`
    (at any depth) is replaced whole, and recorded wire bodies are left out when `fields` is set.

    Example:
        ```python
        agent = Agent(client, tools, redact=Redactor([r"sk-[A-Za-z0-9_-]+"], fields=["system"]))
        ```
    """

    patterns: Iterable[str | re.Pattern[str]] = ()
    """Regular expressions whose matches are hidden."""
    fields: Iterable[str] = ()
    """Names of keys whose values are hidden whole (e.g. ``"args"``, ``"system"``)."""
    replacement: str = "[redacted]"
    """What a hidden match or value becomes."""
    _compiled: tuple[re.Pattern[str], ...] = field(init=False, repr=False, compare=False)
    _names: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        patterns, names = tuple(self.patterns), tuple(self.fields)
        try:
            compiled = tuple(re.compile(p) for p in patterns)
        except (re.error, TypeError) as exc:
            raise UserError(f"Redactor: not a regular expression: {exc}") from None
        object.__setattr__(self, "patterns", patterns)
        object.__setattr__(self, "fields", names)
        object.__setattr__(self, "_compiled", compiled)
        object.__setattr__(self, "_names", frozenset(names))

    def __call__(self, event: dict[str, Any]) -> dict[str, Any]:
        """Return `event` with the matches and fields hidden.

        With `fields`, an ``llm_response``'s recorded wire bodies (``wire``) are left out:
        they hold the same content under each provider's own names (the system prompt is
        ``messages[0]`` or ``system_instruction`` there, not ``system``).
        """
        hidden: dict[str, Any] = self._hide(event)
        if self._names:
            hidden.pop("wire", None)
        return hidden

    def _hide(self, value: Any) -> Any:
        if isinstance(value, str):
            for pattern in self._compiled:
                value = pattern.sub(self.replacement, value)
            return value
        if isinstance(value, dict):
            names = self._names
            return {k: self.replacement if k in names else self._hide(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._hide(v) for v in value]
        return value


class TreeRedact:
    """The redact hook of a run with sub-agents: each event passes its own runs' hooks first.

    An event of a sub-agent's run goes through the hooks of the runs from the one that
    emitted it up to (not including) this run, then through this run's own hook: what a
    sub-agent hides stays hidden in its parent's recordings and views.
    """

    __slots__ = ("_nested", "_own")

    def __init__(self, own: Redact | None, nested: Mapping[str, tuple[Redact, ...]]) -> None:
        """Create the hook.

        Args:
            own: The run's own hook (`None`: none).
            nested: The hooks of each sub-agent run by its id, innermost first (read live:
                runs started later are seen).
        """
        self._own = own
        self._nested = nested

    def __call__(self, data: dict[str, Any]) -> dict[str, Any]:
        """Pass `data` through its runs' hooks, then this run's.

        Raises:
            TypeError: When a hook does not return a dict.
        """
        for hook in self._nested.get(data.get("run_id", ""), ()):
            data = hook(data)
            if not isinstance(data, dict):
                raise TypeError(f"a sub-agent's redact hook returned {type(data).__name__}")
        return data if self._own is None else self._own(data)
