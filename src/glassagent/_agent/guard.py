"""`RunGuard`: what the model's profile and the agent's `Budget` allow, checked around each call.

At the start of a run: attachments of a modality the model cannot read are refused, a model
without native function calling gets the JSON tool protocol, and a cost budget on a model that
cannot be priced is refused. Before each model call: the request must fit the model's context
window, and the call must fit the budget. After each call: its cost.

Sizes are estimated cheaply: about four characters per token (`CHARS_PER_TOKEN`) of the
request's text, corrected by the prompt tokens the last call reported.
"""

from __future__ import annotations

import json
from dataclasses import replace
from decimal import Decimal
from functools import reduce
from operator import add
from typing import TYPE_CHECKING

from glassagent._agent import budget as budgets
from glassagent._core.cost import Cost
from glassagent._core.errors import AttachmentError, ContextLengthError, UserError
from glassagent._core.messages import LLMResponse, Message, ModelSettings, ToolDefinition, Usage
from glassagent._core.pricing import client_cost

if TYPE_CHECKING:
    from collections.abc import Sequence

    from glassagent._agent.budget import BudgetStop
    from glassagent._agent.config import RunConfig
    from glassagent._core.client import BaseLLMClient
    from glassagent._core.profiles.model import Modality, ModelProfile

CHARS_PER_TOKEN = 4
"""The size estimate's ratio: about four characters of English text or code per token."""

_NO_USAGE = "the client reported no token usage for the call"
_TEXT_TYPES = frozenset({"application/json", "application/xml", "application/yaml"})

# a profile's names for the answer's length limit (the design documents' ``max_output_tokens``)
_MAX_TOKENS_NAMES = frozenset({"max_tokens", "max_output_tokens", "max_completion_tokens"})


def request_chars(
    messages: Sequence[Message], tools: Sequence[ToolDefinition], system: str | None
) -> int:
    """The characters of a request's text: messages, tool calls, tool definitions, system.

    Attachments are not counted: what a file costs in tokens depends on the provider.
    """
    chars = len(system or "") + _tool_chars(tools)
    return chars + sum(_message_chars(message) for message in messages)


def estimate_tokens(
    messages: Sequence[Message], tools: Sequence[ToolDefinition], system: str | None
) -> int:
    """About how many tokens a request is, as the agent estimates before each model call.

    Four characters a token (`CHARS_PER_TOKEN`) of the messages, tool calls, tool
    definitions and system instructions; attachments are not counted. A budget's
    ``max_tokens`` and the profile's context check use it until the provider reports usage.

    Args:
        messages: The conversation to send.
        tools: The definitions of the tools offered (`Tool.definition`).
        system: The system instructions.
    """
    return request_chars(messages, tools, system) // CHARS_PER_TOKEN


def _tool_chars(tools: Sequence[ToolDefinition]) -> int:
    return sum(len(t.name) + len(t.description) + len(_dumps(t.parameters)) for t in tools)


def _message_chars(message: Message) -> int:
    chars = len(message.content) + len(message.thinking or "") + len(message.name or "")
    for call in message.tool_calls:
        chars += len(call.name) + len(_dumps(call.input))
    return chars


class RequestSize:
    """`request_chars` of a run's requests, counting each message and tool list once.

    A run's conversation grows by appending: the messages counted before are the start of
    the next request (checked by identity), so only the new ones are measured.
    """

    def __init__(self) -> None:
        self._counted: list[Message] = []
        self._message_chars = 0
        self._tools: Sequence[ToolDefinition] | None = None
        self._tool_chars = 0

    def chars(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition], system: str | None
    ) -> int:
        """The same as `request_chars` for this request."""
        counted = self._counted
        known = len(counted)
        if known > len(messages) or any(
            a is not b for a, b in zip(counted, messages[:known], strict=True)
        ):
            counted.clear()
            known = self._message_chars = 0
        for message in messages[known:]:
            self._message_chars += _message_chars(message)
            counted.append(message)
        if tools is not self._tools:
            self._tools, self._tool_chars = tools, _tool_chars(tools)
        return len(system or "") + self._tool_chars + self._message_chars


def _dumps(value: object) -> str:
    return json.dumps(value, default=repr, separators=(",", ":"))


