"""`PromptCache`: how model calls ask their provider to cache the stable start of a prompt."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from glassagent._core.errors import UserError

Breakpoint = Literal["system", "tools", "turns"]
"""A part of the prompt a cache may end after: the system prompt, the tool definitions, or
the conversation's last user turns."""

BREAKPOINTS: tuple[Breakpoint, ...] = get_args(Breakpoint)
"""Every breakpoint, in the order a prompt holds them."""


@dataclass(frozen=True, kw_only=True)
class PromptCache:
    """How a model call asks for prompt caching: `ModelSettings.prompt_cache` takes one.

    Each field left at `None` keeps the automatic choice. ``PromptCache()`` is the automatic
    rule itself; ``PromptCache(min_tokens=0)`` caches prompts of any size, as
    ``prompt_cache=True`` does. A value the class cannot take is a `UserError`.
    """

    breakpoints: tuple[Breakpoint, ...] | None = None
    """What the cache covers: ``"system"`` (the system prompt), ``"tools"`` (the tool
    definitions) and ``"turns"`` (the conversation up to its last user turns). Anthropic
    marks each one it finds in the request; Gemini caches the system prompt, the tools and,
    with ``"turns"``, the conversation before the last user message. OpenAI caches prefixes
    on its own, so it reads none of them. A list is taken as a tuple. `None`: the provider's
    choice: all three on Anthropic; the system prompt and the tools on Gemini, where each
    cache made is billed and the conversation before the last user message is another one
    on every turn."""
    ttl: int | None = None
    """How long a cache lives, in seconds. Gemini: any number (`None`: 300); Anthropic: 300
    or 3600, its two lifetimes (`None`: 300); OpenAI keeps its cache as long as it decides."""
    key: str | None = None
    """OpenAI's ``prompt_cache_key``, which routes requests of one prefix to one cache. `None`:
    a hash of the system prompt and the tool definitions (``glassagent-`` and 32 hex
    digits), which holds no text of them. Put no secret in a key of your own."""
    min_tokens: int | None = None
    """Request caching only for prompts of at least this many tokens (estimated at four
    characters a token); `None`: the provider's minimum for the model, below which it caches
    nothing; ``0``: always."""

    def __post_init__(self) -> None:
        points = self.breakpoints
        if points is not None:
            self._check_breakpoints(points)
        for name, low in (("ttl", 1), ("min_tokens", 0)):
            value = getattr(self, name)
            if value is not None and (
                not isinstance(value, int) or isinstance(value, bool) or value < low
            ):
                raise UserError(
                    f"PromptCache.{name} must be an integer of at least {low}, not {value!r}."
                )
        key = self.key
        if key is not None and (not isinstance(key, str) or not key.strip()):
            raise UserError(f"PromptCache.key must be a non-empty string, not {key!r}.")

    def _check_breakpoints(self, points: object) -> None:
        """Check `points` and keep them as a tuple without repeats."""
        if isinstance(points, str) or not isinstance(points, tuple | list):
            raise UserError(
                f"PromptCache.breakpoints must be a tuple of {list(BREAKPOINTS)}, not {points!r}."
            )
        unknown = [p for p in points if p not in BREAKPOINTS]
        if unknown:
            raise UserError(
                f"PromptCache.breakpoints takes {list(BREAKPOINTS)}, not {unknown[0]!r}."
            )
        object.__setattr__(self, "breakpoints", tuple(dict.fromkeys(points)))


AUTOMATIC = PromptCache()
"""The automatic rule: the provider's automatic breakpoints, above its minimum."""
ALWAYS = PromptCache(min_tokens=0)
"""What ``prompt_cache=True`` asks for: the automatic breakpoints, whatever the prompt's size."""


def cache_policy(value: bool | PromptCache | None) -> PromptCache | None:
    """The caching a `ModelSettings.prompt_cache` value asks for; `None`: none.

    `None` is `AUTOMATIC`, ``True`` is `ALWAYS`, ``False`` turns caching off.
    """
    if value is None:
        return AUTOMATIC
    if value is True:
        return ALWAYS
    if value is False:
        return None
    return value


def check_prompt_cache(value: object) -> None:
    """Raise `UserError` unless `value` can be a `ModelSettings.prompt_cache`."""
    if value is not None and not isinstance(value, bool | PromptCache):
        raise UserError(
            f"ModelSettings.prompt_cache must be True, False, None or a PromptCache, not {value!r}."
        )


__all__ = ["BREAKPOINTS", "Breakpoint", "PromptCache", "cache_policy"]
