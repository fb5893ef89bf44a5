"""The exception tree (documented in `glassagent.errors`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # the one import cycle allowed (pyproject.toml, [tool.importlinter]):
    # a RunResult is made of messages, which raise these errors
    from glassagent._core.result import RunResult


def _rebuild(cls: type[BaseException], args: tuple[Any, ...], state: dict[str, Any]) -> Any:
    """Recreate an exception without calling its ``__init__`` (used by pickle)."""
    exc = cls.__new__(cls)
    exc.args = args
    exc.__dict__.update(state)
    return exc


_rebuild.__module__ = "glassagent.errors"  # pickles name only public modules (it is there too)


class GlassAgentError(Exception):
    """Root of every error glassagent raises."""

    result: RunResult[Any] | None = None
    """The partial `RunResult` of the agent run that failed, when the error ended a run."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.args, dict(self.__dict__)))


class UserError(GlassAgentError):
    """The SDK was used in a way it does not support (bad tool definition, bad argument...)."""


class AttachmentError(UserError):
    """An attachment cannot be sent: the policy forbids it, or it cannot be taken, read or fetched.

    Raised when an `AttachmentPolicy` refuses a local path or a URL, when a provider cannot take
    an attachment in the form it has (e.g. a URL for Ollama), or when a file cannot be read or
    a download fails.

    Attributes:
        provider: The provider whose request was being built, when one was.
    """

    def __init__(self, message: str, *, provider: str | None = None) -> None:
        super().__init__(message)
        self.provider = provider


class ContextLengthError(UserError):
    """A conversation is longer than the model's context window (its profile's ``context_length``).

    Raised by the agent before the request is sent, from an estimate of its size (see
    ``docs/profiles.md``), instead of the provider's opaque refusal.

    Attributes:
        estimated_tokens: The estimated size of the request in tokens.
        context_length: The tokens the model reads at most (prompt and answer together).
        model: The model's id.
    """

    def __init__(
        self, message: str, *, estimated_tokens: int, context_length: int, model: str
    ) -> None:
        super().__init__(message)
        self.estimated_tokens = estimated_tokens
        self.context_length = context_length
        self.model = model


class DatasetError(UserError):
    """An evaluation dataset cannot be read: the message names the file, the case and the field.

    Attributes:
        where: The file and case (``cases.jsonl, line 3 (case "add")``), or the index of a
            case built in Python.
        field: The case's field at fault (``expected_tool_calls[0].name``), when one is.
    """

    def __init__(self, message: str, *, where: str = "", field: str | None = None) -> None:
        super().__init__(message)
        self.where = where
        self.field = field


class ConfigurationError(GlassAgentError, ValueError):
    """Required configuration is missing or invalid, e.g. an API key or a base URL."""


class ReplayMismatchError(GlassAgentError):
    """A replayed run differs from its recording (`glassagent.testing.ReplayClient`).

    The agent sent a model request the recording did not expect (a changed prompt, system
    prompt, tool or tool result), made more model calls than were recorded, or emitted other
    events. The message shows a unified diff of the recorded and the actual request (or
    events).

    Attributes:
        call: The model call (1, 2, ...) whose request differed, when one did.
        diff: The unified diff of the recorded (``-``) and the actual (``+``) JSON.
    """

    def __init__(self, message: str, *, call: int | None = None, diff: str = "") -> None:
        super().__init__(message)
        self.call = call
        self.diff = diff


class ProviderError(GlassAgentError, RuntimeError):
    """A model provider failed or answered with an error.

    It is a `RuntimeError` too, as the design documents' providers raise API errors (and
    `AuthenticationError` a `ValueError`), so code written against them catches it as is.

    Attributes:
        status: The HTTP status code, when there was one.
        body: The response body (text), when there was one. Never contains an API key.
        provider: The provider name, e.g. ``"gemini"``.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        body: str | None = None,
        provider: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.body = body
        self.provider = provider


class AuthenticationError(ProviderError, ValueError):
    """The provider rejected the credentials (invalid, missing or unauthorised key)."""


class RateLimitError(ProviderError):
    """The provider is rate limiting requests.

    The built-in clients name the seconds in the message when the provider said how long
    to wait (``... Retry after 20 seconds.``).

    Attributes:
        retry_after: Seconds the provider asked to wait before retrying, when it said.
    """

    def __init__(
        self,
        message: str,
        *,
        retry_after: float | None = None,
        status: int | None = 429,
        body: str | None = None,
        provider: str | None = None,
    ) -> None:
        super().__init__(message, status=status, body=body, provider=provider)
        self.retry_after = retry_after


class ProviderUnavailableError(ProviderError):
    """The provider is temporarily unavailable (408, 5xx, 529, no connection); retried.

    Attributes:
        retry_after: Seconds the provider asked to wait (``Retry-After``), when it said.
    """

    def __init__(
        self,
        message: str,
        *,
        retry_after: float | None = None,
        status: int | None = None,
        body: str | None = None,
        provider: str | None = None,
    ) -> None:
        super().__init__(message, status=status, body=body, provider=provider)
        self.retry_after = retry_after


class ProviderTimeoutError(ProviderUnavailableError):
    """A model call took too long: past its deadline, or no bytes arrived for too long.

    Attributes:
        kind: ``"deadline"`` (`ModelSettings.timeout`, the whole call, retries included; not
            retried) or ``"stall"`` (`ModelSettings.stall_timeout` without a byte; retried
            like a lost connection while nothing was passed on yet).
        seconds: The limit that was reached.
    """

    def __init__(
        self, message: str, *, kind: Literal["deadline", "stall"], seconds: float, provider: str
    ) -> None:
        super().__init__(message, provider=provider)
        self.kind = kind
        self.seconds = seconds


class ResponseParseError(ProviderError):
    """The provider's response could not be understood (malformed body, truncated stream)."""