def modality_of(mime_type: str | None) -> Modality | None:
    """The modality of a media type; `None` for one the check does not know (it passes)."""
    mime = (mime_type or "").split(";")[0].strip().lower()
    major = mime.partition("/")[0]
    if mime == "application/pdf":
        return "pdf"
    if major in ("image", "audio", "video"):
        return major  # type: ignore[return-value]  # one of the three
    if major == "text" or mime in _TEXT_TYPES:
        return "text"
    return None


def check_modalities(profile: ModelProfile, messages: Sequence[Message], provider: str) -> None:
    """Refuse an attachment of a modality the model cannot read, before any request.

    Raises:
        AttachmentError: Naming the attachment, its modality and what the model reads.
    """
    takes = profile.features.input_modalities
    for message in messages:
        for attachment in message.attachments:
            modality = modality_of(attachment.mime_type)
            if modality is None or modality == "text" or modality in takes:
                continue
            raise AttachmentError(
                f"Attachment {attachment.name or attachment.mime_type!r} "
                f"({attachment.mime_type}) is {modality} input, but the model "
                f"{profile.id!r} reads only {', '.join(takes)} (features.input_modalities of "
                f"its profile, {profile.origin}). Remove the attachment, or use a model that "
                f"reads {modality}.",
                provider=provider,
            )


