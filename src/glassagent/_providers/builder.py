"""`ResponseBuilder`: one answer assembled from a complete body or from streamed pieces.

Wire modules translate a provider's body or stream chunks into calls on a builder: text and
thinking deltas, tool-call fragments, usage, the finish reason, the model and provider
metadata. The builder does no I/O and knows no provider's wire; `ResponseBuilder.build`
returns the neutral `LLMResponse`.

Tool-call fragments are matched to their call by ``index`` *and* by ``id``: a fragment with
an index continues the call at that index (unless it names another id: some servers give
every parallel call index 0); one without an index continues the call with its id, or starts
a new one for an unseen id; one with neither continues the latest call. So servers that omit
``index`` for parallel calls never have their calls merged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from glassagent._core.messages import (
    LLMResponse,
    StopReason,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    Usage,
    new_call_id,
)
from glassagent._providers import shapes

GENERATED_ID = "generated_id"
"""`ToolCall.provider_metadata` key set on calls whose id glassagent generated (the provider
sent none), so a wire module knows not to send that id back as the provider's own."""


def parse_arguments(call_id: str, name: str, arguments: Any) -> ToolCall:
    """A `ToolCall` from wire arguments (an object, JSON text, or null for none).

    Arguments that are not a JSON object (invalid JSON, an array, a number...) set the call's
    `arguments_error`, so the agent tells the model instead of running the tool.
    """
    if isinstance(arguments, dict):
        return ToolCall(call_id, name, arguments)
    if arguments is not None and not isinstance(arguments, str):
        problem = f"the arguments must be a JSON object, got {shapes.snippet(arguments)}"
        return ToolCall(call_id, name, {}, arguments_error=problem)
    text = arguments or ""
    try:
        value = shapes.loads(text) if text.strip() else {}
    except ValueError as exc:
        problem = f"the arguments are not valid JSON ({exc}): {text[:500]!r}"
        return ToolCall(call_id, name, {}, arguments_error=problem)
    if not isinstance(value, dict):
        problem = f"the arguments must be a JSON object, got {text[:500]!r}"
        return ToolCall(call_id, name, {}, arguments_error=problem)
    return ToolCall(call_id, name, value)


@dataclass
class _CallSlot:
    """The fragments of one tool call collected so far."""

    id: str = ""
    name: str = ""
    fragments: list[str] = field(default_factory=list)
    arguments: Any = None
    metadata: dict[str, Any] = field(default_factory=dict)


