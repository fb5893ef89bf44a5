"""`Agent`: a client, tools and instructions; `run` starts the Think -> Act -> Observe loop."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from glassagent._agent.approval import check_answers, pending_calls
from glassagent._agent.arguments import (
    check_count,
    check_iterable,
    check_seconds,
    check_settings,
    check_type,
    conversation,
    conversation_of,
    prompt_message,
    tools_by_name,
    unique_context_tools,
)
from glassagent._agent.budget import Budget
from glassagent._agent.config import RunConfig
from glassagent._agent.context_policy import ContextPolicy, check_policy
from glassagent._agent.nesting import agent_tool, check_name, handoff_tool
from glassagent._agent.output import output_spec
from glassagent._agent.run import AgentRun
from glassagent._agent.sync import run_coroutine_sync
from glassagent._core.client import BaseLLMClient
from glassagent._core.errors import UserError
from glassagent._core.messages import Attachment, Message, ModelSettings
from glassagent._core.output import FINAL_TOOL
from glassagent._core.result import OutputT, RunResult
from glassagent._core.tool_choice import check_against as check_tool_choice
from glassagent._tools.context import DepsT
from glassagent._tools.context_tools import ContextSettings, ContextTool
from glassagent._tools.tool import Tool, check_approval_rule

if TYPE_CHECKING:
    from glassagent._agent.config import RunSteps
    from glassagent._agent.hook import OnEvent
    from glassagent._agent.nesting import Nesting
    from glassagent._core.output import OutputMode
    from glassagent._core.record.redact import Redact
    from glassagent._history.tree import History
    from glassagent._tools.tool import ApprovalAnswer, ApprovalPolicy

AttachmentLike = Attachment | str | os.PathLike[str]
"""An `Attachment`, or a file path to attach."""

_T = TypeVar("_T")

_NO_SETTINGS = ModelSettings()


class Agent(Generic[DepsT, OutputT]):
    """A model client plus tools: runs the Think -> Act -> Observe loop, streaming events.

    The agent is generic in the type of its runs' output: ``Agent(client,
    output_type=Invoice)`` runs return a ``RunResult[Invoice]`` whose ``output`` is a
    validated ``Invoice`` (see "Structured output"); without `output_type` it is the text.

    Example:
        ```python
        agent = Agent(client, [add], system="Be brief.")
        async for event in agent.run("What is 17 + 25?"):
            print(event.to_dict())
        ```
    """

    __slots__ = (
        "_context_tools",
        "_definitions",
        "_output",
        "_tools",
        "_toolset",
        "budget",
        "client",
        "context_policy",
        "context_settings",
        "description",
        "handoffs",
        "max_iterations",
        "name",
        "on_event",
        "output_type",
        "redact",
        "requires_approval",
        "run_timeout",
        "settings",
        "stop_repeats",
        "system",
        "tool_timeout",
    )

    def __init__(
        self,
        client: BaseLLMClient,
        tools: Iterable[Tool | ContextTool | Callable[..., Any]] = (),
        *,
        system: str | None = None,
        max_iterations: int = 10,
        settings: ModelSettings | None = None,
        tool_timeout: float | None = None,
        run_timeout: float | None = None,
        context_tools: Iterable[ContextTool] = (),
        context_settings: ContextSettings | None = None,
        budget: Budget | None = None,
        requires_approval: bool | ApprovalPolicy = False,
        redact: Redact | None = None,
        on_event: OnEvent | None = None,
        output_type: type[OutputT] | None = None,
        output_retries: int = 2,
        output_mode: OutputMode | None = None,
        stop_repeats: bool = False,
        context_policy: ContextPolicy | None = None,
        name: str | None = None,
        description: str | None = None,
        handoffs: Iterable[Agent[Any, Any]] = (),
    ) -> None:
        """Create an agent.

        Args:
            client: The model backend.
            tools: Tools, or plain functions (wrapped with `tool` automatically); a
                `ContextTool` here is offered to the model as a tool of its own.
            system: System instructions sent with every model call.
            max_iterations: Most model calls a run may make before it fails.
            settings: Default generation settings; a run's settings override them.
            tool_timeout: Seconds a tool call may take when its tool sets no timeout.
            run_timeout: Seconds a whole run may take; past it the run ends with
                `RunTimeoutError`, keeping what it produced (`None`: no limit). Limits of one
                model call are `ModelSettings.timeout` and ``stall_timeout``.
            context_tools: Tools the agent itself runs before the first model call of each
                run, chosen by their relevance to the user's message; their merged output
                goes with every request of the run (see `ContextTool`).
            context_settings: How context tools are selected and where their output goes
                (`None`: `ContextSettings()`).
            budget: Limits on what each run may spend (cost, tokens, model calls), checked
                before each model call; a run that would pass one stops with
                ``stop_reason="budget"``, keeping what it produced (`None`: no limits).
            requires_approval: Which tool calls need a person's approval before they run,
                besides those whose tool requires it: `True` for every call, or an
                `ApprovalPolicy` deciding call by call (see "Approval of tool calls").
            redact: A hook every event dict passes through before it is recorded
                (``save_events``), shown (the notebook view) or exported; the events the
                program sees are not changed (`glassagent.events.Redact`, e.g. a `Redactor`).
            on_event: A function given each event of every run of the agent as the run
                emits it: also of runs nobody iterates (``await agent.run(...)``,
                `run_sync`, the runs of the invoke server), e.g. to trace them
                (`glassagent.otel.EventTracer`) or record them. A plain function is called
                at once; an ``async`` one is awaited in event order, and the run ends only
                after it has seen the last event. When it raises, the failure is logged on
                the ``glassagent`` logger and the run goes on unchanged. It gets the event
                itself, not passed through `redact`.
            output_type: The type every run's answer must have: a pydantic model, a
                dataclass, a ``TypedDict`` or a type such as ``list[str]``; the run's
                `RunResult.output` is a validated instance (`None` or ``str``: plain text).
            output_retries: How often an invalid answer goes back to the model with the
                validation errors before the run fails with `OutputValidationError`.
            output_mode: How the answer is asked for: ``"native"`` (the provider's
                constrained mode), ``"tool"`` (a final-answer tool) or ``"prompted"`` (the
                schema in the system prompt); `None`: the client's choice
                (`BaseLLMClient.output_mode`).
            stop_repeats: When the model asks again for exactly the calls of its previous
                answer (same tools, same arguments), run them, then make the next model call
                offer no tools (``tool_choice="none"``), so the model answers from the
                results it has instead of looping until `max_iterations`. Small models need
                it; tools that are polled on purpose do not want it.
            context_policy: What of a long conversation each model call sends:
                `KeepTurns`, `FitWindow` or `Summarize` (`glassagent.context`; see "Long
                conversations"). `None`: the whole conversation, refused with
                `ContextLengthError` when it does not fit the model's window.
            name: The agent's name: how other agents call it (`as_tool`, a handoff's
                ``transfer_to_<name>`` tool) and how events and `RunResult.last_agent` name
                it. Letters, digits, ``_`` and ``-``.
            description: What the agent does, for the models of agents that hand work to it.
            handoffs: Agents this agent's model may hand the conversation to: each is offered
                as a tool ``transfer_to_<name>``; calling it makes the run go on as that agent
                (its model, tools and instructions), with the conversation as it is (see
                "Many agents"). Each needs a `name`. The attribute is a list: add agents later
                for handoffs that go both ways.

        Raises:
            UserError: On a non-client, duplicate tool names, a bad limit (or one of the
                wrong type), a `system`, `settings`, `budget` or `context_settings` of the
                wrong type, a `requires_approval` that is not a bool or callable, a
                `redact` or `on_event` that is not callable, a ``settings.tool_choice``
                naming a tool the agent does not have, an `output_type` without a JSON
                Schema, a tool named ``final_result`` next to an `output_type`, or a
                `context_policy` that is not a `KeepTurns`, `FitWindow` or `Summarize`.
        """
        if not isinstance(client, BaseLLMClient):
            raise UserError(f"`client` must be a BaseLLMClient, got {type(client).__name__}.")
        check_count("max_iterations", max_iterations)
        check_seconds("tool_timeout", tool_timeout)
        check_seconds("run_timeout", run_timeout)
        check_type("system", system, str, "a string")
        check_settings(settings)
        check_type("context_settings", context_settings, ContextSettings, "a ContextSettings")
        check_iterable("tools", tools, "tools or functions")
        check_iterable("context_tools", context_tools, "context tools")
        if budget is not None and not isinstance(budget, Budget):
            raise UserError(f"`budget` must be a Budget, got {type(budget).__name__}.")
        check_approval_rule(requires_approval)
        for label, hook in (("redact", redact), ("on_event", on_event)):
            if hook is not None and not callable(hook):
                raise UserError(f"`{label}` must be callable, got {type(hook).__name__}.")
        by_name = tools_by_name(tools)
        if name is not None:
            check_name(name, "`name`")
        check_type("description", description, str, "a string")
        check_iterable("handoffs", handoffs, "agents")
        spec = output_spec(output_type or str, output_retries, output_mode)
        if spec is not None and FINAL_TOOL in by_name:
            raise UserError(f"The tool name {FINAL_TOOL!r} is reserved for an agent's output.")
        self.client: BaseLLMClient = client
        """The model backend."""
        self.system: str | None = system
        """System instructions."""
        self.max_iterations: int = max_iterations
        """Most model calls per run."""
        self.settings: ModelSettings = settings or _NO_SETTINGS
        """Default generation settings."""
        self.tool_timeout: float | None = tool_timeout
        """Default seconds per tool call."""
        self.run_timeout: float | None = run_timeout
        """Seconds a whole run may take (`None`: no limit)."""
        self.budget: Budget | None = budget
        """Limits on what each run may spend (`None`: none)."""
        self.requires_approval: bool | ApprovalPolicy = requires_approval
        """Which calls need approval, besides those whose tool requires it."""
        self.redact: Redact | None = redact
        """The hook recordings, views and exports pass event dicts through (`None`: none)."""
        self.on_event: OnEvent | None = on_event
        """The hook given each event of every run as it is emitted (`None`: none)."""
        self.stop_repeats: bool = stop_repeats
        """Whether a repeated round of calls makes the next model call answer."""
        check_policy(context_policy)
        self.context_policy: ContextPolicy | None = context_policy
        """What of a long conversation each model call sends (`None`: all of it)."""
        self.name: str | None = name
        """The agent's name (`None`: none)."""
        self.description: str | None = description
        """What the agent does, for other agents' models (`None`: not said)."""
        self.handoffs: list[Agent[Any, Any]] = list(handoffs)
        """The agents this agent's model may hand the conversation to."""
        self._toolset: tuple[tuple[int, ...], Mapping[str, Tool]] = ((), {})
        self._tools = by_name
        self._definitions = tuple(t.definition for t in by_name.values())
        check_tool_choice(self.settings.tool_choice, list(self._tool_map()))
        self._context_tools = unique_context_tools(context_tools)
        self._output = spec
        self.output_type: type[OutputT] | None = output_type
        """The type of the runs' output (`None`: plain text)."""
        self.context_settings: ContextSettings | None = context_settings
        """How context tools are selected and placed (`None`: the defaults)."""

    @property
    def tools(self) -> tuple[Tool, ...]:
        """The agent's tools."""
        return tuple(self._tools.values())

    def as_tool(
        self,
        name: str | None = None,
        description: str | None = None,
        *,
        timeout: float | None = None,
        requires_approval: bool = False,
    ) -> Tool:
        """This agent as a tool of another agent: each call is a whole run of this agent.

        The calling model gives a ``task``; the call runs this agent on it, as a new
        conversation, and returns its answer (with an `output_type`: the output as JSON). The
        sub-agent's run streams its events inside the parent run's, with ``parent_run_id``,
        ``parent_call_id`` and ``depth``; its usage and cost add to the parent's, the parent's
        budget stops it, aborting the parent aborts it, and a failure is the call's error
        result (see "Many agents").

        Example:
            ```python
            researcher = Agent(client, [search], name="researcher")
            writer = Agent(client, [researcher.as_tool(description="Finds facts.")])
            ```

        Args:
            name: The tool's name (default: the agent's `name`).
            description: What the tool does, for the calling model (default: the agent's
                `description`, else a generic one).
            timeout: Seconds a call may take before it is stopped (`None`: the calling
                agent's ``tool_timeout``).
            requires_approval: Whether each call needs a person's approval.

        Raises:
            UserError: When neither `name` nor the agent's name is given, or it is not a valid
                tool name.
        """
        tool_name = check_name(name or self.name, "The tool name of an agent (`name`)")
        check_type("description", description, str, "a string")
        about = description or self.description or f"Ask the agent {tool_name} to do a task."
        return agent_tool(
            self,
            name=tool_name,
            description=about,
            timeout=timeout,
            requires_approval=requires_approval,
        )

    def _tool_map(self) -> Mapping[str, Tool]:
        """The agent's tools and a ``transfer_to_<name>`` tool per handoff."""
        key = tuple(id(agent) for agent in self.handoffs)
        if key != self._toolset[0]:
            tools = dict(self._tools)
            for agent in self.handoffs:
                if not isinstance(agent, Agent):
                    raise UserError(f"`handoffs` must be agents, got {type(agent).__name__}.")
                handoff = handoff_tool(agent)
                if handoff.name in tools:
                    raise UserError(f"Two tools are named {handoff.name!r}.")
                tools[handoff.name] = handoff
            self._toolset = (key, MappingProxyType(tools))
        return self._toolset[1] if key else self._tools

    def _nested_run(
        self,
        task: str,
        nesting: Nesting | None,
        *,
        deps: Any,
        host: Mapping[str, Any],
        defer_approval: bool,
    ) -> AgentRun[OutputT]:
        """A run of this agent on `task` inside a tool call of another run (`as_tool`)."""
        config = self._configure(None, False, deps, None, defer_approval, host)
        return AgentRun(config, [prompt_message(task, ())], nesting=nesting)

    def _handed_config(self, base: RunConfig) -> RunConfig:
        """`base`, the configuration of a run handed to this agent, as this agent runs it."""
        tools = self._tool_map()
        return replace(
            base,
            client=self.client,
            tools=tools,
            definitions=tuple(t.definition for t in tools.values()),
            system=self.system,
            settings=self.settings,
            tool_timeout=self.tool_timeout,
            context_tools=(),
            requires_approval=self.requires_approval,
            output=self._output,
            stop_repeats=self.stop_repeats,
            context_policy=self.context_policy,
            agent_name=self.name,
        )

    @property
    def context_tools(self) -> tuple[ContextTool, ...]:
        """The tools the agent runs before each run's first model call."""
        return self._context_tools

    def run(
        self,
        prompt: str,
        *,
        messages: Sequence[Message] | None = None,
        history: History | None = None,
        append_to_history: bool = False,
        attachments: Iterable[AttachmentLike] = (),
        deps: DepsT | None = None,
        settings: ModelSettings | None = None,
        defer_approval: bool = False,
        host: Mapping[str, Any] | None = None,
    ) -> AgentRun[OutputT]:
        """Start a run; iterate the result for events, or await it for the `RunResult`.

        Nothing happens until the run is iterated or awaited.

        Args:
            prompt: The user's message.
            messages: The conversation so far (e.g. ``previous.all_messages``).
            history: A conversation tree; the thread at its current node is the context.
            append_to_history: Append the turn to `history` when the run ends: every message
                of a finished run (``current_node`` moves to the answer), what an aborted run
                kept (its partial answer marked ``aborted``), nothing when the run fails.
                The append is a step after the run's end; when the history refuses a message,
                awaiting the run (or iterating it past its last event) raises
                `HistoryAppendError`.
            attachments: Files sent with the prompt (paths or `Attachment`s).
            deps: Any object tools receive as ``ctx.deps``.
            settings: Generation settings that override the agent's for this run.
            defer_approval: Do not wait for calls that need approval (unless their tool has
                an `Approver`): the other calls run, then the run ends with
                ``stop_reason="awaiting_approval"`` and its `RunResult.pending_approvals`;
                continue it with `resume`. `False`: the run waits for `AgentRun.approve` or
                `AgentRun.deny`.
            host: Facts of the application running the agent, for its tools' context:
                ``chat_id``, ``chat_manager``, ``app_path``, ``main_port``, ``chat_path``,
                ``history_path``, ``debug_mode`` (`ToolContext` has each as an attribute),
                and any other key (``ctx.host``). Copied once when the run is created.

        Raises:
            UserError: When both `messages` and `history` are given, `append_to_history`
                without a `history`, an argument of the wrong type (a `prompt` that is not a
                string, `messages` that are not `Message`s, a `history` that is not a
                `History`, ...), or a ``settings.tool_choice`` naming a tool the agent does
                not have.
            AttachmentError: When the history's attachment policy refuses an attachment of
                its thread.
        """
        if history is not None and messages is not None:
            raise UserError("Pass the conversation as `messages` or as `history`, not both.")
        if append_to_history and history is None:
            raise UserError("`append_to_history=True` needs a `history` to append to.")
        question = prompt_message(prompt, attachments)
        check_settings(settings)
        thread = conversation(messages, history)
        thread.append(question)
        config = self._configure(history, append_to_history, deps, settings, defer_approval, host)
        return AgentRun(config, thread)

    def resume(
        self,
        previous: RunResult[Any] | History | Sequence[Message],
        approvals: Mapping[str, ApprovalAnswer] | None = None,
        *,
        append_to_history: bool = False,
        deps: DepsT | None = None,
        settings: ModelSettings | None = None,
        defer_approval: bool = False,
        host: Mapping[str, Any] | None = None,
    ) -> AgentRun[OutputT]:
        """Continue a run that ended ``awaiting_approval``, with a person's answers.

        The calls that waited are those of the conversation's last answer without a result;
        each answered call runs (`True`) or goes back to the model declined (`False`, or a
        reason). A call left unanswered needs approval again: the new run waits for it (or,
        with `defer_approval`, ends ``awaiting_approval`` again at once). Then the run goes on
        as any run does. Nothing else is kept between the two: in a new process, load the
        saved `History` (or messages) and resume from it, with an agent that has the tools.

        Example:
            ```python
            result = await agent.run("Tidy up", history=history, append_to_history=True,
                                     defer_approval=True)
            history.save("chat.json")
            ...  # later, anywhere: ask a person about result.pending_approvals
            history = History.load("chat.json")
            await agent.resume(history, {"call_1": True, "call_2": "not that file"},
                               append_to_history=True)
            ```

        Args:
            previous: The run's `RunResult`, the `History` its turn was appended to (its
                thread at the current node), or its conversation (``all_messages``).
            approvals: Answers by call id: `True` approves, `False` declines, a string
                declines with that reason.
            append_to_history: Append what the new run adds to `previous`, a `History`,
                below its current node.
            deps: Any object tools receive as ``ctx.deps``.
            settings: Generation settings that override the agent's for this run.
            defer_approval: As for `run`.
            host: As for `run`.

        Raises:
            UserError: When no call of `previous` awaits approval, an answer names another
                call or is not a bool or a string, `append_to_history` is given without a
                `History`, or `previous` or `settings` is of the wrong type.
        """
        check_settings(settings)
        history, conversation = conversation_of(previous)
        if append_to_history and history is None:
            raise UserError("`append_to_history=True` needs a `History` to resume from.")
        pending = pending_calls(conversation)
        if not pending:
            raise UserError("Nothing to resume: no tool call of the conversation awaits approval.")
        answers = check_answers(approvals or {}, pending)
        config = self._configure(history, append_to_history, deps, settings, defer_approval, host)
        return AgentRun(config, conversation, resume=(pending, answers))

    def _configure(
        self,
        history: History | None,
        append_to_history: bool,
        deps: Any,
        settings: ModelSettings | None,
        defer_approval: bool,
        host: Mapping[str, Any] | None,
    ) -> RunConfig:
        if host is not None and not isinstance(host, Mapping):
            raise UserError(f"`host` must be a mapping, got {type(host).__name__}.")
        merged = self.settings.merge(settings)
        tools = self._tool_map()
        check_tool_choice(merged.tool_choice, list(tools))
        return RunConfig(
            client=self.client,
            tools=tools,
            definitions=self._definitions
            if tools is self._tools
            else tuple(t.definition for t in tools.values()),
            system=self.system,
            settings=merged,
            max_iterations=self.max_iterations,
            tool_timeout=self.tool_timeout,
            run_timeout=self.run_timeout,
            budget=self.budget,
            deps=deps,
            append_to=history if append_to_history else None,
            append_below=history.current_node if history is not None else None,
            context_tools=self._context_tools,
            context_settings=self.context_settings,
            requires_approval=self.requires_approval,
            defer_approval=defer_approval,
            redact=self.redact,
            on_event=self.on_event,
            output=self._output,
            stop_repeats=self.stop_repeats,
            context_policy=self.context_policy,
            host=MappingProxyType(dict(host)) if host else None,
            agent_name=self.name,
        )

    def _run_steps(
        self,
        prompt: str,
        *,
        history: History | None,
        run_id: str,
        client: Callable[[BaseLLMClient], BaseLLMClient],
        steps: RunSteps,
    ) -> AgentRun[OutputT]:
        """A run with the id `run_id` whose model and tool calls go through steps.

        For `glassagent.durable`: `client` wraps the agent's client (its calls become
        checkpointed steps) and `steps` runs each tool call and waits for approvals.
        """
        if self.handoffs:
            raise UserError("A durable run cannot hand off (see `DurableAgent`).")
        thread = conversation(None, history)
        thread.append(prompt_message(prompt, ()))
        config = self._configure(history, False, None, None, False, None)
        config = replace(config, client=client(config.client), steps=steps)
        return AgentRun(config, thread, run_id=run_id)

    def run_sync(
        self,
        prompt: str,
        *,
        messages: Sequence[Message] | None = None,
        history: History | None = None,
        append_to_history: bool = False,
        attachments: Iterable[AttachmentLike] = (),
        deps: DepsT | None = None,
        settings: ModelSettings | None = None,
        defer_approval: bool = False,
        host: Mapping[str, Any] | None = None,
    ) -> RunResult[OutputT]:
        """Run to the end and return the `RunResult`, from plain code or inside a running loop.

        Every synchronous run executes on one long-lived event loop in a background thread,
        and this call blocks until it ends; so it also works inside an already running loop
        (Jupyter), and a client's kept-alive connections serve one call after another. Ctrl-C
        (``KeyboardInterrupt``) aborts the run, keeping its partial answer, and is re-raised.

        Args:
            prompt: The user's message.
            messages: The conversation so far.
            history: A conversation tree whose current thread is the context.
            append_to_history: Append the turn to `history` (see `run`).
            attachments: Files sent with the prompt.
            deps: Any object tools receive as ``ctx.deps``.
            settings: Generation settings for this run.
            defer_approval: End ``awaiting_approval`` rather than wait for approvals (see
                `run`); nothing can answer a synchronous run while it waits.
            host: Facts of the application for the tools' context (see `run`).

        Raises:
            GlassAgentError: When the run fails or is aborted (with ``.result`` set).
        """
        run = self.run(
            prompt,
            messages=messages,
            history=history,
            append_to_history=append_to_history,
            attachments=attachments,
            deps=deps,
            settings=settings,
            defer_approval=defer_approval,
            host=host,
        )
        return run_coroutine_sync(_await(run))

    def __repr__(self) -> str:
        return f"Agent(client={self.client!r}, tools={list(self._tools)!r})"


async def _await(run: AgentRun[OutputT]) -> RunResult[OutputT]:
    return await run
