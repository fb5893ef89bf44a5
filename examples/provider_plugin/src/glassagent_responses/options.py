"""`ResponsesOptions`: what only the Responses API understands, checked when made."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from glassagent.errors import UserError
from glassagent.llm import Message, ProviderOptions
from glassagent.providers import add_unset, check_mapping, check_number, check_text

EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
SUMMARIES = ("auto", "concise", "detailed")
RESPONSE_ID = "response_id"
"""`LLMResponse.provider_metadata` key of the response's id (for ``previous_response_id``)."""


@dataclass(frozen=True, kw_only=True)
class ResponsesOptions(ProviderOptions):
    """Options for `ResponsesClient`: fields of the Responses API request.

    Pass them as ``ModelSettings(provider_options=ResponsesOptions(...))``. Every field is
    checked when the options are made; a wrong value raises `UserError`.
    """

    kind: Literal["openai_responses"] = "openai_responses"
    """Which provider family these options are for."""
    reasoning_effort: str | None = None
    """How hard a reasoning model thinks (``reasoning.effort``): ``"none"``, ``"minimal"``,
    ``"low"``, ``"medium"``, ``"high"`` or ``"xhigh"``."""
    reasoning_summary: str | None = None
    """Ask for a summary of the reasoning (``reasoning.summary``): ``"auto"``, ``"concise"``
    or ``"detailed"``. It streams as thinking."""
    store: bool | None = None
    """Whether OpenAI keeps the response (OpenAI's default: it does). With ``False`` the
    reasoning comes back encrypted, so it can still be sent back with the next request."""
    previous_response_id: str | None = None
    """Continue from a stored response: the ``"response_id"`` of an earlier answer's
    `LLMResponse.provider_metadata`. OpenAI already holds the conversation up to that answer,
    so only the messages after its assistant turn are sent as ``input``: the new user
    message and the tool results since. That turn is found by its ``"response_id"``; when
    no turn carries it, it is the last assistant turn without one (with none, every message
    is sent). The ``instructions`` (the system prompt) are sent every time, as OpenAI does
    not carry them over."""
    top_p: float | None = None
    """Nucleus sampling: only the most likely tokens adding up to this probability (0 to 1)."""
    extra_body: Mapping[str, Any] | None = None
    """Further body fields, sent as given; one glassagent already sets is refused."""

    merged_mappings = ("extra_body",)

    def __post_init__(self) -> None:
        super().__post_init__()
        _one_of("reasoning_effort", self.reasoning_effort, EFFORTS)
        _one_of("reasoning_summary", self.reasoning_summary, SUMMARIES)
        if self.store is not None and not isinstance(self.store, bool):
            raise UserError(f"ResponsesOptions.store must be True or False, not {self.store!r}.")
        check_text("ResponsesOptions", "previous_response_id", self.previous_response_id)
        check_number("ResponsesOptions", "top_p", self.top_p, 0, 1)
        check_mapping("ResponsesOptions", "extra_body", self.extra_body)

    def unseen(self, messages: Sequence[Message]) -> Sequence[Message]:
        """The messages to send: with `previous_response_id`, those after its turn."""
        if self.previous_response_id is None:
            return messages
        turns = [i for i, m in enumerate(messages) if m.role == "assistant"]
        ids = {i: messages[i].provider_metadata.get(RESPONSE_ID) for i in turns}
        cut = [i for i in turns if ids[i] == self.previous_response_id]
        cut = cut or [i for i in turns if not ids[i]]  # a turn of another response is newer
        return messages[(cut or [-1])[-1] + 1 :]

    def add_to(self, body: dict[str, Any]) -> None:
        """Put these options into a request `body`, refusing a field it already has.

        Raises:
            ConfigurationError: For a field glassagent already set, e.g. ``extra_body``
                holding ``"model"`` (or ``"top_p"`` when `top_p` is set too).
        """
        reasoning = {"effort": self.reasoning_effort, "summary": self.reasoning_summary}
        fields = {
            "reasoning": {k: v for k, v in reasoning.items() if v is not None} or None,
            "store": self.store,
            "include": ["reasoning.encrypted_content"] if self.store is False else None,
            "previous_response_id": self.previous_response_id,
            "top_p": self.top_p,
        }
        given = {k: v for k, v in fields.items() if v is not None}
        add_unset(body, given, "ResponsesOptions", self.kind)
        add_unset(body, self.extra_body or {}, "ResponsesOptions.extra_body", self.kind)


def _one_of(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value is not None and value not in allowed:
        choices = ", ".join(repr(a) for a in allowed)
        raise UserError(f"ResponsesOptions.{name} must be one of {choices}, not {value!r}.")
