"""Explicit context caching for `GeminiClient`: cached contents made once, then reused.

A call that asks for caching (`ModelSettings.prompt_cache`, see `caching.wanted`) puts the
stable start of its prompt into a cached content (``POST cachedContents`` through
google-genai's ``caches.create``): the system instruction, the tools and their tool config
(`AUTOMATIC`), and, when `PromptCache.breakpoints` names ``"turns"``, the conversation before
its last user message. The request then names the cache (``cached_content``) and sends only
the rest: Gemini refuses a system instruction, tools or a tool config next to a cached
content, so a tool config other than the default (``AUTO``) is part of the cache.

Each client keeps a small map (`Caches`) from a hash of (model, system, tools, tool config,
prefix) to the cache made (`Made`: its name and expiry), so later calls and runs with the
same prefix reuse a live cache, and a new one is made once it expired. The hash covers only
what the cache holds: the conversation, with ``"turns"`` only, by `RestContents.fingerprint`
(each message hashed once); the cache's ``contents`` are built only when it is made.

Gemini bills a cache's tokens at the input price when it is made (and its storage while it
lives): the first call answered with a new cache counts them as written (`charged`:
``cache_write_tokens``, also in ``input_tokens``), so its cost includes the creation.
Caching happens only when the cached part is estimated at the model's minimum or more
(`MINIMUM_TOKENS`). A cache that cannot be made never fails the call: it goes without the
cache, and a warning on the ``glassagent`` logger says why (the key masked).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import timezone
from typing import Any

from glassagent._core.caching import Breakpoint
from glassagent._core.messages import LLMResponse, Message, Usage
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
_AUTO_CONFIG = {"function_calling_config": {"mode": "AUTO"}}
"""The tool config Gemini applies when there is none: left out of the cache and its key."""
AUTOMATIC: tuple[Breakpoint, ...] = ("system", "tools")
"""What ``PromptCache(breakpoints=None)`` (the automatic rule, ``prompt_cache=None`` or
``True``) caches on Gemini: not ``"turns"``, the conversation before the last user message,
which is another one on every turn (a cache made, and billed, per turn)."""


@dataclass(frozen=True)
class Plan:
    """What one call caches: the cache's hash key, what goes into it, and the messages after."""

    key: str
    config: dict[str, Any]
    """The ``CreateCachedContentConfig`` fields (as a dict) but the ``contents``; ``ttl``
    included."""
    ttl: int
    rest: Sequence[Message]
    """The messages sent next to the cache."""
    prefix: Sequence[Message] = ()
    """The messages in the cache (``"turns"``), made ``contents`` only when it is made."""
    timeout: float = CREATE_TIMEOUT
    """Seconds making the cache may take: `CREATE_TIMEOUT`, or the call's shorter
    `ModelSettings.timeout`."""

    def cache_config(self) -> dict[str, Any]:
        """The whole ``CreateCachedContentConfig`` (as a dict), the ``contents`` included."""
        if not self.prefix:
            return self.config
        return {**self.config, "contents": wire.to_contents(self.prefix)[0]}


def _split(messages: Sequence[Message], turns: bool) -> tuple[Sequence[Message], Sequence[Message]]:
    """The cached prefix (before the last user message, with `turns`) and the rest."""
    if not turns:
        return (), messages
    last = len(messages) - 1
    while last > 0 and messages[last].role != "user":
        last -= 1
    last = max(last, 0)
    return messages[:last], messages[last:]


def _moved(config: dict[str, Any]) -> dict[str, Any]:
    """The fields of `config` the cache holds (a default tool config left out)."""
    moved = {name: config[name] for name in _MOVED if name in config}
    if moved.get("tool_config") == _AUTO_CONFIG:
        del moved["tool_config"]
    return moved


def plan(
    model: str,
    request: ModelRequest,
    messages: Sequence[Message],
    config: dict[str, Any],
    contents: wire.RestContents,
) -> Plan | None:
    """The cache of one call, or `None` when it asks for none or is under the minimum.

    Cheap when the cache is live: it hashes what the cache holds (`contents` hashes each
    message once) and builds no ``contents``.
    """
    if "cached_content" in config:  # the caller's own (GeminiOptions.extra_config)
        return None
    points = caching.breakpoints_of(request.settings, AUTOMATIC)
    if not points:
        return None
    prefix, rest = _split(messages, "turns" in points)
    moved = _moved(config)
    if not prefix and not moved:
        return None
    minimum = caching.minimum_tokens(MINIMUM_TOKENS, model, FALLBACK_MINIMUM)
    chosen = caching.wanted(
        request.settings,
        minimum,
        lambda enough: caching.estimate_tokens(
            prefix, request.tools, config.get("system_instruction"), enough
        ),
        AUTOMATIC,
    )
    if chosen is None:
        return None
    ttl = chosen.ttl or DEFAULT_TTL
    stable = json.dumps([model, moved], sort_keys=True, default=str)
    digest = hashlib.sha256(stable.encode("utf-8"))
    if prefix:
        digest.update(contents.fingerprint(prefix))
    deadline = request.settings.timeout
    timeout = CREATE_TIMEOUT if deadline is None else min(CREATE_TIMEOUT, deadline)
    cache_config = {**moved, "ttl": f"{ttl}s"}
    return Plan(digest.hexdigest(), cache_config, ttl, rest, prefix, timeout)


