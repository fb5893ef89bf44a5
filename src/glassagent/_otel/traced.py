"""`traced` and `TracedRun`: a run whose events become OpenTelemetry spans as they happen."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic

from opentelemetry import context as otel_context
from opentelemetry import trace

from glassagent._agent.run import AgentRun
from glassagent._agent.sync import run_coroutine_sync
from glassagent._core.errors import UserError
from glassagent._core.result import OutputT
from glassagent._otel.spans import Options, RunSpans
from glassagent._version import __version__

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer, TracerProvider
    from typing_extensions import Self

    from glassagent._core.events import Event
    from glassagent._core.result import RunResult

INSTRUMENTATION = "glassagent"
"""The instrumentation scope name of glassagent's spans."""

_END = object()


class TracedRun(Generic[OutputT]):
    """A run whose events become OpenTelemetry spans; use it as you would the run.

    ``async for event in traced_run`` streams the run's events, ``await traced_run`` returns
    its `RunResult` (or raises as awaiting the run does) and `run_sync` does the same from
    plain code. The spans open and close as the events happen: the events are read as they
    are emitted, also when the loop body of an ``async for`` takes its time. `traced`
    creates traced runs.
    """

    def __init__(self, run: AgentRun[OutputT], tracer: Tracer, options: Options) -> None:
        self.run: AgentRun[OutputT] = run
        """The run being traced (for `AgentRun`'s other methods)."""
        self._tracer = tracer
        self._options = options
        self._claimed = False
        self._pump: asyncio.Task[None] | None = None
        self._pump_error: BaseException | None = None

    @property
    def run_id(self) -> str:
        """The run's id (also the run span's ``glassagent.run.id``)."""
        return self.run.run_id

    @property
    def result(self) -> RunResult[OutputT] | None:
        """The run's result once it has ended, else `None`."""
        return self.run.result

    def abort(self, reason: str = "user_abort") -> None:
        """Stop the run (see `AgentRun.abort`); its open spans end as aborted.

        Args:
            reason: Why, carried by the ``aborted`` event and the run span's status.
        """
        self.run.abort(reason)

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._stream()

    def __await__(self) -> Generator[Any, None, RunResult[OutputT]]:
        return self._collect().__await__()

    def run_sync(self) -> RunResult[OutputT]:
        """Run to the end from plain code and return the `RunResult`, as `Agent.run_sync`.

        Raises:
            GlassAgentError: When the run fails or is aborted (with ``.result`` set).
        """
        return run_coroutine_sync(self._collect())

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.run.__aexit__(exc_type, exc, tb)  # aborts a run still going, waits for it
        if self._pump is not None and not self._pump.done():
            await asyncio.wait({self._pump})

    def _claim(self) -> None:
        if self._claimed:
            raise UserError("A traced run can be iterated or awaited only once; start a new run.")
        self._claimed = True

    async def _collect(self) -> RunResult[OutputT]:
        self._claim()
        await self._drive(None)
        return await self.run  # the result, or the run's error

    async def _stream(self) -> AsyncGenerator[Event, None]:
        """Stream the events that a task of its own reads (and traces) as they come."""
        self._claim()
        queue: asyncio.Queue[Any] = asyncio.Queue()
        pump = self._pump = asyncio.create_task(
            self._forward(queue), name=f"glassagent-otel-{self.run_id}"
        )
        try:
            while (item := await queue.get()) is not _END:
                yield item
        finally:
            if not pump.done():
                self.run.abort("the consumer stopped iterating")
                await asyncio.wait({pump})
        if self._pump_error is not None:  # KeyboardInterrupt or HistoryAppendError, as the run
            raise self._pump_error

    async def _forward(self, queue: asyncio.Queue[Any]) -> None:
        try:
            await self._drive(queue.put_nowait)
        except asyncio.CancelledError:  # the loop is closing: the stream just ends
            pass
        except BaseException as exc:  # also KeyboardInterrupt: it must not escape the task
            self._pump_error = exc
        finally:
            queue.put_nowait(_END)

    async def _drive(self, forward: Callable[[Event], None] | None) -> None:
        """Read every event of the run into its spans, with the run span current.

        The run's own task starts here, so spans that code inside the run creates (an
        instrumented HTTP client, a tool) are children of the run span.
        """
        spans = RunSpans(self._tracer, self._options, self.run.run_id)
        token = otel_context.attach(spans.context)
        error: BaseException | None = None
        try:
            async for event in self.run:
                spans.observe(event)
                if forward is not None:
                    forward(event)
        except BaseException as exc:
            error = exc
            raise
        finally:
            spans.finish(self.run.result, error)
            otel_context.detach(token)

    def __repr__(self) -> str:
        return f"TracedRun(run_id={self.run_id!r})"


def traced(
    run: AgentRun[OutputT],
    *,
    tracer_provider: TracerProvider | None = None,
    capture_content: bool = False,
    redact: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    agent_name: str | None = None,
) -> TracedRun[OutputT]:
    """Trace a run with OpenTelemetry, following the GenAI semantic conventions.

    The run becomes an ``invoke_agent`` span, each model call a ``chat {model}`` span and
    each tool call an ``execute_tool {tool}`` span under it. Spans go to `tracer_provider`,
    or to the global one that the application configured; with none configured the
    OpenTelemetry API records and exports nothing.

    Example:
        ```python
        result = await traced(agent.run("What is 17 + 25?"))
        async for event in traced(agent.run("And 2 + 2?"), capture_content=True):
            ...
        ```

    Args:
        run: The run to trace, as `Agent.run` returns it, not yet started.
        tracer_provider: Where the spans go (`None`: the global tracer provider).
        capture_content: Also export the conversation: input and output messages, system
            instructions, tool definitions, tool arguments and results. They may hold
            personal data; left out by default.
        redact: Applied to each standard event dict before anything of it is exported (its
            error message; its content, with `capture_content`); what it returns is
            exported. When it raises, that event's content is left out. `None`: the
            agent's own hook (``Agent(redact=...)``), so what a recording hides is not
            exported either; pass ``lambda event: event`` to export it unredacted.
        agent_name: The agent's name: ``gen_ai.agent.name`` and the run span's name
            ``invoke_agent {agent_name}``.

    Raises:
        UserError: When `run` is not an `AgentRun`, `redact` is not callable or
            `agent_name` is empty; a given run is then closed, unstarted.
    """
    if not isinstance(run, AgentRun):
        raise UserError(f"traced() takes a run from Agent.run, got {type(run).__name__}.")
    problem = option_problem(redact, agent_name)
    if problem is not None:
        run.close()  # it would otherwise warn that it never ran
        raise UserError(problem)
    if redact is None:
        redact = run._output_redact(live=True)  # the agent's hook, after its sub-agents'
    options = Options(bool(capture_content), redact, agent_name)
    return TracedRun(run, tracer_for(tracer_provider), options)


def option_problem(redact: Any, agent_name: Any) -> str | None:
    """What is wrong with a `redact` hook or an `agent_name` given to trace runs, if anything."""
    if redact is not None and not callable(redact):
        return f"`redact` must be a function of an event dict, got {type(redact).__name__}."
    if agent_name is not None and (not isinstance(agent_name, str) or not agent_name.strip()):
        return "`agent_name` must be a non-empty string."
    return None


def tracer_for(tracer_provider: TracerProvider | None) -> Tracer:
    """Glassagent's tracer from `tracer_provider` (`None`: the global one)."""
    return trace.get_tracer(INSTRUMENTATION, __version__, tracer_provider)
