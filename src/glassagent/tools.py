"""Tools: functions the model can call, described by JSON Schema from type hints and docstrings.

Decorate a function with `tool` (or pass it to `Agent` as is). Add a parameter annotated
`ToolContext` to report progress, read ``deps`` or watch for an abort. A tool made with
``requires_approval=True`` (or an `ApprovalPolicy`) runs only once a person approved the call.

Context tools (`context_tool`, `ContextTool`) are run by the agent itself before the model is
asked, when they are relevant enough to the user's message; `ContextSettings` says how many run
and where their output goes. A `MessageAnalysis` of the message (by `analyze_message`, or
your own `MessageAnalyzer`) helps them score it; `ContextResult` lets one suggest a role.
"""

from glassagent._core.analysis import MessageAnalysis
from glassagent._core.result import ToolResult
from glassagent._export import to_anthropic_tools, to_gemini_tools, to_openai_tools
from glassagent._public import publish
from glassagent._tools.analysis import analyze_message
from glassagent._tools.context import ToolContext, ToolLoader
from glassagent._tools.context_tools import (
    ContextPlacement,
    ContextResult,
    ContextSettings,
    ContextTool,
    MessageAnalyzer,
    Relevance,
    TurnInfo,
    context_tool,
)
from glassagent._tools.tool import ApprovalAnswer, ApprovalPolicy, Approver, Tool, tool

__all__ = [
    "ApprovalAnswer",
    "ApprovalPolicy",
    "Approver",
    "ContextPlacement",
    "ContextResult",
    "ContextSettings",
    "ContextTool",
    "MessageAnalysis",
    "MessageAnalyzer",
    "Relevance",
    "Tool",
    "ToolContext",
    "ToolLoader",
    "ToolResult",
    "TurnInfo",
    "analyze_message",
    "context_tool",
    "to_anthropic_tools",
    "to_gemini_tools",
    "to_openai_tools",
    "tool",
]

publish(__name__, globals(), __all__)
