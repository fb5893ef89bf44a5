"""`ModelSettings.tool_choice`: its values, and the check of a choice against a request's tools.

The choice is ``"auto"`` (the model decides), ``"required"`` (it must call some tool),
``"none"`` (it must not call any) or the name of one tool (it must call that one). Each wire
maps the checked choice to its own field; a wire that cannot honour a choice exactly refuses
it with `ConfigurationError` rather than drop it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from glassagent._core.errors import ConfigurationError, UserError

if TYPE_CHECKING:
    from glassagent._core.messages import ModelSettings, ToolDefinition

KEYWORDS = ("auto", "required", "none")
"""The choices that name no tool."""


def check_against(choice: str | None, names: Sequence[str]) -> None:
    """Raise `UserError` when `choice` names a tool that is not among `names`.

    ``"required"`` without any tool is refused too: no call could satisfy it.
    """
    if choice is None or choice in ("auto", "none"):
        return
    if choice == "required" and not names:
        raise UserError("ModelSettings.tool_choice='required' needs at least one tool.")
    if choice != "required" and choice not in names:
        known = ", ".join(names) or "none"
        raise UserError(
            f"ModelSettings.tool_choice={choice!r} names no tool of this request; "
            f"its tools are: {known}."
        )


def resolve(settings: ModelSettings | None, tools: Sequence[ToolDefinition]) -> str | None:
    """The choice a request sends: `None` when there is none, or no tools to choose from.

    Raises:
        UserError: When the choice names a tool not among `tools`, or is ``"required"``
            without tools.
    """
    choice = settings.tool_choice if settings is not None else None
    check_against(choice, [tool.name for tool in tools])
    return choice if tools else None


def offered(choice: str | None, tools: Sequence[ToolDefinition]) -> tuple[ToolDefinition, ...]:
    """The tools to show the model when a wire has no tool choice field of its own.

    ``"none"`` offers none, a name offers only that tool, anything else all of them.
    """
    if choice == "none":
        return ()
    if choice is not None and choice not in KEYWORDS:
        return tuple(tool for tool in tools if tool.name == choice)
    return tuple(tools)


def refused(provider: str, choice: str, reason: str) -> ConfigurationError:
    """The error of a wire that cannot honour `choice`, naming the provider and the value."""
    return ConfigurationError(
        f"{provider} cannot honour ModelSettings.tool_choice={choice!r}: {reason}"
    )
