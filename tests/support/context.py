"""Helpers of the context-policy tests: a scripted model on a 4,096-token window."""

from __future__ import annotations

from glassagent import LLMResponse, Message, ModelSettings, ToolCall, Usage
from glassagent.agent import estimate_tokens
from glassagent.context import DEFAULT_INSTRUCTIONS
from glassagent.llm import ToolDefinition
from glassagent.testing import FunctionClient

MODEL = "acme-4k"
WINDOW = 4096


def is_summarizer(system: str | None) -> bool:
    """Whether a request is the summarizer's (its system instructions are the policy's)."""
    return system == DEFAULT_INSTRUCTIONS


class Model:
    """A scripted model: answers every turn at length, calls `lookup` when asked to.

    A user message that starts with ``look up`` gets `calls` rounds of one `lookup` call each
    before the answer. Summarizer requests get a short numbered summary. Every request is
    kept with its estimated size.
    """

    def __init__(self, *, calls: int = 0, answer_chars: int = 600) -> None:
        self.calls = calls
        self.answer_chars = answer_chars
        self.summaries = 0
        self.sizes: list[int] = []
        self.client = FunctionClient(self.answer, model=MODEL)

    def answer(
        self,
        messages: tuple[Message, ...],
        tools: tuple[ToolDefinition, ...],
        system: str | None,
        settings: ModelSettings | None,
    ) -> LLMResponse | str:
        if is_summarizer(system):
            self.summaries += 1
            return LLMResponse(
                f"Summary {self.summaries}: the user asked many questions.",
                usage=Usage(input_tokens=estimate_tokens(messages, (), system), output_tokens=12),
            )
        self.sizes.append(estimate_tokens(messages, tools, system))
        last_user = max(i for i, m in enumerate(messages) if m.role == "user")
        made = sum(1 for m in messages[last_user:] if m.role == "assistant")
        asked = messages[last_user].content
        if asked.startswith("look up") and made < self.calls:
            call = ToolCall(f"c{len(self.sizes)}", "lookup", {"key": asked[-20:]})
            return LLMResponse(tool_calls=[call])
        return ("Answer: " + asked + " ") * (self.answer_chars // (len(asked) + 9) + 1)


def question(turn: int) -> str:
    """The user's message of a turn: about 200 characters."""
    return f"Question {turn}: " + "tell me more about the weather and the sea. " * 4


def sent_pairs(messages: tuple[Message, ...]) -> tuple[set[str], set[str]]:
    """The ids of the tool calls and of the tool results of a request."""
    calls = {c.id for m in messages for c in m.tool_calls}
    results = {m.tool_call_id or "" for m in messages if m.role == "tool"}
    return calls, results
