"""The provider contract: what every HTTP provider client does, checked against a real server.

A provider joins by one `ProviderCase`: how to make its client for a base URL and a key, and
how its documented wire writes an answer, as a body and as a stream of events. A test class
then subclasses `ContractSuite` and lists its cases::

    class TestMyProvider(ContractSuite):
        cases = (MY_PROVIDER,)

Every check runs for ``chat`` and for ``stream`` against `WireServer`, a real HTTP/1.1 server
on 127.0.0.1 in the test's own event loop: a text answer; streamed deltas, then exactly one
`LLMResponse`; one tool call with parsed arguments; the finish reasons, mapped and kept raw; a
retry after 429 and 503 that waits as ``Retry-After`` asks (with a `RetryNotice` in the
stream); the call's deadline and its stall timeout against a server that stops sending;
malformed bodies and events; an error event mid-stream; 401; and the key kept out of every
error, its causes and their attributes, tracebacks, ``repr(client)`` and recorded wire bodies.

A case may opt out of a test whose behaviour its provider documents differently, or list a
test its client fails today as a known bug (an expected failure, strict: it fails once fixed).

This file imports only public glassagent names, pytest and the standard library, so a
provider kept elsewhere can load it by path or copy it (examples/provider_plugin loads it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, ClassVar, Literal

import pytest

from glassagent.errors import (
    AuthenticationError,
    GlassAgentError,
    ProviderError,
    ProviderTimeoutError,
    ResponseParseError,
)
from glassagent.llm import (
    BaseLLMClient,
    LLMResponse,
    Message,
    ModelSettings,
    RetryNotice,
    RetryPolicy,
    StopReason,
    StreamPart,
    TextDelta,
    ToolDefinition,
)

KEY = "sk-contract-0123456789-SECRET-KEY"
"""The key every client of the suite is made with; no error or record may show it."""
FAST_RETRY = RetryPolicy(max_retries=2, initial_delay=0.001, jitter=False)
"""Each client's retry policy: waits of a millisecond, unless ``Retry-After`` says otherwise."""
NO_RETRY = RetryPolicy(max_retries=0)
SECONDS = 0.1
"""The deadline and the stall timeout of the cases whose server stops sending."""
WEATHER = ToolDefinition(
    name="get_weather",
    description="The weather of a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"],
    },
)

Side = Literal["chat", "stream"]
Event = tuple["str | None", Any]
"""One stream event: its SSE name (`None`: no ``event:`` line, or an NDJSON line) and its
data, a JSON value, or a `str` sent as it is (OpenAI's ``[DONE]``, a malformed event)."""


@dataclass(frozen=True)
class Call:
    """A tool call to encode."""

    id: str
    name: str
    arguments: dict[str, Any]


CALL = Call("call_7Qx", "get_weather", {"city": "Paris", "days": 2})


@dataclass(frozen=True)
class Answer:
    """An answer to encode: its text as streamed deltas, tool calls and the wire's reason."""

    deltas: tuple[str, ...] = ()
    calls: tuple[Call, ...] = ()
    finish: str = ""
    """The finish reason as the provider's wire writes it (``"stop"``, ``"end_turn"``...)."""

    @property
    def text(self) -> str:
        """The whole text."""
        return "".join(self.deltas)


