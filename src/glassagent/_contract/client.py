"""`ContractClient`: the design's synchronous AI-client methods over any `BaseLLMClient`."""

from __future__ import annotations

import queue
import threading
import weakref
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from glassagent._agent.decide import call_settings
from glassagent._contract import bridge
from glassagent._contract.convert import (
    ContractValueError,
    call_start,
    conversation,
    model_settings,
    thread_of,
    tool_definitions,
    tool_result,
)
from glassagent._contract.execute import Calling, Execution, run_call
from glassagent._contract.stream import ContractResponse, ContractStream, Request, answer
from glassagent._core.client import BaseLLMClient
from glassagent._core.errors import MaxIterationsExceeded, RunAborted
from glassagent._core.messages import Message, ToolCall
from glassagent._tools.tool import Tool
from glassagent._tools.wrap import as_tool

_SHIPPED_PROFILES = Path(__file__).resolve().parent.parent / "_core" / "profiles" / "data"


class ContractClient:
    """The design's AI-client contract (``send_request``, ``handle_function_calls``, ...).

    An application written against the design's provider rules calls these synchronous
    methods with its own dicts: the standard history, the context dict, the event dicts.
    This class gives them over any glassagent client, so such an application runs unchanged
    on every glassagent provider. Coroutines run on glassagent's background loop of
    synchronous calls; do not call these methods from async code (use the client there).

    Example:
        ```python
        client = ContractClient(ScriptedClient(["Hello!"]))
        response = client.send_request("scripted", {}, "Hi", [])
        assert client.extract_response_text(response) == "Hello!"
        ```

    Args:
        client: The glassagent client, or a provider name (``"gemini"``): then each model id
            gets its own client from `glassagent.llm.create_llm_client`, and the key is
            checked now (a missing key raises `ConfigurationError`, a `ValueError`).
        tools: glassagent tools this adapter runs when the context's tool loader does not
            know a call.
        max_tool_rounds: How many rounds of tool calls `handle_function_calls` runs before
            it gives up.
        profile_dir: What `get_profile_dir` returns (default: glassagent's shipped profiles).
        **client_options: Keyword arguments for `create_llm_client` (with a provider name).
    """

    def __init__(
        self,
        client: BaseLLMClient | str,
        *,
        tools: Iterable[Tool | Callable[..., Any]] = (),
        max_tool_rounds: int = 10,
        profile_dir: str | Path | None = None,
        **client_options: Any,
    ) -> None:
        if isinstance(max_tool_rounds, bool) or not isinstance(max_tool_rounds, int):
            raise ContractValueError("max_tool_rounds must be an integer.")
        if max_tool_rounds < 1:
            raise ContractValueError("max_tool_rounds must be at least 1.")
        self._clients: dict[str, BaseLLMClient] = {}
        self._options = client_options
        if isinstance(client, str):
            from glassagent._providers.factory import create_llm_client

            self._provider: str | None = client
            first = create_llm_client(client, **client_options)
        elif isinstance(client, BaseLLMClient):
            self._provider = None
            first = client
        else:
            raise ContractValueError(f"Not a client or provider name: {type(client).__name__}.")
        self._client = first
        self._clients[first.model] = first
        self.tools: dict[str, Tool] = {t.name: t for t in map(as_tool, tools)}
        """The adapter's own glassagent tools, by name."""
        self.max_tool_rounds = max_tool_rounds
        """Rounds of tool calls before `handle_function_calls` gives up."""
        self._profile_dir = Path(profile_dir) if profile_dir is not None else _SHIPPED_PROFILES
        self._streams: weakref.WeakSet[ContractStream] = weakref.WeakSet()
        self._handled: weakref.WeakSet[ContractStream] = weakref.WeakSet()
        self._lock = threading.Lock()

    def get_provider_name(self) -> str:
        """The provider's name (``"gemini"``, ``"openai"``, ...)."""
        return self._client.provider_name

    def get_profile_dir(self) -> Path:
        """The folder of model profiles (``ai_profile/``) this client comes with."""
        return self._profile_dir.resolve()

    @staticmethod
    def shipped_profiles() -> Path:
        """The folder of the model profiles glassagent ships."""
        return _SHIPPED_PROFILES

    def get_masked_api_key(self) -> str:
        """The key as the client shows it (its first and last 4 characters), never the key.

        ``""`` for a client that has no key or does not say.
        """
        masked = getattr(self._client, "get_masked_api_key", None)
        return str(masked()) if callable(masked) else ""

    def send_request(
        self,
        model_id: str,
        history: Mapping[str, Any] | None,
        current_text_input: str,
        current_file_paths: Sequence[str] | None,
        temperature: float | None = 0.7,
        thinking_budget: int | None = None,
        tools: Sequence[Any] | None = None,
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> ContractResponse:
        """Send the conversation and the new user input; wait for the whole answer.

        Args:
            model_id: The model to ask.
            history: The standard history document (version 1 or 2.0); empty for a new chat.
            current_text_input: The user's new text.
            current_file_paths: Files sent with it.
            temperature: Sampling temperature (`None`: the provider's default).
            thinking_budget: Thinking tokens, for models that think.
            tools: Tools offered: glassagent tools, functions, or definition dicts.
            system_prompt: The system prompt.
            **kwargs: Further `ModelSettings` fields (``max_output_tokens`` means
                ``max_tokens``).

        Raises:
            ValueError: For bad arguments or a bad key (`AuthenticationError`).
            RuntimeError: When the provider fails (`ProviderError`, incl. `RateLimitError`).
        """
        request = self._request(
            model_id, conversation(history, current_text_input, current_file_paths),
            temperature, thinking_budget, tools, system_prompt, kwargs,
        )  # fmt: skip
        return self._send(request, lambda: False)

    def send_request_stream(
        self,
        model_id: str,
        history: Mapping[str, Any] | None,
        current_text_input: str,
        current_file_paths: Sequence[str] | None,
        temperature: float | None = 0.7,
        thinking_budget: int | None = None,
        tools: Sequence[Any] | None = None,
        abort_signal: threading.Event | None = None,
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> ContractStream:
        """Like `send_request`, streaming the design's event dicts as they come.

        The stream yields ``thinking_chunk`` and ``text_chunk`` and ends with ``complete``,
        ``aborted`` (once `abort_signal` is set or `abort_streaming` is called) or
        ``error``. Give it to `handle_function_calls_stream` to run the tools it asks for.
        """
        request = self._request(
            model_id, conversation(history, current_text_input, current_file_paths),
            temperature, thinking_budget, tools, system_prompt, kwargs,
        )  # fmt: skip
        return self._stream(request, _signal(abort_signal), follow_up=False)

    def extract_response_text(self, response: ContractResponse) -> str:
        """The text of a `send_request` answer."""
        return response.text

    def handle_function_calls(
        self,
        response: ContractResponse,
        model_id: str,
        history: Mapping[str, Any] | None,
        context: Mapping[str, Any] | None,
    ) -> tuple[ContractResponse, list[dict[str, Any]]]:
        """Run the tools `response` asks for and send their results, until a final answer.

        Each call runs through ``context["tool_loader"].execute_tool(name, arguments,
        context)`` when the context has such a loader, else through the glassagent tool of
        that name (given to the request or to this adapter), with a `ToolContext` made from
        the context dict. A forced ``tool_choice`` (``"required"`` or a tool's name) holds
        for the first answer only: once tools ran, the follow-ups use ``"auto"``, so the model
        can answer with their results (as in `Agent`).

        Returns:
            The final answer and the design's execution dicts of every call, in order.

        Raises:
            RunAborted: When ``context["abort_event"]`` is set.
            MaxIterationsExceeded: After `max_tool_rounds` rounds with calls still asked for.
        """
        executions: list[dict[str, Any]] = []
        for _ in range(self.max_tool_rounds):
            if not response.tool_calls:
                return response, executions
            calling = self._calling(response, context)
            results = []
            for call in response.tool_calls:
                done = self._run_quietly(calling, call)
                executions.append(done.record)
                results.append(self._client_for(model_id).format_tool_result(call, done.result))
            messages = [*response.conversation(self._client_for(model_id)), *results]
            response = self._send(self._follow_up(response, messages), calling.aborted)
        if not response.tool_calls:
            return response, executions
        raise _too_many(self.max_tool_rounds)

    def handle_function_calls_stream(
        self,
        stream_response: ContractStream,
        model_id: str,
        history: Mapping[str, Any] | None,
        context: Mapping[str, Any] | None,
    ) -> Iterator[dict[str, Any]]:
        """Stream a `send_request_stream` answer and run the tools it asks for, round by round.

        Yields the stream's chunks, then for each round ``function_call_start`` (one per
        call), ``function_execution_start``, ``tool_progress``, ``function_execution_complete``
        (one per call), ``sending_function_response`` and the next answer's chunks (with
        ``is_follow_up``), and ends with one ``complete``, ``aborted`` or ``error``.
        """
        if not isinstance(stream_response, ContractStream):
            raise ContractValueError("stream_response must come from send_request_stream.")
        with self._lock:
            self._handled.add(stream_response)  # abort_streaming reaches the tools too
        try:
            yield from self._rounds(stream_response, model_id, context)
        finally:
            self._handled.discard(stream_response)

    def _rounds(
        self, first: ContractStream, model_id: str, context: Mapping[str, Any] | None
    ) -> Iterator[dict[str, Any]]:
        stream, rounds = first, 0
        while True:
            for event in stream:
                held = stream.response is not None and bool(stream.response.tool_calls)
                if not (held and event["type"] == "complete"):
                    yield event
            response = stream.response
            if response is None or not response.tool_calls:
                return
            if rounds == self.max_tool_rounds:
                yield {"type": "error", "error": str(_too_many(rounds))}
                return
            rounds += 1
            calling = self._calling(response, context, first.is_aborted)
            messages = yield from self._round(calling, response, model_id)
            if messages is None:
                yield {"type": "aborted", "text": "", "reason": "user_abort"}
                return
            yield {"type": "sending_function_response"}
            stream = self._stream(self._follow_up(response, messages), calling.aborted, True)

    def send_function_response(
        self,
        model_id: str,
        history: Mapping[str, Any] | None,
        function_response_parts: Sequence[Mapping[str, Any] | Message],
        system_prompt: str | None = None,
        tools: Sequence[Any] | None = None,
        **kwargs: Any,
    ) -> ContractResponse:
        """Send tool results and wait for the model's answer.

        Args:
            model_id: The model to ask.
            history: The standard history whose thread ends with the assistant message that
                made the calls.
            function_response_parts: One result per call: ``{"tool_call_id", "result"}``
                dicts (``"name"`` or ``"function_name"`` optional; a ``"content"`` string
                works too) or tool `Message`s.
            system_prompt: The system prompt.
            tools: The tools offered for the next answer.
            **kwargs: As for `send_request` (``temperature`` included).
        """
        temperature = kwargs.pop("temperature", 0.7)
        messages = thread_of(history) + [_tool_message(part) for part in function_response_parts]
        thinking = kwargs.pop("thinking_budget", None)
        request = self._request(
            model_id, messages, temperature, thinking, tools, system_prompt, kwargs
        )
        return self._send(request, lambda: False)

    def abort_streaming(self) -> None:
        """Abort every stream of this client that is still running."""
        with self._lock:
            streams = [*self._streams, *self._handled]
        for stream in streams:
            stream.abort()

    def close(self) -> None:
        """Close the glassagent clients this adapter made or was given."""
        for client in list(self._clients.values()):
            bridge.wait(client.aclose(), lambda: False)

    def __enter__(self) -> ContractClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ContractClient({self._client!r})"

    # -- helpers ---------------------------------------------------------------------------

    def _client_for(self, model_id: str) -> BaseLLMClient:
        if not isinstance(model_id, str):
            raise ContractValueError(f"model_id must be a string, got {type(model_id).__name__}.")
        if not model_id or model_id == self._client.model:
            return self._client
        with self._lock:
            if model_id in self._clients:
                return self._clients[model_id]
            if self._provider is None:
                raise ContractValueError(
                    f"This adapter's client talks to {self._client.model!r}, not {model_id!r}; "
                    "give ContractClient a provider name to use several models."
                )
            from glassagent._providers.factory import create_llm_client

            options = {**self._options, "model": model_id}
            made = self._clients[model_id] = create_llm_client(self._provider, **options)
            return made

    def _request(
        self,
        model_id: str,
        messages: list[Message],
        temperature: float | None,
        thinking_budget: int | None,
        tools: Sequence[Any] | None,
        system_prompt: str | None,
        options: Mapping[str, Any],
    ) -> Request:
        if system_prompt is not None and not isinstance(system_prompt, str):
            raise ContractValueError("system_prompt must be a string.")
        client = self._client_for(model_id)
        definitions, runnable = tool_definitions(tools)
        settings = model_settings(temperature, thinking_budget, options)
        return Request(
            client, model_id or client.model, messages, system_prompt, definitions, settings,
            {**self.tools, **runnable},
        )  # fmt: skip

    def _follow_up(self, response: ContractResponse, messages: list[Message]) -> Request:
        # Tools ran: a forced choice is "auto" now, so the model may answer (as in `Agent`).
        settings = call_settings(response.settings, acted=True)
        return Request(
            self._client_for(response.model_id), response.model_id, messages,
            response.system_prompt, list(response.tools), settings, response.runnable,
        )  # fmt: skip

    def _send(self, request: Request, aborted: Callable[[], bool]) -> ContractResponse:
        coroutine = request.client.chat(
            request.messages, request.tools, request.system_prompt, settings=request.settings
        )
        try:
            return answer(request, bridge.wait(coroutine, aborted))
        except bridge.Aborted:
            raise RunAborted("The request was aborted.", reason="user_abort") from None

    def _stream(
        self, request: Request, aborted: Callable[[], bool], follow_up: bool
    ) -> ContractStream:
        stream = ContractStream(
            request, aborted=aborted, is_follow_up=follow_up, on_end=self._streams.discard
        )
        with self._lock:
            self._streams.add(stream)
        return stream

    def _calling(
        self,
        response: ContractResponse,
        context: Mapping[str, Any] | None,
        stopped: Callable[[], bool] = lambda: False,
    ) -> Calling:
        if context is not None and not isinstance(context, Mapping):
            raise ContractValueError("context must be a dict.")
        return Calling(
            context or {}, response.runnable, response.model_id, response.settings,
            response.system_prompt, stopped,
        )  # fmt: skip

    def _run_quietly(self, calling: Calling, call: ToolCall) -> Execution:
        if calling.aborted():
            raise RunAborted("The tool calls were aborted.", reason="user_abort")
        updates: queue.SimpleQueue[dict[str, Any]] = queue.SimpleQueue()
        steps = run_call(calling, call, updates)
        try:
            while True:
                next(steps)  # progress has no one to go to here
        except StopIteration as stop:
            done: Execution = stop.value
            return done
        except bridge.Aborted:
            raise RunAborted("The tool calls were aborted.", reason="user_abort") from None

    def _round(
        self, calling: Calling, response: ContractResponse, model_id: str
    ) -> Generator[dict[str, Any], None, list[Message] | None]:
        """One round's events; returns the conversation to send next (`None`: aborted)."""
        client = self._client_for(model_id)
        for call in response.tool_calls:
            name = calling.display_name(call.name)
            yield call_start(call, name, calling.ui_info(call.name))
        yield {"type": "function_execution_start", "count": len(response.tool_calls)}
        results = []
        updates: queue.SimpleQueue[dict[str, Any]] = queue.SimpleQueue()
        for call in response.tool_calls:
            if calling.aborted():
                return None
            try:
                done = yield from run_call(calling, call, updates)
            except bridge.Aborted:
                return None
            yield {"type": "function_execution_complete", "execution": done.record}
            results.append(client.format_tool_result(call, done.result))
        return [*response.conversation(client), *results]


def _signal(abort_signal: threading.Event | None) -> Callable[[], bool]:
    if abort_signal is None:
        return lambda: False
    if not isinstance(abort_signal, threading.Event):
        raise ContractValueError("abort_signal must be a threading.Event.")
    return abort_signal.is_set


def _tool_message(part: Mapping[str, Any] | Message) -> Message:
    if isinstance(part, Message):
        return part
    if not isinstance(part, Mapping) or not isinstance(part.get("tool_call_id"), str):
        raise ContractValueError("Each function response needs a 'tool_call_id'.")
    value = part.get("result", part.get("content", ""))
    call = ToolCall(
        part["tool_call_id"], str(part.get("name") or part.get("function_name") or ""), {}
    )
    result = tool_result(call, value, is_error=bool(part.get("is_error")), duration_ms=0.0)
    return Message(
        role="tool", content=result.output, tool_call_id=call.id, name=call.name or None,
        is_error=result.is_error,
    )  # fmt: skip


def _too_many(rounds: int) -> MaxIterationsExceeded:
    return MaxIterationsExceeded(
        f"The model still asked for tools after {rounds} rounds.", max_iterations=rounds
    )
