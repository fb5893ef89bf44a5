"""`Tool` and the `@tool` decorator."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol, TypeAlias, overload

from glassagent._core.errors import UserError
from glassagent._core.messages import ToolCall, ToolDefinition

ApprovalPolicy: TypeAlias = Callable[[ToolCall], bool | Awaitable[bool]]
"""``policy(call) -> bool`` (or an awaitable of it): does this call need a person's approval?

It receives the `ToolCall` after its arguments were checked against the tool's schema, and
runs on the event loop. A policy that raises stops the call: the model gets an error result.
"""

ApprovalAnswer: TypeAlias = bool | str
"""An answer to an approval: `True` approves, `False` declines, a string declines with that
reason (which the model reads)."""

Approver: TypeAlias = Callable[[ToolCall], ApprovalAnswer | Awaitable[ApprovalAnswer]]
"""``approver(call) -> ApprovalAnswer`` (or an awaitable of it): a tool's own way of asking.

When a call of the tool needs approval, the run asks it (on the event loop, so one that waits
for a person should be async) besides accepting `AgentRun.approve` and `AgentRun.deny`: the
first answer counts. An approver that raises declines the call, with an error result.
"""


def _check(
    function: Callable[..., Any],
    timeout: float | None,
    requires_approval: bool | ApprovalPolicy = False,
    approver: Approver | None = None,
) -> None:
    if not callable(function):
        raise UserError(f"A tool must be a function, got {function!r}.")
    if timeout is not None and timeout <= 0:
        raise UserError("A tool timeout must be a positive number of seconds.")
    check_approval_rule(requires_approval)
    if approver is not None and not callable(approver):
        raise UserError(f"`approver` must be callable, got {approver!r}.")


def _check_display_name(display_name: object) -> None:
    if display_name is not None and (not isinstance(display_name, str) or not display_name):
        raise UserError(f"`display_name` must be a non-empty string, got {display_name!r}.")


def check_approval_rule(rule: object) -> None:
    """Raise `UserError` unless `rule` is a bool or an `ApprovalPolicy` (a callable)."""
    if not isinstance(rule, bool) and not callable(rule):
        raise UserError(f"`requires_approval` must be a bool or a callable, got {rule!r}.")


class _Binder(Protocol):
    """Validates a call's arguments and places them, with the context, for the function."""

    def bind(self, arguments: dict[str, Any], ctx: Any) -> tuple[list[Any], dict[str, Any]]: ...


