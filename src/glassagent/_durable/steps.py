"""The steps of a durable run: each model call and each tool call, checkpointed once done.

`DurableClient` wraps the agent's client: each answer it streams is one step, whose body
streams the wrapped client's answer (its deltas reach the run as they come) and returns the
final `LLMResponse` as JSON. `tool_step` runs each tool call as one step returning its
`ToolResult` as JSON. When a run resumes after a crash, a finished step is not run again: its
recorded JSON is read back, and a replayed answer streams its thinking and text as one delta
each. The step in flight at the crash had recorded nothing, so it runs again.

The step bodies here are plain functions; `glassagent._durable.workflow.register` makes them
DBOS steps (`STEPS`) before DBOS launches.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from glassagent._core.client import BaseLLMClient, RequestClient, stream_request
from glassagent._core.errors import GlassAgentError, ProviderError, RunError
from glassagent._core.messages import (
    LLMResponse,
    Message,
    ModelSettings,
    StreamPart,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    ToolProtocol,
)
from glassagent._core.request import ModelRequest
from glassagent._durable import codec
from glassagent._tools.execute import ToolInterrupted

if TYPE_CHECKING:
    from glassagent._core.output import OutputMode
    from glassagent._core.profiles.model import ModelProfile
    from glassagent._core.result import ToolResult
    from glassagent._tools.execute import Prepared

ModelCall = Callable[[BaseLLMClient, ModelRequest, "Channel"], Awaitable[dict[str, Any]]]
ToolCallStep = Callable[
    [str, Callable[[], Awaitable["ToolResult"]], "Channel"], Awaitable[dict[str, Any]]
]


class Queue(Protocol):
    """Where a model call goes instead of a step (`glassagent._durable.model_queue`)."""

    async def call(
        self, request: ModelRequest, channel: Channel, *, replaying: bool
    ) -> dict[str, Any]:
        """Enqueue the call, wait for it, and return its result as a step's JSON."""
        ...


@dataclass
class Steps:
    """The step functions as DBOS registered them (the plain bodies until then)."""

    model_call: ModelCall
    tool_call: ToolCallStep
    clock: Callable[[], Awaitable[float]]
    """The time, in seconds since the epoch: recorded, so a replay reads the same time."""


