"""The two commands: ``run`` (one turn) and ``chat`` (turns until the user leaves)."""

from __future__ import annotations

import asyncio
import inspect
import sys
import time
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from glassagent import Agent, AgentRun, Message, RunResult
from glassagent.cli._options import Options
from glassagent.cli._sandbox import open_workspace
from glassagent.cli._setup import (
    LOCAL,
    budget_for,
    check_first_call,
    check_workspace,
    load_history,
    open_client,
    provider_of,
    settings_for,
)
from glassagent.cli._terminal import Interrupts, LineReader, asking, declining
from glassagent.cli._view import HumanView, Turn, View, error_line
from glassagent.errors import GlassAgentError, ProviderError, RunAborted
from glassagent.events import ApprovalRequiredEvent, BudgetExceededEvent
from glassagent.history import History
from glassagent.llm import ToolCall

DEFAULT_SYSTEM = (
    "You are a coding agent working in a project folder. Use the tools to look at and change "
    "its files; every path is relative to that folder. Read a file before you change it. "
    "When you are done, answer briefly: what you found, or what you changed."
)
"""The system instructions unless ``--system`` replaces them."""

LOCAL_SYSTEM = (
    "You are a helpful coding assistant working in a project folder. Reply to greetings, "
    'questions and requests for text directly with a "response". Use a tool only when the '
    "request needs the folder's files or a command. Paths are relative to the folder; "
    '"." is the folder itself. When done, give a short "response".'
)
"""The system instructions for the embedded local model: short, as small models need."""


def system_for(provider: str) -> str:
    """The default system instructions for `provider`'s model."""
    return LOCAL_SYSTEM if provider == LOCAL else DEFAULT_SYSTEM


EXIT_OK, EXIT_ERROR, EXIT_BAD_INPUT, EXIT_BUDGET, EXIT_ABORTED = 0, 1, 2, 3, 130

Ask = Callable[[ToolCall], "bool | Awaitable[bool]"]
"""How a session answers the approval of a change: `asking` or `declining`."""

CHAT_HELP = (
    "Commands: /history shows the conversation, /reset starts a new one, /exit leaves "
    "(so do Ctrl-D and Ctrl-C at the prompt); Ctrl-C during a turn aborts it."
)


@dataclass
class Session:
    """What both commands share: the options, the views and Ctrl-C."""

    options: Options
    view: View
    errors: HumanView
    interrupts: Interrupts = field(default_factory=Interrupts)
    root: Path | None = None
    """The workspace folder, once checked."""
    ask: Ask | None = None
    """Answers each change's approval; `None` (``--yes``): changes need none."""

    def note(self, text: str) -> None:
        """A line about the session on standard error."""
        self.errors.note(f"glassagent: {text}")

    def fail(self, text: str, error: BaseException | None = None) -> None:
        """An error as one line on standard error (and its traceback with ``--debug``)."""
        if error is not None and self.options.debug:
            traceback.print_exception(error)
        self.errors.note(f"glassagent: {text}", "red")

    @asynccontextmanager
    async def agent(
        self, ask: Ask | None, messages: Sequence[Message] = ()
    ) -> AsyncIterator[Agent[None]]:
        """The agent over the workspace and the model client; Ctrl-C meanwhile stops all.

        With `ask`, the workspace's changes need approval, which `play` asks for with it.
        `messages` (the first turn's conversation, when known) are checked against
        ``--max-turn-tokens`` before the model is started.

        Raises:
            BadInput: For a workspace, provider, model or key that cannot work.
        """
        options = self.options
        root = self.root = check_workspace(options.workspace)
        provider = provider_of(options.provider, self.note)
        self.ask = ask
        workspace = open_workspace(root, options, self.note, requires_approval=ask is not None)
        system = options.system if options.system is not None else system_for(provider)
        check_first_call(options.max_turn_tokens, system, workspace.tools, messages)
        task = asyncio.current_task()
        assert task is not None
        with self.interrupts.installed(asyncio.get_running_loop()):
            self.interrupts.handler = task.cancel
            async with open_client(provider, options.model, options.base_url, self.note) as client:
                if options.workspace == Path("."):  # say which folder the agent may change
                    self.note(f"working in {root} (the current folder; --workspace for another)")
                yield Agent(
                    client,
                    workspace.tools,
                    system=system,
                    max_iterations=options.max_iterations,
                    settings=settings_for(provider),
                    budget=budget_for(options.max_cost, options.max_turn_tokens, client),
                    stop_repeats=True,  # a model that repeats its calls answers instead
                )

    async def play(self, agent: Agent[None], prompt: str, history: History) -> Turn:
        """One turn, shown as it happens; Ctrl-C aborts it (a second one, again, leaves)."""
        started = time.perf_counter()
        run = agent.run(prompt, history=history, append_to_history=True)
        self.interrupts.handler = lambda: run.abort("interrupted (Ctrl-C)")
        result: RunResult | None
        error: GlassAgentError | None = None
        asking: list[asyncio.Task[None]] = []  # one question per call, answered meanwhile
        ticking = asyncio.create_task(self.tick())
        try:
            async with run:
                async for event in run:
                    self.view.show(event)
                    if isinstance(event, ApprovalRequiredEvent):
                        asking.append(asyncio.create_task(self.answer(run, event.call)))
            result = await run
        except GlassAgentError as exc:
            result, error = getattr(exc, "result", None), exc
        except KeyboardInterrupt:  # Ctrl-C where no signal handler could be set, or a client's
            reason = "interrupted (KeyboardInterrupt)"
            result, error = run.result, RunAborted(f"The run was aborted: {reason}", reason=reason)
        finally:
            ticking.cancel()
            self.interrupts.handler = None
            for task in asking:  # the turn has ended: a question still open is moot
                task.cancel()
            if asking:  # and its read of the terminal must be over before the next one
                await asyncio.wait(asking)
        turn = Turn(result, error, time.perf_counter() - started)
        self.view.turn_done(turn)
        return turn

    async def tick(self) -> None:
        """Redraw the view's status line every second while a model call works quietly."""
        view = self.view
        if not isinstance(view, HumanView) or not view.live:
            return
        while True:
            await asyncio.sleep(1.0)
            view.tick()

    async def answer(self, run: AgentRun, call: ToolCall) -> None:
        """Ask about one change the run waits for, and approve or decline it."""
        try:
            answer = self.ask(call) if self.ask is not None else False
            if inspect.isawaitable(answer):
                answer = await answer
        except Exception as exc:
            run.deny(call.id, f"the question could not be asked: {exc}")
            return
        if answer:
            run.approve(call.id)
        else:
            run.deny(call.id)

    def save(self, history: History, turn: Turn) -> bool:
        """Save the history after a turn that added to it; False when saving failed."""
        path = self.options.history
        if path is None or turn.result is None:
            return True
        if turn.result.stop_reason not in ("end_turn", "aborted", "budget"):
            return True  # a failed turn leaves the history as it was
        try:
            history.save(path)
        except OSError as exc:
            self.fail(f"the history could not be saved in {str(path)!r}: {exc}", exc)
            return False
        return True


