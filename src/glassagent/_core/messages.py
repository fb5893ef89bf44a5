"""Neutral, provider-independent model types: messages, tool calls, responses, settings."""

from __future__ import annotations

import mimetypes
import os
import posixpath
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal, get_args
from urllib.parse import unquote, urlsplit

from glassagent._core.caching import PromptCache, check_prompt_cache
from glassagent._core.errors import AttachmentError, UserError
from glassagent._core.options import ProviderOptions, check_integer, check_number
from glassagent._core.output import OutputSchema
from glassagent._core.retry import RetryPolicy

Role = Literal["system", "user", "assistant", "tool"]
"""Who wrote a message."""

MessageStatus = Literal["completed", "aborted", "unreadable"]
"""Whether a message was finished, cut short by an abort, or (an assistant reply) could not be
read as the tool protocol: ``completed``, ``aborted`` or ``unreadable``."""

StopReason = Literal["tool_use", "end_turn", "max_tokens", "content_filter", "other"]
"""Why the model stopped producing output: ``tool_use`` (it asked for tools), ``end_turn``
(a natural end or a stop sequence), ``max_tokens`` (cut by the token limit), ``content_filter``
(the provider stopped or withheld the answer, e.g. for safety) or ``other`` (any other reason
the provider gave; `LLMResponse.raw_stop_reason` holds it)."""

ToolProtocol = Literal["native", "json", "auto"]
"""How a client offers tools to the model: the provider's own tool calling (``native``), the
JSON tool protocol in the system prompt (``json``), or ``auto`` until the client has decided."""

_ROLES = frozenset(get_args(Role))
_STATUSES = frozenset(get_args(MessageStatus))


@dataclass(frozen=True)
class ToolCall:
    """A request from the model to call one tool.

    Its `input` must be a dict (`UserError` otherwise); a client that cannot read the model's
    arguments as one sets `arguments_error` instead.
    """

    id: str
    """Unique id of this call; its result refers back to it."""
    name: str
    """Name of the tool the model wants to call."""
    input: dict[str, Any]
    """Arguments the model gave, as parsed JSON."""
    provider_metadata: Mapping[str, Any] = field(default_factory=dict)
    """Opaque provider data that must round-trip (e.g. Gemini's thought signature)."""
    arguments_error: str | None = None
    """Why the model's arguments could not be parsed (e.g. invalid JSON), or `None`. A client
    sets it, with empty `input`; the agent does not run such a call but sends the reason back
    to the model as an error result, so the model can correct itself. Not saved in histories
    (the error result is)."""

    def __post_init__(self) -> None:
        if not isinstance(self.input, dict):  # one check: calls are made on the hot path
            raise UserError(
                f"ToolCall.input must be a dict of arguments, not {type(self.input).__name__}."
            )


def new_call_id() -> str:
    """A fresh tool-call id, for calls the provider sent without one: ``call_`` + 24 hex digits."""
    return f"call_{uuid.uuid4().hex[:24]}"


REMOTE_SCHEMES = ("http", "https")
"""URL schemes an `Attachment` may point at: providers fetch them, or glassagent downloads them."""