class Channel:
    """What a step's body tells its caller in this process: that it ran, and the deltas.

    A step's arguments are not stored, so the caller passes one: when the step is replayed
    from its checkpoint, the body never runs and `ran` stays `False`.
    """

    def __init__(self, aborted: Callable[[], bool] | None = None) -> None:
        self.ran = False
        self.aborted = aborted  # whether the process stops the run (it stays pending)
        self.error: GlassAgentError | None = None  # the live error, for its traceback
        self._parts: collections.deque[StreamPart] = collections.deque()
        self._arrived = asyncio.Event()

    def put(self, part: StreamPart) -> None:
        """Hand a delta to the caller."""
        self._parts.append(part)
        self._arrived.set()

    async def parts(self, step: asyncio.Future[Any]) -> AsyncIterator[StreamPart]:
        """The deltas the body hands over, until `step` is done."""
        while True:
            while self._parts:
                yield self._parts.popleft()
            if step.done():
                return
            self._arrived.clear()
            arrived = asyncio.ensure_future(self._arrived.wait())
            try:
                await asyncio.wait({arrived, step}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                arrived.cancel()


class Replay:
    """Whether a run replays the steps it finished before its process stopped.

    A resumed run calls its steps again in the same order; the first `recorded` ones return
    their checkpoints. The run replays until it calls the first step with none: what it
    emits before that reports the time before the crash, that step's request included (it
    was sent then too). A fresh run records nothing, so it never replays.
    """

    __slots__ = ("called", "recorded")

    def __init__(self, recorded: int) -> None:
        self.recorded = recorded
        self.called = 0

    def call(self) -> None:
        """A step (or an awaited message) is about to be called."""
        self.called += 1

    def replaying(self) -> bool:
        """Whether the run's events are replayed ones."""
        return self.called <= self.recorded and self.recorded > 0


class _NotRecorded(BaseException):
    """Carries an exception out of a step without DBOS recording it (it records `Exception`)."""

    def __init__(self, inner: Exception) -> None:
        super().__init__(str(inner))
        self.inner = inner


async def model_call_body(
    inner: BaseLLMClient, request: ModelRequest, channel: Channel
) -> dict[str, Any]:
    """Stream `inner`'s answer to `request`, forwarding deltas; return it as JSON.

    A failed call returns its error (with the text and thinking that streamed before it), so
    that a replay fails the same way, e.g. a `ToolCallFormatError` the run recovers from.
    """
    channel.ran = True
    text: list[str] = []
    thinking: list[str] = []
    stream = stream_request(inner, request)
    try:
        async for part in stream:
            if isinstance(part, LLMResponse):
                return {"response": codec.response_dict(part)}
            if isinstance(part, TextDelta):
                text.append(part.text)
            elif isinstance(part, ThinkingDelta):
                thinking.append(part.text)
            channel.put(part)
    except GlassAgentError as exc:
        channel.error = exc
        return _failed(exc, text, thinking)
    except Exception as exc:  # as `read_answer` reports an untyped failure
        name = inner.provider_name
        message = f"The {name} client failed: {type(exc).__name__}: {exc}"
        channel.error = error = ProviderError(message, provider=name)
        error.__cause__ = exc
        return _failed(error, text, thinking)
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()
    return {"response": None, "text": "".join(text), "thinking": "".join(thinking)}


def _failed(exc: GlassAgentError, text: list[str], thinking: list[str]) -> dict[str, Any]:
    return {"error": codec.error_dict(exc), "text": "".join(text), "thinking": "".join(thinking)}


async def tool_call_body(
    call_id: str, execute: Callable[[], Awaitable[ToolResult]], channel: Channel
) -> dict[str, Any]:
    """Run one tool call; return its result as JSON, with the call's id to check a replay."""
    channel.ran = True
    try:
        result = await execute()
    except ToolInterrupted as exc:  # the run aborts: nothing to keep
        raise _NotRecorded(exc) from None
    if channel.aborted is not None and channel.aborted():  # cut short by a stop: no outcome
        raise _NotRecorded(_Stopped(result))
    return {"call_id": call_id, "result": codec.tool_result_dict(result)}


class _Stopped(Exception):
    """A tool's result while its run was stopping: returned, never recorded."""

    def __init__(self, result: ToolResult) -> None:
        super().__init__("the run stopped while the tool ran")
        self.result = result


async def clock_body() -> float:
    """The time now (`time.time`)."""
    return time.time()


STEPS = Steps(model_call_body, tool_call_body, clock_body)
"""The steps a durable run calls; DBOS steps once registered."""


async def tool_step(
    replay: Replay,
    stopping: Callable[[], bool],
    prepared: Prepared,
    execute: Callable[[], Awaitable[ToolResult]],
) -> ToolResult:
    """Run `prepared` as one step (`RunSteps.tool`), or read its recorded result.

    Raises:
        RunError: When the recorded step is of another call: the run no longer makes its calls
            in the order it made them (an agent changed under a pending run).
    """
    call = prepared.call
    replay.call()
    try:
        data = await STEPS.tool_call(call.id, execute, Channel(stopping))
    except _NotRecorded as carrier:
        if isinstance(carrier.inner, _Stopped):  # the run is aborting: it keeps no result
            return carrier.inner.result
        raise carrier.inner from None
    if data.get("call_id") != call.id:
        raise RunError(
            f"The durable run recorded tool call {data.get('call_id')!r} where it now makes "
            f"{call.id!r}: the agent changed since the run started (give it a new version)."
        )
    return codec.tool_result_from(data["result"])


class DurableClient(RequestClient):
    """`inner`, with each answer one checkpointed step of the durable run calling it.

    With a `queue`, each answer is a call enqueued on it instead (`ModelQueue.call`), run by
    whichever worker dequeues it; its result is the same JSON.
    """

    def __init__(self, inner: BaseLLMClient, replay: Replay, queue: Queue | None = None) -> None:
        self.inner = inner
        self.replay = replay
        self.queue = queue
        self.provider_name = inner.provider_name
        self.model = inner.model

    @property
    def tool_protocol(self) -> ToolProtocol:
        """The wrapped client's protocol."""
        return self.inner.tool_protocol

    @tool_protocol.setter
    def tool_protocol(self, value: ToolProtocol) -> None:
        self.inner.tool_protocol = value

    @property
    def profile(self) -> ModelProfile | None:
        """The wrapped client's profile."""
        return self.inner.profile

    async def send(self, request: ModelRequest) -> LLMResponse:
        """The answer of `send_stream`, whole."""
        async for part in self.send_stream(request):
            if isinstance(part, LLMResponse):
                return part
        raise ProviderError(
            "The model stream ended without an answer.", provider=self.provider_name
        )

    async def send_stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        """Stream the answer as one step: live from the wrapped client, or as recorded."""
        channel = Channel()
        self.replay.call()
        if self.queue is None:
            step = asyncio.ensure_future(STEPS.model_call(self.inner, request, channel))
        else:
            queued = self.queue.call(request, channel, replaying=self.replay.replaying())
            step = asyncio.ensure_future(queued)
        try:
            async for part in channel.parts(step):
                yield part
            data = step.result()
        finally:
            if not step.done():  # the run stopped reading: an abort
                step.cancel()
                await asyncio.wait({step})
        if not channel.ran:  # replayed: what streamed, one piece each
            answer = data.get("response") or data
            if answer.get("thinking"):
                yield ThinkingDelta(answer["thinking"])
            if answer.get("text"):
                yield TextDelta(answer["text"])
        if "error" in data:
            raise channel.error or codec.error_from(data["error"])
        if data.get("response") is not None:
            yield codec.response_from(data["response"])

    def format_assistant_message(self, response: LLMResponse) -> Message:
        """The wrapped client's assistant message."""
        return self.inner.format_assistant_message(response)

    def format_tool_result(self, call: ToolCall, result: ToolResult) -> Message:
        """The wrapped client's tool message."""
        return self.inner.format_tool_result(call, result)

    def output_mode(self, *, tools: bool, settings: ModelSettings) -> OutputMode:
        """The wrapped client's mode.

        Args:
            tools: Whether the run offers tools of its own.
            settings: The run's settings.
        """
        return self.inner.output_mode(tools=tools, settings=settings)

    async def resolve_tool_protocol(self, settings: ModelSettings | None = None) -> ToolProtocol:
        """The wrapped client's decision (a call to its server, for some, not a step)."""
        return await self.inner.resolve_tool_protocol(settings)

    def __repr__(self) -> str:
        return f"DurableClient({self.inner!r})"