@dataclass(frozen=True)
class ProviderCase:
    """How one provider joins the contract suite.

    Args:
        name: The test id.
        make: ``make(base_url, api_key, *, retry, record_wire)``: the client, talking to the
            server whose root is ``base_url`` (``http://127.0.0.1:port``, no path).
        path: The path the client posts to, e.g. ``"/v1/chat/completions"``.
        stream_path: The path a streamed call posts to, when the wire tells a streamed call
            by its path (Gemini's ``:streamGenerateContent?alt=sse``) rather than by a
            ``"stream"`` field in the body. With a query, the query must match too.
        body: The JSON body of a non-streamed `Answer`.
        events: The events of a streamed `Answer`: more than two before the answer is whole
            (the suite cuts a stream after its second event).
        finish_reasons: The wire's reason for ``end_turn``, ``max_tokens`` and ``tool_use``.
        framing: ``"sse"`` (server-sent events) or ``"ndjson"`` (JSON lines).
        error_body: The JSON body of an error status, carrying `message`.
        status_error_body: For a wire whose error bodies name their status too (Gemini's
            ``code`` and ``status``): ``status_error_body(status, message)``, used instead
            of `error_body`.
        error_event: A stream event that reports `message` as an error mid-stream.
        malformed_bodies: Bodies of a wrong shape for this wire (the suite adds bodies that
            are not JSON objects).
        malformed_events: Events of a wrong shape (the suite adds ones that are not JSON).
        call_ids: Whether the wire carries tool-call ids (Ollama's does not).
        opt_outs: The suite's tests this case does not take, each with the reason (the
            provider's documented behaviour differs); reported as skipped. A key is a
            test's name, or a name and a side (``"test_text_answer[stream]"``).
        known_bugs: The suite's tests this case's client fails today, each with the defect,
            keyed as `opt_outs`; they are expected to fail (strictly: once the client is
            fixed the test fails, until its entry goes).
    """

    name: str
    make: Callable[..., BaseLLMClient]
    path: str
    body: Callable[[Answer], Any]
    events: Callable[[Answer], list[Event]]
    finish_reasons: Mapping[StopReason, str]
    stream_path: str | None = None
    framing: Literal["sse", "ndjson"] = "sse"
    error_body: Callable[[str], Any] = lambda message: {"error": {"message": message}}
    status_error_body: Callable[[int, str], Any] | None = None
    error_event: Callable[[str], Event] | None = None
    malformed_bodies: Sequence[Any] = ()
    malformed_events: Sequence[Event] = ()
    call_ids: bool = True
    opt_outs: Mapping[str, str] = field(default_factory=dict)
    known_bugs: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for key, reason in [*self.opt_outs.items(), *self.known_bugs.items()]:
            test, _, side = key.removesuffix("]").partition("[")
            unknown = f"{self.name}: {key!r} names no test of the suite"
            assert test.startswith("test_"), unknown
            assert hasattr(ContractSuite, test), unknown
            assert side in ("", "chat", "stream"), f"{self.name}: {key!r} names no side"
            assert reason.strip(), f"{self.name}: {key!r} comes without a reason"

    def marks(self, test: str, side: Side | None) -> list[pytest.MarkDecorator]:
        """The marks of `test` (on `side`) for this case: a skip, an expected failure, none."""
        for key in (test, f"{test}[{side}]"):
            if key in self.opt_outs:
                return [pytest.mark.skip(reason=f"{self.name} opts out: {self.opt_outs[key]}")]
            if key in self.known_bugs:
                reason = f"{self.name}: a known bug: {self.known_bugs[key]}"
                failed = (AssertionError, pytest.fail.Exception)
                return [pytest.mark.xfail(strict=True, raises=failed, reason=reason)]
        return []

    def client(self, server: WireServer, **options: Any) -> BaseLLMClient:
        """A client of this provider for `server` (fast retries unless `options` say)."""
        options.setdefault("retry", FAST_RETRY)
        return self.make(server.url, KEY, **options)

    def answer(self, answer: Answer, *, streamed: bool) -> Reply:
        """The reply that carries `answer`, as a body or as a stream."""
        if streamed:
            return self.stream(self.events(answer))
        return Reply(body=[json.dumps(self.body(answer)).encode()])

    def stream(self, events: Sequence[Event], *, hang: bool = False) -> Reply:
        """A streamed reply of `events`, one network piece each; `hang`: then nothing more."""
        kind = "application/x-ndjson" if self.framing == "ndjson" else "text/event-stream"
        return Reply(body=[self.frame(e) for e in events], content_type=kind, hang=hang)

    def frame(self, event: Event) -> bytes:
        """One event as its framing writes it."""
        name, data = event
        text = data if isinstance(data, str) else json.dumps(data)
        if self.framing == "ndjson":
            return text.encode() + b"\n"
        return (f"event: {name}\n" if name else "").encode() + f"data: {text}\n\n".encode()

    def error(self, status: int, message: str, **headers: str) -> Reply:
        """An error status whose body carries `message` (``Retry_After=`` is ``Retry-After``)."""
        named = {name.replace("_", "-"): value for name, value in headers.items()}
        if self.status_error_body is not None:
            body = self.status_error_body(status, message)
        else:
            body = self.error_body(message)
        return Reply(status, named, [json.dumps(body).encode()])

    def posted_to(self, request: Request, *, streamed: bool) -> None:
        """Check that `request` went where this wire sends a call, streamed or not."""
        path = self.stream_path if streamed and self.stream_path else self.path
        sent = request.path if "?" in path else request.path.split("?")[0]
        assert (request.method, sent) == ("POST", path), (request.method, request.path)
        if self.stream_path is None:
            assert bool(request.json().get("stream")) is streamed, "the body says streamed"