class ToolCallFormatError(ResponseParseError):
    """The server could not read the model's reply as a tool call, and sent no answer.

    llama.cpp's server answers so (HTTP 500, or an error event mid-stream) when the model
    names a tool that does not exist or breaks the tool-call format of its chat template.
    It is not retried: the same prompt tends to fail the same way. An agent run tells the
    model what went wrong and which tools exist and lets it try again within
    `max_iterations` (its ``llm_response`` event has ``protocol_error`` set); a direct call
    raises it.
    """


UNREADABLE_REPLY = "unreadable_tool_call"
"""The ``raw_stop_reason`` an agent run records for a `ToolCallFormatError` (replays raise it)."""


class ContentBlockedError(ProviderError):
    """The provider refused the prompt or stopped the answer (safety or similar reasons).

    Attributes:
        reason: The provider's reason, e.g. ``SAFETY`` or ``PROHIBITED_CONTENT``.
    """

    def __init__(self, message: str, *, reason: str, provider: str | None = None) -> None:
        super().__init__(message, provider=provider)
        self.reason = reason


class ToolError(GlassAgentError):
    """Raised by a tool to report a clean error message back to the model.

    The agent catches it (like any exception a tool raises) and sends its message to the model
    as an error result, so the model can correct itself.
    """


class MCPServerError(GlassAgentError):
    """An MCP server could not be started, listed or reached, or it broke its protocol.

    A failing tool call does not raise it during a run: the model gets the failure as the
    tool's error result.

    Attributes:
        server: The server's name (`MCPServer.name`).
    """

    def __init__(self, message: str, *, server: str) -> None:
        super().__init__(message)
        self.server = server


class RunError(GlassAgentError):
    """Base of the errors that end an agent run without a final answer."""


class MaxIterationsExceeded(RunError):
    """The run reached `max_iterations` model calls without a final answer."""

    def __init__(self, message: str, *, max_iterations: int) -> None:
        super().__init__(message)
        self.max_iterations = max_iterations


class RunTimeoutError(RunError):
    """The run took longer than the agent's `run_timeout`; what it produced so far is kept.

    Attributes:
        seconds: The limit that was reached.
    """

    def __init__(self, message: str, *, seconds: float) -> None:
        super().__init__(message)
        self.seconds = seconds


class OutputValidationError(RunError):
    """The model's answer did not validate as the agent's `output_type`, retries included.

    Each invalid answer went back to the model with its errors, up to the agent's
    ``output_retries``; this is raised for the last one.

    Attributes:
        text: The last raw output: the answer's text, or the final-answer tool's arguments
            as JSON.
        errors: What was wrong with it, one line each (``"age: Input should be a valid
            integer"``).
    """

    def __init__(self, message: str, *, text: str, errors: tuple[str, ...]) -> None:
        super().__init__(message)
        self.text = text
        self.errors = errors


class RunAborted(RunError):
    """The run was aborted (``run.abort()`` or cancellation) before it finished.

    Attributes:
        reason: The reason given to ``abort()``.
    """

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class HistoryAppendError(GlassAgentError):
    """A run ended, but its turn could not be appended to the history (``append_to_history``).

    The run itself ended as usual (its terminal event was sent); awaiting it, or iterating it
    past its last event, raises this error instead of returning. ``result`` is the run's
    result and ``__cause__`` what the history refused.

    Attributes:
        appended: Ids of the messages appended before the refusal; they stay in the history.
    """

    def __init__(self, message: str, *, appended: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.appended = appended


@dataclass(frozen=True)
class HistoryProblem:
    """One thing wrong with a history document, and where."""

    location: str
    """Where in the document, e.g. ``messages[3].parent_id`` or ``messages["a1"].role``."""
    message: str
    """What is wrong there."""

    def __str__(self) -> str:
        return f"{self.location}: {self.message}"


_SHOWN_PROBLEMS = 20


class HistoryValidationError(GlassAgentError, ValueError):
    """A history document is invalid; `problems` lists everything found, with locations.

    Attributes:
        problems: Every problem found, in document order.
    """

    def __init__(self, problems: tuple[HistoryProblem, ...] | list[HistoryProblem]) -> None:
        problems = tuple(problems)
        lines = [f"  - {p}" for p in problems[:_SHOWN_PROBLEMS]]
        if len(problems) > _SHOWN_PROBLEMS:
            lines.append(f"  ... and {len(problems) - _SHOWN_PROBLEMS} more (see .problems)")
        count = "1 problem" if len(problems) == 1 else f"{len(problems)} problems"
        super().__init__(f"Invalid history ({count}):\n" + "\n".join(lines))
        self.problems = problems


class HistoryConflictError(GlassAgentError):
    """A stored chat changed since it was loaded; saving would silently lose the other write.

    Attributes:
        chat_id: The chat that changed.
        expected_revision: The revision the history was loaded from (`None`: a new chat).
        actual_revision: The revision found in the store (`None`: the chat was deleted).
    """

    def __init__(
        self,
        message: str,
        *,
        chat_id: str,
        expected_revision: str | None,
        actual_revision: str | None,
    ) -> None:
        super().__init__(message)
        self.chat_id = chat_id
        self.expected_revision = expected_revision
        self.actual_revision = actual_revision
