"""`ModelRequest`: one model call, built once, read by every wire."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
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

    The choice and the offered tools are worked out once, when the request is made (also by
    ``dataclasses.replace``), and checked against the tools.

    Raises:
        UserError: When ``settings.tool_choice`` names a tool that is not among `tools`, or
            is ``"required"`` without tools.
    """

    messages: tuple[Message, ...]
    """The conversation so far, oldest first."""
    tools: tuple[ToolDefinition, ...] = ()
    """Every tool of the request (also those the choice does not offer)."""
    system: str | None = None
    """The system instructions, if any."""
    settings: ModelSettings = field(default_factory=ModelSettings)
    """The call's settings."""
    tool_choice: str | None = field(init=False)
    """The checked choice: `None` without tools or without a choice, else ``"auto"``,
    ``"required"``, ``"none"`` or one tool's name (worked out from `settings` and `tools`)."""
    offered: tuple[ToolDefinition, ...] = field(init=False)
    """The tools the model may call under `tool_choice` (``"none"``: none; a name: that
    one), for wires without a choice field of their own."""

    def __post_init__(self) -> None:
        if self.tools or self.settings.tool_choice is not None:
            choice = tool_choice.resolve(self.settings, self.tools)
            offered = tool_choice.offered(choice, self.tools)
        else:  # nothing to choose from, nothing chosen
            choice, offered = None, ()
        object.__setattr__(self, "tool_choice", choice)
        object.__setattr__(self, "offered", offered)

    @classmethod
    def build(
        cls,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        system: str | None = None,
        settings: ModelSettings | None = None,
    ) -> ModelRequest:
        """A request from the arguments of `BaseLLMClient.chat` (sequences become tuples).

        Args:
            messages: The conversation so far, oldest first.
            tools: The tools of the request.
            system: The system instructions, if any.
            settings: The call's settings (`ModelSettings()` when not given).

        Raises:
            UserError: When ``settings.tool_choice`` names a tool that is not among `tools`,
                or is ``"required"`` without tools.
        """
        return cls(
            messages=tuple(messages),
            tools=tuple(tools),
            system=system,
            settings=settings if settings is not None else _NO_SETTINGS,
        )

    @property
    def output_schema(self) -> OutputSchema | None:
        """The schema of a structured answer, when the call asks for one."""
        return self.settings.output_schema

    def with_messages(self, messages: Sequence[Message]) -> ModelRequest:
        """This request with other messages (attachments prepared); the choice is kept."""
        request = copy.copy(self)
        object.__setattr__(request, "messages", tuple(messages))
        return request
