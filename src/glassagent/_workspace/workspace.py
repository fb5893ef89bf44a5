"""`Workspace`: a folder the model may list, read, write and edit, and run commands in."""

from __future__ import annotations

import asyncio
import inspect
import os
import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, TypeAlias

from pydantic import Field

from glassagent._core.errors import ToolError, UserError
from glassagent._core.messages import ToolCall
from glassagent._tools.context import ToolContext
from glassagent._tools.tool import Tool
from glassagent._workspace import files, listing
from glassagent._workspace.command import (
    MAX_COMMAND_SECONDS,
    CommandOutcome,
    CommandSetup,
    checked_env,
    run_command,
)
from glassagent._workspace.paths import Confinement
from glassagent._workspace.sandbox import SandboxMode
from glassagent._workspace.sandbox import plan as sandbox_plan

Confirm: TypeAlias = Callable[[ToolCall], bool | Awaitable[bool]]
"""``confirm(call) -> bool`` (or an awaitable of it): may this change go ahead?

It receives a `ToolCall` with the call's id, the tool's name (``write_file``, ``edit_file``
or ``execute_command``) and the arguments the tool will use, defaults filled in. A plain
function runs on the event loop, so one that waits for a person should be async. It is the
change tools' `Approver`: the time it takes is not part of their timeout.
"""


Offset = Annotated[int, Field(ge=1)]
Seconds = Annotated[float, Field(gt=0)]


