"""Tool definitions in the shapes the main providers document, made by their wire modules."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from copy import deepcopy
from typing import Any

from glassagent._core.messages import ToolDefinition
from glassagent._tools.context_tools import ContextTool
from glassagent._tools.tool import Tool
from glassagent._tools.wrap import definitions_of

ToolSource = Tool | ContextTool | Callable[..., Any] | ToolDefinition


def to_openai_tools(tools: Iterable[ToolSource]) -> list[dict[str, Any]]:
    """Return tools in OpenAI's chat-completions shape.

    ``[{"type": "function", "function": {"name", "description", "parameters"}}]``

    Args:
        tools: Tools, context tools, plain functions or `ToolDefinition`s.
    """
    from glassagent._providers import openai_wire  # the provider stack, on first use only

    return deepcopy(openai_wire.wire_tools(definitions_of(tools)))


def to_anthropic_tools(tools: Iterable[ToolSource]) -> list[dict[str, Any]]:
    """Return tools in Anthropic's Messages API shape.

    ``[{"name", "description", "input_schema"}]``

    Args:
        tools: Tools, context tools, plain functions or `ToolDefinition`s.
    """
    from glassagent._providers import anthropic_wire  # the provider stack, on first use only

    return deepcopy(anthropic_wire.wire_tools(definitions_of(tools)))


def to_gemini_tools(tools: Iterable[ToolSource]) -> list[dict[str, Any]]:
    """Return tools in the Gemini API's REST shape.

    ``[{"functionDeclarations": [{"name", "description", "parametersJsonSchema"}]}]``. The
    schema goes in ``parametersJsonSchema``, which accepts full JSON Schema (``$defs``,
    ``additionalProperties``) unlike the OpenAPI subset of ``parameters``.

    Args:
        tools: Tools, context tools, plain functions or `ToolDefinition`s.
    """
    declarations = [
        {
            "name": d.name,
            "description": d.description,
            "parametersJsonSchema": deepcopy(d.parameters),
        }
        for d in definitions_of(tools)
    ]
    return [{"functionDeclarations": declarations}] if declarations else []