@dataclass(frozen=True, kw_only=True)
class Attachment:
    """A file sent to the model with a message: a path on disk, bytes, or a remote URL.

    Exactly one of `path`, `data` and `url` is set. A path is read when a request is built; a
    URL is passed to providers that fetch URLs themselves, or downloaded when an
    `AttachmentPolicy` allows it (see the clients' ``attachment_policy``).
    """

    path: str | None = None
    """Path of a file to send; read by the provider client when the request is built."""
    data: bytes | None = None
    """The file's content, when it is not read from `path`."""
    url: str | None = None
    """An ``http:`` or ``https:`` URL of the file, for providers that fetch it themselves."""
    mime_type: str | None = None
    """The file's media type, e.g. ``image/png``; guessed from `path` or `url` when not given."""
    name: str | None = None
    """A display name; defaults to the file name of `path` or `url`."""

    def __post_init__(self) -> None:
        if sum(v is not None for v in (self.path, self.data, self.url)) != 1:
            raise UserError("An Attachment needs exactly one of `path`, `data` or `url`.")
        if self.data is not None:
            if self.mime_type is None:
                raise UserError("An Attachment made from bytes needs a `mime_type`.")
            return
        if self.url is not None:
            try:
                parts = urlsplit(self.url)
                _ = parts.port  # a port that is not a number raises here
            except ValueError:
                raise AttachmentError(f"Not a valid URL: {self.url[:200]!r}.") from None
            if parts.scheme.lower() not in REMOTE_SCHEMES or not parts.netloc:
                raise AttachmentError(
                    f"An Attachment's `url` must be an http: or https: URL, not {self.url[:200]!r}."
                )
            where = unquote(parts.path)
            base = posixpath.basename(where) or None
        else:
            where = self.path  # type: ignore[assignment]  # the one set
            base = os.path.basename(where)
        if self.mime_type is None:
            guessed, _ = mimetypes.guess_type(where)
            object.__setattr__(self, "mime_type", guessed or "application/octet-stream")
        if self.name is None:
            object.__setattr__(self, "name", base)

    @classmethod
    def from_path(cls, path: str | os.PathLike[str], mime_type: str | None = None) -> Attachment:
        """Make an attachment from a file path, guessing the mime type from its name.

        Args:
            path: The file to attach.
            mime_type: Overrides the guessed media type.
        """
        return cls(path=os.fspath(path), mime_type=mime_type)

    @classmethod
    def from_url(cls, url: str, mime_type: str | None = None) -> Attachment:
        """Make an attachment from an ``http(s):`` URL, guessing the mime type from its path.

        Args:
            url: Where the file is.
            mime_type: Overrides the guessed media type.

        Raises:
            AttachmentError: For another kind of URL.
        """
        return cls(url=url, mime_type=mime_type)

    def read_bytes(self) -> bytes:
        """Return the attachment's content, reading the file when it was given by path.

        Raises:
            AttachmentError: When the file cannot be read, or for a remote attachment (its
                bytes are downloaded by a client whose `AttachmentPolicy` allows it).
        """
        if self.data is not None:
            return self.data
        if self.url is not None:
            raise AttachmentError(
                f"Attachment {self.name or self.url!r} is remote ({self.url[:200]}); it has no "
                "local bytes. Only a client whose AttachmentPolicy allows downloads fetches it."
            )
        assert self.path is not None
        try:
            with open(self.path, "rb") as f:
                return f.read()
        except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise AttachmentError(f"Cannot read attachment {self.path!r}: {reason}.") from None


@dataclass(frozen=True, kw_only=True)
class Message:
    """One message of a conversation, independent of any provider's wire format.

    An unknown `role` or `status`, or `content` that is not a string, is a `UserError`.
    """

    role: Role
    """Who wrote it: ``system``, ``user``, ``assistant`` or ``tool``."""
    content: str = ""
    """The text of the message (for a tool message: the tool's output)."""
    tool_calls: tuple[ToolCall, ...] = ()
    """Tool calls an assistant message asked for."""
    tool_call_id: str | None = None
    """For a tool message: the id of the `ToolCall` it answers."""
    name: str | None = None
    """For a tool message: the name of the tool that produced it."""
    is_error: bool = False
    """For a tool message: whether the output is an error report."""
    attachments: tuple[Attachment, ...] = ()
    """Files sent with a user message."""
    thinking: str | None = None
    """The model's visible reasoning that came with an assistant message."""
    status: MessageStatus = "completed"
    """``aborted`` when the message was cut short by an abort; ``unreadable`` for an
    assistant reply that could not be read as a tool call (kept with the text that came)."""
    provider_metadata: Mapping[str, Any] = field(default_factory=dict)
    """Opaque provider data that must round-trip with the message."""
    protocol: bool = False
    """Written by the agent's tool protocol, not by the user: the ``user`` message that tells
    the model its last reply could not be read. Sent to the model within its run only."""
    summary_of: int | None = None
    """For a summary a `Summarize` context policy wrote (a ``system`` message): how many
    messages of the thread, from its start, the summary stands for (summaries and the tool
    protocol's own traffic not counted). `None` for any other message. The policy sends the
    summary in place of those messages (see "Long conversations")."""
    pinned: bool = False
    """Always sent: a context policy never leaves a pinned message out of a request."""

    def __post_init__(self) -> None:
        try:  # cheap checks only: messages are made on the hot path
            known = self.role in _ROLES and self.status in _STATUSES
        except TypeError:  # an unhashable role or status
            known = False
        if not known or not isinstance(self.content, str):
            raise UserError(_message_problem(self))


