"""The neutral model contract: messages, responses and the `BaseLLMClient` interface.

Every backend translates between these types and its own wire format; provider types never
leave the backend. A new backend subclasses `BaseLLMClient` and implements `chat`.
"""

from glassagent._core.client import BaseLLMClient
from glassagent._core.messages import (
    Attachment,
    LLMResponse,
    Message,
    MessageStatus,
    ModelSettings,
    Role,
    StopReason,
    StreamPart,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    ToolDefinition,
    Usage,
)
from glassagent._providers.factory import create_llm_client
from glassagent._providers.gemini import GeminiClient

__all__ = [
    "Attachment",
    "BaseLLMClient",
    "GeminiClient",
    "LLMResponse",
    "Message",
    "MessageStatus",
    "ModelSettings",
    "Role",
    "StopReason",
    "StreamPart",
    "TextDelta",
    "ThinkingDelta",
    "ToolCall",
    "ToolDefinition",
    "Usage",
    "create_llm_client",
]
