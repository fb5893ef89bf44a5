"""Context tools: run by the application before a turn, chosen by how relevant they are."""

from __future__ import annotations

import contextlib
import functools
import inspect
import math
import re
import weakref
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Generic, Literal, overload

from glassagent._core.analysis import MessageAnalysis
from glassagent._core.errors import UserError
from glassagent._core.messages import Message, ToolDefinition
from glassagent._tools.analysis import analyze_message
from glassagent._tools.context import DepsT, ToolContext
from glassagent._tools.execute import _call_in_thread
from glassagent._tools.tool import Tool

ContextPlacement = Literal["message", "system"]
"""Where the merged context goes: before the user's message, or into the system prompt."""

_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(frozen=True)
class TurnInfo(Generic[DepsT]):
    """What a context tool knows of the turn it gathers context for (its ``ctx``).

    ``TurnInfo[MyDeps]`` types ``deps``.
    """

    run_id: str
    """Id of the agent run."""
    messages: tuple[Message, ...]
    """The conversation before the user's message (empty when the model calls the tool)."""
    deps: DepsT
    """The object passed to ``agent.run(deps=...)``."""
    call_id: str | None = None
    """Id of the tool call when the model called the tool; `None` when the agent ran it."""
    user_id: str | None = None
    """The user the run is for: ``agent.run(host={"user_id": ...})``, as `ToolContext.user_id`;
    `None` when the application did not say."""
    analysis: MessageAnalysis | None = None
    """What the agent's analyser read in the user's message (`None`: no analyser, it failed,
    or the model called the tool)."""
    arguments: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    """The arguments the model gave when it called the tool (read-only); empty when the
    agent ran it."""


Relevance = Callable[[str, TurnInfo[Any]], "int | float | Awaitable[int | float]"]
"""``relevance(query, ctx)``: a score from 0 to 100, sync or async."""

MessageAnalyzer = Callable[[str, TurnInfo[Any]], "MessageAnalysis | Awaitable[MessageAnalysis]"]
"""``analyzer(query, ctx) -> MessageAnalysis``, sync or async: reads the user's message once
per run, before the context tools are scored (``ctx.analysis`` is still `None` then)."""


@dataclass(frozen=True)
class ContextResult:
    """What a context tool's `run` may return instead of plain text, to say more about it.

    Example:
        ```python
        return ContextResult(prompt, suggested_role="secretary", debug_info="found 3 tasks")
        ```
    """

    text: str = ""
    """The context for the model (``""``: nothing)."""
    suggested_role: str | None = None
    """A role the tool suggests the assistant take for its answer (``"secretary"``). The
    agent does not act on it: the ``context_tool_complete`` event carries it to your
    application."""
    debug_info: str | None = None
    """Notes for the people debugging the tool (``"found 3 items"``), carried by the
    ``context_tool_complete`` event; never sent to the model."""

    def __post_init__(self) -> None:
        """Check the types.

        Raises:
            UserError: When `text` is not a string, or a note is neither a string nor `None`.
        """
        if not isinstance(self.text, str):
            raise UserError(f"`text` must be a string, got {type(self.text).__name__}.")
        for name in ("suggested_role", "debug_info"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise UserError(f"`{name}` must be a string or None, got {value!r}.")


@dataclass(frozen=True)
class ContextSettings:
    """How an `Agent` selects and places the output of its context tools.

    Example:
        ```python
        agent = Agent(client, context_tools=[search_docs, open_tasks],
                      context_settings=ContextSettings(min_relevance=60, placement="system"))
        ```
    """

    min_relevance: int = 50
    """Lowest score (0-100) that makes a context tool eligible."""
    max_tools: int = 2
    """Most context tools run for one turn (the best-ranked eligible ones)."""
    placement: ContextPlacement = "message"
    """``message``: the context goes before the user's message in the request; ``system``:
    it is appended to the system instructions."""
    timeout: float | None = 30.0
    """Seconds a context tool's `relevance` or `run` may take when the tool sets no timeout
    (`None`: no limit). One that takes longer is skipped. The analyser gets as long."""
    analyzer: MessageAnalyzer | None = analyze_message
    """Reads the user's message before the tools are scored; its `MessageAnalysis` is each
    tool's ``ctx.analysis``. The default, `analyze_message`, is a keyword heuristic; `None`:
    no analysis. A sync analyser runs on the event loop: make a slow one async."""

    def __post_init__(self) -> None:
        """Check the values.

        Raises:
            UserError: On a value out of range.
        """
        if not _is_int(self.min_relevance) or not 0 <= self.min_relevance <= 100:
            raise UserError("`min_relevance` must be an integer from 0 to 100.")
        if not _is_int(self.max_tools) or self.max_tools < 1:
            raise UserError("`max_tools` must be an integer of at least 1.")
        if self.placement not in ("message", "system"):
            raise UserError("`placement` must be 'message' or 'system'.")
        _check_timeout(self.timeout)
        if self.analyzer is not None and not callable(self.analyzer):
            raise UserError("`analyzer` must be a function of (query, ctx), or None.")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_timeout(timeout: object) -> None:
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0
    ):
        raise UserError("A context tool timeout must be a positive number of seconds.")