# ---- the server -------------------------------------------------------------------------------


@dataclass
class Request:
    """One request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        """The body, parsed."""
        return json.loads(self.body)


@dataclass
class Reply:
    """What the server sends: a status, headers, the body in pieces (chunked encoding).

    ``silent`` sends nothing at all; ``hang`` sends the head and the pieces, then nothing
    more (the body never ends). Either waits until the server is closed.
    """

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: list[bytes] = field(default_factory=list)
    content_type: str = "application/json"
    hang: bool = False
    silent: bool = False


class WireServer:
    """A real HTTP/1.1 server on 127.0.0.1, run in the test's event loop, answering a script.

    Request ``n`` gets ``replies[n]`` (the last reply once they run out). Use it as
    ``async with WireServer(reply) as server:``; on exit every connection is closed.
    """

    def __init__(self, *replies: Reply) -> None:
        self.replies = replies
        self.requests: list[Request] = []
        self.url = ""
        self._listener: socket.socket | None = None
        self._closing = asyncio.Event()
        self._connections: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    async def __aenter__(self) -> WireServer:
        self._listener = listener = socket.create_server(("127.0.0.1", 0))
        listener.setblocking(False)
        self.url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        asyncio.get_running_loop().add_reader(listener.fileno(), self._accept, listener)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._listener is not None
        asyncio.get_running_loop().remove_reader(self._listener.fileno())
        self._listener.close()
        self._closing.set()  # replies that hang end, and idle connections are closed:
        for writer in self._writers:
            writer.close()
        await asyncio.gather(*self._connections, return_exceptions=True)  # every socket shut

    def _accept(self, listener: socket.socket) -> None:
        """Take a connection and start serving it at once (no accepted socket goes astray)."""
        try:
            connection, _ = listener.accept()
        except BlockingIOError:
            return
        serving = asyncio.get_running_loop().create_task(self._serve(connection))
        self._connections.add(serving)

    async def _serve(self, connection: socket.socket) -> None:
        reader, writer = await asyncio.open_connection(sock=connection)
        self._writers.add(writer)
        try:
            while not self._closing.is_set() and (request := await _read_request(reader)):
                self.requests.append(request)
                reply = self.replies[min(len(self.requests), len(self.replies)) - 1]
                if not await self._send(writer, reply):
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _send(self, writer: asyncio.StreamWriter, reply: Reply) -> bool:
        """Send `reply`; whether the connection can take another request."""
        if reply.silent:
            await self._closing.wait()
            return False
        lines = [
            f"HTTP/1.1 {reply.status} {HTTPStatus(reply.status).phrase}",
            f"Content-Type: {reply.content_type}",
            "Transfer-Encoding: chunked",
            *(f"{name}: {value}" for name, value in reply.headers.items()),
        ]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        for piece in reply.body:
            if piece:
                writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                await writer.drain()
        if reply.hang:
            await self._closing.wait()
            return False
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True


async def _read_request(reader: asyncio.StreamReader) -> Request | None:
    """The next request on a connection, or `None` once the client closed it."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    first, *lines = head.decode("latin-1").split("\r\n")
    method, path, _ = first.split(" ", 2)
    headers = {}
    for line in lines:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return Request(method, path, headers, body)


# ---- calls and checks -------------------------------------------------------------------------


async def ask(
    client: BaseLLMClient,
    streamed: bool,
    *,
    tools: Sequence[ToolDefinition] = (),
    settings: ModelSettings | None = None,
) -> tuple[LLMResponse, list[StreamPart]]:
    """One call by `chat` or by `stream`: the answer, and every part streamed (with it)."""
    messages = [Message(role="user", content="What is the weather in Paris?")]
    if not streamed:
        return await client.chat(messages, tools, settings=settings), []
    parts = [part async for part in client.stream(messages, tools, settings=settings)]
    answers = [part for part in parts if isinstance(part, LLMResponse)]
    assert len(answers) == 1, f"a stream ends with exactly one LLMResponse: {parts!r}"
    assert parts[-1] is answers[0], "the LLMResponse comes last"
    return answers[0], parts


