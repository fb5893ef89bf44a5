"""Test doubles: clients that answer from a script or a function, with no network."""

from __future__ import annotations

import asyncio
import inspect
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass

from glassagent._core.client import BaseLLMClient
from glassagent._core.errors import UserError
from glassagent._core.messages import (
    LLMResponse,
    Message,
    ModelSettings,
    StreamPart,
    TextDelta,
    ThinkingDelta,
    ToolDefinition,
)

_PIECES = re.compile(r"\S+\s*|\s+")


@dataclass(frozen=True)
class RecordedRequest:
    """One request a test client received."""

    messages: tuple[Message, ...]
    """The conversation sent."""
    tools: tuple[ToolDefinition, ...]
    """The tools offered."""
    system: str | None
    """The system instructions."""
    settings: ModelSettings | None
    """The generation settings."""


def split_text(text: str, parts: int = 3) -> list[str]:
    """Split `text` into up to `parts` chunks on word boundaries (their join is `text`)."""
    words = _PIECES.findall(text)
    if len(words) <= 1:
        return [text] if text else []
    size = -(-len(words) // parts)
    return ["".join(words[i : i + size]) for i in range(0, len(words), size)]


class _RecordingClient(BaseLLMClient):
    """Shared by the test clients: records requests and streams answers in chunks."""

    def __init__(self, *, model: str, chunk_delay: float) -> None:
        self.model = model
        self.chunk_delay: float = chunk_delay
        """Seconds to wait before each streamed chunk (to simulate a slow model)."""
        self.requests: list[RecordedRequest] = []
        """Every request received, oldest first."""

    async def _answer(self, request: RecordedRequest) -> LLMResponse:
        raise NotImplementedError

    async def chat(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        system: str | None = None,
        *,
        settings: ModelSettings | None = None,
    ) -> LLMResponse:
        """Record the request and return the next answer."""
        request = RecordedRequest(tuple(messages), tuple(tools), system, settings)
        self.requests.append(request)
        return await self._answer(request)

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        system: str | None = None,
        *,
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[StreamPart]:
        """Record the request and stream the next answer: thinking, then text in chunks."""
        response = await self.chat(messages, tools, system, settings=settings)
        parts: list[StreamPart] = [ThinkingDelta(t) for t in split_text(response.thinking or "")]
        parts += [TextDelta(t) for t in split_text(response.text)]
        for part in parts:
            if self.chunk_delay:
                await asyncio.sleep(self.chunk_delay)
            yield part
        yield response


ScriptItem = LLMResponse | str
"""One scripted answer: an `LLMResponse`, or a plain string for a text-only answer."""


class ScriptedClient(_RecordingClient):
    """Replays scripted answers in order; a plain string is a text-only answer.

    Example:
        ```python
        client = ScriptedClient([
            LLMResponse(tool_calls=[ToolCall("c1", "add", {"a": 1, "b": 2})]),
            "1 + 2 = 3",
        ])
        ```
    """

    provider_name = "scripted"

    def __init__(
        self, responses: Iterable[ScriptItem], *, model: str = "scripted", chunk_delay: float = 0
    ) -> None:
        """Create a client that replays `responses`.

        Args:
            responses: Answers to give, in order.
            model: The model name to report.
            chunk_delay: Seconds to wait before each streamed chunk.
        """
        super().__init__(model=model, chunk_delay=chunk_delay)
        self.responses: list[LLMResponse] = [
            LLMResponse(r) if isinstance(r, str) else r for r in responses
        ]
        """The whole script."""

    @property
    def remaining(self) -> int:
        """How many scripted answers have not been given yet."""
        return len(self.responses) - len(self.requests)

    async def _answer(self, request: RecordedRequest) -> LLMResponse:
        index = len(self.requests) - 1
        if index >= len(self.responses):
            raise UserError(
                f"ScriptedClient ran out of responses: request {index + 1} arrived but the "
                f"script has {len(self.responses)}."
            )
        return self.responses[index]


ResponseFunction = Callable[
    [tuple[Message, ...], tuple[ToolDefinition, ...], str | None, ModelSettings | None],
    LLMResponse | str | Awaitable[LLMResponse | str],
]
"""``fn(messages, tools, system, settings)`` returning an answer (sync or async)."""


class FunctionClient(_RecordingClient):
    """Computes each answer with your function of ``(messages, tools, system, settings)``.

    The function may be sync or async and may return an `LLMResponse` or a plain string.
    """

    provider_name = "function"

    def __init__(
        self, function: ResponseFunction, *, model: str = "function", chunk_delay: float = 0
    ) -> None:
        """Create a client that answers with `function`.

        Args:
            function: Called with ``(messages, tools, system, settings)`` for each request.
            model: The model name to report.
            chunk_delay: Seconds to wait before each streamed chunk.
        """
        super().__init__(model=model, chunk_delay=chunk_delay)
        self.function: ResponseFunction = function
        """The answering function."""

    async def _answer(self, request: RecordedRequest) -> LLMResponse:
        answer = self.function(request.messages, request.tools, request.system, request.settings)
        if inspect.isawaitable(answer):
            answer = await answer
        if isinstance(answer, str):
            return LLMResponse(answer)
        if not isinstance(answer, LLMResponse):
            raise UserError(
                f"FunctionClient's function must return an LLMResponse or str, got {answer!r}."
            )
        return answer