class RunGuard:
    """The profile and budget checks of one run (`AgentRun` calls it; see the module)."""

    def __init__(self) -> None:
        self._config: RunConfig | None = None
        self._profile: ModelProfile | None = None
        self._calls = 0
        self._tokens = 0  # as reported, or estimated for calls that reported no usage
        self._costs: list[Cost] = []
        self._zero = Cost(Decimal(0))
        self._known: tuple[int, int] | None = None  # (prompt tokens, chars) of the last call
        self._pending = (0, 0)  # (chars, estimated tokens) of the call being made
        self._size = RequestSize()
        self._default_max: int | None = None  # the profile's max_tokens, given by `start`
        self.last_tokens = 0
        """The tokens the budget counted for the last call (`after_call`): as reported, or
        estimated when the client reported none."""

    @property
    def cost(self) -> Cost:
        """What the run's model calls cost so far (zero before the first)."""
        return reduce(add, self._costs) if self._costs else self._zero

    def start(self, config: RunConfig, messages: Sequence[Message]) -> RunConfig:
        """The run's configuration, as the model's profile completes it.

        The client is wrapped in the JSON tool protocol when the profile says the model has
        no function calling, and a run without ``max_tokens`` gets the profile's
        ``max_completion_tokens``: no call runs unbounded.

        Raises:
            AttachmentError: For an attachment the model cannot read.
            UserError: For a cost budget on a model that cannot be priced.
            ConfigurationError: For an invalid profile file.
        """
        from glassagent._agent.json_tools import JsonToolsClient

        client = config.client
        profile = self._profile = client.profile
        if profile is not None:
            check_modalities(profile, messages, client.provider_name)
            if not profile.features.supports_function_calling and client.tool_protocol == "native":
                config = replace(config, client=JsonToolsClient(client))
            most = profile.capabilities.max_completion_tokens
            supported = profile.capabilities.supported_parameters
            takes = not supported or not _MAX_TOKENS_NAMES.isdisjoint(supported)
            if most is not None and config.settings.max_tokens is None and takes:
                config = replace(config, settings=replace(config.settings, max_tokens=most))
                self._default_max = most
            if profile.pricing is not None:
                self._zero = Cost(Decimal(0), profile.pricing.currency)
        self._config = config
        if config.budget is not None and config.budget.max_cost is not None:
            self._check_priced(config.budget)
        return config

    def _check_priced(self, budget: budgets.Budget) -> None:
        probe = self._price(Usage(input_tokens=1000, output_tokens=1000))
        client = self._client
        if probe.amount is None:
            raise UserError(
                f"The agent's budget has a max_cost, but calls of {client.model!r} "
                f"({client.provider_name}) cannot be priced: {probe.reason}. Add pricing to "
                "the model's profile (docs/profiles.md), or budget max_tokens instead."
            )
        if probe.currency != budget.currency:
            raise UserError(
                f"The agent's budget has a max_cost in {budget.currency}, but {client.model!r} "
                f"is priced in {probe.currency}: give Budget(currency={probe.currency!r})."
            )

    @property
    def _client(self) -> BaseLLMClient:
        assert self._config is not None, "RunGuard.start was not called"
        return self._config.client

    def _free(self) -> bool:
        """Whether the profile prices every kind of token of the model at zero."""
        pricing = self._profile.pricing if self._profile is not None else None
        if pricing is None:
            return False
        probe = Usage(input_tokens=1000, output_tokens=1000, thinking_tokens=1000)
        return self._price(probe).amount == 0

    def _price(self, usage: Usage) -> Cost:
        """`client_cost` of the call: by the profile, else by genai-prices."""
        return client_cost(self._client, usage)

    def estimate(self, chars: int) -> int:
        """The tokens `before_call` estimates for a request of `chars` characters (`request_chars`).

        Four characters a token, corrected by the prompt tokens the last call reported.
        """
        if self._known is None:
            return chars // CHARS_PER_TOKEN
        known_tokens, known_chars = self._known
        return max(0, known_tokens + (chars - known_chars) // CHARS_PER_TOKEN)

    @property
    def default_max_tokens(self) -> int | None:
        """The ``max_tokens`` the profile gave a run that set none (see `start`), else `None`."""
        return self._default_max

    def before_call(self, messages: Sequence[Message], config: RunConfig) -> BudgetStop | None:
        """Check the request about to be sent; a `BudgetStop` when the budget forbids it.

        Raises:
            ContextLengthError: When the request is larger than the model's context window.
        """
        chars = self._size.chars(messages, config.definitions, config.system)
        tokens = self.estimate(chars)
        self._pending = (chars, tokens)
        profile = self._profile
        if profile is not None and tokens > profile.capabilities.context_length:
            limit = profile.capabilities.context_length
            raise ContextLengthError(
                f"The request to {profile.id!r} is about {tokens} tokens (estimated), more "
                f"than its context_length of {limit} tokens (its profile, {profile.origin}). "
                "Shorten the conversation, or use a model with a larger context window.",
                estimated_tokens=tokens,
                context_length=limit,
                model=profile.id,
            )
        if config.budget is None:
            return None
        return self.budget_stop(config.budget, self.next_call())

    def next_call(self) -> budgets.NextCall:
        """What the call `before_call` checked adds to a budget: its prompt, priced."""
        tokens = self._pending[1]
        return budgets.NextCall(tokens, self._price(Usage(input_tokens=tokens)))

    def budget_stop(
        self, budget: budgets.Budget, next_call: budgets.NextCall, *, later_calls: int = 0
    ) -> BudgetStop | None:
        """Whether `next_call`, after what this run (and its sub-agents) spent, passes `budget`.

        `later_calls`: calls that must still be possible after it (their prompts are in
        `next_call`), e.g. the model call a summarizer's call is made for.
        """
        calls = self._calls + later_calls
        return budgets.check(budget, calls, self._tokens, self.cost, next_call)

    def absorb(self, tokens: int, cost: Cost) -> None:
        """Count a sub-agent's model call (`tokens` as its guard counted them) as this run's."""
        self._calls += 1
        self._tokens += tokens
        self._costs.append(cost)

    def fit(self, settings: ModelSettings) -> ModelSettings:
        """`settings` with the profile's default ``max_tokens`` cut to fit the window.

        The prompt about to be sent (`before_call`'s estimate) and the answer must fit the
        model's context together; a ``max_tokens`` the caller set is left as it is.
        """
        most, profile = self._default_max, self._profile
        if most is None or profile is None or settings.max_tokens != most:
            return settings
        room = profile.capabilities.context_length - self._pending[1]
        return settings if room >= most else replace(settings, max_tokens=max(room, 1))

    def after_call(self, response: LLMResponse) -> Cost:
        """Record a finished call; return its cost.

        A call whose client reported no usage is unpriced (never a silent zero), unless the
        model's profile prices all its tokens at zero; the budget counts its tokens as
        estimated from the request and the answer.
        """
        chars, estimated = self._pending
        usage = response.usage
        self._calls += 1
        if usage.total_tokens == 0:
            answer = Message(
                role="assistant",
                content=response.text,
                thinking=response.thinking,
                tool_calls=response.tool_calls,
            )
            self.last_tokens = estimated + request_chars([answer], (), None) // CHARS_PER_TOKEN
            self._tokens += self.last_tokens
            # unknown, unless every token of this model is free (an unreadable reply of a
            # local model reports no usage, and still costs nothing)
            cost = self._zero if self._free() else Cost(None, reason=_NO_USAGE)
        else:
            self.last_tokens = usage.total_tokens
            self._tokens += usage.total_tokens
            cost = self._price(usage)
        if usage.input_tokens > 0:
            self._known = (usage.input_tokens, chars)
        self._costs.append(cost)
        return cost
