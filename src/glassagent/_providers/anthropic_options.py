"""`AnthropicOptions`: what only Anthropic's Messages API understands, and how it is sent."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from glassagent._core.errors import UserError
from glassagent._core.options import (
    ProviderOptions,
    add_unset,
    check_integer,
    check_mapping,
    check_number,
    check_text,
)

PROVIDER = "anthropic"


@dataclass(frozen=True, kw_only=True)
class AnthropicOptions(ProviderOptions):
    """Options for `AnthropicClient`: fields of Anthropic's Messages API request.

    `top_k`, `top_p`, `metadata`, `service_tier` and `cache_control` go into the request body
    under their own names; `extra_body` adds any other field. `cache_system` and
    `cache_tools` place prompt-cache breakpoints (``cache_control`` on a block) by hand: with
    any of the three cache fields set, the automatic breakpoints of
    `ModelSettings.prompt_cache` are not placed (setting both is a `UserError`).
    """

    kind: Literal["anthropic"] = "anthropic"
    """Which provider family these options are for."""
    top_k: int | None = None
    """Sample only from this many most likely tokens. Anthropic refuses it with thinking on."""
    top_p: float | None = None
    """Nucleus sampling: only the most likely tokens adding up to this probability (0 to 1);
    with thinking on, Anthropic takes 0.95 to 1."""
    metadata: Mapping[str, Any] | None = None
    """Anthropic's ``metadata`` object, e.g. ``{"user_id": "4f1c..."}`` (an opaque id of
    your end user; no name or email address)."""
    service_tier: str | None = None
    """Which capacity serves the request: ``"auto"`` (priority capacity when your account
    has it) or ``"standard_only"``."""
    cache_control: Mapping[str, Any] | None = None
    """Anthropic's top-level ``cache_control``, sent as given: automatic prompt caching, whose
    breakpoint sits on the last cacheable block and moves forward as the conversation grows,
    e.g. ``{"type": "ephemeral"}`` or ``{"type": "ephemeral", "ttl": "1h"}``."""
    cache_system: bool | Literal["5m", "1h"] | None = None
    """A prompt-cache breakpoint on the system prompt: ``True`` for Anthropic's default
    lifetime (five minutes), ``"5m"`` or ``"1h"`` for that one, ``False`` for none. The
    system prompt then goes as one ``text`` block carrying ``cache_control``; nothing is
    marked in a request without one."""
    cache_tools: bool | Literal["5m", "1h"] | None = None
    """A prompt-cache breakpoint on the last tool definition, which caches them all (values
    as for `cache_system`); nothing is marked in a request without tools."""
    extra_body: Mapping[str, Any] | None = None
    """Further body fields, sent as given; one glassagent already sets is refused."""

    merged_mappings = ("extra_body",)

    def __post_init__(self) -> None:
        super().__post_init__()
        owner = "AnthropicOptions"
        check_integer(owner, "top_k", self.top_k, 1)
        check_number(owner, "top_p", self.top_p, 0.0, 1.0)
        check_mapping(owner, "metadata", self.metadata)
        check_text(owner, "service_tier", self.service_tier)
        check_mapping(owner, "cache_control", self.cache_control)
        for name in ("cache_system", "cache_tools"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, bool) or value in ("5m", "1h")):
                raise UserError(f"{owner}.{name} must be True, False, '5m' or '1h', not {value!r}.")
        check_mapping(owner, "extra_body", self.extra_body)

    def overlaps(self, settings: Any) -> Sequence[tuple[str, str]]:
        """`cache_system`, `cache_tools` or `cache_control` with `ModelSettings.prompt_cache`.

        Both place prompt-cache breakpoints: one of them must.
        """
        if settings.prompt_cache is None:
            return ()
        return [
            ("prompt_cache", f"AnthropicOptions.{name}")
            for name in ("cache_system", "cache_tools", "cache_control")
            if getattr(self, name) is not None
        ][:1]


def _breakpoint(lifetime: bool | str) -> dict[str, Any]:
    """The ``cache_control`` of a block: ephemeral, with a ``ttl`` when one was named."""
    mark: dict[str, Any] = {"type": "ephemeral"}
    if isinstance(lifetime, str):
        mark["ttl"] = lifetime
    return mark


def add_options(body: dict[str, Any], options: AnthropicOptions | None) -> None:
    """Put `options` into a finished request `body`, refusing fields glassagent already set.

    Raises:
        ConfigurationError: For a field of `options` or a key of `extra_body` that the body
            already has (``model``, ``messages``, ``stream``, ...).
    """
    if options is None:
        return
    if options.cache_system and body.get("system"):
        text = body["system"]
        body["system"] = [
            {"type": "text", "text": text, "cache_control": _breakpoint(options.cache_system)}
        ]
    if options.cache_tools and body.get("tools"):
        last = {**body["tools"][-1], "cache_control": _breakpoint(options.cache_tools)}
        body["tools"] = [*body["tools"][:-1], last]
    given = {
        "top_k": options.top_k,
        "top_p": options.top_p,
        "metadata": None if options.metadata is None else dict(options.metadata),
        "service_tier": options.service_tier,
        "cache_control": None if options.cache_control is None else dict(options.cache_control),
    }
    add_unset(body, {k: v for k, v in given.items() if v is not None}, "AnthropicOptions", PROVIDER)
    add_unset(body, options.extra_body or {}, "AnthropicOptions.extra_body", PROVIDER)
