"""Per-provider generation options: the typed escape hatch of `ModelSettings`.

`ProviderOptions` is the base class. Each provider family subclasses it next to its wire
(`OpenAIOptions`, `OllamaOptions`, `GeminiOptions`, `AnthropicOptions`, and a plugin's own),
for the settings that family understands and the portable `ModelSettings` fields do not. A
client passes them to its provider unchanged, and refuses options meant for another provider
with `ConfigurationError` rather than dropping them.

The check helpers (`check_number`, `check_integer`, `check_mapping`, `check_text`) and
`add_unset` serve every options class and wire, plugins' included.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, Field, dataclass, fields, replace
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from glassagent._core.errors import ConfigurationError, UserError

if TYPE_CHECKING:
    from pydantic import GetCoreSchemaHandler
    from pydantic_core import CoreSchema
    from typing_extensions import Self


def check_number(owner: str, name: str, value: Any, low: float, high: float) -> None:
    """Check an options field that is a number from `low` to `high`, or `None`.

    Call it in ``__post_init__``, e.g. ``check_number("AcmeOptions", "top_p", self.top_p, 0, 1)``.

    Args:
        owner: The options class's name, for the message.
        name: The field's name, for the message.
        value: The field's value.
        low: The smallest value allowed.
        high: The largest value allowed.

    Raises:
        UserError: When `value` is not `None` and is not an int or float from `low` to
            `high` (a bool and NaN are refused).
    """
    if value is None:
        return
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or math.isnan(value) or not low <= value <= high:
        raise UserError(f"{owner}.{name} must be a number from {low} to {high}, not {value!r}.")


def check_integer(owner: str, name: str, value: Any, low: int) -> None:
    """Check an options field that is an integer of at least `low`, or `None`.

    Args:
        owner: The options class's name, for the message.
        name: The field's name, for the message.
        value: The field's value.
        low: The smallest value allowed.

    Raises:
        UserError: When `value` is not `None` and is not an int of at least `low` (a bool
            is refused).
    """
    if value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise UserError(f"{owner}.{name} must be an integer of at least {low}, not {value!r}.")


def check_mapping(owner: str, name: str, value: Any) -> None:
    """Check an options field that is a mapping with string keys, or `None`.

    Args:
        owner: The options class's name, for the message.
        name: The field's name, for the message.
        value: The field's value, e.g. an ``extra_body``.

    Raises:
        UserError: When `value` is not `None` and is not a mapping, or has a key that is
            not a string.
    """
    if value is not None and not isinstance(value, Mapping):
        raise UserError(f"{owner}.{name} must be a mapping, not {type(value).__name__}.")
    if value is not None and not all(isinstance(k, str) for k in value):
        raise UserError(f"{owner}.{name} must have string keys.")


def check_text(owner: str, name: str, value: Any) -> None:
    """Check an options field that is a non-empty string, or `None`.

    Args:
        owner: The options class's name, for the message.
        name: The field's name, for the message.
        value: The field's value.

    Raises:
        UserError: When `value` is not `None` and is not a non-empty string.
    """
    if value is not None and (not isinstance(value, str) or not value):
        raise UserError(f"{owner}.{name} must be a non-empty string, not {value!r}.")


_Options = TypeVar("_Options", bound="ProviderOptions")


@dataclass(frozen=True, kw_only=True)
class ProviderOptions:
    """The base class of the per-provider options that `ModelSettings.provider_options` takes.

    Each provider family subclasses it as a frozen, keyword-only dataclass that fixes `kind`
    with a default and checks its fields in ``__post_init__`` (calling
    ``super().__post_init__()`` first), raising `UserError`. Its client reads them with
    `from_settings`, which refuses another family's options with `ConfigurationError`:

    ```python
    @dataclass(frozen=True, kw_only=True)
    class AcmeOptions(ProviderOptions):
        kind: Literal["acme"] = "acme"
        beam_width: int | None = None
        extra_body: Mapping[str, Any] | None = None

        merged_mappings = ("extra_body",)
    ```

    `ModelSettings` takes an instance of any subclass; `merge` combines two of one class
    field by field, `from_dict` builds one from a mapping (unknown keys refused), and events
    carry `kind`, so `parse_event` rebuilds the right class once the module defining it has
    been imported. Two classes cannot claim one `kind`.
    """

    kind: str
    """Which provider family these options are for; each subclass fixes it with a default,
    e.g. ``kind: Literal["acme"] = "acme"``."""

    merged_mappings: ClassVar[tuple[str, ...]] = ()
    """The mapping fields `merge` combines key by key (e.g. ``("extra_body",)``); `merge`
    replaces every other field whole."""

    _classes: ClassVar[dict[str, type[ProviderOptions]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        kind = cls.__dict__.get("kind", MISSING)
        if isinstance(kind, Field):
            kind = kind.default
        if kind is MISSING:  # a subclass of a family's class keeps its parent's kind
            if not isinstance(getattr(cls, "kind", None), str):
                raise UserError(
                    f"{cls.__name__} must fix its provider family, e.g. "
                    'kind: Literal["acme"] = "acme".'
                )
            return
        if not isinstance(kind, str) or not kind:
            raise UserError(f"{cls.__name__}.kind must default to a non-empty string.")
        owner = ProviderOptions._classes.get(kind)
        if owner is not None and owner.__qualname__ != cls.__qualname__:
            raise UserError(
                f"{cls.__name__} cannot take kind {kind!r}: {owner.__name__} has it. "
                "Give it a kind of its own."
            )
        ProviderOptions._classes[kind] = cls

    def __post_init__(self) -> None:
        if type(self) is ProviderOptions:
            raise UserError(
                "ProviderOptions is the base class: use a provider's options, such as "
                "OpenAIOptions(...), or a subclass of your own."
            )
        expected = _declared_kind(type(self))
        if self.kind != expected:
            raise UserError(f"{type(self).__name__}.kind is {expected!r}, not {self.kind!r}.")

    def merge(self, other: Self) -> Self:
        """Return these options overridden by every field `other` sets (not `None`).

        The fields named in `merged_mappings` are combined key by key, `other`'s keys
        winning; every other field `other` sets replaces this one's.

        Args:
            other: Options of the same class that take precedence.

        Raises:
            UserError: For options of another class.
        """
        if type(other) is not type(self):
            raise UserError(
                f"Cannot merge {type(other).__name__}(...) into {type(self).__name__}(...): "
                "they are for different providers."
            )
        changes: dict[str, Any] = {}
        for f in fields(other):
            value = getattr(other, f.name)
            if value is None or f.name == "kind":
                continue
            mine = getattr(self, f.name)
            if f.name in self.merged_mappings and mine is not None:
                value = {**mine, **value}
            changes[f.name] = value
        return replace(self, **changes) if changes else self

    def overlaps(self, settings: Any) -> Sequence[tuple[str, str]]:
        """The portable settings these options say again, which `ModelSettings` refuses.

        Override it when an option has a twin among the `ModelSettings` fields, as Ollama's
        ``options["temperature"]`` has `ModelSettings.temperature`. By default: none.

        Args:
            settings: The `ModelSettings` that carry these options.

        Returns:
            A ``(field, option)`` pair for each `ModelSettings` field that is set and that an
            option here repeats, e.g. ``("max_tokens", "OllamaOptions.options['num_predict']")``.
        """
        del settings
        return ()

    @classmethod
    def from_settings(cls, settings: Any, provider: str) -> Self | None:
        """The options of this class that `settings` carry, for a client of `provider`.

        Args:
            settings: The call's `ModelSettings`, or `None`.
            provider: The client's provider name, for the error.

        Returns:
            `settings.provider_options` when they are of this class (or a subclass of it);
            `None` when there are none.

        Raises:
            ConfigurationError: For options of another class: the client cannot honour
                them, and dropping them silently would be worse.
        """
        options = None if settings is None else settings.provider_options
        return options_for(options, cls, provider)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """Build options from a mapping of field names, e.g. read from JSON or a config file.

        Called on `ProviderOptions` itself, it picks the class by ``data["kind"]``; called on
        a subclass, ``kind`` may be left out. As with pydantic's ``extra="forbid"``, a key
        that is no field of the class is refused, not dropped.

        Args:
            data: Field names and their values (``kind`` included, or not).

        Raises:
            UserError: For an unknown key (the message lists the fields and suggests the
                closest one), an unknown or foreign ``kind``, or a value the class refuses.
        """
        if not isinstance(data, Mapping):
            raise UserError(f"{cls.__name__}.from_dict takes a mapping, not {type(data).__name__}.")
        target = _class_for(cls, data.get("kind", MISSING))
        known = [f.name for f in fields(target) if f.init and f.name != "kind"]
        unknown = [key for key in data if key != "kind" and key not in known]
        if unknown:
            raise UserError(_unknown_keys(target.__name__, unknown, known))
        values = {key: value for key, value in data.items() if key != "kind"}
        try:
            made = target(**values)
        except TypeError as exc:  # a required field left out
            raise UserError(f"{target.__name__}: {exc}") from None
        return made

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        """Let pydantic (`parse_event`) rebuild options from their dict with `from_dict`."""
        from pydantic_core import core_schema

        def validate(value: Any) -> ProviderOptions:
            if isinstance(value, cls):
                return value
            if not isinstance(value, Mapping):
                raise ValueError(f"{cls.__name__} must be a mapping, not {type(value).__name__}")
            try:
                return cls.from_dict(value)
            except UserError as exc:
                raise ValueError(str(exc)) from None

        return core_schema.no_info_plain_validator_function(validate)


def _declared_kind(cls: type[ProviderOptions]) -> Any:
    field = cls.__dataclass_fields__["kind"]
    return field.default


def _class_for(cls: type[_Options], kind: Any) -> type[_Options]:
    """The class `from_dict` builds: `cls`, or the one `kind` names when `cls` is the base."""
    if cls is not ProviderOptions:
        if kind is not MISSING and kind != _declared_kind(cls):
            raise UserError(
                f"{cls.__name__} has kind {_declared_kind(cls)!r}, not {kind!r}; "
                "ProviderOptions.from_dict picks the class by kind."
            )
        return cls
    known = ", ".join(sorted(ProviderOptions._classes))
    if kind is MISSING:
        raise UserError(f"ProviderOptions.from_dict needs a 'kind' (one of: {known}).")
    found = ProviderOptions._classes.get(kind) if isinstance(kind, str) else None
    if found is None:
        raise UserError(
            f"No provider options have kind {kind!r} (known: {known}); import the module "
            "that defines them first."
        )
    return found  # type: ignore[return-value]


def _unknown_keys(owner: str, unknown: list[Any], known: list[str]) -> str:
    named = []
    for key in unknown:
        close = difflib.get_close_matches(str(key), known, n=1)
        named.append(f"{key!r} (did you mean {close[0]!r}?)" if close else repr(key))
    noun = "field" if len(unknown) == 1 else "fields"
    return f"{owner} has no {noun} {', '.join(named)}; its fields are: {', '.join(known)}."


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


def add_unset(target: dict[str, Any], extra: Mapping[str, Any], where: str, provider: str) -> None:
    """Add `extra`'s entries to `target`, refusing any key glassagent already set there.

    A wire calls it last, for the fields a caller passes through (an ``extra_body``), so
    that they can add to the request body but never silently replace what glassagent wrote.

    Args:
        target: The request body (or a part of it), changed in place.
        extra: The entries to add.
        where: Where they came from, for the message, e.g. ``"AcmeOptions.extra_body"``.
        provider: The provider name, for the message.

    Raises:
        ConfigurationError: For a key `target` already has, naming `provider`, `where` and
            the key. The entries before it have been added.
    """
    for key, value in extra.items():
        if key in target:
            raise ConfigurationError(
                f"{provider} cannot take {where}[{key!r}]: glassagent already sets {key!r} "
                "(from a ModelSettings field, an option, or the tool protocol)."
            )
        target[key] = value


__all__ = ["ProviderOptions"]
