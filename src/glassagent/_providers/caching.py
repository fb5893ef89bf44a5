"""What the wires share of prompt caching: the policy, the size estimate and the default key.

Each wire asks `wanted` whether to request caching for a call: `ModelSettings.prompt_cache`
read by `cache_policy`, and the prompt's estimated size (four characters a token, as the
agent's context guard estimates) against the provider's minimum for the model
(`minimum_tokens`), below which the provider caches nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from glassagent._core.caching import BREAKPOINTS, Breakpoint, cache_policy
from glassagent._core.messages import Message, ModelSettings, ToolDefinition

CHARS_PER_TOKEN = 4
"""Characters counted as one token by the estimate (as `glassagent._agent.guard`)."""
KEY_PREFIX = "glassagent-"
"""How a default ``prompt_cache_key`` begins; 32 hex digits of a SHA-256 hash follow."""


def minimum_tokens(table: Sequence[tuple[str, int]], model: str, fallback: int) -> int:
    """The provider's minimum cacheable prompt for `model`, in tokens.

    That of the first entry whose name `model` contains (after any ``models/`` prefix),
    else `fallback`.

    Args:
        table: ``(part of a model name, tokens)`` pairs, the more specific names first.
        model: The model name the client sends.
        fallback: The minimum of a model the table does not name.
    """
    name = model.lower().removeprefix("models/")
    for part, tokens in table:
        if part in name:
            return tokens
    return fallback


def estimate_tokens(
    messages: Sequence[Message],
    tools: Sequence[ToolDefinition],
    system: str | None,
    enough: int | None = None,
) -> int:
    """The prompt's size in tokens, estimated at four characters a token.

    Counts the text of the system prompt, each message and its tool calls, then the tool
    definitions (their schemas as Python writes them, close to their JSON); attachments are
    not counted. Cheap: it runs before each call that may ask for caching.

    Args:
        messages: The conversation.
        tools: The tool definitions.
        system: The system prompt.
        enough: Stop counting once the estimate reaches this many tokens.
    """
    limit = None if enough is None else enough * CHARS_PER_TOKEN
    chars = len(system or "")
    for message in messages:
        chars += len(message.content)
        for call in message.tool_calls:
            chars += len(call.name) + len(str(call.input))
        if limit is not None and chars >= limit:
            return chars // CHARS_PER_TOKEN
    for tool in tools:
        chars += len(tool.name) + len(tool.description) + len(str(tool.parameters))
    return chars // CHARS_PER_TOKEN


@dataclass(frozen=True)
class Chosen:
    """The caching requested for one call: a `PromptCache` with its breakpoints resolved."""

    breakpoints: tuple[Breakpoint, ...]
    """What the cache covers: the policy's breakpoints, else the provider's automatic ones."""
    ttl: int | None
    """`PromptCache.ttl`."""
    key: str | None
    """`PromptCache.key`."""


def breakpoints_of(
    settings: ModelSettings, automatic: tuple[Breakpoint, ...] = BREAKPOINTS
) -> tuple[Breakpoint, ...]:
    """What the cache of a call with `settings` covers; ``()`` when it asks for no caching.

    Args:
        settings: The call's settings (`ModelSettings.prompt_cache`).
        automatic: The provider's breakpoints when the policy names none.
    """
    policy = cache_policy(settings.prompt_cache)
    if policy is None:
        return ()
    return automatic if policy.breakpoints is None else policy.breakpoints


def wanted(
    settings: ModelSettings,
    minimum: int,
    estimate: Callable[[int], int],
    automatic: tuple[Breakpoint, ...] = BREAKPOINTS,
) -> Chosen | None:
    """The caching to request for one call, or `None` for none.

    Args:
        settings: The call's settings (`ModelSettings.prompt_cache`).
        minimum: The provider's minimum for the model, used when the policy gives none.
        estimate: Returns the prompt's estimated size in tokens, given the size that is
            enough (it may stop counting there); called only when needed.
        automatic: The provider's breakpoints when the policy names none
            (`PromptCache.breakpoints` is `None`); every one by default.
    """
    policy = cache_policy(settings.prompt_cache)
    if policy is None:
        return None
    floor = minimum if policy.min_tokens is None else policy.min_tokens
    if floor > 0 and estimate(floor) < floor:
        return None
    points = automatic if policy.breakpoints is None else policy.breakpoints
    return Chosen(points, policy.ttl, policy.key)


_KEYS: dict[tuple[str | None, tuple[int, ...]], tuple[tuple[ToolDefinition, ...], str]] = {}
"""The keys of the latest system prompts and tool sets, by the prompt and the tools' ids."""
_KEYS_KEPT = 64


def default_key(system: str | None, tools: Sequence[ToolDefinition]) -> str:
    """A stable cache key of a system prompt and tool definitions: ``glassagent-`` + 32 hex.

    The hash holds no text of them; the same prompt and tools always give the same key. The
    keys of the latest prompts and tool sets are kept (an agent sends the same ones on every
    call).
    """
    memo = (system, tuple(id(t) for t in tools))
    kept = _KEYS.get(memo)
    if kept is not None and all(a is b for a, b in zip(kept[0], tools, strict=True)):
        return kept[1]
    stable = json.dumps(
        [system or "", [[t.name, t.description, t.parameters] for t in tools]],
        sort_keys=True,
        separators=(",", ":"),
        default=str,
    )
    key = KEY_PREFIX + hashlib.sha256(stable.encode("utf-8")).hexdigest()[:32]
    if len(_KEYS) >= _KEYS_KEPT:
        _KEYS.clear()
    _KEYS[memo] = (tuple(tools), key)
    return key
