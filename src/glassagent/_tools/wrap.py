"""`as_tool` and `definitions_of`: what the tools, functions and context tools given become."""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Iterable
from typing import Any

from glassagent._core.messages import ToolDefinition
from glassagent._tools.context_tools import ContextTool
from glassagent._tools.tool import Tool

_wrapped: weakref.WeakKeyDictionary[Callable[..., Any], Tool] = weakref.WeakKeyDictionary()


def as_tool(obj: Tool | ContextTool | Callable[..., Any]) -> Tool:
    """Return `obj` as a `Tool`, wrapping a plain function once (the result is cached).

    A `ContextTool` gives its `ContextTool.as_tool`.
    """
    if isinstance(obj, Tool):
        return obj
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
