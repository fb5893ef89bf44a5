"""A real HTTP/1.1 keep-alive server on 127.0.0.1, in a thread, answering from a script.

Tests start it with ``with LoopbackServer(handler) as server:`` and stop it on exit. Each
request is answered by ``handler(request) -> Reply``; a reply can be sent in timed pieces
(``Reply(chunks=[(delay, bytes), ...])``) to play slow, dribbling or stalled servers.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MAX_REQUESTS = 500
"""A test server refuses (closes) connections after this many requests: bounded by design."""
POLL_SECONDS = 0.01
"""How often the serving thread looks for `shutdown`: the wait of every stop."""


@dataclass
class Request:
    """One request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    connection: int

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Reply:
    """What the server sends: a status, headers and the body in (delay, bytes) pieces."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    chunks: Iterable[tuple[float, bytes]] = ()
    close: bool = False  # drop the connection after this reply
    content_length: int | None = None  # claim another length (a body cut short)

    @classmethod
    def body(cls, data: bytes, status: int = 200, **headers: str) -> Reply:
        return cls(status, {k.replace("_", "-"): v for k, v in headers.items()}, [(0.0, data)])


def sse(*payloads: Any) -> bytes:
    """An SSE body of JSON payloads, ended by ``[DONE]``."""
    events = [f"data: {json.dumps(p)}\n\n".encode() for p in payloads]
    return b"".join(events) + b"data: [DONE]\n\n"


def openai_answer(text: str) -> bytes:
    """A streamed chat-completions answer with `text` and a stop reason."""
    return sse(
        {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    )


def openai_reply(text: str) -> Callable[[Request], Reply]:
    """A handler answering `text`: streamed when the request asks for a stream."""

    def handle(request: Request) -> Reply:
        if request.json().get("stream"):
            return Reply.body(openai_answer(text))
        body = {"choices": [{"message": {"content": text}, "finish_reason": "stop"}]}
        return Reply.body(json.dumps(body).encode(), Content_Type="application/json")

    return handle


async def read_request(reader: Any) -> bytes:
    """Read one HTTP/1.1 request with a Content-Length body from an asyncio stream."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    body: bytes = await reader.readexactly(length)
    return body


class LoopbackServer:
    """The server; `requests` lists what arrived, `connections` how many were opened."""

    def __init__(self, handler: Callable[[Request], Reply]) -> None:
        self.handler = handler
        self.requests: list[Request] = []
        self.connections = 0
        self.closed = 0  # connections the client closed (or that ended)
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> LoopbackServer:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                with owner._lock:
                    owner.connections += 1
                    self.connection_number = owner.connections

            def finish(self) -> None:
                super().finish()
                with owner._lock:
                    owner.closed += 1

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self._answer()

            def do_GET(self) -> None:
                self._answer()

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                request = Request(
                    self.command,
                    self.path,
                    {k.lower(): v for k, v in self.headers.items()},
                    self.rfile.read(length),
                    self.connection_number,
                )
                with owner._lock:
                    owner.requests.append(request)
                    too_many = len(owner.requests) > MAX_REQUESTS
                if too_many:
                    self.close_connection = True
                    return
                reply = owner.handler(request)
                chunks = list(reply.chunks)
                self.send_response(reply.status)
                headers = {"Content-Type": "text/event-stream", **reply.headers}
                for name, value in headers.items():
                    self.send_header(name, value)
                length = reply.content_length
                if length is None:
                    length = sum(len(c) for _, c in chunks)
                self.send_header("Content-Length", str(length))
                self.end_headers()
                try:
                    for delay, data in chunks:
                        if delay:
                            time.sleep(delay)
                        self.wfile.write(data)
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True
                    return
                if reply.close or reply.content_length is not None:
                    self.close_connection = True

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        # a short poll: `shutdown` waits for the serving loop's next look (0.5 s by default)
        serve = {"poll_interval": POLL_SECONDS}
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs=serve, daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        assert self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)
