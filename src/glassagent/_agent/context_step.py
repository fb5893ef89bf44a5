"""Gather context: score the context tools, run the best ones, merge what they give.

The step before a run's first model call, for an agent with context tools: analyse the
user's message, score every tool, run the best ones. Nothing here fails the turn: a tool
whose `relevance` or `run` raises or times out is skipped, an analyser that fails leaves
``ctx.analysis`` `None`, and the events say so.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from glassagent._core.analysis import MessageAnalysis
from glassagent._core.events import ContextScore, ContextSelectionEvent, ContextToolCompleteEvent
from glassagent._core.messages import Message
from glassagent._tools.context_tools import (
    ContextPlacement,
    ContextResult,
    ContextSettings,
    ContextTool,
    MessageAnalyzer,
    TurnInfo,
    as_score,
    invoke_run,
)
from glassagent._tools.execute import _call_async, describe_exception

if TYPE_CHECKING:
    from glassagent._agent.config import RunConfig

SEPARATOR = "\n---\n"
"""The line between the outputs of two context tools."""

_T = TypeVar("_T")
_DEFAULT_SETTINGS = ContextSettings()


@dataclass(frozen=True)
class Gathered:
    """The merged context of a turn and where it goes in each request of the run.

    The conversation keeps the user's own message; only the requests carry the context.
    """

    text: str | None = None
    """The merged outputs, or `None` when no tool gave any."""
    placement: ContextPlacement = "message"
    """Where `text` goes."""
    index: int = 0
    """Position of the user's message in the conversation."""

    def apply(
        self, conversation: Sequence[Message], system: str | None
    ) -> tuple[tuple[Message, ...], str | None]:
        """The messages and system instructions of a request, with the context in place."""
        messages = tuple(conversation)
        if self.text is None:
            return messages, system
        block = f"<context>\n{self.text}\n</context>"
        if self.placement == "system":
            return messages, f"{system}\n\n{block}" if system else block
        user = messages[self.index]
        with_context = replace(user, content=f"{block}\n\n{user.content}")
        return (*messages[: self.index], with_context, *messages[self.index + 1 :]), system


NO_CONTEXT = Gathered()
"""A turn without context."""


def merge(outputs: Sequence[tuple[str, str]]) -> str | None:
    """``(name, output)`` pairs, in order, as one text: each labelled, ``---`` between them.

    Empty outputs are left out; `None` when nothing remains.
    """
    parts = [f"[{name}]\n{output.strip()}" for name, output in outputs if output.strip()]
    return SEPARATOR.join(parts) or None


def rank(
    tools: Sequence[ContextTool],
    scored: Sequence[tuple[int, str | None, float]],
    settings: ContextSettings,
) -> list[tuple[ContextTool, ContextScore]]:
    """Rank by score, then priority (both descending, ties in registration order); decide.

    Args:
        tools: The context tools.
        scored: ``(score, error, duration_ms)`` of each tool.
        settings: The `ContextSettings`.
    """
    order = sorted(range(len(tools)), key=lambda i: (-scored[i][0], -tools[i].priority, i))
    ranked: list[tuple[ContextTool, ContextScore]] = []
    selected = 0
    for i in order:
        score, error, duration = scored[i]
        status: Literal["selected", "below_threshold", "over_cap", "relevance_failed"]
        if error is not None:
            status = "relevance_failed"
        elif score < settings.min_relevance:
            status = "below_threshold"
        elif selected < settings.max_tools:
            status, selected = "selected", selected + 1
        else:
            status = "over_cap"
        tool = tools[i]
        ranked.append(
            (tool, ContextScore(tool.name, score, tool.priority, status, error, duration))
        )
    return ranked


class _Batch:
    """Coroutines run concurrently; an outside cancellation cancels them all."""

    def __init__(self) -> None:
        self.cancelling = False

    def own_cancellation(self) -> bool:
        """Whether a `CancelledError` caught by a member came from the batch (else from within)."""
        return self.cancelling

    async def settle(self, coroutines: Sequence[Coroutine[Any, Any, _T]]) -> list[_T]:
        tasks = [asyncio.create_task(c) for c in coroutines]
        if not tasks:
            return []
        try:
            await asyncio.wait(tasks)
        except asyncio.CancelledError:
            self.cancelling = True
            for task in tasks:
                task.cancel()
            await asyncio.wait(tasks)
            raise
        return [task.result() for task in tasks]


def _timeout(tool: ContextTool, settings: ContextSettings) -> float | None:
    return tool.timeout if tool.timeout is not None else settings.timeout


