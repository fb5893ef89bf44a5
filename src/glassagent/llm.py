"""The neutral model contract: messages, responses and the `BaseLLMClient` interface.

Every backend translates between these types and its own wire format; provider types never
leave the backend. A new backend subclasses `BaseLLMClient` and implements `chat`.

Shipped backends: `AnthropicClient` (Anthropic's Messages API), `AzureOpenAIClient` (model
deployments on Azure OpenAI), `GeminiClient` (Google Gemini on google-genai),
`OpenAICompatibleClient` (OpenAI, llama-server, vLLM, LM Studio), `OllamaClient` and
`LlamaClient`;
`create_llm_client` makes one by provider name, including providers that other packages add
through the ``glassagent.providers`` entry-point group or `register_provider`. Each takes an
`AttachmentPolicy`, which says which local files attachments may read and whether remote
ones are passed on or downloaded, and ``record_wire=True`` to attach each call's bodies to its
answer (`WireRecord`), so ``llm_response`` events and recordings keep them.

`ModelSettings.provider_options` takes what only one provider family understands: an
instance of a `ProviderOptions` subclass, `AnthropicOptions`, `GeminiOptions`,
`OllamaOptions`, `OpenAIOptions`, or a plugin's own. `ModelSettings.prompt_cache` takes a
`PromptCache`: what to cache of the prompt, for how long, and from which size on.
"""

from glassagent._core.attachments import AttachmentPolicy
from glassagent._core.caching import PromptCache
from glassagent._core.client import BaseLLMClient
from glassagent._core.messages import (
    Attachment,
    LLMResponse,
    Message,
    MessageStatus,
    ModelSettings,
    RetryNotice,
    Role,
    StopReason,
    StreamPart,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    ToolDefinition,
    ToolProtocol,
    Usage,
    WireRecord,
)
from glassagent._core.options import ProviderOptions
from glassagent._core.output import OutputMode, OutputSchema
from glassagent._core.request import ModelRequest
from glassagent._core.retry import RetryPolicy
from glassagent._providers.anthropic import AnthropicClient
from glassagent._providers.anthropic_options import AnthropicOptions
from glassagent._providers.azure import AzureOpenAIClient
from glassagent._providers.factory import create_llm_client, register_provider
from glassagent._providers.gemini import GeminiClient
from glassagent._providers.gemini_options import GeminiOptions
from glassagent._providers.ollama import LlamaClient, OllamaClient
from glassagent._providers.ollama_options import OllamaOptions
from glassagent._providers.openai_compat import OpenAICompatibleClient
from glassagent._providers.openai_options import OpenAIOptions
from glassagent._public import publish

__all__ = [
    "AnthropicClient",
    "AnthropicOptions",
    "Attachment",
    "AttachmentPolicy",
    "AzureOpenAIClient",
    "BaseLLMClient",
    "GeminiClient",
    "GeminiOptions",
    "LLMResponse",
    "LlamaClient",
    "Message",
    "MessageStatus",
    "ModelRequest",
    "ModelSettings",
    "OllamaClient",
    "OllamaOptions",
    "OpenAICompatibleClient",
    "OpenAIOptions",
    "OutputMode",
    "OutputSchema",
    "PromptCache",
    "ProviderOptions",
    "RetryNotice",
    "RetryPolicy",
    "Role",
    "StopReason",
    "StreamPart",
    "TextDelta",
    "ThinkingDelta",
    "ToolCall",
    "ToolDefinition",
    "ToolProtocol",
    "Usage",
    "WireRecord",
    "create_llm_client",
    "register_provider",
]

publish(__name__, globals(), __all__)