class ContextTool(ABC):
    """A tool the application runs before a turn, when it is relevant enough to the message.

    Subclass it and define `run` (and usually `relevance`), or decorate a function with
    `context_tool`. Both may be sync or async. `relevance` is called for every tool on every
    turn, a sync one on the event loop itself: keep it cheap (look at the words of the query
    or at ``ctx.analysis``, no network or database calls). A sync `run` runs in a worker
    thread.

    Example:
        ```python
        class OpenTasks(ContextTool):
            name = "open_tasks"
            description = "The user's open tasks."
            priority = 80

            def relevance(self, query: str, ctx: TurnInfo) -> int:
                return 90 if "task" in query.lower() else 0

            async def run(self, query: str, ctx: TurnInfo) -> str:
                return "; ".join(await ctx.deps.open_tasks())
        ```
    """

    name: str = ""
    """The tool's name (1-64 letters, digits, ``_`` or ``-``), in events and labels."""
    description: str = ""
    """What the tool gives; defaults to the class docstring."""
    priority: int = 50
    """0-100: which of two equally relevant tools runs first (higher wins)."""
    timeout: float | None = None
    """Seconds `relevance` or `run` may take; `None`: the agent's `ContextSettings.timeout`."""
    parameters: Mapping[str, Any] | None = None
    """JSON Schema (an object schema) of the arguments the model gives when it calls the
    tool; they are checked against it and reach `run` as ``ctx.arguments``, with the
    ``query`` argument (``""`` without one) as `query`. `None`: one string, ``query``."""

    def relevance(self, query: str, ctx: TurnInfo[Any]) -> int | float | Awaitable[int | float]:
        """Score how useful the tool is for `query`, from 0 (not at all) to 100.

        The default is 100: the tool is always eligible and `priority` ranks it.

        Args:
            query: The user's message.
            ctx: The turn.
        """
        return 100

    @abstractmethod
    def run(
        self, query: str, ctx: TurnInfo[Any]
    ) -> str | ContextResult | Awaitable[str | ContextResult | None] | None:
        """Gather the context for `query`: text for the model (`None` or ``""``: nothing).

        Return a `ContextResult` to also suggest a role or leave debug notes.

        Args:
            query: The user's message (or what the model asked for, when it calls the tool).
            ctx: The turn.
        """

    @property
    def definition(self) -> ToolDefinition:
        """The tool's JSON-schema definition: its `parameters`, else one string ``query``."""
        return self.as_tool().definition

    def as_tool(self) -> Tool:
        """The same tool as a `Tool` the model can call with its `parameters` (cached).

        Passing the context tool in an agent's ``tools`` does this for you.
        """
        try:
            return _as_tools[self]
        except (KeyError, TypeError):
            pass
        made = _model_tool(self)
        with contextlib.suppress(TypeError):  # not weak-referenceable: just do not cache
            _as_tools[self] = made
        return made

    def _run_target(self) -> Callable[[str, TurnInfo[Any]], Any]:
        """The callable that does the work (a decorated function's own, to see if it is async)."""
        return self.run

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, priority={self.priority!r})"


