"""`ModelRequest`: one model call, built once, read by every wire."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from glassagent._core import tool_choice
from glassagent._core.messages import Message, ModelSettings, ToolDefinition

if TYPE_CHECKING:
    from glassagent._core.output import OutputSchema

_NO_SETTINGS = ModelSettings()


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """One model call: what is sent, with the tool choice resolved once.

    The agent builds one per model call; the built-in clients read the choice and the
    offered tools from it instead of working them out again from the settings. A client
    written against ``chat(messages, tools, system, *, settings)`` keeps working: the
    agent's request reaches it as those four arguments.

    Build one with `ModelRequest.build`, which checks the choice against the tools.
    """

    messages: tuple[Message, ...]
    """The conversation so far, oldest first."""
    tools: tuple[ToolDefinition, ...] = ()
    """Every tool of the request (also those the choice does not offer)."""
    system: str | None = None
    """The system instructions, if any."""
    settings: ModelSettings = field(default_factory=ModelSettings)
    """The call's settings."""
    tool_choice: str | None = None
    """The checked choice: `None` without tools or without a choice, else ``"auto"``,
    ``"required"``, ``"none"`` or one tool's name."""
    offered: tuple[ToolDefinition, ...] = ()
    """The tools the model may call under `tool_choice` (``"none"``: none; a name: that
    one), for wires without a choice field of their own."""

    @classmethod
    def build(
        cls,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        system: str | None = None,
        settings: ModelSettings | None = None,
    ) -> ModelRequest:
        """A request with its tool choice resolved and checked against its tools.

        Args:
            messages: The conversation so far, oldest first.
            tools: The tools of the request.
            system: The system instructions, if any.
            settings: The call's settings (`ModelSettings()` when not given).

        Raises:
            UserError: When ``settings.tool_choice`` names a tool that is not among `tools`,
                or is ``"required"`` without tools.
        """
        settings = settings if settings is not None else _NO_SETTINGS
        tools = tuple(tools)
        choice = tool_choice.resolve(settings, tools)
        return cls(
            messages=tuple(messages),
            tools=tools,
            system=system,
            settings=settings,
            tool_choice=choice,
            offered=tool_choice.offered(choice, tools),
        )

    @property
    def output_schema(self) -> OutputSchema | None:
        """The schema of a structured answer, when the call asks for one."""
        return self.settings.output_schema

    def with_messages(self, messages: Sequence[Message]) -> ModelRequest:
        """This request with other messages (attachments prepared, history trimmed)."""
        return replace(self, messages=tuple(messages))
