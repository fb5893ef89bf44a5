"""`EventTracer`: an ``on_event`` hook that traces every run of an agent (or of a server).

`traced` wraps one run you start yourself. Runs you never hold, those ``agent.run_sync``
makes inside a library or those of the invoke server, are traced by giving an `EventTracer`
as the agent's (or the app's) ``on_event`` hook: it opens a run's spans at its first event
and ends them at its last, with the spans, attributes and content `traced` gives.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from glassagent._core.errors import UserError
from glassagent._core.events import LLMResponseEvent
from glassagent._otel.spans import Options, RunSpans, Totals
from glassagent._otel.traced import option_problem, tracer_for

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

    from glassagent._core.events import Event
    from glassagent._core.result import RunResult


class EventTracer:
    """An ``on_event`` hook that traces each run it is given the events of, as `traced` does.

    Give it to the agent, ``Agent(..., on_event=EventTracer())``, or to the invoke server,
    ``create_app(..., on_event=EventTracer())``: every run becomes an ``invoke_agent`` span
    with its ``chat`` and ``execute_tool`` spans, whoever runs it. One tracer serves any
    number of runs at once. Unlike `traced`, the run's own task does not run with the run
    span current, so spans that code inside the run creates (an instrumented HTTP client)
    are not its children.

    Example:
        ```python
        app = create_app(model=client, tools=tools, on_event=EventTracer(redact=redactor))
        ```

    Args:
        tracer_provider: Where the spans go (`None`: the global tracer provider).
        capture_content: Also export the conversation (see `traced`).
        redact: Applied to each standard event dict before anything of it is exported, as
            in `traced`. Give the agent's own hook to hide what its recordings hide (a hook
            sees no agent, so there is no default).
        agent_name: The agent's name: ``gen_ai.agent.name`` and the run span's name.

    Raises:
        UserError: When `redact` is not callable or `agent_name` is empty.
    """

    def __init__(
        self,
        *,
        tracer_provider: TracerProvider | None = None,
        capture_content: bool = False,
        redact: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        agent_name: str | None = None,
    ) -> None:
        problem = option_problem(redact, agent_name)
        if problem is not None:
            raise UserError(problem)
        self._tracer = tracer_for(tracer_provider)
        self._options = Options(bool(capture_content), redact, agent_name)
        self._runs: dict[str, tuple[RunSpans, Totals]] = {}
        self._roots: dict[str, str] = {}  # a sub-agent's run id -> its top-level run's id
        self._seen: dict[str, int] = {}  # run id -> the last seq traced

    def __call__(self, event: Event) -> None:
        """Trace `event`: open its run's spans at the first, end them at the last.

        A sub-agent's event goes to the spans of the run it is nested in, when this hook
        traces that run; one the hook gets twice (the parent's and the sub-agent's own
        ``on_event``) is traced once.
        """
        if self._seen.get(event.run_id, -1) >= event.seq:
            return
        self._seen[event.run_id] = event.seq
        root = event.run_id
        if event.depth and event.parent_run_id is not None:
            above = self._roots.get(event.parent_run_id, event.parent_run_id)
            root = above if above in self._runs else root
        self._roots.setdefault(event.run_id, root)
        run = self._runs.get(root)
        if run is None:
            spans = RunSpans(self._tracer, self._options, event.run_id)
            run = self._runs[root] = (spans, Totals())
        spans, totals = run
        spans.observe(event)
        own = event.run_id == root
        if isinstance(event, LLMResponseEvent):
            totals.add(event, own=own)
        if not own or not totals.end(event):
            return
        del self._runs[root]
        for run_id in [r for r, top in self._roots.items() if top == root]:
            del self._roots[run_id]
            self._seen.pop(run_id, None)
        spans.finish(cast("RunResult", totals), None)  # the totals a result would give

    def __repr__(self) -> str:
        return f"EventTracer(runs_open={len(self._runs)})"
