"""`JsonToolsClient`: any client, offering tools by the JSON tool protocol.

The agent wraps a client in it for a run when the model's profile says it has no native
function calling and the client would offer tools natively: the request carries the tools in
the system prompt and the earlier tool rounds as protocol JSON, and the reply is read back into
text, thinking and tool calls (`glassagent._core.json_protocol`). The client itself is
never changed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from typing import TYPE_CHECKING

from glassagent._core import json_protocol
from glassagent._core.client import BaseLLMClient, RequestClient, send_request, stream_request
from glassagent._core.json_stream import ReplyStream, final_deltas, streamed_deltas
from glassagent._core.messages import (
    LLMResponse,
    Message,
    ModelSettings,
    RetryNotice,
    StreamPart,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    ToolProtocol,
)
from glassagent._core.request import ModelRequest

if TYPE_CHECKING:
    from glassagent._core.output import OutputMode
    from glassagent._core.profiles.model import ModelProfile
    from glassagent._core.result import ToolResult


def protocol_request(request: ModelRequest) -> ModelRequest:
    """What the wrapped client is sent for `request`: the JSON tool protocol, no native tools.

    The messages carry the earlier rounds as protocol JSON. With tools, the system prompt
    lists the tools the request's choice offers and says what the reply must be
    (`json_protocol.system_prompt`); the choice is honoured there, so the wrapped client gets
    none. The choice is read from `request`, resolved once when it was built.
    """
    system = request.system
    if request.tools:
        system = json_protocol.system_prompt(system, request.offered, request.tool_choice)
    settings = request.settings
    if settings.tool_choice is not None:
        settings = replace(settings, tool_choice=None)
    return replace(
        request,
        messages=tuple(json_protocol.encode_history(request.messages, tools=bool(request.tools))),
        tools=(),
        system=system,
        settings=settings,
    )


class JsonToolsClient(RequestClient):
    """`inner`, with tools offered by the JSON tool protocol instead of natively."""

    tool_protocol: ToolProtocol = "json"

    def __init__(self, inner: BaseLLMClient) -> None:
        self.inner = inner
        self.provider_name = inner.provider_name
        self.model = inner.model

    @property
    def profile(self) -> ModelProfile | None:
        """The wrapped client's profile."""
        return self.inner.profile

    async def send(self, request: ModelRequest) -> LLMResponse:
        """The wrapped client's answer to `protocol_request`, read into text and tool calls."""
        response = await send_request(self.inner, protocol_request(request))
        return json_protocol.read_response(response) if request.tools else response

    async def send_stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        """Stream the wrapped client's answer to `protocol_request`, read as it comes.

        The reply's ``thought`` streams as thinking and its ``response`` as text while they
        are written (`ReplyStream`); a tool call follows once the reply is complete.
        """
        offered = bool(request.tools)
        parts = stream_request(self.inner, protocol_request(request))
        thinking: list[str] = []
        replies = ReplyStream()
        try:
            async for part in parts:
                if not offered:
                    yield part
                elif isinstance(part, TextDelta):
                    for delta in streamed_deltas(replies, part.text):
                        yield delta
                elif isinstance(part, ThinkingDelta):
                    thinking.append(part.text)
                    yield part
                elif isinstance(part, RetryNotice):
                    thinking.clear()  # the next attempt streams its thinking anew
                    replies = ReplyStream()
                    yield part
                elif isinstance(part, LLMResponse):
                    response = json_protocol.read_response(part)
                    for delta in final_deltas(response, "".join(thinking), replies):
                        yield delta
                    yield response
                else:
                    yield part
        finally:
            aclose = getattr(parts, "aclose", None)
            if aclose is not None:
                await aclose()

    def format_assistant_message(self, response: LLMResponse) -> Message:
        """The wrapped client's assistant message."""
        return self.inner.format_assistant_message(response)

    def format_tool_result(self, call: ToolCall, result: ToolResult) -> Message:
        """The wrapped client's tool message."""
        return self.inner.format_tool_result(call, result)

    def output_mode(self, *, tools: bool, settings: ModelSettings) -> OutputMode:
        """``tool`` with tools; without, the wrapped client's native mode, else ``prompted``.

        The model has no native tool calling: tools are listed in the prompt, and a run
        without tools gets the schema in the prompt rather than a final-answer tool.

        Args:
            tools: Whether the run offers tools of its own.
            settings: The run's settings.
        """
        if tools:
            return "tool"
        mode = self.inner.output_mode(tools=False, settings=settings)
        return "native" if mode == "native" else "prompted"

    async def resolve_tool_protocol(self, settings: ModelSettings | None = None) -> ToolProtocol:
        """Always ``json``."""
        return "json"

    def __repr__(self) -> str:
        return f"JsonToolsClient({self.inner!r})"
