"""`ReplayClient`: the model side of a recorded run, answered again with no network."""

from __future__ import annotations

import asyncio
import itertools
import os
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from glassagent._core import errors
from glassagent._core.errors import UNREADABLE_REPLY, ReplayMismatchError, ToolCallFormatError
from glassagent._core.events import (
    AbortedEvent,
    ErrorEvent,
    Event,
    LLMRequestEvent,
    LLMResponseEvent,
    LLMRetryEvent,
    TextChunkEvent,
    ThinkingChunkEvent,
)
from glassagent._core.messages import (
    LLMResponse,
    Message,
    ModelSettings,
    RetryNotice,
    StreamPart,
    TextDelta,
    ThinkingDelta,
    ToolDefinition,
    ToolProtocol,
)
from glassagent._core.output import FINAL_TOOL
from glassagent._core.record.jsonl import recorded
from glassagent._core.result import RunResult
from glassagent._testing import compare
from glassagent._testing.clients import RecordedRequest, _RecordingClient

if TYPE_CHECKING:
    from typing_extensions import Self

    from glassagent._core.output import OutputMode

_REQUEST_KEYS = ("messages", "tools", "system", "settings")


@dataclass(frozen=True)
class _Call:
    """One recorded model call: what was asked, what streamed, how it ended."""

    request: dict[str, Any]
    protocol: ToolProtocol
    parts: tuple[StreamPart, ...]
    response: LLMResponse | None
    ending: ErrorEvent | AbortedEvent | None


def _calls(pairs: Sequence[tuple[Event, dict[str, Any]]]) -> list[_Call]:
    """The model calls of recorded events, in order (across runs)."""
    calls: list[_Call] = []
    request: tuple[LLMRequestEvent, dict[str, Any]] | None = None
    parts: list[StreamPart] = []

    def close(response: LLMResponse | None, ending: ErrorEvent | AbortedEvent | None) -> None:
        assert request is not None
        event, raw = request
        neutral = compare.normal({key: raw.get(key) for key in _REQUEST_KEYS})
        calls.append(_Call(neutral, event.tool_protocol, tuple(parts), response, ending))

    for event, raw in pairs:
        if isinstance(event, LLMRequestEvent):
            if request is not None:  # the run ended during the call without saying how
                close(None, None)
            request, parts = (event, raw), []
        elif request is None:
            continue
        elif isinstance(event, (TextChunkEvent, ThinkingChunkEvent, LLMRetryEvent)):
            parts.append(_part(event))
        elif isinstance(event, LLMResponseEvent):
            close(_response(event), None)
            request = None
        elif isinstance(event, (ErrorEvent, AbortedEvent)):
            close(None, event)
            request = None
    if request is not None:
        close(None, None)
    return _with_metadata(calls)


def _part(event: TextChunkEvent | ThinkingChunkEvent | LLMRetryEvent) -> StreamPart:
    if isinstance(event, TextChunkEvent):
        return TextDelta(event.text)
    if isinstance(event, ThinkingChunkEvent):
        return ThinkingDelta(event.text)
    return RetryNotice(
        attempt=event.attempt,
        delay=event.delay,
        error=event.error,
        error_type=event.error_type,
        status=event.status,
    )


def _response(event: LLMResponseEvent) -> LLMResponse:
    return LLMResponse(
        text=event.text,
        tool_calls=event.tool_calls,
        stop_reason=event.stop_reason,
        thinking=event.thinking,
        usage=event.usage,
        protocol_error=event.protocol_error,
        raw_stop_reason=event.raw_stop_reason,
        wire=event.wire,  # a recording with wire bodies replays to the same events
    )