def without_moved(config: dict[str, Any], name: str) -> dict[str, Any]:
    """The call's config naming cache `name`, without what went into the cache."""
    kept = {k: v for k, v in config.items() if k not in _MOVED}
    return {**kept, "cached_content": name}


@dataclass
class Made:
    """A cache this client made, or failed to make: its name (`None`: failed) and expiry.

    `tokens` is what Gemini billed for making it, counted once by the first call answered
    with it (`charged`).
    """

    name: str | None
    expires: float
    """When it expires, in epoch seconds (a failed one: when it is tried again)."""
    tokens: int = 0
    """The cache's tokens (``usageMetadata.totalTokenCount`` of ``caches.create``) not yet
    counted by a call; ``-1``: made, its count not reported (the first call counts the cached
    tokens it reads)."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def claim(self, read: int) -> int:
        """The creation's tokens, once: the first caller gets them, every later one 0.

        Args:
            read: The cached tokens the claiming call read: the count when none was reported.
        """
        if not self.tokens:
            return 0
        with self._lock:
            tokens, self.tokens = self.tokens, 0
        return read if tokens < 0 else tokens


def charged(response: LLMResponse, made: Made | None) -> LLMResponse:
    """`response` with the tokens of making its cache, when it is the first to count them.

    They are billed at the input price when the cache is made: ``cache_write_tokens``, also
    added to ``input_tokens`` (the prompt's tokens read from the cache stay in both
    ``input_tokens`` and ``cache_read_tokens``), so the call's cost includes the creation.
    """
    if made is None:
        return response
    usage = response.usage
    tokens = made.claim(usage.cache_read_tokens)
    if tokens <= 0:
        return response
    return replace(
        response,
        usage=Usage(
            usage.input_tokens + tokens,
            usage.output_tokens,
            usage.thinking_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cache_write_tokens=usage.cache_write_tokens + tokens,
        ),
    )


class Caches:
    """The cached contents of one client, by hash key: each a `Made` (a failed one too).

    A failed cache (`Made.name` `None`) stands for a prefix whose cache could not be made,
    until its time is up.
    """

    def __init__(self) -> None:
        """An empty map."""
        self._entries: OrderedDict[str, Made] = OrderedDict()
        self._pending: dict[str, asyncio.Task[Made | None]] = {}
        self.created = 0
        """Caches made (for tests and diagnostics)."""

    def __len__(self) -> int:
        """The number of prefixes remembered."""
        return len(self._entries)

    def _live(self, key: str) -> Made | None:
        entry = self._entries.get(key)
        if entry is None or entry.expires - MARGIN <= time.time():
            return None
        self._entries.move_to_end(key)
        return entry

    def _remember(self, key: str, made: Made) -> None:
        self._entries[key] = made
        self._entries.move_to_end(key)
        while len(self._entries) > KEPT:
            self._entries.popitem(last=False)

    async def get(self, sdk: Any, model: str, chosen: Plan, secret: str | None) -> Made | None:
        """A live cache of `chosen`, made when there is none; `None`: go without.

        Calls of one prefix on one event loop share one ``caches.create``.
        """
        entry = self._live(chosen.key)
        if entry is not None:
            return entry if entry.name is not None else None
        loop = asyncio.get_running_loop()
        task = self._pending.get(chosen.key)
        if task is None or task.get_loop() is not loop:
            task = loop.create_task(self._create(sdk, model, chosen, secret))
            self._pending[chosen.key] = task
        return await asyncio.shield(task)

    async def _create(self, sdk: Any, model: str, chosen: Plan, secret: str | None) -> Made | None:
        from google.genai import types

        try:
            config = types.CreateCachedContentConfig(**chosen.cache_config())
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
        tokens = getattr(made.usage_metadata, "total_token_count", None)
        counted = tokens if isinstance(tokens, int) and tokens > 0 else -1
        entry = Made(name, at, counted)
        self._remember(chosen.key, entry)
        return entry

    def _failed(self, chosen: Plan, model: str, exc: Exception, secret: str | None) -> None:
        code = getattr(exc, "code", None)
        refused = isinstance(code, int) and 400 <= code < 500
        wait = chosen.ttl if refused else RETRY_AFTER
        self._remember(chosen.key, Made(None, time.time() + wait + MARGIN))
        detail = redact(f"{type(exc).__name__}: {exc}", secret)[:500]
        logger.warning(
            "gemini: no prompt cache for %s (%s); calls go without it for %d s",
            model,
            detail,
            int(wait),
        )
