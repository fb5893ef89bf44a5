"""`OpenAIOptions`: what only OpenAI's Chat API (and the servers that speak it) understands."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from glassagent._core.options import (
    ProviderOptions,
    check_integer,
    check_mapping,
    check_number,
    check_text,
)


@dataclass(frozen=True, kw_only=True)
class OpenAIOptions(ProviderOptions):
    """Options for `OpenAICompatibleClient` and `AzureOpenAIClient` (OpenAI's Chat API).

    Every field that is set goes into the request body under its own name; `extra_body` adds
    any other field your server accepts (e.g. llama.cpp's ``chat_template_kwargs``).
    """

    kind: Literal["openai"] = "openai"
    """Which provider family these options are for."""
    top_p: float | None = None
    """Nucleus sampling: only the most likely tokens adding up to this probability (0 to 1)."""
    seed: int | None = None
    """Seed for reproducible sampling, where the server supports it."""
    presence_penalty: float | None = None
    """Penalty (-2 to 2) for tokens that already appeared at all."""
    frequency_penalty: float | None = None
    """Penalty (-2 to 2) for tokens by how often they already appeared."""
    reasoning_effort: str | None = None
    """How hard a reasoning model thinks, e.g. ``"low"``, ``"medium"`` or ``"high"``."""
    response_format: Mapping[str, Any] | None = None
    """The ``response_format`` object, e.g. ``{"type": "json_object"}`` or a ``json_schema``."""
    extra_body: Mapping[str, Any] | None = None
    """Further body fields, sent as given; one glassagent already sets is refused."""

    merged_mappings = ("extra_body",)

    def __post_init__(self) -> None:
        super().__post_init__()
        owner = "OpenAIOptions"
        check_number(owner, "top_p", self.top_p, 0.0, 1.0)
        check_integer(owner, "seed", self.seed, -(2**63))
        check_number(owner, "presence_penalty", self.presence_penalty, -2.0, 2.0)
        check_number(owner, "frequency_penalty", self.frequency_penalty, -2.0, 2.0)
        check_text(owner, "reasoning_effort", self.reasoning_effort)
        check_mapping(owner, "response_format", self.response_format)
        check_mapping(owner, "extra_body", self.extra_body)
