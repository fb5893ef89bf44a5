"""`Tool` and the `@tool` decorator."""

from __future__ import annotations

import contextlib
import inspect
import weakref
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, overload

from glassagent._core.errors import UserError
from glassagent._core.messages import ToolDefinition

if TYPE_CHECKING:
    from glassagent._tools.context_tools import ContextTool
    from glassagent._tools.schema import Signature


class InvalidArguments(Exception):
    """The model's arguments do not fit the tool's signature (the message is for the model)."""


class Tool:
    """A function the model can call, with its JSON Schema computed once.

    Make one with the `tool` decorator (or pass a plain function to `Agent`, which wraps it).
    A `Tool` stays callable like the function it wraps.
    """

    __slots__ = (
        "__weakref__",
        "_signature",
        "definition",
        "function",
        "is_async",
        "timeout",
        "ui_info",
    )

    def __init__(
        self,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        timeout: float | None = None,
        ui_info: Any = None,
    ) -> None:
        """Wrap `function` as a tool.

        Args:
            function: A sync or async function with type hints.
            name: The name the model sees; defaults to the function's name.
            description: What the tool does; defaults to the function's docstring.
            timeout: Seconds after which a call is stopped and reported to the model as failed.
            ui_info: Display hints for user interfaces, carried in events, never sent to models.

        Raises:
            UserError: When the function cannot be described to a model.
        """
        from glassagent._tools.schema import analyse

        if not callable(function):
            raise UserError(f"A tool must be a function, got {function!r}.")
        if timeout is not None and timeout <= 0:
            raise UserError("A tool timeout must be a positive number of seconds.")
        tool_name = name or str(getattr(function, "__name__", ""))
        self.function: Callable[..., Any] = function
        """The wrapped function."""
        self.timeout: float | None = timeout
        """Seconds a call may take, or `None` for the agent's default."""
        self.ui_info: Any = ui_info
        """Display hints for user interfaces."""
        self.is_async: bool = inspect.iscoroutinefunction(function)
        """Whether the function is a coroutine function (else it runs in a worker thread)."""
        self._signature: Signature = analyse(function, tool_name, description)
        self.definition = ToolDefinition(
            tool_name, self._signature.description, self._signature.parameters
        )
        """What the model is told: name, description, parameters."""

    @property
    def name(self) -> str:
        """The name the model calls the tool by."""
        return self.definition.name

    @property
    def description(self) -> str:
        """What the tool does, for the model."""
        return self.definition.description

    @property
    def parameters(self) -> dict[str, Any]:
        """JSON Schema of the tool's arguments."""
        return self.definition.parameters

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the wrapped function directly."""
        return self.function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"Tool(name={self.name!r})"


@overload
def tool(function: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    ui_info: Any = None,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    ui_info: Any = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Turn a function into a `Tool`; use as ``@tool`` or ``@tool(name=..., timeout=...)``.

    The JSON Schema comes from the type hints; the description and per-parameter descriptions
    come from the docstring (Google, NumPy or Sphinx style). A parameter annotated
    `ToolContext` is injected at call time and hidden from the model.

    Args:
        function: The function (when used as a bare ``@tool``).
        name: The name the model sees; defaults to the function's name.
        description: What the tool does; defaults to the docstring.
        timeout: Seconds after which a call fails with a timeout reported to the model.
        ui_info: Display hints for user interfaces, shown in events.
    """
    if function is not None:
        return Tool(function)

    def decorate(fn: Callable[..., Any]) -> Tool:
        return Tool(fn, name=name, description=description, timeout=timeout, ui_info=ui_info)

    return decorate


_wrapped: weakref.WeakKeyDictionary[Callable[..., Any], Tool] = weakref.WeakKeyDictionary()


def as_tool(obj: Tool | ContextTool | Callable[..., Any]) -> Tool:
    """Return `obj` as a `Tool`, wrapping a plain function once (the result is cached).

    A `ContextTool` gives its `ContextTool.as_tool`.
    """
    if isinstance(obj, Tool):
        return obj
    from glassagent._tools.context_tools import ContextTool

    if isinstance(obj, ContextTool):
        return obj.as_tool()
    try:
        return _wrapped[obj]
    except (KeyError, TypeError):
        pass
    wrapped = Tool(obj)
    with contextlib.suppress(TypeError):  # not weak-referenceable: just do not cache
        _wrapped[obj] = wrapped
    return wrapped


def definitions_of(
    tools: Iterable[Tool | ContextTool | Callable[..., Any] | ToolDefinition],
) -> list[ToolDefinition]:
    """Return the `ToolDefinition` of each tool, function or definition."""
    return [t if isinstance(t, ToolDefinition) else as_tool(t).definition for t in tools]