def _message_problem(message: Message) -> str:
    """What is wrong with a message `Message.__post_init__` refuses."""
    if not isinstance(message.role, str) or message.role not in _ROLES:
        return f"Message.role must be one of {sorted(_ROLES)}, not {message.role!r}."
    if not isinstance(message.content, str):
        return f"Message.content must be a str, not {type(message.content).__name__}."
    return f"Message.status must be one of {sorted(_STATUSES)}, not {message.status!r}."


@dataclass(frozen=True)
class ToolDefinition:
    """What a model is told about a tool."""

    name: str
    """The tool's name, as the model calls it."""
    description: str
    """What the tool does, for the model."""
    parameters: dict[str, Any]
    """JSON Schema of the tool's arguments (an ``object`` schema)."""


@dataclass(frozen=True, repr=False)
class Usage:
    """Token counts of one or more model calls; add them with ``+``."""

    input_tokens: int = 0
    """Tokens in the prompt."""
    output_tokens: int = 0
    """Tokens in the answer (text and tool calls)."""
    thinking_tokens: int = 0
    """Tokens spent on reasoning."""
    cache_read_tokens: int = 0
    """Of `input_tokens`, those the provider read from its prompt cache (billed cheaper)."""
    cache_write_tokens: int = 0
    """Of `input_tokens`, those the provider wrote into its prompt cache (Anthropic bills
    them dearer; on Gemini, a new cache's tokens, billed at the input price on top of the
    prompt)."""

    def __repr__(self) -> str:
        fields = [
            f"input_tokens={self.input_tokens}",
            f"output_tokens={self.output_tokens}",
            f"thinking_tokens={self.thinking_tokens}",
        ]
        fields += [  # the cache counts only when a provider reported some
            f"{name}={value}"
            for name, value in (
                ("cache_read_tokens", self.cache_read_tokens),
                ("cache_write_tokens", self.cache_write_tokens),
            )
            if value
        ]
        return f"Usage({', '.join(fields)})"

    @property
    def total_tokens(self) -> int:
        """All tokens: input, output and thinking."""
        return self.input_tokens + self.output_tokens + self.thinking_tokens

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.thinking_tokens + other.thinking_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )


def _check_tool_choice(value: Any) -> None:
    """Raise `UserError` unless `value` is `None` or a non-empty string."""
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise UserError(
            "ModelSettings.tool_choice must be 'auto', 'required', 'none' or a tool's name, "
            f"not {value!r}."
        )