_as_tools: weakref.WeakKeyDictionary[ContextTool, Tool] = weakref.WeakKeyDictionary()


class _FunctionContextTool(ContextTool):
    """A context tool made by `context_tool` from a function."""

    def __init__(
        self,
        function: Callable[..., Any],
        *,
        name: str | None,
        description: str | None,
        priority: int,
        relevance: Relevance | int | float,
        timeout: float | None,
        parameters: Mapping[str, Any] | None = None,
    ) -> None:
        if not callable(function):
            raise UserError(f"A context tool must be a function, got {function!r}.")
        self.function = function
        self.name = name or str(getattr(function, "__name__", ""))
        self.description = description if description is not None else _first_doc(function)
        self.priority = priority
        self.timeout = timeout
        self.parameters = parameters
        self._relevance = relevance
        check_context_tool(self)

    def relevance(self, query: str, ctx: TurnInfo[Any]) -> int | float | Awaitable[int | float]:
        """Score `query` with the function given as ``relevance=`` (or its constant)."""
        if callable(self._relevance):
            return self._relevance(query, ctx)
        return self._relevance

    def run(self, query: str, ctx: TurnInfo[Any]) -> Any:
        """Call the decorated function."""
        return self.function(query, ctx)

    def _run_target(self) -> Callable[[str, TurnInfo[Any]], Any]:
        return self.function

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the decorated function directly."""
        return self.function(*args, **kwargs)


def _first_doc(obj: Any) -> str:
    return inspect.cleandoc(getattr(obj, "__doc__", None) or "")


def describe_context_tool(item: ContextTool) -> str:
    """The tool's description: its `description`, else its class docstring."""
    return item.description or _first_doc(type(item))


def check_context_tool(item: object) -> ContextTool:
    """Return `item` if it is a well-formed context tool.

    Raises:
        UserError: When it is not a `ContextTool`, or its name, priority, timeout or
            parameters schema is bad.
    """
    if not isinstance(item, ContextTool):
        raise UserError(
            f"A context tool must be a ContextTool (or made with @context_tool), got {item!r}."
        )
    if not isinstance(item.name, str) or not _NAME_RE.match(item.name):
        raise UserError(
            f"Context tool name {item.name!r} must be 1-64 letters, digits, '_' or '-'."
        )
    if not _is_int(item.priority) or not 0 <= item.priority <= 100:
        raise UserError(f"Context tool {item.name!r}: `priority` must be an integer 0-100.")
    _check_timeout(item.timeout)
    if item.parameters is not None:
        from glassagent._tools.json_schema import schema_signature

        schema_signature(item.name, item.parameters, _takes_arguments)
    return item


def _takes_arguments(**arguments: Any) -> None:
    """Stands for a context tool's call when its parameters schema is checked."""


