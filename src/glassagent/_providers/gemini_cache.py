"""Explicit context caching for `GeminiClient`: cached contents made once, then reused.

A call that asks for caching (`ModelSettings.prompt_cache`, see `caching.wanted`) puts the
stable start of its prompt into a cached content (``POST cachedContents`` through
google-genai's ``caches.create``): the system instruction, the tools and their tool
config, and, with the ``turns`` breakpoint, the conversation before its last user message.
The request then names the cache (``cached_content``) and sends only the rest: Gemini refuses
a system instruction, tools or a tool config next to a cached content.

Each client keeps a small map (`Caches`) from a hash of (model, system, tools, tool config,
prefix) to the cache's name and expiry, so later calls and runs with the same prefix reuse a
live cache, and a new one is made once it expired. Caching happens only when the prefix is
estimated at the model's minimum or more (`MINIMUM_TOKENS`). A cache that cannot be made
never fails the call: it goes without the cache, and a warning on the ``glassagent`` logger
says why (the key masked).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timezone
from typing import Any

from glassagent._core.caching import cache_policy
from glassagent._core.messages import Message
from glassagent._core.request import ModelRequest
from glassagent._providers import caching
from glassagent._providers import gemini_wire as wire
from glassagent._providers.http import redact

logger = logging.getLogger("glassagent")

MINIMUM_TOKENS: tuple[tuple[str, int], ...] = (
    ("gemini-2.5-flash-lite", 2048),
    ("gemini-2.5-flash", 1024),
    ("gemini-2.5-pro", 4096),
)
"""The smallest cached content each model takes, by part of its name (Gemini's documented
minimums: 1024 tokens for 2.5 Flash, 4096 for 2.5 Pro; 2.5 Flash-Lite refuses less than
2048). Any other model: `FALLBACK_MINIMUM`."""
FALLBACK_MINIMUM = 4096
"""The minimum of a model `MINIMUM_TOKENS` does not name (the largest documented one)."""
DEFAULT_TTL = 300
"""Seconds a cache lives when `PromptCache.ttl` does not say."""
MARGIN = 10.0
"""A cache that expires within this many seconds is not used (a new one is made)."""
RETRY_AFTER = 30.0
"""Seconds before a prefix whose cache failed for another reason than a refusal is tried
again (a refused one, a 4xx, waits its lifetime)."""
CREATE_TIMEOUT = 30.0
"""Seconds making a cache may take at most; past it the call goes without."""
KEPT = 64
"""Caches each client remembers (the most recently used)."""
_MOVED = ("system_instruction", "tools", "tool_config")
"""Config fields that go into the cache, never next to it."""


@dataclass(frozen=True)
class Plan:
    """What one call caches: the cache's hash key, its config, and the messages after it."""

    key: str
    config: dict[str, Any]
    """The ``CreateCachedContentConfig`` fields (as a dict), ``ttl`` included."""
    ttl: int
    rest: Sequence[Message]
    """The messages sent next to the cache."""
    timeout: float = CREATE_TIMEOUT
    """Seconds making the cache may take: `CREATE_TIMEOUT`, or the call's shorter
    `ModelSettings.timeout`."""


def _split(messages: Sequence[Message], turns: bool) -> tuple[Sequence[Message], Sequence[Message]]:
    """The cached prefix (before the last user message, with `turns`) and the rest."""
    if not turns:
        return (), messages
    last = max((i for i, m in enumerate(messages) if m.role == "user"), default=0)
    return messages[:last], messages[last:]


