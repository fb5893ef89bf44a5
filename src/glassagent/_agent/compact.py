"""A run's context policy at work: what each model call sends of the conversation.

The conversation is cut into turns (a user message and what follows it up to the next user
message) and each turn into groups: the user's message, then each other message with the
tool results that follow it. A policy sends or leaves out whole groups, so a tool call never
goes without its results, nor a result without its call. A group with a ``system`` message
or a pinned message is always sent, and so is the current turn's user message.

Summaries (`Message.summary_of`) are never sent as messages: `Summarize` puts the latest in
the system instructions in place of the messages it covers; without it they are left out
(the messages they cover are sent). Nothing here changes the conversation's messages; a new
summary is appended to it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from glassagent._agent import decide, output
from glassagent._agent.budget import NextCall
from glassagent._agent.context_policy import (
    POLICY_NAMES,
    SUMMARY_HEADING,
    FitWindow,
    KeepTurns,
    Summarize,
)
from glassagent._agent.guard import CHARS_PER_TOKEN, request_chars
from glassagent._agent.summarize import summarize
from glassagent._agent.tokens import Sizer
from glassagent._core.cost import Cost
from glassagent._core.messages import Message, Usage
from glassagent._core.pricing import client_cost

if TYPE_CHECKING:
    from glassagent._agent.config import RunConfig
    from glassagent._agent.context_step import Gathered
    from glassagent._agent.guard import RunGuard
    from glassagent._core.client import BaseLLMClient


@dataclass
class Group:
    """Messages sent or left out together: one message and the tool results that follow it."""

    positions: list[int]
    """Their positions in the conversation."""
    turn: int
    """The turn it belongs to."""
    keep: bool
    """Always sent: it holds a ``system`` or a pinned message."""


@dataclass
class Layout:
    """The turns and groups of the messages that may be sent."""

    groups: list[Group] = field(default_factory=list)
    turns: list[list[int]] = field(default_factory=list)
    """The groups of each turn, by index; the last turn is the current one."""


def sendable_positions(conversation: Sequence[Message], prior: int) -> list[int]:
    """Positions of the messages a request may send (`decide.sendable`, summaries left out)."""
    return [
        i
        for i, m in enumerate(conversation)
        if m.summary_of is None
        and (
            not decide.protocol_traffic(m)
            or (i >= prior and (m.protocol or m.content or m.tool_calls))
        )
    ]


def layout(conversation: Sequence[Message], positions: Sequence[int], prior: int) -> Layout:
    """The turns and groups of the messages at `positions`.

    The run's own messages (from `prior` on) all belong to its turn: a user message the run
    added (asking again for valid output, say) starts no turn of its own, nor does it in a
    later run (`output.is_retry_request`).
    """
    result = Layout()
    for i in positions:
        message = conversation[i]
        starts_turn = (
            message.role == "user"
            and not message.protocol
            and (i == prior or (i < prior and not output.is_retry_request(message)))
        )
        if starts_turn or not result.turns:
            result.turns.append([])
        turn = len(result.turns) - 1
        group = result.groups[-1] if result.groups else None
        joins = (
            message.role == "tool"
            and not starts_turn
            and group is not None
            and group.turn == turn
            and conversation[group.positions[0]].role == "assistant"
        )
        keep = message.role == "system" or message.pinned
        if joins:
            assert group is not None
            group.positions.append(i)
            group.keep = group.keep or keep
        else:
            result.turns[-1].append(len(result.groups))
            result.groups.append(Group([i], turn, keep))
    return result


class Selection:
    """Which groups a request sends, and its size: ``(chars, tokens)``."""

    def __init__(
        self, shape: Layout, sizes: dict[int, tuple[int, int]], fixed: tuple[int, int]
    ) -> None:
        self.shape = shape
        self.sizes = [
            (sum(sizes[p][0] for p in g.positions), sum(sizes[p][1] for p in g.positions))
            for g in shape.groups
        ]
        self.sent = [True] * len(shape.groups)
        self.chars = fixed[0] + sum(c for c, _ in self.sizes)
        self.tokens = fixed[1] + sum(t for _, t in self.sizes)

    def drop(self, index: int) -> None:
        """Leave group `index` out (a group always sent stays)."""
        if self.sent[index] and not self.shape.groups[index].keep:
            self.sent[index] = False
            self.chars -= self.sizes[index][0]
            self.tokens -= self.sizes[index][1]

    def refix(self, before: tuple[int, int], after: tuple[int, int]) -> None:
        """The fixed part (system instructions and tools) changed from `before` to `after`."""
        self.chars += after[0] - before[0]
        self.tokens += after[1] - before[1]

    def positions(self) -> list[int]:
        """The positions sent, in order."""
        groups = self.shape.groups
        return [p for i, g in enumerate(groups) if self.sent[i] for p in g.positions]


def keep_turns(selection: Selection, n: int) -> None:
    """Send only the last `n` turns (and the groups always sent)."""
    turns = selection.shape.turns
    for turn in turns[: max(0, len(turns) - n)]:
        for index in turn:
            selection.drop(index)


def fit(selection: Selection, fits: Any) -> None:
    """Drop the oldest turns, then the current turn's oldest groups, until `fits`.

    The current turn keeps its first group (the user's message) and its last.
    """
    if fits(selection):
        return
    turns = selection.shape.turns
    for turn in turns[:-1]:
        for index in turn:
            selection.drop(index)
        if fits(selection):
            return
    if turns:
        for index in turns[-1][1:-1]:
            selection.drop(index)
            if fits(selection):
                return


def latest_summary(conversation: Sequence[Message]) -> Message | None:
    """The last summary of the conversation, if any."""
    for message in reversed(conversation):
        if message.summary_of is not None:
            return message
    return None


def countable(conversation: Sequence[Message]) -> list[int]:
    """Positions `Message.summary_of` counts: not summaries, not the tool protocol's traffic."""
    return [
        i
        for i, m in enumerate(conversation)
        if m.summary_of is None and not decide.protocol_traffic(m)
    ]


def with_summary(system: str | None, summary: Message | None) -> str | None:
    """The system instructions of a request, with the summary after them."""
    if summary is None:
        return system
    block = f"{SUMMARY_HEADING}\n{summary.content}"
    return f"{system}\n\n{block}" if system else block


@dataclass
class Prepared:
    """What the next model call sends, and what its compaction did."""

    messages: tuple[Message, ...]
    system: str | None
    config: RunConfig
    """The run's configuration with `system` as its system instructions (for `RunGuard`)."""
    event: dict[str, Any] | None = None
    """The ``context_compacted`` event's fields (but ``iteration``), when it is due."""
    spent: list[tuple[Usage, Cost]] = field(default_factory=list)
    """The summarizer's calls for this request: usage and cost of each."""


@dataclass(frozen=True)
class Spending:
    """How a run pays for its summarizer's calls (`AgentRun` gives it)."""

    refuse: Callable[[NextCall, int], str | None]
    """Why a summarizer call may not be made, because a budget would pass; `None` when it
    may. Given the prompts of the calls to make (`NextCall`: the summarizer's and the model
    call's after them) and how many calls follow the first."""
    spend: Callable[[Usage, Cost], None]
    """Counts one summarizer call as the run's, as soon as it is made."""


@dataclass
class _Request:
    """One request under construction, for `ContextWindow`."""

    conversation: list[Message]
    config: RunConfig
    view: tuple[Message, ...]
    system: str | None
    positions: list[int]
    shape: Layout
    sizes: dict[int, tuple[int, int]]
    fixed: tuple[int, int]
    summary: Message | None = None
    new_summary: bool = False
    summary_error: str | None = None
    spent: list[tuple[Usage, Cost]] = field(default_factory=list)


class ContextWindow:
    """One run's context policy at work: `prepare` gives what each model call sends.

    A summary that could not be written (the summarizer failed, or a budget forbade its
    calls) is not asked for again in the run: later requests leave out turns instead.
    """

    def __init__(self, prior: int, spending: Spending | None = None) -> None:
        self._prior = prior  # the conversation's messages before this run
        self._spending = spending
        self._sizer: Sizer | None = None
        self._tools: tuple[object, int] | None = None  # (definitions, their tokens)
        self._shown: tuple[object, ...] | None = None  # what the last event showed
        self._no_summary: str | None = None  # why no summary is written in this run

    async def prepare(
        self, conversation: list[Message], config: RunConfig, context: Gathered, guard: RunGuard
    ) -> Prepared:
        """The next request's messages and system instructions, as the policy has them.

        A `Summarize` policy may call its model and append a summary to `conversation`.
        """
        view, system = context.apply(conversation, config.system)
        positions = sendable_positions(conversation, self._prior)
        policy = config.context_policy
        if policy is None:
            if len(positions) == len(view):
                return Prepared(view, system, config)
            return Prepared(tuple(view[i] for i in positions), system, config)
        window = self._window(policy, config)
        room = None
        if window is not None and not isinstance(policy, KeepTurns):
            room = window - self._reserve(policy, config, guard, window)
        request = await self._measure(conversation, config, view, system, positions, room)
        selection = Selection(request.shape, request.sizes, request.fixed)
        before = (len(positions), selection.tokens)
        if isinstance(policy, KeepTurns):
            keep_turns(selection, policy.n)
        elif window is not None and room is not None:  # FitWindow or Summarize, sized

            def fits(chosen: Selection, limit: float = room) -> bool:
                return max(chosen.tokens, guard.estimate(chosen.chars)) <= limit

            if isinstance(policy, Summarize):
                due = lambda s: fits(s, policy.trigger * room)  # noqa: E731
                await self._summarize(policy, request, selection, due, window)
            fit(selection, fits)
        sent = selection.positions()
        messages = tuple(view[i] for i in sent)
        final_system = with_summary(system, request.summary)
        after = (len(sent), selection.tokens)
        event = self._event(request, sent, before, after, window)
        if final_system != config.system:
            config = replace(config, system=final_system)
        return Prepared(messages, final_system, config, event, request.spent)

    @staticmethod
    def _window(policy: FitWindow | KeepTurns | Summarize, config: RunConfig) -> int | None:
        """The tokens a request may have: the policy's, else the profile's (`KeepTurns`: none)."""
        if isinstance(policy, KeepTurns):
            return None
        if policy.window is not None:
            return policy.window
        profile = config.client.profile
        return profile.capabilities.context_length if profile is not None else None

    def _sizer_of(self, config: RunConfig) -> Sizer:
        """The run's sizer, for its client (a handoff changes the client)."""
        if self._sizer is None or self._sizer.client is not config.client:
            self._sizer = Sizer(config.client)
            self._tools = None
        return self._sizer

    async def _measure(
        self,
        conversation: list[Message],
        config: RunConfig,
        view: tuple[Message, ...],
        system: str | None,
        positions: list[int],
        room: int | None,
    ) -> _Request:
        """The request's layout and sizes.

        The tokenizer counts what the policy's choice depends on: the groups always sent (and
        the current turn's first and last), and the newest messages back to where they pass
        `room` (`KeepTurns`: the turns it keeps). The older messages are left out whatever
        their size, so they get the estimate.
        """
        shape = layout(conversation, positions, self._prior)
        index = {p: k for k, p in enumerate(positions)}
        groups = shape.groups
        counted = [g for g in groups if g.keep]
        if shape.turns:
            counted += [groups[shape.turns[-1][0]], groups[shape.turns[-1][-1]]]
        policy = config.context_policy
        if isinstance(policy, KeepTurns):
            counted += [groups[i] for turn in shape.turns[-policy.n :] for i in turn]
        enough = 0 if isinstance(policy, KeepTurns) or room is None else room
        exact = [index[p] for group in counted for p in group.positions]
        sizer = self._sizer_of(config)
        sizes = await sizer.messages([view[i] for i in positions], enough=enough, exact=exact)
        fixed = await self._fixed(sizer, config, system)
        by_position = dict(zip(positions, sizes, strict=True))
        return _Request(conversation, config, view, system, positions, shape, by_position, fixed)

    async def _fixed(self, sizer: Sizer, config: RunConfig, system: str | None) -> tuple[int, int]:
        """``(chars, tokens)`` of the system instructions and the tool definitions."""
        tools = config.definitions
        if self._tools is None or self._tools[0] is not tools:
            text = "\n".join(f"{t.name}\n{t.description}\n{t.parameters}" for t in tools)
            chars = request_chars((), tools, None)
            tokens = (await sizer.text(text, chars))[1] if tools else 0
            self._tools = (tools, tokens)
        system_tokens = (await sizer.text(system))[1] if system else 0
        return request_chars((), tools, system), system_tokens + self._tools[1]

    @staticmethod
    def _reserve(
        policy: FitWindow | Summarize, config: RunConfig, guard: RunGuard, window: int
    ) -> int:
        """Tokens left for the answer: the policy's, the run's own ``max_tokens``, or 1/4."""
        if policy.reserve is not None:
            return policy.reserve
        most = config.settings.max_tokens
        if most is not None and most != guard.default_max_tokens:
            return most
        return window // 4

    async def _summarize(
        self, policy: Summarize, request: _Request, selection: Selection, fits: Any, window: int
    ) -> None:
        """Send the latest summary for what it covers; write a new one when it is due."""
        conversation, shape = request.conversation, request.shape
        summary = latest_summary(conversation)
        order = countable(conversation)
        if summary is not None:
            covered = set(order[: summary.summary_of])
            for index, group in enumerate(shape.groups):
                if covered.issuperset(group.positions):
                    selection.drop(index)
            await self._use_summary(request, selection, summary)
        cut = len(shape.turns) - policy.keep_turns
        if fits(selection) or cut <= 0:
            return
        older = [i for turn in shape.turns[:cut] for i in turn if selection.sent[i]]
        older = [i for i in older if not shape.groups[i].keep]
        if not older:
            return
        if self._no_summary is not None:
            request.summary_error = self._no_summary
            return
        first_kept = shape.groups[shape.turns[cut][0]].positions[0]
        messages = [conversation[p] for i in older for p in shape.groups[i].positions]
        config = request.config
        client = policy.client or config.client
        after = selection.tokens - sum(selection.sizes[i][1] for i in older)
        written = await summarize(
            policy,
            client,
            summary.content if summary is not None else None,
            messages,
            window=window,
            timeout=config.settings.timeout,
            refuse=self._refusal(client, config, after + policy.max_summary_tokens),
            spend=self._spending.spend if self._spending is not None else None,
        )
        request.spent += written.calls
        if written.text is None:
            request.summary_error = written.error
            self._no_summary = f"{written.error} (earlier in this run; not asked again)"
            return
        new = Message(
            role="system",
            content=written.text,
            summary_of=sum(1 for p in order if p < first_kept),
        )
        conversation.append(new)
        request.new_summary = True
        for index in older:
            selection.drop(index)
        await self._use_summary(request, selection, new)

    def _refusal(
        self, summarizer: BaseLLMClient, config: RunConfig, after: int
    ) -> Callable[[int, int], str | None] | None:
        """Why the summarizer's calls still to make may not be made (`Spending`).

        They are given by the characters of their prompts and their number; `after` is the
        tokens of the model call after them, as estimated.
        """
        spending = self._spending
        if spending is None:
            return None

        def refuse(chars: int, calls: int) -> str | None:
            tokens = chars // CHARS_PER_TOKEN
            cost = client_cost(summarizer, Usage(input_tokens=tokens))
            cost += client_cost(config.client, Usage(input_tokens=after))
            why = spending.refuse(NextCall(tokens + after, cost), calls)
            return None if why is None else f"not summarized: {why}"

        return refuse

    async def _use_summary(self, request: _Request, selection: Selection, summary: Message) -> None:
        """Send `summary` in the system instructions (in place of an earlier one)."""
        sizer = self._sizer_of(request.config)
        fixed = await self._fixed(sizer, request.config, with_summary(request.system, summary))
        selection.refix(request.fixed, fixed)
        request.fixed, request.summary = fixed, summary

    def _event(
        self,
        request: _Request,
        sent: list[int],
        before: tuple[int, int],
        after: tuple[int, int],
        window: int | None,
    ) -> dict[str, Any] | None:
        """The ``context_compacted`` fields, when this request differs from the last shown."""
        kept = set(sent)
        dropped = tuple(p for p in request.positions if p not in kept)
        summary = request.summary
        error = request.summary_error
        if not dropped and summary is None and not request.spent and error is None:
            return None
        shown = (dropped, summary.summary_of if summary is not None else None, id(summary), error)
        if shown == self._shown and not request.spent:
            return None
        self._shown = shown
        usage, cost = Usage(), None
        for call_usage, call_cost in request.spent:
            usage += call_usage
            cost = call_cost if cost is None else cost + call_cost
        assert self._sizer is not None
        policy = request.config.context_policy
        return {
            "policy": POLICY_NAMES[type(policy)],
            "messages_before": before[0],
            "messages_after": after[0],
            "tokens_before": before[1],
            "tokens_after": after[1],
            "window": window,
            "tokenizer": self._sizer.tokenizer,
            "dropped": dropped,
            "summary": summary.content if summary is not None else None,
            "summary_of": summary.summary_of if summary is not None else None,
            "new_summary": request.new_summary,
            "summary_error": request.summary_error,
            "usage": usage,
            "cost": cost,
        }
