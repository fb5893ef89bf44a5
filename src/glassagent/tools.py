"""Tools: functions the model can call, described by JSON Schema from type hints and docstrings.

Decorate a function with `tool` (or pass it to `Agent` as is). Add a parameter annotated
`ToolContext` to report progress, read ``deps`` or watch for an abort.
"""

from glassagent._core.result import ToolResult
from glassagent._public import publish
from glassagent._tools.context import ToolContext
from glassagent._tools.export import to_anthropic_tools, to_gemini_tools, to_openai_tools
from glassagent._tools.tool import Tool, tool

__all__ = [
    "Tool",
    "ToolContext",
    "ToolResult",
    "to_anthropic_tools",
    "to_gemini_tools",
    "to_openai_tools",
    "tool",
]

publish(__name__, globals(), __all__)
