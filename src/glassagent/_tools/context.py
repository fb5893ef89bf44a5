"""`ToolContext`: what a running tool may know and do besides its arguments.

`ToolLoader` is its view of the run's tools, through which a tool runs another one.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Generic

from typing_extensions import TypeVar

from glassagent._core.errors import UserError
from glassagent._core.messages import ModelSettings, ToolCall
from glassagent._core.result import ToolResult
from glassagent._tools.execute import prepare_call, run_prepared

if TYPE_CHECKING:
    from glassagent._tools.tool import Tool

DepsT = TypeVar("DepsT", default=Any)
"""Type of the user object passed to ``agent.run(deps=...)``."""

SEED_KEYS = (
    "model",
    "thinking_budget",
    "chat_path",
    "history_path",
    "app_path",
    "main_port",
    "abort_event",
    "execution_id",
    "chat_id",
    "chat_manager",
    "tool_loader",
    "debug_mode",
    "system_prompt",
)
"""The keys of `ToolContext.to_seed_dict`, those of the design's context dict."""

_NO_HOST: Mapping[str, Any] = MappingProxyType({})
_FLAG_LOCK = threading.Lock()  # only taken the first time a context's `abort_flag` is read


class ToolContext(Generic[DepsT]):
    """Handed to a tool that declares a parameter annotated ``ToolContext``.

    The agent creates one for each call and injects it; the model never sees the parameter.
    ``ToolContext[MyDeps]`` types ``deps``.

    Example:
        ```python
        @tool
        async def crawl(url: str, ctx: ToolContext) -> str:
            await ctx.progress(f"fetching {url}")
            ...
        ```

    Besides the call itself, it carries what the run knows (`model`, `settings`,
    `thinking_budget`, `system_prompt`, the agent's tools as `tool_loader`) and what the
    application running the agent told it through ``agent.run(host=...)`` (`chat_id`,
    `user_id`, `chat_manager`, `app_path`, `main_port`, `chat_path`, `history_path`,
    `debug_mode`); the invoke server fills in the chat id, its store and its port.
    `to_seed_dict` gives all of it as the plain dict older tool code expects.
    """

    __slots__ = (
        "_abort_event",
        "_abort_flag",
        "_inner_calls",
        "_loop",
        "_loop_thread",
        "_on_progress",
        "_tools",
        "call_id",
        "deps",
        "host",
        "idempotency_key",
        "model",
        "run_id",
        "settings",
        "system_prompt",
        "tool_name",
        "ui_info",
    )
    _is_tool_context = True  # how the signature analysis (`schema.is_context`) knows the class

    def __init__(
        self,
        *,
        call_id: str,
        run_id: str,
        tool_name: str,
        deps: DepsT,
        on_progress: Callable[[str], None],
        ui_info: Any = None,
        model: str = "",
        settings: ModelSettings | None = None,
        system_prompt: str | None = None,
        tools: Mapping[str, Tool] | None = None,
        host: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> None:
        self.call_id: str = call_id
        """Id of the tool call being executed."""
        self.run_id: str = run_id
        """Id of the agent run."""
        self.idempotency_key: str = idempotency_key or f"{run_id}:{call_id}"
        """A key unique to this call within all runs: ``"<run_id>:<call_id>"`` (with the
        call's ordinal appended, as ``:2``, when the model reused a call id in the run).
        A durable run (`glassagent.durable`) gives a call the same key when it runs the call
        again after a crash; pass it to the systems the tool changes (an ``Idempotency-Key``
        header, a unique column), so that a repeated call does not act twice."""
        self.tool_name: str = tool_name
        """Name of the tool being executed."""
        self.deps: DepsT = deps
        """The object passed to ``agent.run(deps=...)`` (e.g. a database handle)."""
        self.ui_info: Any = ui_info
        """Display hints for user interfaces; a tool may replace them while it runs."""
        self._on_progress = on_progress
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self.model: str = model
        """Id of the model the run calls (``client.model``)."""
        if settings is None:
            settings = ModelSettings()
        self.settings: ModelSettings = settings
        """The run's generation settings (the agent's, merged with the run's)."""
        self.system_prompt: str | None = system_prompt
        """The agent's system instructions (`None`: none)."""
        self.host: Mapping[str, Any] = host if host is not None else _NO_HOST
        """What the application told the run through ``agent.run(host=...)`` (read-only)."""
        self._tools = tools if tools is not None else _NO_HOST
        self._abort_event = asyncio.Event()
        self._abort_flag: threading.Event | None = None
        self._inner_calls = 0  # the calls made through `tool_loader`, for their keys

    @property
    def execution_id(self) -> str:
        """Id of this execution: the run's id (`run_id`), shared by the run's calls."""
        return self.run_id

    @property
    def thinking_budget(self) -> int | None:
        """The thinking budget of the run's settings (`None`: the model decides)."""
        return self.settings.thinking_budget

    @property
    def tool_loader(self) -> ToolLoader:
        """The agent's tools by name (read-only); a tool can run another through it."""
        return ToolLoader(self._tools, self)

    @property
    def chat_id(self) -> str | None:
        """Id of the stored chat the run continues (``host["chat_id"]``), else `None`."""
        return self._host_str("chat_id")

    @property
    def user_id(self) -> str | None:
        """The user the run is for (``host["user_id"]``), else `None`."""
        return self._host_str("user_id")

    @property
    def chat_manager(self) -> Any:
        """The chat store the run's chat is kept in (``host["chat_manager"]``), else `None`."""
        return self.host.get("chat_manager")

    @property
    def app_path(self) -> str | None:
        """The host application's path (``host["app_path"]``), else `None`."""
        return self._host_str("app_path")

    @property
    def main_port(self) -> str | None:
        """The port the host application serves on (``host["main_port"]``), else `None`."""
        return self._host_str("main_port")

    @property
    def chat_path(self) -> str | None:
        """The folder of the run's chat (``host["chat_path"]``), else `None`."""
        return self._host_str("chat_path")

    @property
    def history_path(self) -> str | None:
        """The file of the run's history (``host["history_path"]``), else `None`."""
        return self._host_str("history_path")

    @property
    def debug_mode(self) -> bool:
        """``host["debug_mode"]`` when given, else whether ``glassagent`` logs at DEBUG."""
        if "debug_mode" in self.host:
            return bool(self.host["debug_mode"])
        return logging.getLogger("glassagent").isEnabledFor(logging.DEBUG)

    def _host_str(self, key: str) -> str | None:
        value = self.host.get(key)
        return None if value is None else str(value)

    async def progress(self, message: str) -> None:
        """Report progress; it reaches the run's consumer as a ``tool_progress`` event at once.

        Args:
            message: A short human-readable progress message.
        """
        self._on_progress(message)
        await asyncio.sleep(0)

    def progress_nowait(self, message: str) -> None:
        """Report progress from a synchronous tool; safe to call from its worker thread.

        A message sent after the run ended (a tool still going past its timeout) is dropped.

        Args:
            message: A short human-readable progress message.
        """
        if threading.get_ident() == self._loop_thread:
            self._on_progress(message)
        else:
            with contextlib.suppress(RuntimeError):  # the loop closed: the run is long over
                self._loop.call_soon_threadsafe(self._on_progress, message)

    @property
    def is_aborted(self) -> bool:
        """True once the run was aborted or this call timed out; a long tool should stop."""
        return self._abort_event.is_set()

    @property
    def abort_event(self) -> asyncio.Event:
        """An event set when the run is aborted or this call times out (for ``await``)."""
        return self._abort_event

    @property
    def abort_flag(self) -> threading.Event:
        """A `threading.Event` set when the run is aborted or this call times out.

        The view of `abort_event` for a synchronous tool, which runs on a worker thread:
        ``ctx.abort_flag.wait(5)`` sleeps until then. Made on first use.
        """
        flag = self._abort_flag
        if flag is None:
            with _FLAG_LOCK:
                flag = self._abort_flag
                if flag is None:
                    flag = threading.Event()
                    self._abort_flag = flag
            if self._abort_event.is_set():  # aborted before the flag existed
                flag.set()
        return flag

    def to_seed_dict(self) -> dict[str, Any]:
        """This context as the design's plain context dict (the keys of `SEED_KEYS`).

        ``abort_event`` is `abort_flag` (a `threading.Event`), ``execution_id`` the run's id
        and ``tool_loader`` the agent's tools by name; the host's facts are `None` when the
        application did not give them.
        """
        return {
            "model": self.model,
            "thinking_budget": self.thinking_budget,
            "chat_path": self.chat_path,
            "history_path": self.history_path,
            "app_path": self.app_path,
            "main_port": self.main_port,
            "abort_event": self.abort_flag,
            "execution_id": self.execution_id,
            "chat_id": self.chat_id,
            "chat_manager": self.chat_manager,
            "tool_loader": self.tool_loader,
            "debug_mode": self.debug_mode,
            "system_prompt": self.system_prompt,
        }

    def _abort(self) -> None:
        self._abort_event.set()
        flag = self._abort_flag
        if flag is not None:
            flag.set()

    def __repr__(self) -> str:
        return f"ToolContext(tool_name={self.tool_name!r}, call_id={self.call_id!r})"


_NUMBERS = itertools.count(1)


class ToolLoader(Mapping[str, "Tool"]):
    """The run's tools by name, read-only: what `ToolContext.tool_loader` gives.

    Besides reading a tool, a tool can run another one: ``await loader.run_tool(name,
    arguments)`` from async code, or the design's ``loader.execute_tool(name, arguments,
    context)`` from a sync tool (it runs in a worker thread). The inner call gets a context of
    its own (same run, deps, host facts and progress) and its arguments are checked as the
    model's are.
    """

    def __init__(self, tools: Mapping[str, Tool], ctx: ToolContext[Any]) -> None:
        self._tools = tools
        self._ctx = ctx

    def __getitem__(self, name: str) -> Tool:
        return self._tools[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        return f"ToolLoader({sorted(self._tools)!r})"

    def get_display_name(self, name: str) -> str:
        """The name people see for the tool `name` (`name` itself for an unknown tool)."""
        found = self._tools.get(name)
        return found.display_name if found is not None else name

    async def run_tool(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        """Run the tool `name` with `arguments`; failures come back as an error result."""
        parent = self._ctx
        call = ToolCall(f"{parent.call_id}.{next(_NUMBERS)}", name, dict(arguments))
        parent._inner_calls += 1
        tool = self._tools.get(name)
        ctx: ToolContext[Any] = ToolContext(
            call_id=call.id,
            run_id=parent.run_id,
            tool_name=name,
            deps=parent.deps,
            on_progress=parent._on_progress,
            ui_info=tool.ui_info if tool is not None else None,
            model=parent.model,
            settings=parent.settings,
            system_prompt=parent.system_prompt,
            tools=self._tools,
            host=parent.host,
            idempotency_key=f"{parent.idempotency_key}.{parent._inner_calls}",
        )
        prepared = prepare_call(tool, call, ctx, available=self._tools.keys())
        if isinstance(prepared, ToolResult):
            return prepared
        return await run_prepared(prepared, default_timeout=None)

    def execute_tool(
        self, name: str, arguments: Mapping[str, Any], context: Any = None
    ) -> dict[str, Any]:
        """Run the tool `name` from a sync tool and wait: the design's ``execute_tool``.

        Args:
            name: The tool to run.
            arguments: Its arguments.
            context: The design's context dict; accepted for the design's call, not needed.

        Returns:
            The design's execution dict (``function_name``, ``tool_name``, ``args``,
            ``result``, ``has_ui``, ``ui_info``).

        Raises:
            UserError: When called on the run's own event loop (an async tool): it would wait
                for itself; use ``await run_tool(...)`` there.
        """
        if threading.get_ident() == self._ctx._loop_thread:
            raise UserError("execute_tool waits; from an async tool use `await run_tool(...)`.")
        future = asyncio.run_coroutine_threadsafe(self.run_tool(name, arguments), self._ctx._loop)
        result = future.result()
        call = ToolCall(result.call_id, name, dict(arguments))
        return execution_dict(call, self.get_display_name(name), result, result.ui_info)


def result_value(result: ToolResult) -> Any:
    """The design's ``execution.result``: structured when it is JSON, else its text."""
    return result.structured if result.structured is not None else result.output


def execution_dict(
    call: ToolCall, display_name: str, result: ToolResult, ui_info: Any
) -> dict[str, Any]:
    """The design's ``execution`` dict of one finished call."""
    return {
        "function_name": call.name,
        "tool_name": display_name,
        "args": dict(call.input),
        "result": result_value(result),
        "has_ui": ui_info is not None,
        "ui_info": ui_info,
    }
