"""Think: stream one model answer, turning its parts into events as they arrive."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from glassagent._agent import decide
from glassagent._core.client import stream_request
from glassagent._core.errors import GlassAgentError, ProviderError, ResponseParseError
from glassagent._core.events import LLMRetryEvent, TextChunkEvent, ThinkingChunkEvent
from glassagent._core.messages import (
    LLMResponse,
    ModelSettings,
    RetryNotice,
    TextDelta,
    ThinkingDelta,
    ToolDefinition,
    ToolProtocol,
)

if TYPE_CHECKING:
    from glassagent._core.client import BaseLLMClient
    from glassagent._core.request import ModelRequest


async def tool_protocol(
    client: BaseLLMClient, tools: Sequence[ToolDefinition], settings: ModelSettings
) -> ToolProtocol:
    """The protocol the next call offers `tools` with; ``auto`` is resolved first.

    A client that cannot decide now (its server is down) is left to decide in the call,
    which retries and reports the failure as usual; the event then says ``auto``.
    """
    if client.tool_protocol != "auto" or not tools:
        return client.tool_protocol
    try:
        return await client.resolve_tool_protocol(settings)
    except ProviderError:
        return client.tool_protocol


@asynccontextmanager
async def _closing(stream: AsyncIterator[Any]) -> AsyncGenerator[AsyncIterator[Any], None]:
    """Close an async generator on exit, so an aborted model stream releases its connection."""
    try:
        yield stream
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()


async def read_answer(
    client: BaseLLMClient,
    request: ModelRequest,
    *,
    emit: Callable[..., None],
    text: list[str],
    thinking: list[str],
    iteration: int,
) -> LLMResponse:
    """Stream the answer to `request`; text and thinking also collect into `text`/`thinking`.

    The request goes to the client whole (`BaseLLMClient.send_stream`): a built-in client
    reads its resolved tool choice, a client of your own gets its four parts in `stream`.
    Emits ``text_chunk``, ``thinking_chunk`` and ``llm_retry`` events as parts arrive.

    Raises:
        GlassAgentError: What the client raised, or a `ProviderError` wrapping anything
            untyped; `ResponseParseError` when the stream ends without an `LLMResponse`, or
            when its tool calls are malformed (checked for every client, also custom ones).
    """
    follow_up = iteration > 1
    try:
        stream = stream_request(client, request)
        async with _closing(stream) as parts:
            async for part in parts:
                if isinstance(part, TextDelta):
                    text.append(part.text)
                    emit(TextChunkEvent, text=part.text, is_follow_up=follow_up)
                elif isinstance(part, ThinkingDelta):
                    thinking.append(part.text)
                    emit(ThinkingChunkEvent, text=part.text)
                elif isinstance(part, LLMResponse):
                    if problem := decide.malformed_call(part):
                        name = client.provider_name
                        message = f"The {name} client returned {problem}"
                        raise ResponseParseError(message, provider=name)
                    return part
                elif isinstance(part, RetryNotice):
                    emit(LLMRetryEvent, iteration=iteration, **decide.retry_fields(part))
    except GlassAgentError:
        raise
    except Exception as exc:
        name = client.provider_name
        raise ProviderError(
            f"The {name} client failed: {type(exc).__name__}: {exc}", provider=name
        ) from exc
    raise ResponseParseError(
        "The model stream ended without a final LLMResponse.", provider=client.provider_name
    )