async def _guarded(
    call: Callable[[], Any], limit: float | None, batch: _Batch, what: str
) -> tuple[Any, str | None]:
    """``(value, None)``, or ``(None, error)`` when `call` (or what it returns) fails.

    `call` is sync, or returns an awaitable, awaited for at most `limit` seconds.
    """
    try:
        value: Any = call()
        if inspect.isawaitable(value):
            awaitable = value
            try:
                ok, value = await asyncio.wait_for(_call_async(lambda: awaitable), limit)
            except asyncio.TimeoutError:  # only the limit: `_call_async` caught the rest
                return None, f"{what} timed out after {limit:g} s"
            if not ok:
                raise value
    except asyncio.CancelledError:
        if batch.own_cancellation():
            raise
        return None, f"{what} was cancelled from within"
    except BaseException as exc:  # nothing user code raises may stop the loop (SystemExit)
        return None, describe_exception(exc)
    return value, None


async def _analyze(
    analyzer: MessageAnalyzer, query: str, info: TurnInfo[Any], limit: float | None, batch: _Batch
) -> tuple[MessageAnalysis | None, str | None]:
    """``(analysis, None)``, or ``(None, error)`` when the analyser fails."""
    value, error = await _guarded(lambda: analyzer(query, info), limit, batch, "the analyzer")
    if error is None and not isinstance(value, MessageAnalysis):
        name = type(value).__name__
        return None, f"TypeError: the analyzer returned a {name}, not a MessageAnalysis"
    return value, error


async def _score(
    tool: ContextTool, query: str, info: TurnInfo[Any], limit: float | None, batch: _Batch
) -> tuple[int, str | None, float]:
    """``(score, error, duration_ms)``: a failed relevance scores 0 with its error."""
    started = time.perf_counter()
    score = 0
    value, error = await _guarded(lambda: tool.relevance(query, info), limit, batch, "relevance")
    if error is None:
        try:
            score = as_score(value)
        except ValueError as exc:
            error = describe_exception(exc)
    return score, error, (time.perf_counter() - started) * 1000


async def _run(
    tool: ContextTool,
    score: int,
    request: tuple[str, TurnInfo[Any], ContextSettings],
    emit: Callable[..., None],
    batch: _Batch,
) -> str:
    """Run one selected tool; its ``context_tool_complete`` event is emitted as it ends."""
    query, info, settings = request
    limit = _timeout(tool, settings)
    started = time.perf_counter()
    result, error = ContextResult(), None
    try:
        work = functools.partial(invoke_run, tool, query, info)
        ok, value = await asyncio.wait_for(_call_async(work), limit)
    except asyncio.TimeoutError:
        error = f"timed out after {limit:g} s"
    except asyncio.CancelledError:
        if batch.own_cancellation():
            raise
        error = "cancelled from within"
    else:  # whatever it raised, the turn goes on without it
        result, error = (value, None) if ok else (result, describe_exception(value))
    emit(
        ContextToolCompleteEvent,
        tool_name=tool.name,
        score=score,
        output=result.text,
        is_error=error is not None,
        error=error,
        duration_ms=(time.perf_counter() - started) * 1000,
        suggested_role=result.suggested_role,
        debug_info=result.debug_info,
    )
    return result.text


async def gather_context(
    config: RunConfig,
    conversation: Sequence[Message],
    index: int,
    run_id: str,
    emit: Callable[..., None],
) -> Gathered:
    """Analyse the user's message at `index`, score every context tool, run the selected ones.

    Emits ``context_selection``, then ``context_tool_complete`` as each selected tool ends.
    """
    tools = config.context_tools
    if not tools:
        return NO_CONTEXT
    settings = config.context_settings or _DEFAULT_SETTINGS
    query = conversation[index].content
    user_id = (config.host or {}).get("user_id")
    info = TurnInfo(
        run_id=run_id,
        messages=tuple(conversation[:index]),
        deps=config.deps,
        user_id=None if user_id is None else str(user_id),
    )
    batch = _Batch()
    analysis, analysis_error = None, None
    if settings.analyzer is not None:
        [(analysis, analysis_error)] = await batch.settle(
            [_analyze(settings.analyzer, query, info, settings.timeout, batch)]
        )
        info = replace(info, analysis=analysis)
    scored = await batch.settle(
        [_score(t, query, info, _timeout(t, settings), batch) for t in tools]
    )
    ranked = rank(tools, scored, settings)
    emit(
        ContextSelectionEvent,
        scores=tuple(score for _, score in ranked),
        min_relevance=settings.min_relevance,
        max_tools=settings.max_tools,
        analysis=analysis,
        analysis_error=analysis_error,
    )
    chosen = [(tool, score.score) for tool, score in ranked if score.status == "selected"]
    request = (query, info, settings)
    outputs = await batch.settle([_run(t, s, request, emit, batch) for t, s in chosen])
    text = merge([(tool.name, output) for (tool, _), output in zip(chosen, outputs, strict=True)])
    return Gathered(text, settings.placement, index)