async def failure(
    client: BaseLLMClient,
    streamed: bool,
    settings: ModelSettings | None = None,
    *,
    served: object = None,
) -> GlassAgentError:
    """The error a call raises (it must raise one of glassagent's); `served`: what for."""
    try:
        await ask(client, streamed, settings=settings)
    except GlassAgentError as error:
        return error
    pytest.fail(f"{type(client).__name__} raised no error for {served!r}")


async def _refuses_bodies(case: ProviderCase, bodies: Sequence[bytes]) -> None:
    """Each body, answering a call, is a `ResponseParseError`, not retried."""
    for body in bodies:
        async with WireServer(Reply(body=[body])) as server, case.client(server) as client:
            error = await failure(client, False, served=body)
        assert isinstance(error, ResponseParseError), (body, error)
        assert len(server.requests) == 1, "a malformed body is not retried"


async def _refuses_events(case: ProviderCase, bad: Sequence[Event]) -> None:
    """Each event, in a stream after its first event, is a `ResponseParseError`."""
    answer = Answer(("Sunny", " in ", "Paris."), finish=case.finish_reasons["end_turn"])
    events = case.events(answer)
    for event in bad:
        stream = case.stream([events[0], event, *events[1:]])
        async with WireServer(stream) as server, case.client(server) as client:
            error = await failure(client, True, ModelSettings(retry=NO_RETRY), served=event)
        assert isinstance(error, ResponseParseError), (event, error)


def chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and every exception chained to it (causes and contexts)."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        current = todo.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        todo += [current.__cause__, current.__context__]


def assert_no_key(exc: BaseException) -> None:
    """The key appears in no text of `exc` or of the exceptions chained to it, in none of
    their attributes, and not in the traceback an application would print or log."""
    for link in chain(exc):
        texts = [str(link), repr(link), repr(link.args), str(getattr(link, "body", ""))]
        texts.append(repr(vars(link)))
        for text in texts:
            assert KEY not in text, f"the key leaked in {type(link).__name__}: {text[:300]}"
    printed = "".join(traceback.format_exception(exc))
    assert KEY not in printed, "the key leaked in the traceback"


_NOT_OBJECTS: list[bytes] = [b"{not json", b"[1, 2]", b'"text"', b"null", b"42"]
_NOT_JSON_EVENTS: list[Event] = [(None, '{"unterminated'), (None, "[1, 2]"), (None, '"text"')]