@dataclass(frozen=True, kw_only=True)
class ModelSettings:
    """Generation settings; `None` means "the provider's default"."""

    temperature: float | None = None
    """Sampling temperature, from 0.0 to 2.0."""
    max_tokens: int | None = None
    """Upper bound on output tokens per model call (at least 1)."""
    thinking_budget: int | None = None
    """Tokens the model may spend on reasoning: 0 turns reasoning off, -1 lets the model
    decide. Gemini honours the number; Ollama only turns thinking on or off; the
    OpenAI-compatible client refuses it (see `OpenAIOptions.reasoning_effort`)."""
    timeout: float | None = None
    """Seconds one model call may take in all, retries and waits included; past it the call
    ends with `ProviderTimeoutError` (``kind="deadline"``). `None`: no deadline."""
    stop_sequences: tuple[str, ...] | None = None
    """Strings that end generation when produced (a list is taken as a tuple)."""
    tool_choice: str | None = None
    """Whether and which tools the model must call: ``"auto"`` (it decides), ``"required"``
    (it must call one), ``"none"`` (it must not call any) or one tool's name (it must call
    that tool; the three words win over tools of those names). A name not among the
    request's tools is a `UserError`; a client that cannot honour a choice exactly refuses
    it with `ConfigurationError`. An agent run sends ``"required"`` or a name only until
    tools have run, then ``"auto"`` (see "Tool choice" in the clients guide). `None`: the
    provider's default (``"auto"``)."""
    stall_timeout: float | None = None
    """Seconds a model call may go without receiving a byte (`None`: 300, as local models on
    a CPU can think for minutes before answering); past it `ProviderTimeoutError`
    (``kind="stall"``)."""
    max_response_bytes: int | None = None
    """The largest answer body accepted, in bytes (`None`: 32 MiB); a larger one fails fast
    with `ResponseParseError`, before it is held in memory."""
    retry: RetryPolicy | None = None
    """How failed calls are retried; `None`: the client's policy (by default `RetryPolicy()`)."""
    provider_options: ProviderOptions | None = None
    """Settings only one provider family understands: an instance of a `ProviderOptions`
    subclass (`OpenAIOptions`, `OllamaOptions`, `GeminiOptions`, `AnthropicOptions`, or a
    plugin's own), passed to its client unchanged; a client of another family refuses them
    with `ConfigurationError`."""
    output_schema: OutputSchema | None = None
    """A JSON Schema the answer must follow, in the provider's own constrained mode; a
    client that has none refuses it with `ConfigurationError`. `Agent(output_type=...)`
    sets it for clients whose `BaseLLMClient.output_mode` is ``native``."""
    prompt_cache: bool | PromptCache | None = None
    """Prompt caching, where the provider offers it: `None` asks for it when the prompt is
    at least the provider's minimum for the model (about 1024 tokens), ``False`` turns it
    off, ``True`` asks for it whatever the size, and a `PromptCache` says what to cache and
    for how long. Anthropic gets ``cache_control`` breakpoints, OpenAI a
    ``prompt_cache_key``, Gemini an explicit cached content (see "Prompt caching")."""

    def __post_init__(self) -> None:
        if self.output_schema is not None and not isinstance(self.output_schema, OutputSchema):
            raise UserError(
                "ModelSettings.output_schema must be an OutputSchema, "
                f"not {type(self.output_schema).__name__}."
            )
        for name in ("timeout", "stall_timeout"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int | float) or not value > 0
            ):
                raise UserError(
                    f"ModelSettings.{name} must be a positive number of seconds, not {value!r}."
                )
        check_integer("ModelSettings", "max_response_bytes", self.max_response_bytes, 1)
        if self.retry is not None and not isinstance(self.retry, RetryPolicy):
            raise UserError(
                f"ModelSettings.retry must be a RetryPolicy, not {type(self.retry).__name__}."
            )
        check_number("ModelSettings", "temperature", self.temperature, 0.0, 2.0)
        check_integer("ModelSettings", "max_tokens", self.max_tokens, 1)
        check_integer("ModelSettings", "thinking_budget", self.thinking_budget, -1)
        self._check_stop_sequences()
        _check_tool_choice(self.tool_choice)
        check_prompt_cache(self.prompt_cache)
        options = self.provider_options
        if options is not None and not isinstance(options, ProviderOptions):
            raise UserError(
                "ModelSettings.provider_options must be provider options (of a ProviderOptions "
                f"subclass, e.g. OpenAIOptions(...)), not {type(options).__name__}."
            )
        self._check_overlaps()

    def _check_stop_sequences(self) -> None:
        stops = self.stop_sequences
        if stops is None:
            return
        if isinstance(stops, str) or not isinstance(stops, tuple | list):
            raise UserError(
                "ModelSettings.stop_sequences must be a tuple of strings, e.g. ('END',), "
                f"not {stops!r}."
            )
        if not all(isinstance(s, str) and s for s in stops):
            raise UserError("ModelSettings.stop_sequences must hold non-empty strings only.")
        object.__setattr__(self, "stop_sequences", tuple(stops))

    def _check_overlaps(self) -> None:
        """Refuse an option that says again what a portable field already says."""
        options = self.provider_options
        clashes = () if options is None else options.overlaps(self)
        if clashes:
            name, option = clashes[0]
            raise UserError(f"ModelSettings.{name} and {option} say the same thing; set one.")

    def merge(self, other: ModelSettings | None) -> ModelSettings:
        """Return these settings overridden by every field `other` sets (not `None`).

        Provider options of the same class are merged field by field (see
        `ProviderOptions.merge`).

        Args:
            other: Settings that take precedence, e.g. run-level over agent-level.

        Raises:
            UserError: When the two carry provider options of different providers.
        """
        if other is None:
            return self
        changes = {f.name: v for f in fields(other) if (v := getattr(other, f.name)) is not None}
        mine, theirs = self.provider_options, other.provider_options
        if mine is not None and theirs is not None:
            if type(mine) is not type(theirs):
                raise UserError(
                    f"Cannot merge ModelSettings.provider_options={type(theirs).__name__}(...) "
                    f"into {type(mine).__name__}(...): they are for different providers."
                )
            changes["provider_options"] = mine.merge(theirs)
        return replace(self, **changes) if changes else self


