"""`ModelProfile` and its sections: what a model can do, what it costs, its limits."""

from __future__ import annotations

import difflib
import re
from datetime import date
from decimal import Decimal
from typing import Annotated, Any, Literal
from urllib.parse import quote

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    PrivateAttr,
    field_validator,
    model_validator,
)

from glassagent._core.errors import UserError

Modality = Literal["text", "image", "audio", "video", "pdf"]
"""A kind of content a model takes or produces."""

_Price = Annotated[Decimal, Field(ge=0, allow_inf_nan=False)]
_Tokens = Annotated[int, Field(gt=0)]
_CONTROL = re.compile(r"[\x00-\x20\x7f\\]")


class _Section(BaseModel):
    # Unknown keys are kept (a profile written for another tool loads unchanged) and shown
    # by `ModelProfile.unknown_fields`.
    model_config = ConfigDict(frozen=True, extra="allow", str_strip_whitespace=True)


def check_model_id(model_id: str) -> str:
    """`model_id` if it can name a profile, else `UserError`.

    A model id is at most 200 characters, without spaces, control characters or
    backslashes, and no ``/``-separated part of it is ``.`` or ``..``; it never names a place
    outside a directory, whatever it is used for.
    """
    if (
        not model_id
        or len(model_id) > 200
        or _CONTROL.search(model_id)
        or model_id.startswith("/")
        or any(part in {".", ".."} for part in model_id.split("/"))
    ):
        raise UserError(
            f"{model_id!r} is not a valid model id: it must be 1 to 200 characters without "
            "spaces, control characters or backslashes, and no '/'-separated part may be "
            "'.' or '..'."
        )
    return model_id


def profile_file_name(model_id: str) -> str:
    """The file name of the profile of `model_id`: the id, percent-encoded, plus ``.json``.

    Letters, digits and ``-._~`` stay as they are; every other character is written as
    ``%XX`` (``/`` as ``%2F``, ``:`` as ``%3A``), so the name is one safe file name on every
    system: ``profile_file_name("llama3.1:8b") == "llama3.1%3A8b.json"``. When profiles are
    read, a file's name is percent-decoded before it is compared with its id, so on systems
    that allow ``:`` in file names ``llama3.1:8b.json`` is accepted too.

    Args:
        model_id: The model's id (`BasicInfo.id`).

    Raises:
        UserError: For an id that cannot name a profile (see `BasicInfo.id`).
    """
    return quote(check_model_id(model_id), safe="") + ".json"


