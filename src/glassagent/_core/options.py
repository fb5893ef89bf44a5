"""Per-provider generation options: the typed escape hatch of `ModelSettings`.

Each class holds settings one provider family understands and the portable `ModelSettings`
fields do not. A client passes them to its provider unchanged, and refuses options meant for
another provider with `ConfigurationError` rather than dropping them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from glassagent._core.errors import ConfigurationError, UserError

if TYPE_CHECKING:
    from glassagent._core.messages import ModelSettings

_MAPPINGS = ("options", "extra_body", "extra_config")
"""Mapping fields that `merge` combines key by key instead of replacing."""


def check_number(owner: str, name: str, value: Any, low: float, high: float) -> None:
    """Raise `UserError` naming ``owner.name`` unless `value` is `None` or in ``[low, high]``."""
    if value is None:
        return
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or math.isnan(value) or not low <= value <= high:
        raise UserError(f"{owner}.{name} must be a number from {low} to {high}, not {value!r}.")


def check_integer(owner: str, name: str, value: Any, low: int) -> None:
    """Raise `UserError` naming ``owner.name`` unless `value` is `None` or an int >= `low`."""
    if value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise UserError(f"{owner}.{name} must be an integer of at least {low}, not {value!r}.")


def _check_mapping(owner: str, name: str, value: Any) -> None:
    if value is not None and not isinstance(value, Mapping):
        raise UserError(f"{owner}.{name} must be a mapping, not {type(value).__name__}.")
    if value is not None and not all(isinstance(k, str) for k in value):
        raise UserError(f"{owner}.{name} must have string keys.")


def _check_text(owner: str, name: str, value: Any) -> None:
    if value is not None and (not isinstance(value, str) or not value):
        raise UserError(f"{owner}.{name} must be a non-empty string, not {value!r}.")


_Options = TypeVar("_Options", "OpenAIOptions", "OllamaOptions", "GeminiOptions")
_Self = TypeVar("_Self", bound="_Mergeable")


class _Mergeable:
    def merge(self: _Self, other: _Self) -> _Self:
        """Return these options overridden by every field `other` sets (not `None`).

        Mapping fields (``options``, ``extra_body``, ``extra_config``) are combined key by
        key, `other`'s keys winning; every other field `other` sets replaces this one's.

        Args:
            other: Options of the same class that take precedence.
        """
        changes: dict[str, Any] = {}
        for f in fields(other):  # type: ignore[arg-type]
            value = getattr(other, f.name)
            if value is None or f.name == "kind":
                continue
            mine = getattr(self, f.name)
            if f.name in _MAPPINGS and mine is not None:
                value = {**mine, **value}
            changes[f.name] = value
        return replace(self, **changes) if changes else self  # type: ignore[type-var]


@dataclass(frozen=True, kw_only=True)
class OpenAIOptions(_Mergeable):
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

    def __post_init__(self) -> None:
        owner = "OpenAIOptions"
        check_number(owner, "top_p", self.top_p, 0.0, 1.0)
        check_integer(owner, "seed", self.seed, -(2**63))
        check_number(owner, "presence_penalty", self.presence_penalty, -2.0, 2.0)
        check_number(owner, "frequency_penalty", self.frequency_penalty, -2.0, 2.0)
        _check_text(owner, "reasoning_effort", self.reasoning_effort)
        _check_mapping(owner, "response_format", self.response_format)
        _check_mapping(owner, "extra_body", self.extra_body)


@dataclass(frozen=True, kw_only=True)
class OllamaOptions(_Mergeable):
    """Options for `OllamaClient`: its ``options`` object and top-level ``keep_alive``/``think``."""

    kind: Literal["ollama"] = "ollama"
    """Which provider family these options are for."""
    options: Mapping[str, Any] | None = None
    """Entries for Ollama's ``options`` object (``num_ctx``, ``top_k``, ``top_p``, ``seed``,
    ``repeat_penalty``, ...), sent as given. The portable settings' own entries
    (``temperature``, ``num_predict``, ``stop``) are refused when those settings are set."""
    keep_alive: str | float | None = None
    """How long the model stays loaded after the call, e.g. ``"10m"``, ``0`` or ``-1``."""
    think: bool | str | None = None
    """Ollama's ``think`` as given: ``True``/``False``, or a level such as ``"high"`` for
    models that take one. Not together with `ModelSettings.thinking_budget`."""

    def __post_init__(self) -> None:
        _check_mapping("OllamaOptions", "options", self.options)
        keep_alive = self.keep_alive
        if keep_alive is not None and (
            isinstance(keep_alive, bool) or not isinstance(keep_alive, str | int | float)
        ):
            raise UserError(
                "OllamaOptions.keep_alive must be a duration string or seconds, "
                f"not {keep_alive!r}."
            )
        if self.think is not None and not isinstance(self.think, bool):
            _check_text("OllamaOptions", "think", self.think)


@dataclass(frozen=True, kw_only=True)
class GeminiOptions(_Mergeable):
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

    def __post_init__(self) -> None:
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
        _check_text(owner, "response_mime_type", self.response_mime_type)
        _check_mapping(owner, "response_json_schema", self.response_json_schema)
        _check_text(owner, "thinking_level", self.thinking_level)
        _check_mapping(owner, "extra_config", self.extra_config)


ProviderOptions = OpenAIOptions | OllamaOptions | GeminiOptions
"""Any of the per-provider option classes `ModelSettings.provider_options` takes."""


def options_for(options: Any, expected: type[_Options], provider: str) -> _Options | None:
    """Return `options` when they are `expected`'s; raise when they are another provider's.

    Raises:
        ConfigurationError: For options of another class, naming `provider`.
    """
    if options is None or isinstance(options, expected):
        return options
    raise ConfigurationError(
        f"{provider} cannot honour ModelSettings.provider_options={type(options).__name__}(...): "
        f"that client takes {expected.__name__}."
    )


def add_portable(
    target: dict[str, Any], settings: ModelSettings, *, max_tokens: str | None, stop: str
) -> None:
    """Put the portable `ModelSettings` fields that are set into `target`, by the wire's names.

    Args:
        target: The body, config or options object to fill.
        settings: The `ModelSettings`.
        max_tokens: The wire's name for the token limit (`None`: the caller sets it).
        stop: The wire's name for the stop sequences.
    """
    if settings.temperature is not None:
        target["temperature"] = settings.temperature
    if max_tokens is not None and settings.max_tokens is not None:
        target[max_tokens] = settings.max_tokens
    if settings.stop_sequences:
        target[stop] = list(settings.stop_sequences)


def add_unset(target: dict[str, Any], extra: Mapping[str, Any], where: str, provider: str) -> None:
    """Add `extra`'s entries to `target`, refusing any key glassagent already set there.

    Raises:
        ConfigurationError: For a key `target` already has, naming `provider`.
    """
    for key, value in extra.items():
        if key in target:
            raise ConfigurationError(
                f"{provider} cannot take {where}[{key!r}]: glassagent already sets {key!r} "
                "(from a ModelSettings field, an option, or the tool protocol)."
            )
        target[key] = value


__all__ = ["GeminiOptions", "OllamaOptions", "OpenAIOptions", "ProviderOptions"]