class Tool:
    """A function the model can call, with its JSON Schema computed once.

    Make one with the `tool` decorator (or pass a plain function to `Agent`, which wraps it),
    or from a JSON Schema you already have with `Tool.from_schema`. A `Tool` stays callable
    like the function it wraps.
    """

    __slots__ = (
        "__weakref__",
        "_display_name",
        "_signature",
        "approver",
        "definition",
        "function",
        "is_async",
        "requires_approval",
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
        requires_approval: bool | ApprovalPolicy = False,
        approver: Approver | None = None,
        display_name: str | None = None,
    ) -> None:
        """Wrap `function` as a tool.

        Args:
            function: A sync or async function with type hints.
            name: The name the model sees; defaults to the function's name.
            description: What the tool does; defaults to the function's docstring.
            timeout: Seconds after which a call is stopped and reported to the model as failed.
                The time a call waits for approval does not count.
            ui_info: Display hints for user interfaces, carried in events, never sent to models.
            requires_approval: Whether a person must approve each call before it runs: `True`,
                or an `ApprovalPolicy` deciding call by call (see "Approval of tool calls").
            approver: Asked when a call of this tool needs approval (see `Approver`); `None`:
                the run's consumer answers (`AgentRun.approve`), or the run defers.
            display_name: The name people see (``tool_name`` in events, e.g. ``"Web search"``
                for ``web_search``); defaults to `name`. Never sent to models.

        Raises:
            UserError: When the function cannot be described to a model, or an option has
                the wrong type.
        """
        from glassagent._tools.schema import analyse

        _check(function, timeout, requires_approval, approver)
        _check_display_name(display_name)
        tool_name = name or str(getattr(function, "__name__", ""))
        self.function: Callable[..., Any] = function
        """The wrapped function."""
        self.timeout: float | None = timeout
        """Seconds a call may take, or `None` for the agent's default."""
        self.ui_info: Any = ui_info
        """Display hints for user interfaces."""
        self.requires_approval: bool | ApprovalPolicy = requires_approval
        """Whether each call needs a person's approval: a bool, or a policy deciding per call."""
        self.approver: Approver | None = approver
        """The tool's own way of asking for approval, or `None`."""
        self._display_name = display_name
        self.is_async: bool = inspect.iscoroutinefunction(function)
        """Whether the function is a coroutine function (else it runs in a worker thread)."""
        signature = analyse(function, tool_name, description)
        self._signature: _Binder = signature
        self.definition = ToolDefinition(tool_name, signature.description, signature.parameters)
        """What the model is told: name, description, parameters."""

    @classmethod
    def from_schema(
        cls,
        name: str,
        description: str,
        parameters: Mapping[str, Any],
        function: Callable[..., Any],
        *,
        timeout: float | None = None,
        ui_info: Any = None,
        requires_approval: bool | ApprovalPolicy = False,
        approver: Approver | None = None,
        display_name: str | None = None,
    ) -> Tool:
        """Make a tool from a JSON Schema you already have (MCP, OpenAPI, a benchmark...).

        The model sees `parameters` as they are. Its arguments are validated against them
        (with `jsonschema`, the schema's own ``$schema`` draft, 2020-12 by default); arguments
        that do not fit go back to the model as an error result, as for other tools. The
        function is then called with the arguments as keyword arguments; a parameter annotated
        `ToolContext` (keyword or positional-only) receives the call's context.

        Example:
            ```python
            schema = {"type": "object", "properties": {"query": {"type": "string"}}}
            search = Tool.from_schema("search", "Search the web.", schema, run_search)
            ```

        Args:
            name: The name the model calls the tool by.
            description: What the tool does, for the model.
            parameters: The JSON Schema of the arguments (an object schema).
            function: A sync or async function called with the validated arguments.
            timeout: Seconds after which a call is stopped and reported to the model as failed.
            ui_info: Display hints for user interfaces, carried in events, never sent to models.
            requires_approval: Whether a person must approve each call (see `Tool`).
            approver: Asked when a call needs approval (see `Tool`).
            display_name: The name people see (see `Tool`); defaults to `name`.

        Raises:
            UserError: On a bad name or description, an invalid schema, a schema that does not
                describe an object, a function that cannot be called, or an option of the
                wrong type.
        """
        from glassagent._tools.json_schema import schema_signature
        from glassagent._tools.schema import check_name

        _check(function, timeout, requires_approval, approver)
        _check_display_name(display_name)
        check_name(name)
        if not isinstance(description, str):
            raise UserError(f"Tool {name!r}: the description must be a string.")
        signature = schema_signature(name, parameters, function)
        made = cls.__new__(cls)
        made.function = function
        made.timeout = timeout
        made.ui_info = ui_info
        made.requires_approval = requires_approval
        made.approver = approver
        made._display_name = display_name
        made.is_async = inspect.iscoroutinefunction(function)
        made._signature = signature
        made.definition = ToolDefinition(name, description, signature.parameters)
        return made

    @property
    def name(self) -> str:
        """The name the model calls the tool by."""
        return self.definition.name

    @property
    def display_name(self) -> str:
        """The name people see: ``tool_name`` in events. Defaults to `name`."""
        return self._display_name or self.definition.name

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
    requires_approval: bool | ApprovalPolicy = False,
    approver: Approver | None = None,
    display_name: str | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    ui_info: Any = None,
    requires_approval: bool | ApprovalPolicy = False,
    approver: Approver | None = None,
    display_name: str | None = None,
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
        requires_approval: Whether a person must approve each call before it runs: `True`, or
            an `ApprovalPolicy` deciding call by call.
        approver: Asked when a call needs approval (see `Approver`).
        display_name: The name people see in events (``tool_name``), e.g. ``"Web search"``;
            defaults to the tool's name. Never sent to models.
    """
    if function is not None:
        return Tool(function)

    def decorate(fn: Callable[..., Any]) -> Tool:
        return Tool(
            fn,
            name=name,
            description=description,
            timeout=timeout,
            ui_info=ui_info,
            requires_approval=requires_approval,
            approver=approver,
            display_name=display_name,
        )

    return decorate
