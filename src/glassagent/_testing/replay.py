"""`ReplayClient`: the model side of a recorded run, answered again with no network."""

from __future__ import annotations

import asyncio
import os
from collections import deque
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from glassagent._core import errors
from glassagent._core.errors import (
    UNREADABLE_REPLY,
    ReplayMismatchError,
    ToolCallFormatError,
    UserError,
)
from glassagent._core.events import (
    AbortedEvent,
    ErrorEvent,
    Event,
    FunctionCallStartEvent,
    HandoffEvent,
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

    run_id: str
    provider: str
    model: str
    request: dict[str, Any]
    protocol: ToolProtocol
    parts: tuple[StreamPart, ...]
    response: LLMResponse | None
    ending: ErrorEvent | AbortedEvent | None


@dataclass
class _Open:
    """A recorded model call whose answer has not come yet."""

    slot: int
    event: LLMRequestEvent
    raw: dict[str, Any]
    parts: list[StreamPart]


class _Agents:
    """Which agent each recorded run is at each event: who made each model call.

    A sub-agent's run is the agent its parent's call names (``ui_info["agent"]`` of an agent
    used as a tool, else the tool's name); a handoff makes its run the agent handed to; a
    top-level run starts as the agent its first handoff names, if it has one.
    """

    def __init__(self, events: Iterable[Event]) -> None:
        self._current: dict[str, str | None] = {}
        self._calls: dict[tuple[str | None, str | None], str] = {}
        self._first: dict[str, str] = {}
        for event in events:
            if isinstance(event, HandoffEvent):
                self._first.setdefault(event.run_id, event.from_agent)

    def see(self, event: Event) -> str | None:
        """Follow `event`; the agent its run is after it."""
        run = event.run_id
        if run not in self._current:
            if event.depth:
                name = self._calls.get((event.parent_run_id, event.parent_call_id))
            else:
                name = self._first.get(run)
            self._current[run] = name
        if isinstance(event, FunctionCallStartEvent):
            ui = event.ui_info
            agent = ui.get("agent") if isinstance(ui, Mapping) else None
            name = agent if isinstance(agent, str) and agent else event.function_name
            self._calls[(run, event.call_id)] = name
        elif isinstance(event, HandoffEvent):
            self._current[run] = event.to_agent
        return self._current[run]


def _chosen(event: Event, agent: str | None, current: str | None) -> bool:
    """Whether a model call of `event`'s run is one the replay answers."""
    return not event.depth if agent is None else current == agent


def _calls(pairs: Sequence[tuple[Event, dict[str, Any]]], agent: str | None) -> list[_Call]:
    """The model calls of recorded events that `agent` made (`None`: top-level runs), in order.

    The events of runs nested in each other interleave; each run's calls are read apart.
    """
    slots: list[_Call | None] = []
    open_calls: dict[str, _Open] = {}
    agents = _Agents(event for event, _ in pairs)

    def close(run: str, response: LLMResponse | None, ending: Any) -> None:
        call = open_calls.pop(run)
        neutral = compare.normal({key: call.raw.get(key) for key in _REQUEST_KEYS})
        event, parts = call.event, tuple(call.parts)
        slots[call.slot] = _Call(
            run, event.provider, event.model, neutral, event.tool_protocol, parts, response, ending
        )

    for event, raw in pairs:
        run, current = event.run_id, agents.see(event)
        if isinstance(event, LLMRequestEvent):
            if run in open_calls:  # the run ended during the call without saying how
                close(run, None, None)
            if _chosen(event, agent, current):
                open_calls[run] = _Open(len(slots), event, raw, [])
                slots.append(None)
        elif run not in open_calls:
            continue
        elif isinstance(event, (TextChunkEvent, ThinkingChunkEvent, LLMRetryEvent)):
            open_calls[run].parts.append(_part(event))
        elif isinstance(event, LLMResponseEvent):
            close(run, _response(event), None)
        elif isinstance(event, (ErrorEvent, AbortedEvent)):
            close(run, None, event)
    for run in list(open_calls):
        close(run, None, None)
    return _with_metadata([call for call in slots if call is not None])


def _made(pairs: Sequence[tuple[Event, dict[str, Any]]], agent: str) -> dict[str, int]:
    """The runs in which `agent` made model calls, with their depth."""
    agents = _Agents(event for event, _ in pairs)
    runs: dict[str, int] = {}
    for event, _ in pairs:
        current = agents.see(event)
        if isinstance(event, LLMRequestEvent) and current == agent:
            runs.setdefault(event.run_id, event.depth)
    return runs


def _within(events: Sequence[Event], runs: Mapping[str, int]) -> list[dict[str, Any]]:
    """The dicts of the events of `runs` and of the runs nested in them.

    Each of `runs` reads as a top-level run (its depth 0, without a parent), and they come
    in the order of the calls that ran them (sub-agents that ran at once end in any order).
    """
    starts: dict[tuple[str | None, str | None], int] = {
        (e.run_id, e.call_id): index
        for index, e in enumerate(events)
        if isinstance(e, FunctionCallStartEvent)
    }
    roots = {run: run for run in runs}
    groups: dict[str, list[dict[str, Any]]] = {}
    position: dict[str, int] = {}
    for index, event in enumerate(events):
        if event.run_id not in roots and event.parent_run_id in roots:
            roots[event.run_id] = roots[event.parent_run_id]
        root = roots.get(event.run_id)
        if root is None:
            continue
        if root not in groups:
            groups[root] = []
            position[root] = starts.get((event.parent_run_id, event.parent_call_id), index)
        data = event.to_dict()
        depth = event.depth - runs[root]
        if depth > 0:
            data["depth"] = depth
        else:
            for key in ("parent_run_id", "parent_call_id", "depth"):
                data.pop(key, None)
        groups[root].append(data)
    return [data for root in sorted(groups, key=position.__getitem__) for data in groups[root]]


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
    following: dict[int, _Call] = {}  # index -> the next call of the same run
    last: dict[str, int] = {}
    for index, call in enumerate(calls):
        if call.run_id in last:
            following[last[call.run_id]] = call
        last[call.run_id] = index
    for index, after in following.items():
        call = calls[index]
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

    A recording of many agents (an agent used as another's tool, handoffs) holds the model
    calls of each: a client replays those of one agent. By default those of the top-level
    runs (``depth`` 0); with ``agent="researcher"`` those the agent of that name made, in a
    sub-agent's run or after a handoff to it. Give each agent of the replayed setup its own
    client from the same recording, and `check` the top-level run on the default one.

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
        call = self._next()
        if call is None:
            return "tool"
        request = call.request
        if (request.get("settings") or {}).get("output_schema"):
            return "native"
        names = [t.get("name") for t in request.get("tools") or () if isinstance(t, dict)]
        return "tool" if FINAL_TOOL in names else "prompted"

    def __init__(
        self,
        events: Iterable[Event | dict[str, Any]] | str | os.PathLike[str],
        *,
        chunk_delay: float = 0,
        agent: str | None = None,
    ) -> None:
        """Create a client that replays the model calls of `events`.

        Args:
            events: Recorded events (of one or more runs, in order), their dicts, or the path
                of a file written by `save_events`.
            chunk_delay: Seconds to wait before each replayed chunk.
            agent: Replay the model calls of the agent of this name: a sub-agent's (the name
                of the agent used as a tool; the tool's name for an agent without one) or
                those after a handoff to it (a top-level run is known by name only once it
                hands off). `None`: the calls of the top-level runs, sub-agents' left out.

        Raises:
            UserError: When the file cannot be read, or an item is not an event.
        """
        if agent is not None and (not isinstance(agent, str) or not agent):
            raise UserError(f"`agent` must be an agent's name, got {agent!r}.")
        pairs = recorded(events)
        self.recorded_events: tuple[Event, ...] = tuple(event for event, _ in pairs)
        """The recording's events."""
        self.agent = agent
        """The agent whose model calls are replayed (`None`: those of the top-level runs)."""
        self._calls = _calls(pairs, agent)
        self._runs = _made(pairs, agent) if agent is not None else None
        queues: dict[str, deque[_Call]] = {}
        for call in self._calls:
            queues.setdefault(call.run_id, deque()).append(call)
        self._queues = list(queues.values())
        first = next((c for c in self._calls), None)
        model = first.model if first else "replay"
        super().__init__(model=model, chunk_delay=chunk_delay)
        if first is not None:
            self.provider_name = first.provider
        protocols = {call.protocol for call in self._calls}
        self.tool_protocol = first.protocol if len(protocols) == 1 and first else "auto"

    @classmethod
    def from_events(
        cls,
        source: str | os.PathLike[str] | Iterable[Event | dict[str, Any]],
        *,
        chunk_delay: float = 0,
        agent: str | None = None,
    ) -> Self:
        """Replay a recording: a file written by `save_events`, or events (e.g. ``result.events``).

        Args:
            source: A JSON Lines file path, or events or event dicts.
            chunk_delay: Seconds to wait before each replayed chunk.
            agent: Replay the model calls of the agent of this name (see `ReplayClient`).

        Raises:
            UserError: When the file cannot be read or holds something other than events.
        """
        return cls(source, chunk_delay=chunk_delay, agent=agent)

    @property
    def remaining(self) -> int:
        """How many recorded model calls have not been replayed yet."""
        return sum(len(queue) for queue in self._queues)

    def _next(self) -> _Call | None:
        """The recorded call expected next: the next one of the first run not done."""
        return next((queue[0] for queue in self._queues if queue), None)

    def _take(self, request: RecordedRequest) -> _Call:
        """The recorded call `request` is: the next call of a run, the first run's first.

        Runs that went on at once (sub-agents called together) may ask in any order: a
        request may be the next call of any recorded run.
        """
        self.requests.append(request)
        number = len(self.requests)
        call = self._next()
        if call is None:
            raise ReplayMismatchError(
                f"Model call {number} was not recorded: the recording has only "
                f"{len(self._calls)} model call(s).",
                call=number,
            )
        actual = compare.request_json(
            request.messages, request.tools, request.system, request.settings
        )
        for queue in self._queues:
            if queue and queue[0].request == actual:
                return queue.popleft()
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
        call = self._next()
        return call.protocol if call is not None else self.tool_protocol

    def check(self, *runs: RunResult[Any] | Iterable[Event]) -> None:
        """Check that the replay went as recorded: every model call made, the same events.

        The events are compared as their dicts, without ids, sequence numbers, timestamps and
        durations (``run_id``, ``parent_run_id``, ``seq``, ``timestamp``, ``latency_ms``,
        ``duration_ms``); the results of tool calls that ran concurrently may finish in any
        order. Sub-agents' events are compared too, each with the call that ran it. A client
        of one `agent` compares the runs that agent made calls in (with the runs nested in
        them): those of the given runs, or the given runs themselves when they are the
        agent's own (a sub-agent replayed on its own).

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
        expected: Sequence[Event | dict[str, Any]] = self.recorded_events
        if self._runs is not None and self.agent is not None:
            expected = _within(self.recorded_events, self._runs)
            pairs = [(event, event.to_dict()) for event in actual]
            made = _made(pairs, self.agent)
            if made:
                actual = _within(actual, made)  # type: ignore[assignment]
        expected_view, actual_view = compare.events(expected), compare.events(actual)
        if expected_view != actual_view:
            diff = compare.diff(expected_view, actual_view, "events")
            raise ReplayMismatchError(
                f"The replayed run's events differ from the recording's:\n{diff}", diff=diff
            )
