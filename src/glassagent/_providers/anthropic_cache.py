"""Prompt-cache breakpoints of Anthropic's Messages API, placed by one documented rule.

A breakpoint is ``cache_control: {"type": "ephemeral"}`` on a block; Anthropic caches the
prompt up to it (tools, then system, then messages) and reads the longest cached prefix on
later calls. `add_breakpoints` marks, as `PromptCache.breakpoints` asks:

- ``system``: the system prompt (sent as one ``text`` block carrying the mark);
- ``tools``: the last tool definition, which caches them all;
- ``turns``: the last content block of the last user turn, and of the one before it, so
  that a call reads what the call before it wrote.

That is four breakpoints at most, the API's limit. Nothing is marked when the estimated
prompt is under the model's minimum (`MINIMUM_TOKENS`; Anthropic would cache nothing and
cache writes cost more), when `ModelSettings.prompt_cache` is ``False``, or when
`AnthropicOptions` place breakpoints of their own (``cache_system``, ``cache_tools``,
``cache_control``).
"""

from __future__ import annotations

from typing import Any

from glassagent._core.errors import ConfigurationError
from glassagent._core.request import ModelRequest
from glassagent._providers import caching
from glassagent._providers.anthropic_options import AnthropicOptions

PROVIDER = "anthropic"
MINIMUM_TOKENS: tuple[tuple[str, int], ...] = (
    ("opus-4-5", 4096),
    ("opus-4-6", 4096),
    ("haiku-4-5", 4096),
    ("3-5-haiku", 2048),
    ("3-haiku", 2048),
)
"""The shortest prompt each model caches, by part of its name (Anthropic's documented
minimums: 4096 tokens for Claude Opus 4.5 and 4.6 and Haiku 4.5, 2048 for Haiku 3 and 3.5).
Any other model: `FALLBACK_MINIMUM`."""
FALLBACK_MINIMUM = 1024
"""The minimum of the Sonnet and Opus models, and of a model `MINIMUM_TOKENS` does not name."""
_LIFETIMES = {300: "5m", 3600: "1h"}


def _manual(options: AnthropicOptions | None) -> bool:
    """Whether `options` place breakpoints of their own."""
    if options is None:
        return False
    return any(
        v is not None for v in (options.cache_system, options.cache_tools, options.cache_control)
    )


def _mark(ttl: int | None) -> dict[str, Any]:
    """The ``cache_control`` of a breakpoint.

    Raises:
        ConfigurationError: For a lifetime Anthropic does not offer.
    """
    mark: dict[str, Any] = {"type": "ephemeral"}
    if ttl is None:
        return mark
    lifetime = _LIFETIMES.get(ttl)
    if lifetime is None:
        raise ConfigurationError(
            f"anthropic cannot honour PromptCache(ttl={ttl}): its caches live 300 or 3600 seconds."
        )
    mark["ttl"] = lifetime
    return mark


def add_breakpoints(body: dict[str, Any], model: str, request: ModelRequest) -> None:
    """Mark the breakpoints of `request` in its Messages API `body` (see the module).

    Raises:
        ConfigurationError: For a `PromptCache.ttl` other than 300 or 3600 seconds.
    """
    settings = request.settings
    if _manual(AnthropicOptions.from_settings(settings, PROVIDER)):
        return
    minimum = caching.minimum_tokens(MINIMUM_TOKENS, model, FALLBACK_MINIMUM)
    policy = caching.wanted(
        settings,
        minimum,
        lambda enough: caching.estimate_tokens(
            request.messages, request.tools, request.system, enough
        ),
    )
    if policy is None:
        return
    mark = _mark(policy.ttl)
    if "system" in policy.breakpoints and body.get("system"):
        body["system"] = [{"type": "text", "text": body["system"], "cache_control": mark}]
    tools = body.get("tools")
    if "tools" in policy.breakpoints and tools:
        body["tools"] = [*tools[:-1], {**tools[-1], "cache_control": mark}]
    if "turns" in policy.breakpoints:
        users = [turn for turn in body["messages"] if turn["role"] == "user" and turn["content"]]
        for turn in users[-2:]:
            turn["content"] = [
                *turn["content"][:-1],
                {**turn["content"][-1], "cache_control": mark},
            ]
