"""Span attributes of the OpenTelemetry GenAI semantic conventions, from typed events.

Only metadata lives here (names, models, settings, token counts, finish reasons, cost);
message content is built by `glassagent._otel.content`, and only when the user opts in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.util.types import AttributeValue

    from glassagent._core.cost import Cost
    from glassagent._core.events import LLMRequestEvent, LLMResponseEvent
    from glassagent._core.messages import StopReason, Usage
    from glassagent._core.result import RunResult

    Attributes = dict[str, AttributeValue]

# The GenAI semantic conventions (development status; names as of semconv 1.37+).
OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
SYSTEM = "gen_ai.system"  # the older name of the provider, still read by many backends
AGENT_NAME = "gen_ai.agent.name"
REQUEST_MODEL = "gen_ai.request.model"
TEMPERATURE = "gen_ai.request.temperature"
MAX_TOKENS = "gen_ai.request.max_tokens"
STOP_SEQUENCES = "gen_ai.request.stop_sequences"
FINISH_REASONS = "gen_ai.response.finish_reasons"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
REASONING_TOKENS = "gen_ai.usage.reasoning.output_tokens"
CACHE_READ_TOKENS = "gen_ai.usage.cache_read.input_tokens"
CACHE_WRITE_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
TOOL_DEFINITIONS = "gen_ai.tool.definitions"
ERROR_TYPE = "error.type"

# glassagent's own attributes, for what the conventions have no name for.
RUN_ID = "glassagent.run.id"
RUN_STOP_REASON = "glassagent.run.stop_reason"
RUN_ITERATIONS = "glassagent.run.iterations"
BUDGET_LIMIT = "glassagent.budget.limit"
ITERATION = "glassagent.iteration"
COST_AMOUNT = "glassagent.cost.amount"
COST_CURRENCY = "glassagent.cost.currency"
CONTEXT_TOOL = "glassagent.tool.context"
CONTEXT_SCORE = "glassagent.tool.context_score"
PROGRESS_MESSAGE = "glassagent.tool.progress"
HANDOFF = "glassagent.handoff"
"""The span event of a handoff, on the run span."""
HANDOFF_FROM = "glassagent.handoff.from_agent"
HANDOFF_TO = "glassagent.handoff.to_agent"

INVOKE_AGENT = "invoke_agent"
CHAT = "chat"
EXECUTE_TOOL = "execute_tool"

TOOL_ERROR = "tool_error"
"""``error.type`` of a tool call that failed (its error result went back to the model)."""
UNKNOWN_TOOL = "unknown_tool"
"""``error.type`` of a call to a tool name the agent does not have."""
ERROR_TYPE_OTHER = "_OTHER"
"""``error.type`` of a step that ended in a way nothing else describes."""
ABORTED = "RunAborted"
"""``error.type`` of an aborted run and of the calls it cut short."""

_PROVIDERS = {"gemini": "gcp.gemini"}  # glassagent's names that the conventions spell apart
_FINISH_REASONS: dict[str, str] = {
    "end_turn": "stop",
    "tool_use": "tool_call",
    "max_tokens": "length",
    "content_filter": "content_filter",
}


def provider_name(provider: str) -> str:
    """The conventions' ``gen_ai.provider.name`` for a glassagent client's provider name."""
    return _PROVIDERS.get(provider, provider)


def finish_reason(stop: StopReason, raw: str | None = None) -> str:
    """The conventions' finish reason for a stop reason (the provider's own for ``other``)."""
    return _FINISH_REASONS.get(stop) or raw or stop


def run_attributes(agent_name: str | None, run_id: str) -> Attributes:
    """The run span's attributes known when it starts."""
    attributes: Attributes = {OPERATION: INVOKE_AGENT, RUN_ID: run_id}
    if agent_name:
        attributes[AGENT_NAME] = agent_name
    return attributes


def model_attributes(provider: str, model: str) -> Attributes:
    """Who serves the calls: provider (both names) and requested model."""
    name = provider_name(provider)
    return {PROVIDER: name, SYSTEM: name, REQUEST_MODEL: model}


def request_attributes(event: LLMRequestEvent) -> Attributes:
    """A model call's attributes known when it starts: provider, model and settings."""
    attributes: Attributes = {
        OPERATION: CHAT,
        **model_attributes(event.provider, event.model),
        ITERATION: event.iteration,
    }
    settings = event.settings
    if settings.temperature is not None:
        attributes[TEMPERATURE] = float(settings.temperature)
    if settings.max_tokens is not None:
        attributes[MAX_TOKENS] = settings.max_tokens
    if settings.stop_sequences:
        attributes[STOP_SEQUENCES] = list(settings.stop_sequences)
    return attributes


def usage_attributes(usage: Usage) -> Attributes:
    """Token counts as the conventions count them.

    Their output tokens include reasoning tokens (glassagent counts those apart); their input
    tokens include cached ones, as glassagent's do.
    """
    attributes: Attributes = {
        INPUT_TOKENS: usage.input_tokens,
        OUTPUT_TOKENS: usage.output_tokens + usage.thinking_tokens,
    }
    for name, value in (
        (REASONING_TOKENS, usage.thinking_tokens),
        (CACHE_READ_TOKENS, usage.cache_read_tokens),
        (CACHE_WRITE_TOKENS, usage.cache_write_tokens),
    ):
        if value:
            attributes[name] = value
    return attributes


def cost_attributes(cost: Cost) -> Attributes:
    """What the calls cost, when it is known."""
    if cost.amount is None:
        return {}
    return {COST_AMOUNT: float(cost.amount), COST_CURRENCY: cost.currency}


def response_attributes(event: LLMResponseEvent) -> Attributes:
    """A finished model call's attributes: finish reason, tokens and cost."""
    return {
        FINISH_REASONS: [finish_reason(event.stop_reason, event.raw_stop_reason)],
        **usage_attributes(event.usage),
        **cost_attributes(event.cost),
    }


def tool_attributes(name: str, call_id: str | None) -> Attributes:
    """A tool call's attributes known when it starts."""
    attributes: Attributes = {OPERATION: EXECUTE_TOOL, TOOL_NAME: name, TOOL_TYPE: "function"}
    if call_id is not None:
        attributes[TOOL_CALL_ID] = call_id
    return attributes


def result_attributes(result: RunResult[Any]) -> Attributes:
    """The run span's totals once the run has ended."""
    attributes: Attributes = {
        **usage_attributes(result.usage),
        **cost_attributes(result.cost),
        RUN_STOP_REASON: result.stop_reason,
        RUN_ITERATIONS: result.iterations,
    }
    if result.model_stop_reason is not None:
        attributes[FINISH_REASONS] = [finish_reason(result.model_stop_reason)]
    return attributes
