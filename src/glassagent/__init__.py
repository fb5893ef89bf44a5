"""glassagent: typed, async, tool-using LLM agents whose every step is visible."""

from glassagent._agent.agent import Agent
from glassagent._agent.budget import Budget
from glassagent._agent.run import AgentRun
from glassagent._core.client import BaseLLMClient
from glassagent._core.errors import GlassAgentError
from glassagent._core.events import Event
from glassagent._core.messages import LLMResponse, Message, ModelSettings, ToolCall, Usage
from glassagent._core.result import RunResult, ToolResult
from glassagent._providers import (  # noqa: F401 - they register their kinds for parse_event
    anthropic_options,
    gemini_options,
    ollama_options,
    openai_options,
)
from glassagent._public import publish
from glassagent._tools.context import ToolContext
from glassagent._tools.tool import Tool, tool
from glassagent._version import __version__

__all__ = [
    "Agent",
    "AgentRun",
    "BaseLLMClient",
    "Budget",
    "Event",
    "GlassAgentError",
    "LLMResponse",
    "Message",
    "ModelSettings",
    "RunResult",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolResult",
    "Usage",
    "__version__",
    "tool",
]

# Each name carries the public module that documents it (glassagent.llm.Message, ...), set
# here too so that it does not depend on which modules were imported.
publish("glassagent.agent", globals(), ["Agent", "AgentRun", "Budget", "RunResult"])
publish("glassagent.errors", globals(), ["GlassAgentError"])
publish("glassagent.llm", globals(), ["BaseLLMClient", "LLMResponse", "Message", "ModelSettings"])
publish("glassagent.llm", globals(), ["ToolCall", "Usage"])
publish("glassagent.tools", globals(), ["Tool", "ToolContext", "ToolResult", "tool"])