class BasicInfo(_Section):
    """Which model a profile describes."""

    id: str
    """The model id as sent to the provider, e.g. ``"gemini-2.5-flash"`` or ``"llama3.1:8b"``.

    At most 200 characters, without spaces, control characters or backslashes, and no
    ``/``-separated part may be ``.`` or ``..``."""
    name: str = Field(min_length=1)
    """A human-readable name, e.g. ``"Gemini 2.5 Flash"``."""
    description: str = ""
    """One or two sentences about the model."""
    provider: str = Field(min_length=1)
    """The provider that serves the model at these prices: a glassagent provider name
    (``gemini``, ``openai``, ``anthropic``, ``ollama``), ``local`` for the embedded model, or
    another name (a plugin's provider, ``openrouter``...)."""
    aliases: tuple[str, ...] = ()
    """Other ids the provider accepts for the same model, e.g. a dated snapshot id."""

    @field_validator("id")
    @classmethod
    def _valid_id(cls, value: str) -> str:
        try:
            return check_model_id(value)
        except UserError as exc:
            raise ValueError(exc.message) from None

    @field_validator("aliases")
    @classmethod
    def _valid_aliases(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for alias in value:
            cls._valid_id(alias)
        return value


class Capabilities(_Section):
    """How much the model reads and writes, and which settings it honours."""

    context_length: _Tokens
    """The context window in tokens: the prompt and the answer together."""
    max_completion_tokens: _Tokens | None = None
    """The most tokens one answer may have, when the provider limits it below the window."""
    supported_parameters: tuple[str, ...] = ()
    """The generation settings the model honours, named as `ModelSettings` fields
    (``temperature``, ``max_tokens``, ``thinking_budget``, ``stop_sequences``) or as provider
    options (``top_p``, ``seed``...)."""


class Features(_Section):
    """What the model can do."""

    supports_function_calling: bool
    """Whether the provider's API takes tool definitions and returns tool calls natively;
    a model without it needs the JSON tool protocol."""
    supports_streaming: bool
    """Whether answers can be streamed."""
    is_multimodal: bool
    """Whether the model takes or produces anything but text (it must agree with the
    modalities)."""
    input_modalities: tuple[Modality, ...] = ("text",)
    """What the model reads: ``text``, ``image``, ``audio``, ``video``, ``pdf``."""
    output_modalities: tuple[Modality, ...] = ("text",)
    """What the model writes."""
    supports_reasoning: bool
    """Whether the model thinks before it answers (thinking tokens)."""

    @model_validator(mode="after")
    def _multimodal_agrees(self) -> Features:
        others = set(self.input_modalities) | set(self.output_modalities)
        if self.is_multimodal != bool(others - {"text"}):
            raise ValueError(
                f"is_multimodal is {str(self.is_multimodal).lower()} but the modalities are "
                f"input {list(self.input_modalities)}, output {list(self.output_modalities)}"
            )
        return self


class PricingTier(_Section):
    """The prices that apply instead when a call's prompt is longer than a threshold.

    Providers such as Google bill all tokens of a call at a higher rate once its prompt
    exceeds a size (Gemini 2.5 Pro: 200,000 tokens). A price the tier leaves out is the base
    price.
    """

    above_input_tokens: _Tokens
    """The tier applies to calls whose input tokens exceed this number."""
    input_per_1m_tokens: _Price | None = None
    """The input price per million tokens in this tier."""
    output_per_1m_tokens: _Price | None = None
    """The output price per million tokens in this tier."""
    thinking_per_1m_tokens: _Price | None = None
    """The thinking price per million tokens in this tier."""
    cached_input_per_1m_tokens: _Price | None = None
    """The cache-read price per million tokens in this tier."""
    cache_write_per_1m_tokens: _Price | None = None
    """The cache-write price per million tokens in this tier."""


class Pricing(_Section):
    """What the model costs per million tokens, as the provider published it.

    Thinking tokens cost `thinking_per_1m_tokens` when given, else the output price; prompt
    tokens read from the provider's cache cost `cached_input_per_1m_tokens` and those written
    into it `cache_write_per_1m_tokens`, each the input price when not given.
    """

    input_per_1m_tokens: _Price
    """The price of one million prompt tokens."""
    output_per_1m_tokens: _Price
    """The price of one million answer tokens."""
    thinking_per_1m_tokens: _Price | None = None
    """The price of one million thinking tokens, when the provider bills them apart."""
    cached_input_per_1m_tokens: _Price | None = None
    """The price of one million prompt tokens read from the provider's prompt cache."""
    cache_write_per_1m_tokens: _Price | None = None
    """The price of one million prompt tokens written into the provider's prompt cache."""
    currency: str = Field(default="USD", pattern=r"^[A-Z]{3}$")
    """The ISO 4217 currency code of the prices."""
    as_of: date | None = None
    """The day the prices were read from their source; ``None`` when the profile does not say
    (costs priced by it then say their prices are undated)."""
    source: str | None = None
    """Where the prices were read (a URL, a price database)."""
    tiers: tuple[PricingTier, ...] = ()
    """Prices for long prompts, lowest threshold first."""

    @field_validator("tiers")
    @classmethod
    def _ascending(cls, value: tuple[PricingTier, ...]) -> tuple[PricingTier, ...]:
        thresholds = [tier.above_input_tokens for tier in value]
        if thresholds != sorted(set(thresholds)):
            raise ValueError("tiers must have distinct above_input_tokens, lowest first")
        return value


class Limitations(_Section):
    """Limits the provider puts on use of the model (they often depend on the account)."""

    rate_limit_rpm: _Tokens | None = None
    """Requests per minute."""
    rate_limit_tpm: _Tokens | None = None
    """Tokens per minute."""


class ModelProfile(_Section):
    """What a model can do, what it costs and its limits: one profile file, validated.

    Profiles are JSON files named after their model (`profile_file_name`); `get_profile`
    finds them. All sections are immutable.
    """

    basic_info: BasicInfo
    """Which model this is and who serves it."""
    capabilities: Capabilities
    """How much it reads and writes, and which settings it honours."""
    features: Features
    """What it can do."""
    pricing: Pricing | None = None
    """What it costs; ``None`` when the profile does not say (cost then falls back to
    genai-prices)."""
    limitations: Limitations = Limitations()
    """Rate limits, where known."""
    notes: tuple[str, ...] | dict[str, JsonValue] = ()
    """Free-form remarks: a list of them (a single string is taken as one note), or an object
    of named ones, as in ``{"best_for": ["summaries"], "release_date": "2025-01-01"}``."""

    _origin: str | None = PrivateAttr(default=None)

    @field_validator("notes", mode="before")
    @classmethod
    def _one_note(cls, value: object) -> object:
        return (value,) if isinstance(value, str) else value

    @property
    def id(self) -> str:
        """The model id (`BasicInfo.id`)."""
        return self.basic_info.id

    @property
    def provider(self) -> str:
        """The provider (`BasicInfo.provider`)."""
        return self.basic_info.provider

    @property
    def unknown_fields(self) -> dict[str, Any]:
        """The keys the profile format does not know, kept as read: dotted path -> value.

        For example ``{"basic_info.family": "gemini"}``; empty for a profile of only known
        fields. They are kept, not refused, so profiles written for other tools load.
        """
        found: dict[str, Any] = dict(self.model_extra or {})
        for name in type(self).model_fields:
            _collect_extra(getattr(self, name), name, found)
        return found

    @property
    def origin(self) -> str | None:
        """Where the profile was read: its file, or the plugin that returned it."""
        return self._origin

    def __hash__(self) -> int:
        # The notes may be an object (a dict, with lists in it), as in the seed's format:
        # hashed by their frozen form, so every profile can be a set member or a cache key.
        return hash(
            (
                self.basic_info,
                self.capabilities,
                self.features,
                self.pricing,
                self.limitations,
                _frozen(self.notes),
            )
        )

    def __repr__(self) -> str:
        unknown = self.unknown_fields
        shown = f", unknown_fields={sorted(unknown)!r}" if unknown else ""
        return f"ModelProfile(id={self.id!r}, provider={self.provider!r}{shown})"


def _collect_extra(section: object, path: str, found: dict[str, Any]) -> None:
    """Add the unknown keys of `section` and of the sections inside it to `found`."""
    if not isinstance(section, _Section):
        return
    for name, value in (section.model_extra or {}).items():
        found[f"{path}.{name}"] = value
    for name in type(section).model_fields:
        value = getattr(section, name)
        if isinstance(value, tuple):
            for index, item in enumerate(value):
                _collect_extra(item, f"{path}.{name}.{index}", found)
        else:
            _collect_extra(value, f"{path}.{name}", found)


def _frozen(value: object) -> object:
    """`value` with each dict a frozenset of its items and each list a tuple (hashable)."""
    if isinstance(value, dict):
        return frozenset((key, _frozen(item)) for key, item in value.items())
    if isinstance(value, list | tuple):
        return tuple(_frozen(item) for item in value)
    return value


CLOSE_NAME = 0.86
"""How alike (`difflib.SequenceMatcher` ratio) an unknown key and a known name must be for
the key to be taken as a misspelling of the name."""


def close_names(profile: ModelProfile) -> dict[str, str]:
    """The unknown keys that look like misspellings of a known name: dotted path -> name.

    Only names the section does not set are suggested (``rate_limit_rpd`` beside a given
    ``rate_limit_rpm`` is not a misspelling of it); keys unlike every name are not listed.
    """
    found: dict[str, str] = {}
    _collect_close(profile, "", found)
    return found


def _collect_close(section: object, path: str, found: dict[str, str]) -> None:
    if not isinstance(section, _Section):
        return
    prefix = f"{path}." if path else ""
    unset = [name for name in type(section).model_fields if name not in section.model_fields_set]
    for key in section.model_extra or {}:
        close = difflib.get_close_matches(key, unset, n=1, cutoff=CLOSE_NAME)
        if close:
            found[prefix + key] = close[0]
    for name in type(section).model_fields:
        value = getattr(section, name)
        if isinstance(value, tuple):
            for index, item in enumerate(value):
                _collect_close(item, f"{prefix}{name}.{index}", found)
        else:
            _collect_close(value, prefix + name, found)


def close_to_missing(missing: str, given: object) -> str | None:
    """An unknown key of `given` (a section as read) that looks like the missing `missing`."""
    if not isinstance(given, dict):
        return None
    known = {name for cls in _SECTIONS for name in cls.model_fields}
    keys = [key for key in given if isinstance(key, str) and key not in known]
    close = difflib.get_close_matches(missing, keys, n=1, cutoff=CLOSE_NAME)
    return close[0] if close else None


_SECTIONS = (ModelProfile, BasicInfo, Capabilities, Features, Pricing, PricingTier, Limitations)
