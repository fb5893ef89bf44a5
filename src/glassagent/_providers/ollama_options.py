"""`OllamaOptions`: Ollama's ``options`` object and its top-level ``keep_alive`` and ``think``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from glassagent._core.errors import UserError
from glassagent._core.options import ProviderOptions, check_mapping, check_text

_TWINS = (("temperature", "temperature"), ("max_tokens", "num_predict"), ("stop_sequences", "stop"))
"""`ModelSettings` fields and the ``options`` entries that say the same thing."""


@dataclass(frozen=True, kw_only=True)
class OllamaOptions(ProviderOptions):
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

    merged_mappings = ("options",)

    def __post_init__(self) -> None:
        super().__post_init__()
        check_mapping("OllamaOptions", "options", self.options)
        keep_alive = self.keep_alive
        if keep_alive is not None and (
            isinstance(keep_alive, bool) or not isinstance(keep_alive, str | int | float)
        ):
            raise UserError(
                "OllamaOptions.keep_alive must be a duration string or seconds, "
                f"not {keep_alive!r}."
            )
        if self.think is not None and not isinstance(self.think, bool):
            check_text("OllamaOptions", "think", self.think)

    def overlaps(self, settings: Any) -> Sequence[tuple[str, str]]:
        """The ``options`` entries (and ``think``) that repeat a `ModelSettings` field set."""
        given = self.options or {}
        found = [
            (name, f"OllamaOptions.options[{key!r}]")
            for name, key in _TWINS
            if getattr(settings, name) is not None and key in given
        ]
        if settings.thinking_budget is not None and self.think is not None:
            found.append(("thinking_budget", "OllamaOptions.think"))
        return found