def _with_metadata(calls: list[_Call]) -> list[_Call]:
    """Give each answer the provider data of its assistant message, as the next request shows.

    ``llm_response`` events do not carry `LLMResponse.provider_metadata` (e.g. a Gemini
    thought signature); the conversation sent next does, and must be sent again as it was.
    """
    for index, (call, after) in enumerate(itertools.pairwise(calls)):
        response = call.response
        if response is None:
            continue
        ids = [c.id for c in response.tool_calls]
        for message in reversed(after.request.get("messages") or []):
            if not isinstance(message, dict) or message.get("role") != "assistant":
                continue
            calls_of = [c.get("id") for c in message.get("tool_calls") or () if isinstance(c, dict)]
            if message.get("content") == response.text and calls_of == ids:
                metadata = message.get("provider_metadata") or {}
                if metadata:
                    answer = replace(response, provider_metadata=metadata)
                    calls[index] = replace(call, response=answer)
                break
    return calls


def _failure(call: _Call, number: int, provider: str) -> Exception:
    """What to raise for a recorded call that got no answer."""
    ending = call.ending
    if isinstance(ending, ErrorEvent):
        kind = getattr(errors, ending.error_type, None)
        if isinstance(kind, type) and issubclass(kind, errors.ProviderError):
            try:
                return kind(ending.error, provider=provider)
            except TypeError:
                return errors.ProviderError(ending.error, provider=provider)
        how = f"failed with {ending.error_type}: {ending.error}"
    elif isinstance(ending, AbortedEvent):
        how = f"was aborted ({ending.reason})"
    else:
        how = "ended without saying how"
    return ReplayMismatchError(
        f"Model call {number} has no recorded answer: the recorded run {how}, which a replay "
        "cannot reproduce.",
        call=number,
    )


