"""`ContractStream`: one streamed model call as the design's event dicts."""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import Any

from glassagent._contract import bridge
from glassagent._core.client import BaseLLMClient
from glassagent._core.errors import GlassAgentError
from glassagent._core.messages import (
    LLMResponse,
    Message,
    ModelSettings,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    ToolDefinition,
)
from glassagent._tools.tool import Tool

ABORT_REASON = "user_abort"
"""The design's reason of an ``aborted`` event."""


@dataclass(frozen=True)
class ContractResponse:
    """What the design's ``send_request`` returns: the answer, and what it answered.

    `text` and `tool_calls` read the answer; `response` is glassagent's own `LLMResponse`
    (usage, stop reason, raw body). The rest is what `handle_function_calls` needs to go on.
    """

    response: LLMResponse
    """The model's answer."""
    model_id: str
    """The model asked."""
    messages: tuple[Message, ...]
    """The conversation sent, oldest first (the new user message included)."""
    system_prompt: str | None
    """The system prompt sent."""
    tools: tuple[ToolDefinition, ...]
    """The tools offered."""
    settings: ModelSettings
    """The generation settings used."""
    runnable: dict[str, Tool] = field(default_factory=dict, repr=False, compare=False)
    """The offered tools glassagent can run itself, by name."""

    @property
    def text(self) -> str:
        """The answer's text."""
        return self.response.text

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The tools the model asked to call."""
        return self.response.tool_calls

    def conversation(self, client: BaseLLMClient) -> list[Message]:
        """The conversation sent, followed by this answer as `client` keeps it."""
        return [*self.messages, client.format_assistant_message(self.response)]


@dataclass
class Request:
    """One model call of the design's methods, ready to send."""

    client: BaseLLMClient
    model_id: str
    messages: list[Message]
    system_prompt: str | None
    tools: list[ToolDefinition]
    settings: ModelSettings
    runnable: dict[str, Tool]


class ContractStream(Iterator[dict[str, Any]]):
    """The events of one streamed model call: what ``send_request_stream`` returns.

    It yields ``thinking_chunk`` and ``text_chunk`` events as they arrive and ends with
    ``complete``, ``aborted`` (the text so far, reason ``"user_abort"``) or ``error``. After
    the end, `response` is the whole answer (`None` after an abort or error), `error` the
    glassagent error an ``error`` event reported. Pass it to ``handle_function_calls_stream``
    to run the tools it asks for.
    """

    def __init__(
        self,
        request: Request,
        *,
        aborted: Callable[[], bool],
        is_follow_up: bool = False,
        on_end: Callable[[ContractStream], None] | None = None,
    ) -> None:
        self._request = request
        self._aborted = aborted
        self._stop = threading.Event()
        self._on_end = on_end
        self.is_follow_up = is_follow_up
        """Whether this stream continues after tools ran (its chunks say so)."""
        self.response: ContractResponse | None = None
        """The whole answer, once the stream has ended with ``complete``."""
        self.error: GlassAgentError | None = None
        """The error an ``error`` event reported, if any."""
        self._events = self._run()

    def __next__(self) -> dict[str, Any]:
        return next(self._events)

    def abort(self) -> None:
        """Stop the stream: it ends with ``aborted`` within a fraction of a second."""
        self._stop.set()

    def close(self) -> None:
        """Stop reading and release the model call (an unfinished stream is cancelled)."""
        self._events.close()

    def is_aborted(self) -> bool:
        """Whether the stream was told to stop (its signal, `abort`, `abort_streaming`)."""
        return self._stop.is_set() or self._aborted()

    def _run(self) -> Generator[dict[str, Any], None, None]:
        request, parts = self._request, []
        stream = request.client.stream(
            request.messages, request.tools, request.system_prompt, settings=request.settings
        )
        try:
            for part in bridge.iterate(stream, self.is_aborted):
                if isinstance(part, TextDelta):
                    parts.append(part.text)
                    yield {
                        "type": "text_chunk",
                        "text": part.text,
                        "is_follow_up": self.is_follow_up,
                    }
                elif isinstance(part, ThinkingDelta):
                    yield {"type": "thinking_chunk", "text": part.text}
                elif isinstance(part, LLMResponse):
                    self.response = answer(request, part)
        except bridge.Aborted:
            yield {"type": "aborted", "text": "".join(parts), "reason": ABORT_REASON}
            return
        except GlassAgentError as exc:
            self.error = exc
            yield {"type": "error", "error": str(exc)}
            return
        finally:
            if self._on_end is not None:
                self._on_end(self)
        text = self.response.text if self.response is not None else "".join(parts)
        yield {"type": "complete", "text": text}


def _chunk(text: str, is_follow_up: bool) -> dict[str, Any]:
    return {"type": "text_chunk", "text": text, "is_follow_up": is_follow_up}


def answer(request: Request, response: LLMResponse) -> ContractResponse:
    """The `ContractResponse` of `request`'s answer `response`."""
    return ContractResponse(
        response=response,
        model_id=request.model_id,
        messages=tuple(request.messages),
        system_prompt=request.system_prompt,
        tools=tuple(request.tools),
        settings=request.settings,
        runnable=request.runnable,
    )