def as_score(value: object) -> int:
    """A relevance result as an integer score.

    Raises:
        ValueError: When `value` is not a number from 0 to 100.
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not (math.isfinite(value) and 0 <= value <= 100)
    ):
        raise ValueError(f"relevance returned {value!r}, not a number from 0 to 100")
    return round(value)


async def invoke_run(item: ContextTool, query: str, ctx: TurnInfo[Any]) -> ContextResult:
    """Run `item` for `query`: awaited when async, in a worker thread when sync.

    Raises:
        BaseException: Whatever the tool raised; `TypeError` when it returned neither text
            nor a `ContextResult`.
    """
    target = item._run_target()
    if inspect.iscoroutinefunction(target):
        value = await target(query, ctx)
    else:
        ok, value = await _call_in_thread(functools.partial(target, query, ctx), item.name)
        if not ok:
            raise value
    if inspect.isawaitable(value):
        value = await value
    if value is None:
        return ContextResult()
    if isinstance(value, str):
        return ContextResult(value)
    if not isinstance(value, ContextResult):
        raise TypeError(f"run returned a {type(value).__name__}, not a str or a ContextResult")
    return value


def _model_tool(item: ContextTool) -> Tool:
    """`item` as a tool for the model: it reads the text; a role or debug notes are dropped."""
    check_context_tool(item)
    description = describe_context_tool(item)

    async def gather(arguments: dict[str, Any], ctx: ToolContext) -> str:
        query = arguments.get("query")
        info = TurnInfo(
            run_id=ctx.run_id,
            messages=(),
            deps=ctx.deps,
            call_id=ctx.call_id,
            user_id=ctx.user_id,
            arguments=MappingProxyType(arguments),
        )
        return (await invoke_run(item, query if isinstance(query, str) else "", info)).text

    if item.parameters is not None:

        async def call_with(ctx: ToolContext, /, **arguments: Any) -> str:
            return await gather(arguments, ctx)

        parameters = item.parameters
        return Tool.from_schema(item.name, description, parameters, call_with, timeout=item.timeout)

    async def call(query: str, ctx: ToolContext) -> str:
        """Look up context.

        Args:
            query: What to look up.
            ctx: The call (hidden from the model).
        """
        return await gather({"query": query}, ctx)

    return Tool(call, name=item.name, description=description, timeout=item.timeout)


@overload
def context_tool(function: Callable[..., Any], /) -> ContextTool: ...


@overload
def context_tool(
    *,
    name: str | None = None,
    description: str | None = None,
    priority: int = 50,
    relevance: Relevance | int | float = 100,
    timeout: float | None = None,
    parameters: Mapping[str, Any] | None = None,
) -> Callable[[Callable[..., Any]], ContextTool]: ...


def context_tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    priority: int = 50,
    relevance: Relevance | int | float = 100,
    timeout: float | None = None,
    parameters: Mapping[str, Any] | None = None,
) -> ContextTool | Callable[[Callable[..., Any]], ContextTool]:
    """Turn ``fn(query, ctx) -> str`` into a `ContextTool`; ``@context_tool(priority=80)``.

    The function and `relevance` may be sync or async; both are called with the user's
    message and a `TurnInfo`. Keep `relevance` cheap: it runs for every turn. The function
    returns text, `None` or a `ContextResult`.

    Example:
        ```python
        @context_tool(priority=80, relevance=lambda query, ctx: 90 if "task" in query else 0)
        async def open_tasks(query: str, ctx: TurnInfo) -> str:
            return "; ".join(await ctx.deps.open_tasks())
        ```

    Args:
        function: The function (when used as a bare ``@context_tool``).
        name: The tool's name; defaults to the function's name.
        description: What it gives; defaults to the docstring.
        priority: 0-100, the tie-breaker between equally relevant tools.
        relevance: ``relevance(query, ctx) -> int`` (0-100), or a constant score; the
            default 100 makes the tool always eligible.
        timeout: Seconds the tool may take; `None`: the agent's `ContextSettings.timeout`.
        parameters: JSON Schema of the arguments the model gives when it calls the tool
            (``ctx.arguments``); `None`: one string, ``query`` (see `ContextTool.parameters`).

    Raises:
        UserError: On a bad name, priority, timeout or parameters schema.
    """

    def decorate(fn: Callable[..., Any]) -> ContextTool:
        return _FunctionContextTool(
            fn,
            name=name,
            description=description,
            priority=priority,
            relevance=relevance,
            timeout=timeout,
            parameters=parameters,
        )

    return decorate(function) if function is not None else decorate