def plan(
    model: str,
    request: ModelRequest,
    messages: Sequence[Message],
    config: dict[str, Any],
    contents: wire.RestContents,
) -> Plan | None:
    """The cache of one call, or `None` when it asks for none or is under the minimum."""
    if "cached_content" in config:  # the caller's own (GeminiOptions.extra_config)
        return None
    policy = cache_policy(request.settings.prompt_cache)
    if policy is None or not policy.breakpoints:
        return None
    prefix, rest = _split(messages, "turns" in policy.breakpoints)
    moved = {name: config[name] for name in _MOVED if name in config}
    if not prefix and not moved:
        return None
    minimum = caching.minimum_tokens(MINIMUM_TOKENS, model, FALLBACK_MINIMUM)
    chosen = caching.wanted(
        request.settings,
        minimum,
        lambda enough: caching.estimate_tokens(
            prefix, request.tools, config.get("system_instruction"), enough
        ),
    )
    if chosen is None:
        return None
    ttl = chosen.ttl or DEFAULT_TTL
    rest_prefix = contents.contents(prefix)
    stable = json.dumps([model, moved, rest_prefix], sort_keys=True, default=str)
    key = hashlib.sha256(stable.encode("utf-8")).hexdigest()
    cache_config = {**moved, "ttl": f"{ttl}s"}
    if prefix:
        cache_config["contents"] = wire.to_contents(prefix)[0]
    deadline = request.settings.timeout
    timeout = CREATE_TIMEOUT if deadline is None else min(CREATE_TIMEOUT, deadline)
    return Plan(key, cache_config, ttl, rest, timeout)


def without_moved(config: dict[str, Any], name: str) -> dict[str, Any]:
    """The call's config naming cache `name`, without what went into the cache."""
    kept = {k: v for k, v in config.items() if k not in _MOVED}
    return {**kept, "cached_content": name}


class Caches:
    """The cached contents of one client: hash key -> (name or `None`, expiry in epoch s).

    A `None` name stands for a prefix whose cache could not be made, until its time is up.
    """

    def __init__(self) -> None:
        """An empty map."""
        self._entries: OrderedDict[str, tuple[str | None, float]] = OrderedDict()
        self._pending: dict[str, asyncio.Task[str | None]] = {}
        self.created = 0
        """Caches made (for tests and diagnostics)."""

    def __len__(self) -> int:
        """The number of prefixes remembered."""
        return len(self._entries)

    def _live(self, key: str) -> tuple[str | None, float] | None:
        entry = self._entries.get(key)
        if entry is None or entry[1] - MARGIN <= time.time():
            return None
        self._entries.move_to_end(key)
        return entry

    def _remember(self, key: str, name: str | None, expires: float) -> None:
        self._entries[key] = (name, expires)
        self._entries.move_to_end(key)
        while len(self._entries) > KEPT:
            self._entries.popitem(last=False)

    async def name(self, sdk: Any, model: str, chosen: Plan, secret: str | None) -> str | None:
        """The name of a live cache of `chosen`, made when there is none; `None`: without.

        Calls of one prefix on one event loop share one ``caches.create``.
        """
        entry = self._live(chosen.key)
        if entry is not None:
            return entry[0]
        loop = asyncio.get_running_loop()
        task = self._pending.get(chosen.key)
        if task is None or task.get_loop() is not loop:
            task = loop.create_task(self._create(sdk, model, chosen, secret))
            self._pending[chosen.key] = task
        return await asyncio.shield(task)

    async def _create(self, sdk: Any, model: str, chosen: Plan, secret: str | None) -> str | None:
        from google.genai import types

        try:
            config = types.CreateCachedContentConfig(**chosen.config)
            made = await asyncio.wait_for(
                sdk.aio.caches.create(model=model, config=config), chosen.timeout
            )
            name = made.name
            if not isinstance(name, str) or not name:
                raise ValueError("the answer named no cache")
        except Exception as exc:
            self._failed(chosen, model, exc, secret)
            return None
        finally:
            self._pending.pop(chosen.key, None)
        self.created += 1
        expires = made.expire_time
        if expires is None:
            at = time.time() + chosen.ttl
        else:
            at = (expires if expires.tzinfo else expires.replace(tzinfo=timezone.utc)).timestamp()
        self._remember(chosen.key, name, at)
        return name

    def _failed(self, chosen: Plan, model: str, exc: Exception, secret: str | None) -> None:
        code = getattr(exc, "code", None)
        refused = isinstance(code, int) and 400 <= code < 500
        wait = chosen.ttl if refused else RETRY_AFTER
        self._remember(chosen.key, None, time.time() + wait + MARGIN)
        detail = redact(f"{type(exc).__name__}: {exc}", secret)[:500]
        logger.warning(
            "gemini: no prompt cache for %s (%s); calls go without it for %d s",
            model,
            detail,
            int(wait),
        )