def unknown_model(turn: Turn) -> bool:
    """Whether the first model call failed as a provider does for a model it does not know."""
    error, result = turn.error, turn.result
    return (
        isinstance(error, ProviderError)
        and error.status == 404
        and result is not None
        and result.iterations <= 1
    )


def budget_stop(turn: Turn) -> BudgetExceededEvent | None:
    """The event that ended the turn when the budget stopped it."""
    result = turn.result
    if result is None or result.stop_reason != "budget" or not result.events:
        return None
    last = result.events[-1]
    return last if isinstance(last, BudgetExceededEvent) else None


async def run_once(session: Session) -> int:
    """``glassagent run``: one turn; the exit code tells how it ended."""
    options = session.options
    assert options.prompt is not None
    history = load_history(options.history)
    first: list[Message] = []  # the first prompt, measured only for a token budget
    if options.max_turn_tokens is not None:
        first = [*history.to_messages(), Message(role="user", content=options.prompt)]
    async with session.agent(None if options.yes else declining(session.note), first) as agent:
        turn = await session.play(agent, options.prompt, history)
    saved = session.save(history, turn)
    error = turn.error
    if error is None:
        if not saved:
            return EXIT_ERROR
        stop = budget_stop(turn)
        if stop is not None:
            session.errors.note(f"glassagent: the budget stopped the turn: {stop.reason}", "yellow")
            return EXIT_BUDGET
        return EXIT_OK
    if isinstance(error, RunAborted):
        session.fail(f"aborted: {error.reason}")
        return EXIT_ABORTED
    if unknown_model(turn):
        model = options.model or agent.client.model
        session.fail(f"the provider does not know the model {model!r} (or the address is "
                     f"wrong): {error_line(error)}", error)  # fmt: skip
        return EXIT_BAD_INPUT
    session.fail(error_line(error), error)
    return EXIT_ERROR


@dataclass
class Chat:
    """``glassagent chat``: a conversation, turn after turn, until the user leaves."""

    session: Session
    reader: LineReader
    history: History
    leaving: bool = False

    async def converse(self, agent: Agent[None]) -> int:
        """Prompt, run, show; until Ctrl-D, /exit, or Ctrl-C at the prompt or twice in a turn."""
        session = self.session
        session.view.note(
            f"glassagent chat | {agent.client.provider_name}/{agent.client.model} | "
            f"{session.root} | /help for commands"
        )
        if len(self.history):
            count = len(self.history.thread())
            session.view.note(f"(continuing {count} messages of {session.options.history})")
        while not self.leaving:
            session.interrupts.handler = self.reader.interrupt
            line = await self.reader.readline("> ")
            session.interrupts.handler = None
            if line is None:
                break
            text = line.strip()
            if text.startswith("/"):
                self.command(text)
            elif text:
                await self.turn(agent, text)
        session.errors.note("")
        return EXIT_OK

    async def turn(self, agent: Agent[None], prompt: str) -> None:
        """One turn; Ctrl-C aborts it, a second Ctrl-C also leaves the chat afterwards."""
        session = self.session
        interrupts, before = session.interrupts, session.interrupts.count
        turn = await session.play(agent, prompt, self.history)
        if interrupts.count - before > 1:
            self.leaving = True
        if turn.error is not None and not isinstance(turn.error, RunAborted):
            session.fail(error_line(turn.error), turn.error)
        session.save(self.history, turn)

    def command(self, text: str) -> None:
        """A slash command: /exit, /reset, /history or /help."""
        view, name = self.session.view, text.split()[0].lower()
        if name in ("/exit", "/quit"):
            self.leaving = True
        elif name == "/reset":
            self.history = load_history(None)
            saved = self.session.options.history
            extra = f"; its first turn replaces the conversation in {saved}" if saved else ""
            view.note(f"(a new conversation{extra})")
        elif name == "/history":
            view.thread(self.history.thread())
        elif name == "/help":
            view.note(CHAT_HELP)
        else:
            view.note(f"unknown command {name}; {CHAT_HELP}", "yellow")


async def chat(session: Session) -> int:
    """``glassagent chat``: exit code 0 when the user leaves."""
    options = session.options
    history = load_history(options.history)
    reader = LineReader(sys.stdin.fileno(), prompts=sys.stderr)
    async with session.agent(None if options.yes else asking(reader)) as agent:
        return await Chat(session, reader, history).converse(agent)