class Workspace:
    """A folder the model may work in, given to an agent as tools (`tools`).

    The tools are ``list_files``, ``read_file``, ``write_file``, ``edit_file`` and, with
    ``allow_commands=True``, ``execute_command``. Every path the model gives is resolved in
    `root`: one that leads outside it (``..``, an absolute path elsewhere, a symbolic link
    pointing out) is refused with an error result the model reads, and the run goes on.
    Symbolic links that stay inside (``latest -> v2/``) are followed. On POSIX systems the
    file tools are race-free: a path is walked from a descriptor of `root`, one folder at a
    time, without following a link the walk has not checked, so a folder or file swapped for
    a link while a tool runs cannot lead it outside. A file with several hard links (one may
    be outside) is neither read nor changed, and a FIFO is refused without waiting. On
    Windows a path is checked once, then used by name: not race-free.

    - ``list_files`` lists a folder at every depth, folders marked with a trailing ``/``,
      skipping ``.git``, ``node_modules``, ``__pycache__``, ``.venv`` and the like; at most
      500 entries, then a note of how many were left out.
    - ``read_file`` numbers the lines; ``offset`` and ``limit`` count lines. It reads at
      most `max_read_bytes` per call and says where to read on; binary files are reported,
      not shown.
    - ``write_file`` replaces a whole file atomically (a temporary file in the same folder,
      then a rename; the file keeps its mode) and creates missing folders.
    - ``edit_file`` replaces one exact occurrence of a text; none or several are an error
      result saying which.
    - ``execute_command`` runs a ``sh`` command line in `root`, without input. Each output
      line is a ``tool_progress`` event as it comes; the result holds the output (at most
      `max_output_bytes`, cut in the middle) and the exit code. Its timeout (60 s unless the
      model asks otherwise, 600 s at most) stops it, and so do the end of the command, an
      abort and a cancellation. On Linux it runs in a sandbox (`sandbox`): namespaces of its
      own (user, mount, PID, IPC, and network unless `allow_network`) and Landlock; it may
      write only in `root`, its own ``$TMPDIR`` and a private ``/tmp``, reads the rest of
      the file system, sees only its own processes, and when it ends everything it started
      ends with it. Without the sandbox it runs in a process group of its own, which is
      killed; a process that leaves the group (``setsid``) escapes that. Either way its
      environment holds only ``PATH``, ``HOME``, ``LANG``, ``LC_*``, ``TERM``, ``USER``,
      ``LOGNAME``, ``SHELL``, ``TZ``, ``TMPDIR`` (a new folder per command, removed after
      it) and what `env` passes: no API key or other secret of the agent's environment.

    Example:
        ```python
        workspace = Workspace("project", allow_commands=True, confirm=ask_the_user)
        agent = Agent(client, workspace.tools)
        ```
    """

    __slots__ = (
        "_commands",
        "_confinement",
        "_tools",
        "_unasked",
        "allow_commands",
        "allow_network",
        "confirm",
        "env",
        "max_output_bytes",
        "max_read_bytes",
        "requires_approval",
        "sandbox",
        "sandbox_status",
        "sandboxed",
    )

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        allow_commands: bool = False,
        confirm: Confirm | None = None,
        requires_approval: bool = False,
        max_read_bytes: int = 100_000,
        max_output_bytes: int = 30_000,
        sandbox: SandboxMode = "auto",
        allow_network: bool = False,
        env: Mapping[str, str] | None = None,
    ) -> None:
        """Give the model the folder `root`.

        Args:
            root: An existing folder; paths the model gives are relative to it.
            allow_commands: Whether to offer ``execute_command`` (absent from `tools`
                otherwise). POSIX systems only.
            confirm: Asked before each ``write_file``, ``edit_file`` and ``execute_command``
                call (see `Confirm`); a no goes back to the model as an error result
                ("the user declined ..."); the call's ``function_execution_complete`` event
                has ``is_error=True`` and ``ui_info={"declined": True}``. `None`: changes go
                ahead unasked. `confirm` answers the changes' approvals (with
                ``approval_required`` and ``approval_answered`` events; `AgentRun.approve`
                may answer first); calls that would fail anyway are not asked about.
            requires_approval: Changes need approval even without `confirm`: the run's
                consumer answers them (`AgentRun.approve`, `AgentRun.deny`), or a run with
                ``defer_approval=True`` ends ``awaiting_approval``.
            max_read_bytes: Most bytes one ``read_file`` call reads; a longer file is shown
                in parts, with a note telling the model where to read on.
            max_output_bytes: Most bytes of a command's output sent to the model; longer
                output keeps its start and its end, with a note where it was cut.
            sandbox: Where commands run. ``"auto"``: in the sandbox where this machine can
                make it (`sandbox_support`), otherwise without one, with a warning on the
                ``glassagent`` logger (once per process); `sandbox_status` warns where the
                sandbox leaves host sockets reachable. ``"required"``: in the sandbox, or a
                `UserError` here, also when `root` holds ``/tmp`` or ``/run`` (commands
                would see the host's) or `allow_network` is set where Landlock is older than
                ABI 6 (the host's abstract unix sockets would be reachable). ``"off"``:
                without one.
            allow_network: Let sandboxed commands use the network (no network namespace of
                their own). Without it they have only a loopback interface of their own.
            env: Variables to give every command (names to values), besides the few passed
                from the agent's environment; they replace those of the same name.

        Raises:
            UserError: When `root` is not an existing folder, a limit is not a positive
                integer, `confirm` is not callable, `sandbox` or `env` is invalid, commands
                are asked for on Windows, or ``sandbox="required"`` where the sandbox
                cannot be made.
        """
        for name, value in (
            ("max_read_bytes", max_read_bytes),
            ("max_output_bytes", max_output_bytes),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UserError(f"`{name}` must be a positive number of bytes, got {value!r}.")
        if confirm is not None and not callable(confirm):
            raise UserError(f"`confirm` must be callable, got {confirm!r}.")
        if allow_commands and sys.platform == "win32":
            raise UserError("`execute_command` needs a POSIX system (process groups).")
        self._confinement = Confinement(root)
        self.allow_commands: bool = allow_commands
        """Whether ``execute_command`` is offered."""
        self.confirm: Confirm | None = confirm
        """Asked before each change; `None` lets changes go ahead unasked."""
        self.requires_approval: bool = bool(requires_approval or confirm is not None)
        """Whether each change needs approval (always so with a `confirm`)."""
        self.max_read_bytes: int = max_read_bytes
        """Most bytes one ``read_file`` call reads."""
        self.max_output_bytes: int = max_output_bytes
        """Most bytes of a command's output sent to the model."""
        self.env: Mapping[str, str] = checked_env(env)
        """Variables given to every command, besides the allowed ones (read-only)."""
        self.sandbox: SandboxMode = sandbox
        """The sandbox mode asked for: ``"auto"``, ``"required"`` or ``"off"``."""
        self.allow_network: bool = bool(allow_network)
        """Whether sandboxed commands may use the network."""
        sandboxed, status = sandbox_plan(
            sandbox,
            allow_commands=allow_commands,
            allow_network=self.allow_network,
            root=str(self.root),
        )
        self.sandboxed: bool = sandboxed
        """Whether commands run in the sandbox."""
        self.sandbox_status: str = status
        """One line saying how commands run, e.g. "commands run in a sandbox (Linux
        namespaces: user, mount, pid, ipc, network; Landlock ABI 7); no network" (with
        "; WARNING: ..." where host sockets stay reachable) or "commands run WITHOUT a
        sandbox: ..."."""
        self._commands = CommandSetup(self.env, sandboxed, self.allow_network)
        self._unasked: set[str] = set()  # ids of change calls not asked about: they would fail
        self._tools = self._make_tools()

    @property
    def root(self) -> Path:
        """The workspace folder, absolute, symbolic links resolved once, when it was given.

        If that folder is later moved or replaced, the file tools refuse to work.
        """
        return self._confinement.root

    @property
    def tools(self) -> tuple[Tool, ...]:
        """The tools to give an agent: ``Agent(client, workspace.tools)``."""
        return self._tools

    def __repr__(self) -> str:
        commands = f", sandboxed={self.sandboxed}" if self.allow_commands else ""
        return f"Workspace(root={str(self.root)!r}, allow_commands={self.allow_commands}{commands})"

    def _make_tools(self) -> tuple[Tool, ...]:
        rule = self._would_change if self.requires_approval else False
        approver = self._ask if self.confirm is not None else None
        change: dict[str, Any] = {"requires_approval": rule, "approver": approver}
        made = [
            Tool(self._list_files, name="list_files"),
            Tool(self._read_file, name="read_file"),
            Tool(self._write_file, name="write_file", **change),
            Tool(self._edit_file, name="edit_file", **change),
        ]
        if self.allow_commands:
            command = Tool(self._execute_command, name="execute_command", **change)
            if self.sandboxed:  # the model is told what it cannot do, so it need not find out
                network = "" if self.allow_network else ", and it has no network access"
                told = (
                    f"{command.description}\n\nIt runs in a sandbox: it can write only in the "
                    f"workspace and its temporary folder{network}."
                )
                command.definition = replace(command.definition, description=told)
            made.append(command)
        return tuple(made)

    async def _would_change(self, call: ToolCall) -> bool:
        """The change tools' approval policy: ask about a change unless it would fail anyway.

        A call not asked about is remembered: when it runs, it only fails (`_unasked_fails`),
        even if the files changed meanwhile so that it would now succeed.
        """
        self._unasked.discard(call.id)
        if call.name == "execute_command":
            return True
        try:
            await asyncio.to_thread(self._check_change, call.name, dict(call.input))
        except ToolError:
            self._unasked.add(call.id)
            return False
        return True

    def _check_change(self, name: str, arguments: dict[str, Any]) -> None:
        """Raise the `ToolError` the change would end with; return if it would go ahead."""
        path = str(arguments.get("path", ""))
        if name == "edit_file":
            old, new = str(arguments.get("old", "")), str(arguments.get("new", ""))
            files.edited(self._confinement, path, old, new)
        else:
            self._confinement.check(path)

    def _was_unasked(self, ctx: ToolContext[Any] | None) -> bool:
        """Whether this call was not asked about (it would have failed); forgets it."""
        if ctx is None or ctx.call_id not in self._unasked:
            return False
        self._unasked.discard(ctx.call_id)
        return True

    def _unasked_fails(self, name: str, arguments: dict[str, Any]) -> None:
        """For a call that was not asked about: raise its error, and never change a file."""
        self._check_change(name, arguments)
        raise ToolError(
            "the workspace changed while this call waited, and it was not approved: nothing "
            "was done. Call the tool again."
        )

    async def _ask(self, call: ToolCall) -> bool:
        """The change tools' approver: `confirm`, given the arguments the tool will use."""
        assert self.confirm is not None
        arguments = dict(call.input)
        if call.name == "execute_command":
            arguments.setdefault("timeout", 60)
        answer = self.confirm(ToolCall(call.id, call.name, arguments))
        if inspect.isawaitable(answer):
            answer = await answer
        return bool(answer)

    # ---- the tools: their docstrings are what the model reads ----------------------------

    def _list_files(self, path: str = ".", pattern: str | None = None) -> str:
        """List the files and folders under a folder of the workspace, at every depth.

        One entry per line, as a path relative to the workspace (ready for read_file);
        folders end with "/". Version control and tool folders (.git, node_modules,
        __pycache__, .venv, ...) are left out. At most 500 entries are shown; a note says
        how many more there are.

        Args:
            path: The folder to list, relative to the workspace; "." is the workspace itself.
            pattern: Only entries matching this glob, e.g. "*.py". A pattern without "/" is
                matched against names, one with "/" against paths under `path`.
        """
        return listing.list_entries(self._confinement, path, pattern)

    def _read_file(
        self, path: str, offset: Offset | None = None, limit: Offset | None = None
    ) -> str:
        """Read a text file of the workspace; each line comes with its line number.

        A long file is shown in parts: a note at the end says which offset to read on from.
        Binary files are reported, not shown.

        Args:
            path: The file, relative to the workspace.
            offset: The line number to start at (1 is the first line).
            limit: The most lines to show.
        """
        return files.read_lines(self._confinement, path, offset, limit, self.max_read_bytes)

    async def _write_file(
        self,
        path: str,
        content: str,
        ctx: ToolContext[Any] = None,  # type: ignore[assignment]  # None: called directly
    ) -> str:
        """Write a whole file of the workspace: create it, or replace all of its content.

        Missing folders on the way are created. To change part of a file, use edit_file.

        Args:
            path: The file, relative to the workspace.
            content: The complete new content of the file.
            ctx: Injected by the agent.
        """
        return await asyncio.to_thread(self._write, path, content, self._was_unasked(ctx))

    def _write(self, path: str, content: str, unasked: bool = False) -> str:
        if unasked:
            self._unasked_fails("write_file", {"path": path})
        return files.write_text(self._confinement, path, content)

    async def _edit_file(
        self,
        path: str,
        old: str,
        new: str,
        ctx: ToolContext[Any] = None,  # type: ignore[assignment]  # None: called directly
    ) -> str:
        """Replace one exact piece of text in a file of the workspace.

        `old` must occur exactly once in the file, character for character (indentation and
        line breaks included); include enough surrounding lines to make it unique. Read the
        file first. To replace a whole file, use write_file.

        Args:
            path: The file, relative to the workspace.
            old: The exact text to replace; it must occur once in the file.
            new: The text to put in its place.
            ctx: Injected by the agent.
        """
        return await asyncio.to_thread(self._edit, path, old, new, self._was_unasked(ctx))

    def _edit(self, path: str, old: str, new: str, unasked: bool = False) -> str:
        if unasked:
            self._unasked_fails("edit_file", {"path": path, "old": old, "new": new})
        return files.apply_edit(self._confinement, path, old, new)

    async def _execute_command(
        self, command: str, ctx: ToolContext[Any], timeout: Seconds = 60
    ) -> str:
        """Run a shell command (sh) in the workspace folder and return its output.

        Standard output and error come together, followed by the exit code. The command gets
        no input. Long output keeps its start and end. Anything the command started in the
        background is stopped when it ends.

        Args:
            command: The shell command line, e.g. "pytest -q tests/test_io.py".
            timeout: Seconds before the command is stopped (at most 600).
            ctx: Injected by the agent.
        """
        if "\0" in command:
            raise ToolError("the command contains a NUL character: a shell command cannot hold one")
        seconds = min(timeout, MAX_COMMAND_SECONDS)
        outcome = await run_command(
            command,
            cwd=self.root,
            timeout=seconds,
            max_output_bytes=self.max_output_bytes,
            on_line=ctx.progress_nowait,
            abort=ctx.abort_event,
            setup=self._commands,
        )
        return _report(outcome, seconds)


def _report(outcome: CommandOutcome, seconds: float) -> str:
    """The command's result for the model; a command stopped early is an error result."""
    output = outcome.output or "(no output)\n"
    if not output.endswith("\n"):
        output += "\n"
    if outcome.ending == "timed_out":
        raise ToolError(
            f"the command did not finish within {seconds:g} s; it was stopped, with everything "
            f"it started. Its output until then:\n{output}"
        )
    if outcome.ending == "aborted":
        raise ToolError(f"the command was stopped: the run was aborted. Its output:\n{output}")
    code = outcome.exit_code
    if code is None:
        return f"{output}[exit code unknown]"
    return f"{output}[exit code {code}]" if code >= 0 else f"{output}[killed by signal {-code}]"
