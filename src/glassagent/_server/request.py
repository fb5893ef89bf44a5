"""`InvokeRequest`: one invoke request, read from untrusted JSON; `ServerLimits`; `InvokeError`."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from glassagent._agent.budget import Budget
from glassagent._core.attachments import AttachmentPolicy
from glassagent._core.errors import (
    GlassAgentError,
    HistoryProblem,
    HistoryValidationError,
    UserError,
)
from glassagent._core.messages import ModelSettings
from glassagent._history.model import HistoryLimits, Version
from glassagent._history.store import check_chat_id
from glassagent._history.tree import History

SERVER_HISTORY_LIMITS = HistoryLimits(
    max_messages=10_000,
    max_depth=10_000,
    max_message_bytes=1024 * 1024,
    max_total_bytes=16 * 1024 * 1024,
    max_nesting=32,
)
"""The bounds a posted history must respect by default (`ServerLimits.history`)."""


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return _is_int(value) or (isinstance(value, float) and math.isfinite(value))


@dataclass(frozen=True, kw_only=True)
class ServerLimits:
    """Bounds on what one request may ask of the server; input beyond them is refused."""

    max_body_bytes: int = 1024 * 1024
    """The largest request body, in bytes; a larger one gets 413 before it is parsed."""
    max_iterations: int = 10
    """The most model calls one request may ask for (``max_iterations``), and the default.
    A request asking for more gets this many."""
    history: HistoryLimits = SERVER_HISTORY_LIMITS
    """Bounds on a posted history (messages, depth, bytes per message); the ``message`` of
    a request is held to ``history.max_message_bytes`` too."""
    run_timeout: float | None = None
    """Seconds one run may take (`None`: no limit beyond ``max_iterations`` and the model
    calls' own timeouts)."""
    save_attempts: int = 5
    """How often a turn is saved to its stored chat. The first save is checked; when another
    request changed the chat meanwhile, the next merges the turn into the chat as it is now
    (`ChatStore.asave` with ``merge=True``), below the same node. With 1, a chat that changed
    meanwhile answers 409."""
    budget: Budget | None = None
    """What the run of one request may spend (cost, tokens, model calls; `None`: no limit).
    A run it stops ends with status ``budget_exceeded``, its turn kept like a finished one."""
    body_timeout: float = 15.0
    """Seconds a request body may take to arrive, from the end of its headers; a slower one
    gets 408 and its connection is closed."""
    body_idle_timeout: float = 5.0
    """Seconds a request body may pause between two of its pieces; a longer pause gets 408."""
    max_concurrent_requests: int = 100
    """The most requests the app handles at once, event streams included; one more gets 503
    with ``Retry-After: 1``."""
    max_connections: int = 500
    """The most open connections (and requests) `serve` and `aserve` accept (uvicorn's
    ``limit_concurrency``); a request beyond them gets uvicorn's plain 503."""
    keep_alive_timeout: float = 5.0
    """Seconds `serve` and `aserve` keep an idle connection open after an answer (uvicorn's
    ``timeout_keep_alive``)."""
    header_timeout: float = 10.0
    """Seconds a connection of `serve` or `aserve` may take to send a request's headers,
    from its opening or the end of its previous answer; then it is closed. Also bounds how
    long a client may go on sending a body the app answered without reading."""
    max_approvals: int = 100
    """The most calls one request may answer (``approvals``). The calls of a turn awaiting
    approval may be answered over several requests: those left unanswered keep waiting."""

    def __post_init__(self) -> None:
        for name in _COUNTS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UserError(f"ServerLimits.{name} must be a positive integer, not {value!r}.")
        for name in _SECONDS:
            value = getattr(self, name)
            if value is None and name == "run_timeout":
                continue
            if not _is_number(value) or not value > 0:
                raise UserError(
                    f"ServerLimits.{name} must be a positive number of seconds, not {value!r}."
                )
        if not isinstance(self.history, HistoryLimits):
            raise UserError(
                f"ServerLimits.history must be a HistoryLimits, not {type(self.history).__name__}."
            )
        if self.budget is not None and not isinstance(self.budget, Budget):
            raise UserError(
                f"ServerLimits.budget must be a Budget, not {type(self.budget).__name__}."
            )


_COUNTS = (
    "max_body_bytes",
    "max_iterations",
    "save_attempts",
    "max_concurrent_requests",
    "max_connections",
    "max_approvals",
)
_SECONDS = (
    "run_timeout",
    "body_timeout",
    "body_idle_timeout",
    "keep_alive_timeout",
    "header_timeout",
)


DEFAULT_SERVER_LIMITS = ServerLimits()


def checked_limits(limits: ServerLimits | None) -> ServerLimits:
    """`limits`, or the defaults when `None`.

    Raises:
        UserError: When `limits` is not a `ServerLimits`.
    """
    if limits is None:
        return DEFAULT_SERVER_LIMITS
    if not isinstance(limits, ServerLimits):
        raise UserError(f"`limits` must be a ServerLimits, not {type(limits).__name__}.")
    return limits


MAX_CALL_ID_CHARS = 512
"""The longest call id ``approvals`` may name (the ids providers give are far shorter)."""


class InvokeError(GlassAgentError):
    """A request the server refuses, with the HTTP status that says why.

    Attributes:
        status: The HTTP status: 400 (unknown model or tool), 401, 404, 408 (a body too
            slow to arrive), 409 (nothing awaits approval), 413 or 422.
        code: A short stable name for the refusal, e.g. ``"invalid_request"``.
        problems: Every problem found, with its location in the request (for 422).
    """

    def __init__(
        self,
        message: str,
        *,
        status: int,
        code: str,
        problems: Sequence[HistoryProblem] = (),
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.problems = tuple(problems)


_PARAMS: dict[str, Callable[[Any], bool]] = {
    "temperature": lambda v: _is_number(v),
    "max_tokens": lambda v: _is_int(v),
    "thinking_budget": lambda v: _is_int(v),
    "timeout": lambda v: _is_number(v),
    "stop_sequences": lambda v: isinstance(v, list) and all(isinstance(s, str) for s in v),
    "tool_choice": lambda v: isinstance(v, str),
    "prompt_cache": _is_bool,  # on or off: PromptCache(...) is for code only
}
_PARAM_KINDS = {
    "temperature": "a number",
    "max_tokens": "an integer",
    "thinking_budget": "an integer",
    "timeout": "a number",
    "stop_sequences": "an array of strings",
    "tool_choice": "a string",
    "prompt_cache": "true or false",
}


@dataclass(frozen=True, kw_only=True)
class InvokeRequest:
    """One invoke: a message or answers to approve calls, and where its conversation is kept.

    Build one in code, or read one from a request body with `from_json` (which validates
    everything and reads a posted history as untrusted). The JSON names differ in two places:
    ``tools_config.active_tools`` is `active_tools`, ``params`` is `settings`.
    """

    message: str = ""
    """The user's message; empty when the request gives `approvals`."""
    model_id: str | None = None
    """Which of the server's models answers; `None`: the default one."""
    history: History | None = None
    """The conversation so far; wins over `chat_id`."""
    history_version: Version = "2.0"
    """The format `history` was posted in, and is returned in."""
    chat_id: str | None = None
    """A stored chat to continue (when no `history` is given)."""
    append_to_history: bool = False
    """Append the turn to `history` (returned) or to the stored chat (saved)."""
    system_prompt: str | None = None
    """System instructions; `None`: the server's."""
    active_tools: tuple[str, ...] | None = None
    """The names of the server's tools to offer; `None`: all of them."""
    settings: ModelSettings | None = None
    """Generation settings (``params``) over the server's."""
    max_iterations: int | None = None
    """Most model calls for this turn; `None`: the server's default."""
    stream: bool = False
    """Answer with a stream of events (the HTTP app only)."""
    approvals: Mapping[str, bool | str] | None = None
    """Answers to the calls a turn of the conversation (`history` or `chat_id`) left awaiting
    approval, by call id: `True` approves, `False` declines, a string declines with that
    reason. The request then resumes that turn (`Agent.resume`) and has no `message`. On a
    durable server, the answers go to the turn `run_id`."""
    run_id: str | None = None
    """A durable server's turn (``create_app(durable=...)``): a new turn's id (default: a
    new one), or a turn to follow again or to answer `approvals` of. Refused (400) by a
    server without ``durable``."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Request fields this server does not know; they are ignored."""

    @classmethod
    def from_json(cls, body: bytes | str, limits: ServerLimits | None = None) -> InvokeRequest:
        """Parse and validate a request body.

        Args:
            body: The JSON body.
            limits: The server's limits; `ServerLimits()` when not given.

        Raises:
            InvokeError: 422, listing every problem found.
            UserError: When `body` is neither bytes nor a string.
        """
        if not isinstance(body, (bytes, bytearray, str)):
            raise UserError(
                "InvokeRequest.from_json takes the body as bytes or a string, "
                f"not {type(body).__name__}; use from_dict for parsed JSON."
            )
        try:
            data = json.loads(body)
        except RecursionError:
            raise _invalid("$", "the JSON nests too deeply to parse") from None
        except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, over-long integers
            raise _invalid("$", f"the body is not valid JSON: {exc}") from None
        return cls.from_dict(data, limits)

    @classmethod
    def from_dict(cls, data: Any, limits: ServerLimits | None = None) -> InvokeRequest:
        """Validate a parsed request body; a posted history may not read the server's files.

        The history is read with `AttachmentPolicy.safe` and ``limits.history``.

        Args:
            data: The parsed JSON.
            limits: The server's limits; `ServerLimits()` when not given.

        Raises:
            InvokeError: 422, listing every problem found (a history's with locations under
                ``history``).
        """
        limits = checked_limits(limits)
        if not isinstance(data, dict):
            raise _invalid("$", f"the body must be a JSON object, not {_kind(data)}")
        problems: list[HistoryProblem] = []
        fields = _read_fields(data, limits, problems)
        history, version = _read_history(data.get("history"), limits, problems)
        if problems:
            raise InvokeError(
                _summary(problems), status=422, code="invalid_request", problems=problems
            )
        return cls(history=history, history_version=version, **fields)


def _read_fields(
    data: dict[str, Any], limits: ServerLimits, problems: list[HistoryProblem]
) -> dict[str, Any]:
    """Every field but the history, checked; problems are added to `problems`."""

    def take(name: str, check: Callable[[Any], bool], kind: str) -> Any:
        value = data.get(name)
        if value is None:
            return None
        if not check(value):
            problems.append(HistoryProblem(name, f"must be {kind}, not {_kind(value)}"))
            return None
        return value

    approvals = data.get("approvals")
    message = None
    if approvals is None:
        message = take("message", lambda v: isinstance(v, str), "a string")
        _check_message(data, message, limits, problems)
    else:
        given = any(data.get(name) is not None for name in ("history", "chat_id", "run_id"))
        found = approvals_problems(
            approvals,
            limits,
            message_given=data.get("message") is not None,
            conversation_given=given,
        )
        problems.extend(found)
    chat_id = take("chat_id", lambda v: isinstance(v, str), "a string")
    if chat_id is not None:
        try:
            check_chat_id(chat_id)
        except UserError as exc:
            problems.append(HistoryProblem("chat_id", str(exc)))
    run_id = take("run_id", lambda v: isinstance(v, str), "a string")
    if run_id is not None:
        try:
            check_chat_id(run_id)
        except UserError as exc:
            problems.append(HistoryProblem("run_id", str(exc).replace("chat id", "run id")))
    iterations = take("max_iterations", _is_int, "an integer")
    if iterations is not None and iterations < 1:
        problems.append(HistoryProblem("max_iterations", "must be at least 1"))
    known = _KNOWN_FIELDS
    return {
        "message": message or "",
        "model_id": take("model_id", lambda v: isinstance(v, str), "a string"),
        "chat_id": chat_id,
        "append_to_history": bool(take("append_to_history", _is_bool, "true or false")),
        "system_prompt": take("system_prompt", lambda v: isinstance(v, str), "a string"),
        "active_tools": _read_tools(data.get("tools_config"), problems),
        "settings": _read_params(data.get("params"), problems),
        "max_iterations": min(iterations, limits.max_iterations) if iterations else None,
        "stream": bool(take("stream", _is_bool, "true or false")),
        "approvals": approvals if isinstance(approvals, dict) else None,
        "run_id": run_id,
        "extra": {k: v for k, v in data.items() if k not in known},
    }


def _check_message(
    data: dict[str, Any], message: Any, limits: ServerLimits, problems: list[HistoryProblem]
) -> None:
    if "message" not in data or data["message"] is None:
        problems.append(HistoryProblem("message", "is required"))
    elif message == "":
        problems.append(HistoryProblem("message", "must not be empty"))
    elif isinstance(message, str):
        size = len(message.encode("utf-8", "surrogatepass"))
        if size > limits.history.max_message_bytes:
            problems.append(
                HistoryProblem(
                    "message",
                    f"{size} bytes exceed max_message_bytes={limits.history.max_message_bytes}",
                )
            )


def approvals_problems(
    approvals: Any,
    limits: ServerLimits,
    *,
    message_given: bool,
    conversation_given: bool,
) -> list[HistoryProblem]:
    """What is wrong with a request that answers calls awaiting approval (none: empty).

    The answers must be an object of at most ``limits.max_approvals`` call ids (each not
    empty, at most `MAX_CALL_ID_CHARS` characters), each answered with a bool or a reason
    (a string within ``limits.history.max_message_bytes``); the request must name the
    conversation (``history`` or ``chat_id``) and bring no message.
    """
    problems: list[HistoryProblem] = []
    if message_given:
        problems.append(
            HistoryProblem(
                "message",
                "must not be given with `approvals`: they resume the turn that awaits them; "
                "send the message in a request of its own",
            )
        )
    if not conversation_given:
        problems.append(
            HistoryProblem(
                "approvals",
                "answer calls of a conversation: send its `chat_id` or `history` with them",
            )
        )
    if not isinstance(approvals, Mapping):
        kind = f"must be an object of call ids, not {_kind(approvals)}"
        return [*problems, HistoryProblem("approvals", kind)]
    if not approvals:
        return [*problems, HistoryProblem("approvals", "must answer at least one call")]
    if len(approvals) > limits.max_approvals:
        too_many = (
            f"{len(approvals)} answers exceed max_approvals={limits.max_approvals}; "
            "answer the other calls in a next request"
        )
        return [*problems, HistoryProblem("approvals", too_many)]
    for call_id, answer in approvals.items():
        problems.extend(_answer_problems(call_id, answer, limits))
    return problems


def _answer_problems(call_id: Any, answer: Any, limits: ServerLimits) -> list[HistoryProblem]:
    if not isinstance(call_id, str) or not call_id:
        return [
            HistoryProblem("approvals", f"a call id must be a non-empty string, not {call_id!r}")
        ]
    if len(call_id) > MAX_CALL_ID_CHARS:
        long = f"a call id of {len(call_id)} characters exceeds {MAX_CALL_ID_CHARS}"
        return [HistoryProblem("approvals", long)]
    where = f"approvals.{call_id}"
    if isinstance(answer, str):
        size = len(answer.encode("utf-8", "surrogatepass"))
        most = limits.history.max_message_bytes
        if size > most:
            return [
                HistoryProblem(where, f"the reason's {size} bytes exceed max_message_bytes={most}")
            ]
    elif not isinstance(answer, bool):
        kind = f"must be true, false or a reason (a string), not {_kind(answer)}"
        return [HistoryProblem(where, kind)]
    return []


def check_approvals(request: InvokeRequest, limits: ServerLimits) -> None:
    """Check the `approvals` of a request built in code as `InvokeRequest.from_dict` does.

    Raises:
        InvokeError: 422 ``invalid_request``, listing every problem found.
    """
    if request.approvals is None:
        return
    given = any(x is not None for x in (request.history, request.chat_id, request.run_id))
    problems = approvals_problems(
        request.approvals, limits, message_given=bool(request.message), conversation_given=given
    )
    if problems:
        raise InvokeError(_summary(problems), status=422, code="invalid_request", problems=problems)


_KNOWN_FIELDS = frozenset(
    {
        "message",
        "model_id",
        "history",
        "chat_id",
        "append_to_history",
        "system_prompt",
        "tools_config",
        "params",
        "max_iterations",
        "stream",
        "approvals",
        "run_id",
    }
)


def _read_tools(value: Any, problems: list[HistoryProblem]) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        problems.append(HistoryProblem("tools_config", f"must be an object, not {_kind(value)}"))
        return None
    names = value.get("active_tools")
    if names is None:
        return None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        problems.append(
            HistoryProblem("tools_config.active_tools", "must be an array of tool names")
        )
        return None
    return tuple(dict.fromkeys(names))


def _read_params(value: Any, problems: list[HistoryProblem]) -> ModelSettings | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        problems.append(HistoryProblem("params", f"must be an object, not {_kind(value)}"))
        return None
    settings: dict[str, Any] = {}
    found = len(problems)
    for name, given in value.items():
        check = _PARAMS.get(name)
        if check is None:
            known = ", ".join(_PARAMS)
            problems.append(HistoryProblem(f"params.{name}", f"unknown parameter (use {known})"))
        elif given is not None and not check(given):
            kind = f"must be {_PARAM_KINDS[name]}, not {_kind(given)}"
            problems.append(HistoryProblem(f"params.{name}", kind))
        elif given is not None:
            settings[name] = tuple(given) if name == "stop_sequences" else given
    if len(problems) > found:
        return None
    try:
        return ModelSettings(**settings)
    except UserError as exc:
        problems.append(HistoryProblem("params", str(exc)))
        return None


def _read_history(
    value: Any, limits: ServerLimits, problems: list[HistoryProblem]
) -> tuple[History | None, Version]:
    if value is None:
        return None, "2.0"
    version: Version = "2.0" if isinstance(value, dict) and "schema_version" in value else "1"
    try:
        history = History.from_dict(
            value, limits=limits.history, attachment_policy=AttachmentPolicy.safe()
        )
    except HistoryValidationError as exc:
        for problem in exc.problems:
            where = problem.location
            location = "history" if where == "$" else f"history.{where}"
            problems.append(HistoryProblem(location, problem.message))
        return None, version
    return history, version


def _summary(problems: Sequence[HistoryProblem]) -> str:
    shown = "; ".join(str(p) for p in problems[:5])
    more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
    count = "1 problem" if len(problems) == 1 else f"{len(problems)} problems"
    return f"Invalid request ({count}): {shown}{more}"


def _invalid(location: str, message: str) -> InvokeError:
    problem = HistoryProblem(location, message)
    return InvokeError(_summary([problem]), status=422, code="invalid_request", problems=[problem])


def _kind(value: Any) -> str:
    """The JSON name of a value's type."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object" if isinstance(value, dict) else type(value).__name__
