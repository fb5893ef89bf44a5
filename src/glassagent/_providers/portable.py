"""`add_portable`: the portable `ModelSettings` fields, put into a wire's body by its names."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from glassagent._core.messages import ModelSettings


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