class ResponseBuilder:
    """Collects one model answer; every value is checked by the wire module that feeds it.

    Args:
        provider: The provider's name, for errors.
    """

    def __init__(self, provider: str) -> None:
        self.provider = provider
        self._text: list[str] = []
        self._thinking: list[str] = []
        self._calls: list[_CallSlot] = []
        self._by_index: dict[int, _CallSlot] = {}
        self._by_id: dict[str, _CallSlot] = {}
        self.usage = Usage()
        """The answer's token counts (the latest report wins)."""
        self.raw_stop_reason: str | None = None
        """The provider's finish reason as sent, once it sent one."""
        self.model: str | None = None
        """The model the provider says answered."""
        self.metadata: dict[str, Any] = {}
        """Provider data for `LLMResponse.provider_metadata` (it must round-trip)."""
        self.timings: dict[str, float] = {}
        """Durations the server reported, in milliseconds."""

    # ---- content ------------------------------------------------------------------------

    def text(self, delta: str) -> TextDelta | None:
        """Add answer text; return it as a stream part (`None` for empty text)."""
        if not delta:
            return None
        self._text.append(delta)
        return TextDelta(delta)

    def thinking(self, delta: str) -> ThinkingDelta | None:
        """Add reasoning text; return it as a stream part (`None` for empty text)."""
        if not delta:
            return None
        self._thinking.append(delta)
        return ThinkingDelta(delta)

    def tool_call(
        self,
        *,
        index: int | None = None,
        call_id: str | None = None,
        name: str | None = None,
        arguments: Any = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        """Add a tool call, or the next fragment of one.

        Args:
            index: The call's position as the wire numbers it, when it does.
            call_id: The call's id, when this fragment carries it.
            name: The tool's name, when this fragment carries it.
            arguments: A piece of the arguments' JSON text, or the whole arguments object (any
                other value is kept as sent, and the call gets an `arguments_error`).
            metadata: Provider data for the call's `ToolCall.provider_metadata`.
        """
        slot = self._slot(index, call_id or None)
        if call_id and not slot.id:
            slot.id = call_id
            self._by_id[call_id] = slot
        slot.name = slot.name or (name or "")
        if arguments is not None and not isinstance(arguments, str):
            slot.arguments = arguments
        elif arguments:
            slot.fragments.append(arguments)
        if metadata:
            slot.metadata.update(metadata)

    def _slot(self, index: int | None, call_id: str | None) -> _CallSlot:
        """The call a fragment belongs to, made when it is the first fragment of a call."""
        if index is not None:
            slot = self._by_index.get(index)
            if slot is None or (call_id and slot.id and slot.id != call_id):
                known = self._by_id.get(call_id) if call_id else None
                slot = known or self._new_slot()
                self._by_index[index] = slot
            return slot
        if call_id is not None:
            return self._by_id.get(call_id) or self._new_slot()
        return self._calls[-1] if self._calls else self._new_slot()

    def _new_slot(self) -> _CallSlot:
        slot = _CallSlot()
        self._calls.append(slot)
        return slot

    # ---- bookkeeping --------------------------------------------------------------------

    def finish(self, raw_stop_reason: str | None) -> None:
        """Record the provider's finish reason (an empty or missing one changes nothing)."""
        if raw_stop_reason:
            self.raw_stop_reason = raw_stop_reason

    @property
    def thinking_text(self) -> str:
        """The reasoning text collected so far."""
        return "".join(self._thinking)

    @property
    def finished(self) -> bool:
        """Whether the provider has sent a finish reason."""
        return self.raw_stop_reason is not None

    def set_model(self, model: str | None) -> None:
        """Record the model that answered (an empty or missing name changes nothing)."""
        self.model = model or self.model

    # ---- result -------------------------------------------------------------------------

    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The assembled calls, in the order their first fragments came.

        Raises:
            ResponseParseError: For a call that never got a name.
        """
        calls = []
        for slot in self._calls:
            if not slot.name:
                raw = {"id": slot.id, "arguments": "".join(slot.fragments)}
                raise shapes.parse_error(self.provider, "a tool call without a name", raw)
            metadata = dict(slot.metadata)
            call_id = slot.id
            if not call_id:
                call_id = new_call_id()
                metadata[GENERATED_ID] = True
            text = "".join(slot.fragments)
            wire = text if text or slot.arguments is None else slot.arguments
            call = parse_arguments(call_id, slot.name, wire)
            if metadata:
                call = replace(call, provider_metadata={**call.provider_metadata, **metadata})
            calls.append(call)
        return tuple(calls)

    def build(
        self,
        *,
        stop_reasons: Mapping[str, StopReason],
        model: str | None = None,
        raw_response: Any = None,
        raw_request: Any = None,
    ) -> LLMResponse:
        """The `LLMResponse` collected so far.

        Args:
            stop_reasons: The provider's finish reasons and their neutral reading; an unknown
                one reads ``other``, a missing one ``end_turn`` (tool calls make it
                ``tool_use`` whatever the provider said).
            model: The model to report when the provider named none.
            raw_response: The body or the list of chunks, for `LLMResponse.raw_response`.
            raw_request: The body sent, for `LLMResponse.raw_request`.

        Raises:
            ResponseParseError: For a tool call without a name.
        """
        raw = self.raw_stop_reason
        stop = "end_turn" if raw is None else stop_reasons.get(raw, "other")
        return LLMResponse(
            text="".join(self._text),
            tool_calls=self.tool_calls(),
            stop_reason=stop,
            raw_stop_reason=raw,
            thinking="".join(self._thinking) or None,
            usage=self.usage,
            model=self.model or model,
            provider_metadata=dict(self.metadata),
            raw_response=raw_response,
            raw_request=raw_request,
            timings=dict(self.timings),
        )