class ReplayClient(_RecordingClient):
    """Answers as a recorded run's model did, with no network: for offline regression tests.

    Each model call must send the request that was recorded (the conversation, tools, system
    instructions and settings; compared as JSON); the recorded answer then streams back as it
    was recorded (thinking and text chunks, retries) and the agent re-executes the same tool
    calls. A request the recording did not expect raises `ReplayMismatchError`, with a diff.
    The client reports the recorded provider and model, so costs are priced alike.

    Example:
        ```python
        replay = ReplayClient.from_events("tests/recordings/weather.jsonl")
        replay.check(await make_agent(replay).run("What is the weather in Paris?"))
        ```
    """

    provider_name = "replay"

    def output_mode(self, *, tools: bool, settings: ModelSettings) -> OutputMode:
        """The mode the recorded run used, as its next recorded request shows.

        Args:
            tools: Whether the run offers tools of its own.
            settings: The run's settings.
        """
        if len(self.requests) >= len(self._calls):
            return "tool"
        request = self._calls[len(self.requests)].request
        if (request.get("settings") or {}).get("output_schema"):
            return "native"
        names = [t.get("name") for t in request.get("tools") or () if isinstance(t, dict)]
        return "tool" if FINAL_TOOL in names else "prompted"

    def __init__(
        self,
        events: Iterable[Event | dict[str, Any]] | str | os.PathLike[str],
        *,
        chunk_delay: float = 0,
    ) -> None:
        """Create a client that replays the model calls of `events`.

        Args:
            events: Recorded events (of one or more runs, in order), their dicts, or the path
                of a file written by `save_events`.
            chunk_delay: Seconds to wait before each replayed chunk.

        Raises:
            UserError: When the file cannot be read, or an item is not an event.
        """
        pairs = recorded(events)
        self.recorded_events: tuple[Event, ...] = tuple(event for event, _ in pairs)
        """The recording's events."""
        self._calls = _calls(pairs)
        first = next((e for e in self.recorded_events if isinstance(e, LLMRequestEvent)), None)
        super().__init__(model=first.model if first else "replay", chunk_delay=chunk_delay)
        if first is not None:
            self.provider_name = first.provider
        protocols = {call.protocol for call in self._calls}
        self.tool_protocol = first.tool_protocol if len(protocols) == 1 and first else "auto"

    @classmethod
    def from_events(
        cls,
        source: str | os.PathLike[str] | Iterable[Event | dict[str, Any]],
        *,
        chunk_delay: float = 0,
    ) -> Self:
        """Replay a recording: a file written by `save_events`, or events (e.g. ``result.events``).

        Args:
            source: A JSON Lines file path, or events or event dicts.
            chunk_delay: Seconds to wait before each replayed chunk.

        Raises:
            UserError: When the file cannot be read or holds something other than events.
        """
        return cls(source, chunk_delay=chunk_delay)

    @property
    def remaining(self) -> int:
        """How many recorded model calls have not been replayed yet."""
        return max(0, len(self._calls) - len(self.requests))

    def _take(self, request: RecordedRequest) -> _Call:
        self.requests.append(request)
        number = len(self.requests)
        if number > len(self._calls):
            raise ReplayMismatchError(
                f"Model call {number} was not recorded: the recording has only "
                f"{len(self._calls)} model call(s).",
                call=number,
            )
        call = self._calls[number - 1]
        actual = compare.request_json(
            request.messages, request.tools, request.system, request.settings
        )
        if actual != call.request:
            diff = compare.diff(call.request, actual, f"request {number}")
            raise ReplayMismatchError(
                f"Model call {number} sent a request the recording did not expect "
                f"(different {compare.differing(call.request, actual)}):\n{diff}",
                call=number,
                diff=diff,
            )
        return call

    def _outcome(self, call: _Call) -> LLMResponse:
        if call.response is None:
            raise _failure(call, len(self.requests), self.provider_name)
        if call.response.raw_stop_reason == UNREADABLE_REPLY:  # the server could not read the reply
            problem = call.response.protocol_error or "the reply could not be read"
            raise ToolCallFormatError(problem, provider=self.provider_name)
        return call.response

    async def _answer(self, request: RecordedRequest) -> LLMResponse:  # pragma: no cover
        raise AssertionError("ReplayClient.chat answers itself")

    async def chat(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        system: str | None = None,
        *,
        settings: ModelSettings | None = None,
    ) -> LLMResponse:
        """Check the request against the recording and return the recorded answer."""
        request = RecordedRequest(tuple(messages), tuple(tools), system, settings)
        return self._outcome(self._take(request))

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        system: str | None = None,
        *,
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[StreamPart]:
        """Check the request, then stream the recorded chunks and the recorded answer."""
        call = self._take(RecordedRequest(tuple(messages), tuple(tools), system, settings))
        for part in call.parts:
            if self.chunk_delay:
                await asyncio.sleep(self.chunk_delay)
            yield part
        yield self._outcome(call)

    async def resolve_tool_protocol(self, settings: ModelSettings | None = None) -> ToolProtocol:
        """The tool protocol the next recorded call used."""
        number = len(self.requests)
        return self._calls[number].protocol if number < len(self._calls) else self.tool_protocol

    def check(self, *runs: RunResult[Any] | Iterable[Event]) -> None:
        """Check that the replay went as recorded: every model call made, the same events.

        The events are compared as their dicts, without ids, sequence numbers, timestamps and
        durations (``run_id``, ``seq``, ``timestamp``, ``latency_ms``, ``duration_ms``); the
        results of tool calls that ran concurrently may finish in any order.

        Args:
            runs: The replayed runs' results (or events), in the order they ran.

        Raises:
            ReplayMismatchError: When a recorded call was not made, or the events differ
                (with a unified diff of the two).
        """
        if self.remaining:
            raise ReplayMismatchError(
                f"{self.remaining} recorded model call(s) were not made: the replayed run "
                f"stopped after model call {len(self.requests)} of {len(self._calls)}."
            )
        actual = [e for run in runs for e in (run.events if isinstance(run, RunResult) else run)]
        expected_view, actual_view = compare.events(self.recorded_events), compare.events(actual)
        if expected_view != actual_view:
            diff = compare.diff(expected_view, actual_view, "events")
            raise ReplayMismatchError(
                f"The replayed run's events differ from the recording's:\n{diff}", diff=diff
            )