class ContractSuite:
    """The contract every HTTP provider client keeps; subclass it and set `cases`."""

    cases: ClassVar[Sequence[ProviderCase]] = ()

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        """Run every test once per case, and per side (``chat``, ``stream``) when it takes
        ``streamed`` (pytest calls this for each test of the class)."""
        if "case" not in metafunc.fixturenames:
            return
        test = metafunc.function.__name__
        sides: list[Side | None] = [None]
        if "streamed" in metafunc.fixturenames:
            sides = ["chat", "stream"]
        params = [
            pytest.param(
                *((case,) if side is None else (case, side == "stream")),
                id=case.name if side is None else f"{case.name}-{side}",
                marks=case.marks(test, side),
            )
            for case in self.cases
            for side in sides
        ]
        metafunc.parametrize(["case"] if sides == [None] else ["case", "streamed"], params)

    async def test_text_answer(self, case: ProviderCase, streamed: bool) -> None:
        answer = Answer(("Sunny", " in ", "Paris."), finish=case.finish_reasons["end_turn"])
        async with (
            WireServer(case.answer(answer, streamed=streamed)) as server,
            case.client(server) as client,
        ):
            response, _ = await ask(client, streamed)
        assert (response.text, response.tool_calls) == ("Sunny in Paris.", ())
        assert response.stop_reason == "end_turn"
        (request,) = server.requests
        case.posted_to(request, streamed=streamed)
        assert any(KEY in value for value in request.headers.values()), "the key is sent"

    async def test_stream_yields_deltas_then_one_response(self, case: ProviderCase) -> None:
        answer = Answer(("It ", "is ", "sunny", "."), finish=case.finish_reasons["end_turn"])
        async with (
            WireServer(case.answer(answer, streamed=True)) as server,
            case.client(server) as client,
        ):
            response, parts = await ask(client, True)
        texts = [part.text for part in parts if isinstance(part, TextDelta)]
        assert texts == ["It ", "is ", "sunny", "."]
        assert all(isinstance(p, TextDelta) for p in parts[:-1]), parts
        assert response.text == "It is sunny."

    async def test_one_tool_call_with_parsed_arguments(
        self, case: ProviderCase, streamed: bool
    ) -> None:
        answer = Answer(calls=(CALL,), finish=case.finish_reasons["tool_use"])
        async with (
            WireServer(case.answer(answer, streamed=streamed)) as server,
            case.client(server) as client,
        ):
            response, _ = await ask(client, streamed, tools=[WEATHER])
        (call,) = response.tool_calls
        assert (call.name, call.input, call.arguments_error) == (CALL.name, CALL.arguments, None)
        if case.call_ids:
            assert call.id == CALL.id
        assert response.stop_reason == "tool_use"

    @pytest.mark.parametrize("stop", ["end_turn", "max_tokens", "tool_use"])
    async def test_finish_reasons_are_mapped(
        self, case: ProviderCase, streamed: bool, stop: StopReason
    ) -> None:
        finish = case.finish_reasons[stop]
        calls = (CALL,) if stop == "tool_use" else ()
        answer = Answer(("Sunny",), calls, finish=finish)
        async with (
            WireServer(case.answer(answer, streamed=streamed)) as server,
            case.client(server) as client,
        ):
            response, _ = await ask(client, streamed, tools=[WEATHER])
        assert (response.stop_reason, response.raw_stop_reason) == (stop, finish)

    @pytest.mark.parametrize("status", [429, 503])
    async def test_retries_after_the_wait_the_server_asks_for(
        self, case: ProviderCase, streamed: bool, status: int
    ) -> None:
        answer = Answer(("Sunny.",), finish=case.finish_reasons["end_turn"])
        busy = case.error(status, "busy, come back later", Retry_After="0.02")
        async with (
            WireServer(busy, case.answer(answer, streamed=streamed)) as server,
            case.client(server) as client,
        ):
            started = time.monotonic()
            response, parts = await ask(client, streamed)
            waited = time.monotonic() - started
        assert response.text == "Sunny."
        assert len(server.requests) == 2
        assert waited >= 0.02, "the client waited as long as Retry-After asked"
        if streamed:
            notice = parts[0]
            assert isinstance(notice, RetryNotice), parts
            assert (notice.attempt, notice.status) == (1, status)
            assert notice.delay == 0.02, "the wait Retry-After asks for, not the backoff"
            assert all(not isinstance(p, RetryNotice) for p in parts[1:])

    async def test_the_deadline_ends_a_call_whose_server_stops(
        self, case: ProviderCase, streamed: bool
    ) -> None:
        answer = Answer(("Sunny", " in ", "Paris."), finish=case.finish_reasons["end_turn"])
        stalls = case.stream(case.events(answer)[:1], hang=True) if streamed else Reply(silent=True)
        settings = ModelSettings(timeout=SECONDS)
        async with WireServer(stalls) as server, case.client(server) as client:
            started = time.monotonic()
            error = await failure(client, streamed, settings)
        assert isinstance(error, ProviderTimeoutError), error
        assert (error.kind, time.monotonic() - started < 2.0) == ("deadline", True)
        assert_no_key(error)

    async def test_the_stall_timeout_ends_a_call_whose_server_stops(
        self, case: ProviderCase, streamed: bool
    ) -> None:
        answer = Answer(("Sunny", " in ", "Paris."), finish=case.finish_reasons["end_turn"])
        stalls = case.stream(case.events(answer)[:1], hang=True) if streamed else Reply(silent=True)
        settings = ModelSettings(stall_timeout=SECONDS, retry=NO_RETRY)
        async with WireServer(stalls) as server, case.client(server) as client:
            started = time.monotonic()
            error = await failure(client, streamed, settings)
        assert isinstance(error, ProviderTimeoutError), error
        assert (error.kind, time.monotonic() - started < 2.0) == ("stall", True)
        assert_no_key(error)

    async def test_bodies_that_are_no_json_object_raise_response_parse_error(
        self, case: ProviderCase
    ) -> None:
        await _refuses_bodies(case, _NOT_OBJECTS)

    async def test_malformed_bodies_raise_response_parse_error(self, case: ProviderCase) -> None:
        await _refuses_bodies(case, [json.dumps(body).encode() for body in case.malformed_bodies])

    async def test_events_that_are_no_json_object_raise_response_parse_error(
        self, case: ProviderCase
    ) -> None:
        await _refuses_events(case, _NOT_JSON_EVENTS)

    async def test_malformed_events_raise_response_parse_error(self, case: ProviderCase) -> None:
        await _refuses_events(case, case.malformed_events)

    async def test_a_stream_cut_short_raises_response_parse_error(self, case: ProviderCase) -> None:
        answer = Answer(("Sunny", " in ", "Paris."), finish=case.finish_reasons["end_turn"])
        events = case.events(answer)
        assert len(events) > 3, "the case's stream must be longer to be cut"
        async with WireServer(case.stream(events[:2])) as server, case.client(server) as client:
            error = await failure(client, True, ModelSettings(retry=NO_RETRY))
        assert isinstance(error, ResponseParseError), error

    async def test_an_error_event_mid_stream_is_a_provider_error(self, case: ProviderCase) -> None:
        if case.error_event is None:
            pytest.skip(f"{case.name}'s wire has no error event")
        answer = Answer(("Sunny", " in ", "Paris."), finish=case.finish_reasons["end_turn"])
        first = case.events(answer)[:1]
        stream = case.stream([*first, case.error_event("the context window is full")])
        async with WireServer(stream) as server, case.client(server) as client:
            error = await failure(client, True, ModelSettings(retry=NO_RETRY))
        assert isinstance(error, ProviderError), error
        assert not isinstance(error, ResponseParseError), "an error event is no malformed one"
        assert "the context window is full" in str(error), "the server's message is shown"

    async def test_401_is_an_authentication_error_without_the_key(
        self, case: ProviderCase, streamed: bool
    ) -> None:
        rejected = case.error(401, f"Incorrect API key provided: {KEY}.")
        async with WireServer(rejected) as server, case.client(server) as client:
            error = await failure(client, streamed)
        assert isinstance(error, AuthenticationError), error
        assert (error.status, error.provider) == (401, client.provider_name)
        assert "Incorrect API key provided" in str(error), "the server's message is shown"
        assert len(server.requests) == 1, "a rejected key is not retried"
        assert_no_key(error)

    async def test_the_key_stays_out_of_errors_the_server_reports(
        self, case: ProviderCase, streamed: bool
    ) -> None:
        echoes = [("upstream said:", case.error(500, f"upstream said: {KEY}"))]  # a status
        if streamed and case.error_event is not None:
            echoes.append(("failed for", case.stream([case.error_event(f"failed for {KEY}")])))
        for message, echo in echoes:
            async with WireServer(echo) as server, case.client(server) as client:
                assert KEY not in repr(client)
                error = await failure(client, streamed, ModelSettings(retry=NO_RETRY))
            assert isinstance(error, ProviderError), error
            assert message in str(error), "the server's message is shown, the key masked"
            assert_no_key(error)

    async def test_the_key_stays_out_of_errors_on_unreadable_answers(
        self, case: ProviderCase, streamed: bool
    ) -> None:
        if streamed:
            echo = case.stream([(None, "{" + KEY)])  # an event that is not JSON
        else:
            echo = Reply(body=[json.dumps([KEY]).encode()])  # a body of the wrong shape
        async with WireServer(echo) as server, case.client(server) as client:
            error = await failure(client, streamed, ModelSettings(retry=NO_RETRY))
        assert isinstance(error, ResponseParseError), error
        assert_no_key(error)

    async def test_the_key_stays_out_of_recorded_bodies(
        self, case: ProviderCase, streamed: bool
    ) -> None:
        answer = Answer(("Your key is ", KEY, "."), finish=case.finish_reasons["end_turn"])
        async with (
            WireServer(case.answer(answer, streamed=streamed)) as server,
            case.client(server, record_wire=True) as client,
        ):
            assert KEY not in repr(client)
            response, _ = await ask(client, streamed, settings=ModelSettings(retry=NO_RETRY))
        assert KEY in response.text
        assert response.wire is not None
        recorded = json.dumps([response.wire.request, response.wire.response])
        assert "Your key is " in recorded
        assert KEY not in recorded
