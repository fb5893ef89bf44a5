"""OpenTelemetry spans of a run; needs ``pip install "glassagent[otel]"`` (the API only).

`traced` wraps a run: ``await traced(agent.run(...))``, ``async for event in
traced(agent.run(...))`` or ``traced(agent.run(...)).run_sync()``. The run becomes an
``invoke_agent`` span, each model call a ``chat {model}`` span and each tool call an
``execute_tool {tool}`` span, with the attributes of the OpenTelemetry GenAI semantic
conventions (``gen_ai.operation.name``, ``gen_ai.request.model``,
``gen_ai.usage.input_tokens``, ...). Message content is exported only with
``capture_content=True``, after an optional ``redact`` hook. Spans go to the tracer
provider the application configured (or the one passed); glassagent never installs one, so
without it nothing is recorded or exported. Runs you do not start yourself (``run_sync`` in
a library, the invoke server's) are traced by an `EventTracer` given as the ``on_event``
hook of the agent or of ``create_app``.
"""

from glassagent._otel.hook import EventTracer
from glassagent._otel.traced import INSTRUMENTATION, TracedRun, traced
from glassagent._public import publish

__all__ = ["EventTracer", "INSTRUMENTATION", "TracedRun", "traced"]  # noqa: RUF022 (plain sort)

publish(__name__, globals(), ["EventTracer", "TracedRun", "traced"])
