"""`GeminiOptions`: fields of google-genai's ``GenerateContentConfig``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from glassagent._core.errors import UserError
from glassagent._core.options import (
    ProviderOptions,
    check_integer,
    check_mapping,
    check_number,
    check_text,
)


@dataclass(frozen=True, kw_only=True)
class GeminiOptions(ProviderOptions):
    """Options for `GeminiClient`: fields of google-genai's ``GenerateContentConfig``."""

    kind: Literal["gemini"] = "gemini"
    """Which provider family these options are for."""
    top_p: float | None = None
    """Nucleus sampling: only the most likely tokens adding up to this probability (0 to 1)."""
    top_k: int | None = None
    """Sample only from this many most likely tokens."""
    seed: int | None = None
    """Seed for reproducible sampling."""
    presence_penalty: float | None = None
    """Penalty for tokens that already appeared at all."""
    frequency_penalty: float | None = None
    """Penalty for tokens by how often they already appeared."""
    safety_settings: tuple[Mapping[str, Any], ...] | None = None
    """Safety thresholds, e.g. ``({"category": "HARM_CATEGORY_HARASSMENT",
    "threshold": "BLOCK_ONLY_HIGH"},)``."""
    response_mime_type: str | None = None
    """The answer's media type, e.g. ``application/json``."""
    response_json_schema: Mapping[str, Any] | None = None
    """A JSON Schema the answer must follow (with ``response_mime_type="application/json"``)."""
    thinking_level: str | None = None
    """Gemini 3's thinking depth, e.g. ``"low"`` or ``"high"``; not together with
    `ModelSettings.thinking_budget`."""
    extra_config: Mapping[str, Any] | None = None
    """Further ``GenerateContentConfig`` fields, sent as given; one glassagent already sets is
    refused."""

    merged_mappings = ("extra_config",)

    def __post_init__(self) -> None:
        super().__post_init__()
        owner = "GeminiOptions"
        check_number(owner, "top_p", self.top_p, 0.0, 1.0)
        check_integer(owner, "top_k", self.top_k, 1)
        check_integer(owner, "seed", self.seed, -(2**63))
        check_number(owner, "presence_penalty", self.presence_penalty, -2.0, 2.0)
        check_number(owner, "frequency_penalty", self.frequency_penalty, -2.0, 2.0)
        if self.safety_settings is not None:
            if isinstance(self.safety_settings, Mapping) or not all(
                isinstance(s, Mapping) for s in self.safety_settings
            ):
                raise UserError("GeminiOptions.safety_settings must be a sequence of mappings.")
            object.__setattr__(self, "safety_settings", tuple(self.safety_settings))
        check_text(owner, "response_mime_type", self.response_mime_type)
        check_mapping(owner, "response_json_schema", self.response_json_schema)
        check_text(owner, "thinking_level", self.thinking_level)
        check_mapping(owner, "extra_config", self.extra_config)

    def overlaps(self, settings: Any) -> Sequence[tuple[str, str]]:
        """`thinking_level` with `ModelSettings.thinking_budget` set."""
        if settings.thinking_budget is not None and self.thinking_level is not None:
            return [("thinking_budget", "GeminiOptions.thinking_level")]
        return ()