@dataclass(frozen=True)
class WireRecord:
    """The bodies of one model call as they crossed the wire, kept for recordings.

    A client made with ``record_wire=True`` attaches one to each answer
    (`LLMResponse.wire`); the agent copies it into the ``llm_response`` event, so
    `save_events` keeps it. Bodies only: no headers, so no ``Authorization`` or key
    header; a key the server echoes inside a body is masked (e.g. ``sk-p...x9Qk``).
    """

    request: Any
    """The JSON body sent, as a JSON value (the attempt that answered, when a call was
    retried)."""
    response: Any
    """The JSON body received. For a streamed call, the list of its chunks' JSON payloads in
    the order they came: each SSE ``data:`` payload (OpenAI's closing ``[DONE]`` marker left
    out, Anthropic's ``ping`` kept) or each NDJSON line (Ollama)."""
    streamed: bool = False
    """Whether the answer came as a stream of chunks."""


@dataclass(frozen=True)
class LLMResponse:
    """One complete answer of a model: text, tool calls, reasoning and usage."""

    text: str = ""
    """The answer's text (may be empty when the model only calls tools)."""
    tool_calls: tuple[ToolCall, ...] = ()
    """Tools the model asked to call."""
    stop_reason: StopReason = "end_turn"
    """Why the model stopped; always ``tool_use`` when there are tool calls."""
    thinking: str | None = None
    """The model's visible reasoning, when it produced any."""
    usage: Usage = field(default_factory=Usage)
    """Tokens used by this call."""
    model: str | None = None
    """The model that answered, as reported by the provider."""
    provider_metadata: Mapping[str, Any] = field(default_factory=dict)
    """Opaque provider data for the assistant message (e.g. a thought signature on its text)."""
    raw_response: Any = field(default=None, repr=False, compare=False)
    """The provider's raw response (parsed JSON, or the list of streamed chunks), for inspection."""
    raw_request: Any = field(default=None, repr=False, compare=False)
    """The exact JSON body sent over the wire (never containing an API key), for inspection."""
    protocol_error: str | None = None
    """Set when the reply did not follow the tool protocol the client asked for and the client
    fell back (e.g. a JSON-protocol reply that could not be parsed became the final text)."""
    timings: Mapping[str, float] = field(default_factory=dict, compare=False)
    """Durations the server reported, in milliseconds (e.g. ``{"eval_ms": 812.5}``)."""
    raw_stop_reason: str | None = None
    """The provider's own finish reason, as sent (e.g. ``length``, ``MAX_TOKENS``,
    ``MODEL_ARMOR``); `None` when it sent none. `stop_reason` is its neutral reading."""
    wire: WireRecord | None = field(default=None, repr=False, compare=False)
    """The call's wire bodies, key masked, when the client records them (``record_wire=True``);
    `None` otherwise. The agent puts it into the ``llm_response`` event."""

    def __post_init__(self) -> None:
        if not isinstance(self.tool_calls, tuple):
            object.__setattr__(self, "tool_calls", tuple(self.tool_calls))
        if self.tool_calls and self.stop_reason != "tool_use":
            object.__setattr__(self, "stop_reason", "tool_use")


@dataclass(frozen=True)
class TextDelta:
    """A piece of answer text, streamed as it arrives."""

    text: str
    """The new text."""
    kind: Literal["text"] = "text"
    """Tag of this stream part."""


@dataclass(frozen=True)
class ThinkingDelta:
    """A piece of the model's reasoning, streamed as it arrives."""

    text: str
    """The new reasoning text."""
    kind: Literal["thinking"] = "thinking"
    """Tag of this stream part."""


@dataclass(frozen=True, kw_only=True)
class RetryNotice:
    """A model call failed before any answer and will be tried again after `delay` seconds."""

    attempt: int
    """Which retry this is: 1 for the first."""
    delay: float
    """Seconds waited before the retry."""
    error: str
    """Why the previous attempt failed (never holds a key)."""
    error_type: str
    """The error's class name, e.g. ``RateLimitError``."""
    status: int | None = None
    """The HTTP status of the failure, when there was one."""
    kind: Literal["retry"] = "retry"
    """Tag of this stream part."""


StreamPart = TextDelta | ThinkingDelta | RetryNotice | LLMResponse
"""What `BaseLLMClient.stream` yields: deltas (and `RetryNotice`s), then one `LLMResponse`."""

__all__ = [
    "Attachment",
    "LLMResponse",
    "Message",
    "MessageStatus",
    "ModelSettings",
    "RetryNotice",
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
]
