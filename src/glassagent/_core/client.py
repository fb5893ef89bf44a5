"""`BaseLLMClient`: the one interface every model backend implements."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import aclosing
from types import TracebackType
from typing import TYPE_CHECKING, cast

from glassagent._core.messages import (
    LLMResponse,
    Message,
    ModelSettings,
    StreamPart,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    ToolDefinition,
    ToolProtocol,
)

if TYPE_CHECKING:
    from typing_extensions import Self

    from glassagent._core.output import OutputMode
    from glassagent._core.profiles.model import ModelProfile
    from glassagent._core.request import ModelRequest
    from glassagent._core.result import ToolResult


class BaseLLMClient(ABC):
    """Base class of model backends.

    A backend implements `chat` only; `stream` falls back to it. Backends that can stream
    override `stream` too. Clients are async context managers: ``async with client: ...``
    closes their connections on exit.
    """

    provider_name: str = "custom"
    """Name of the provider, shown in events and errors (e.g. ``"gemini"``)."""
    model: str = "unknown"
    """The model this client talks to."""
    tool_protocol: ToolProtocol = "native"
    """How this client offers tools to the model (shown in ``llm_request`` events)."""

    @property
    def profile(self) -> ModelProfile | None:
        """The profile of `model` served by `provider_name` (`glassagent.profiles.get_profile`).

        Profiles are read once per process, on first use; ``None`` when no profile describes
        the model.

        Raises:
            ConfigurationError: When a profile file or plugin is invalid.
        """
        from glassagent._core.profiles.load import get_profile

        return get_profile(self.model, self.provider_name)

    @abstractmethod
    async def chat(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        system: str | None = None,
        *,
        settings: ModelSettings | None = None,
    ) -> LLMResponse:
        """Send a conversation to the model and return its complete answer.

        Args:
            messages: The conversation so far, oldest first.
            tools: Tools the model may call.
            system: The system instructions, if any.
            settings: Generation settings for this call.

        Returns:
            The model's answer.
        """

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        system: str | None = None,
        *,
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[StreamPart]:
        """Stream the model's answer: text and thinking deltas, then one final `LLMResponse`.

        The default calls `chat` and yields its thinking and text as one delta each.

        Args:
            messages: The conversation so far, oldest first.
            tools: Tools the model may call.
            system: The system instructions, if any.
            settings: Generation settings for this call.

        Yields:
            `ThinkingDelta` and `TextDelta` parts, then exactly one `LLMResponse`.
        """
        response = await self.chat(messages, tools, system, settings=settings)
        if response.thinking:
            yield ThinkingDelta(response.thinking)
        if response.text:
            yield TextDelta(response.text)
        yield response

    async def send(self, request: ModelRequest) -> LLMResponse:
        """Send one `ModelRequest` and return the complete answer.

        The agent calls this; the default hands the request to `chat` as its four
        arguments, so a client that implements only `chat` serves it. The built-in clients
        read the request's resolved tool choice directly.

        Args:
            request: The call, built once by `ModelRequest.build`.
        """
        return await self.chat(
            request.messages, request.tools, request.system, settings=request.settings
        )

    def send_stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        """Stream the answer to one `ModelRequest`; the default hands it to `stream`.

        Args:
            request: The call, built once by `ModelRequest.build`.
        """
        return self.stream(
            request.messages, request.tools, request.system, settings=request.settings
        )

    def format_assistant_message(self, response: LLMResponse) -> Message:
        """Turn a model answer into the assistant `Message` kept in the conversation.

        Args:
            response: The model's answer.
        """
        return Message(
            role="assistant",
            content=response.text,
            tool_calls=response.tool_calls,
            thinking=response.thinking,
            provider_metadata=response.provider_metadata,
        )

    def format_tool_result(self, call: ToolCall, result: ToolResult) -> Message:
        """Turn a tool's result into the `Message` sent back to the model.

        Args:
            call: The call the result answers.
            result: The tool's result.
        """
        return Message(
            role="tool",
            content=result.output,
            tool_call_id=call.id,
            name=call.name,
            is_error=result.is_error,
        )

    def output_mode(self, *, tools: bool, settings: ModelSettings) -> OutputMode:
        """How a run of this client gets an answer that follows an output schema.

        ``native`` means the client honours `ModelSettings.output_schema` (its provider's
        constrained mode) for a request with these tools and settings; ``tool`` asks for the
        final-answer tool, ``prompted`` for the schema in the system prompt. The default is
        ``tool``: a client of your own gets the schema only as a tool it may call, unless it
        overrides this.

        Args:
            tools: Whether the run offers tools of its own.
            settings: The run's settings.
        """
        return "tool"

    async def resolve_tool_protocol(self, settings: ModelSettings | None = None) -> ToolProtocol:
        """Decide how tools are offered, before a call that offers them; return the choice.

        The agent awaits it before each model call with tools while `tool_protocol` is
        ``"auto"``, so the ``llm_request`` event shows the protocol the call uses. The default
        returns `tool_protocol`; a client that decides later (``OllamaClient`` asks its server
        once) overrides it and sets `tool_protocol` to the choice.

        Args:
            settings: The settings of the call about to be made (its limits and timeout).

        Raises:
            ProviderError: When the client cannot decide (e.g. the server cannot be reached).
        """
        return self.tool_protocol

    @property
    def tokenizer(self) -> str | None:
        """What `count_tokens` counts with (e.g. ``"llama.cpp /tokenize"``); `None`: nothing.

        The default is the wrapped client's (see `count_tokens`).
        """
        inner = _wrapped(self)
        return inner.tokenizer if inner is not None else None

    async def count_tokens(self, texts: Sequence[str]) -> list[int] | None:
        """How many tokens each of `texts` is for `model`, by the model's own tokenizer.

        A context policy (`glassagent.context`) measures requests with it. `None` means the
        client cannot count now (it has no tokenizer, or its tokenizer failed): the agent
        then estimates four characters a token. Counts are of the text alone; a chat
        template's few tokens around each message are not included. The default asks the
        client this one wraps (the ``inner`` client of the JSON tool protocol's and a durable
        run's wrappers), else returns `None`.

        Args:
            texts: The texts to count, e.g. one per message.
        """
        inner = _wrapped(self)
        return await inner.count_tokens(texts) if inner is not None else None

    async def aclose(self) -> None:  # noqa: B027 - optional hook, empty by default
        """Release the client's resources (HTTP connections). The default does nothing."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(provider={self.provider_name!r}, model={self.model!r})"


def _wrapped(client: BaseLLMClient) -> BaseLLMClient | None:
    """The client `client` wraps (its ``inner``), if any."""
    inner = getattr(client, "inner", None)
    return inner if isinstance(inner, BaseLLMClient) and inner is not client else None


def stream_request(client: BaseLLMClient, request: ModelRequest) -> AsyncIterator[StreamPart]:
    """`client`'s streamed answer to `request`, by its most specific streaming method.

    A subclass that overrides `BaseLLMClient.stream` below the class that gave it
    `BaseLLMClient.send_stream` (a built-in client's subclass that logs, say) keeps being
    called through its `stream`; otherwise the request goes whole to `send_stream`.
    """
    if _lowest(type(client), "send_stream", "stream") == "stream":
        return client.stream(
            request.messages, request.tools, request.system, settings=request.settings
        )
    return client.send_stream(request)


async def send_request(client: BaseLLMClient, request: ModelRequest) -> LLMResponse:
    """`client`'s whole answer to `request`, by `send` or a lower override of `chat`."""
    if _lowest(type(client), "send", "chat") == "chat":
        return await client.chat(
            request.messages, request.tools, request.system, settings=request.settings
        )
    return await client.send(request)


def _lowest(cls: type, new: str, old: str) -> str:
    """Which of two methods `cls` defines lowest in its MRO (`new` when one class has both)."""
    for klass in cls.__mro__:
        if new in vars(klass):
            return new
        if old in vars(klass):
            return old
    return new


class RequestClient(BaseLLMClient):
    """A client that takes whole `ModelRequest`s: `chat` and `stream` build one and hand it on.

    A subclass implements `send` and `send_stream`; a call of `chat` or `stream` with the
    four parts builds the request (resolving its tool choice) once and sends it.
    """

    async def chat(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        system: str | None = None,
        *,
        settings: ModelSettings | None = None,
    ) -> LLMResponse:
        """Send the conversation and return the complete answer (`send`).

        Args:
            messages: The conversation so far, oldest first.
            tools: Tools the model may call.
            system: The system instructions, if any.
            settings: Generation settings for this call.
        """
        from glassagent._core.request import ModelRequest

        return await self.send(ModelRequest.build(messages, tools, system, settings))

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        system: str | None = None,
        *,
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[StreamPart]:
        """Stream the answer (`send_stream`); closing this generator closes that one at once.

        Args:
            messages: The conversation so far, oldest first.
            tools: Tools the model may call.
            system: The system instructions, if any.
            settings: Generation settings for this call.

        Yields:
            `ThinkingDelta` and `TextDelta` parts, then exactly one `LLMResponse`.
        """
        from glassagent._core.request import ModelRequest

        request = ModelRequest.build(messages, tools, system, settings)
        parts = cast("AsyncGenerator[StreamPart, None]", self.send_stream(request))
        async with aclosing(parts):
            async for part in parts:
                yield part

    @abstractmethod
    async def send(self, request: ModelRequest) -> LLMResponse:
        """Send one `ModelRequest` and return the complete answer."""

    @abstractmethod
    def send_stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        """Stream the answer to one `ModelRequest`."""
