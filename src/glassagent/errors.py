"""Every error glassagent raises, under one root.

```text
GlassAgentError
├── UserError                     misuse: bad tool definitions, bad arguments
│   ├── AttachmentError           an attachment the policy, provider or model refuses (.provider)
│   ├── ContextLengthError        longer than the model's context window (.estimated_tokens)
│   └── DatasetError              an evaluation dataset that cannot be read (.where, .field)
├── ConfigurationError            missing or invalid configuration (also a ValueError)
├── ReplayMismatchError           a replayed run sent another request than recorded (.diff)
├── ProviderError                 a model provider failed (.status, .body, .provider)
│   ├── AuthenticationError       rejected credentials (also a ValueError)
│   ├── RateLimitError            slow down (.retry_after)
│   ├── ProviderUnavailableError  408, 5xx, 529 or unreachable; retried
│   │   └── ProviderTimeoutError  past the call's deadline or stalled (.kind, .seconds)
│   ├── ResponseParseError        malformed body or truncated stream
│   │   └── ToolCallFormatError   the server could not read the model's tool call; not retried
│   └── ContentBlockedError       refused for safety or similar reasons (.reason)
├── ToolError                     raised by a tool to report a clean error to the model
├── MCPServerError                an MCP server failed to start, list or answer (.server)
├── HistoryValidationError        an invalid history document (.problems; also a ValueError)
├── HistoryConflictError          a stored chat changed since it was loaded (.chat_id)
├── HistoryAppendError            a run's turn could not be appended to its history (.appended)
└── RunError                      a run ended without a final answer
    ├── MaxIterationsExceeded     the model kept calling tools (.max_iterations)
    ├── RunTimeoutError           the run took longer than the agent's run_timeout (.seconds)
    ├── OutputValidationError     the answer never validated as the output_type (.text, .errors)
    └── RunAborted                run.abort() or cancellation (.reason)
```

When an error ends an agent run, ``error.result`` holds the partial `RunResult`. Errors pickle.
"""

from glassagent._core.errors import (
    AttachmentError,
    AuthenticationError,
    ConfigurationError,
    ContentBlockedError,
    ContextLengthError,
    DatasetError,
    GlassAgentError,
    HistoryAppendError,
    HistoryConflictError,
    HistoryValidationError,
    MaxIterationsExceeded,
    MCPServerError,
    OutputValidationError,
    ProviderError,
    ProviderTimeoutError,
    ProviderUnavailableError,
    RateLimitError,
    ReplayMismatchError,
    ResponseParseError,
    RunAborted,
    RunError,
    RunTimeoutError,
    ToolCallFormatError,
    ToolError,
    UserError,
    _rebuild,  # noqa: F401 - what pickles of errors call
)
from glassagent._public import publish

__all__ = [
    "AttachmentError",
    "AuthenticationError",
    "ConfigurationError",
    "ContentBlockedError",
    "ContextLengthError",
    "DatasetError",
    "GlassAgentError",
    "HistoryAppendError",
    "HistoryConflictError",
    "HistoryValidationError",
    "MCPServerError",
    "MaxIterationsExceeded",
    "OutputValidationError",
    "ProviderError",
    "ProviderTimeoutError",
    "ProviderUnavailableError",
    "RateLimitError",
    "ReplayMismatchError",
    "ResponseParseError",
    "RunAborted",
    "RunError",
    "RunTimeoutError",
    "ToolCallFormatError",
    "ToolError",
    "UserError",
]

publish(__name__, globals(), __all__)
