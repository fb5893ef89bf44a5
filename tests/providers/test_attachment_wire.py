"""Remote attachments on each provider's wire, and downloads from a real loopback server."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from glassagent import Agent
from glassagent.errors import AttachmentError, ConfigurationError
from glassagent.llm import (
    Attachment,
    AttachmentPolicy,
    BaseLLMClient,
    GeminiClient,
    LlamaClient,
    Message,
    OllamaClient,
    OpenAICompatibleClient,
)

CAT = "https://example.com/cat.png"
PDF = "https://example.com/report.pdf"
PNG = b"\x89PNG\r\n\x1a\n downloaded"
KEY = "sk-test-0123456789abcdefXYZ"
GEMINI_KEY = "AIzaSyD3adB33fTestKey0000000000x9Qk"
DOWNLOADS = AttachmentPolicy(download=True, allow_private_hosts=True)


# ---- a real file server on 127.0.0.1 ---------------------------------------------------

Route = Callable[[BaseHTTPRequestHandler], None]


@dataclass
class FileServer:
    """Serves routes on loopback and records every request (path and headers)."""

    server: ThreadingHTTPServer
    routes: dict[str, Route] = field(default_factory=dict)
    seen: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def serve(self, path: str, body: bytes, mime: str = "image/png", length: bool = True) -> str:
        def send(handler: BaseHTTPRequestHandler) -> None:
            handler.send_response(200)
            handler.send_header("Content-Type", mime)
            if length:
                handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            handler.wfile.write(body)

        self.routes[path] = send
        return self.url(path)

    def redirect(self, path: str, location: str) -> str:
        def send(handler: BaseHTTPRequestHandler) -> None:
            handler.send_response(302)
            handler.send_header("Location", location)
            handler.send_header("Content-Length", "0")
            handler.end_headers()

        self.routes[path] = send
        return self.url(path)

    def stall(self, path: str) -> str:
        def send(handler: BaseHTTPRequestHandler) -> None:
            self.release.wait(10)  # until the test ends

        self.routes[path] = send
        return self.url(path)


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        files: FileServer = self.server.files  # type: ignore[attr-defined]
        files.seen.append((self.path, dict(self.headers)))
        route = files.routes.get(self.path)
        if route is None:
            self.send_error(404)
        else:
            route(self)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def files() -> Iterator[FileServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    files = FileServer(server)
    server.files = files  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    yield files
    files.release.set()
    server.shutdown()
    server.server_close()
    thread.join(10)


# ---- clients whose requests are captured -------------------------------------------------


@dataclass
class Capture:
    bodies: list[dict[str, Any]] = field(default_factory=list)

    def http(self, answer: dict[str, Any]) -> httpx.AsyncClient:
        def handler(request: httpx.Request) -> httpx.Response:
            self.bodies.append(json.loads(request.content))
            return httpx.Response(200, json=answer)

        return httpx.AsyncClient(transport=httpx.MockTransport(handler))


OPENAI_ANSWER = {"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]}
OLLAMA_ANSWER = {"model": "m", "message": {"role": "assistant", "content": "ok"}, "done": True}
GEMINI_ANSWER = {
    "candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]}, "index": 0}],
}


def openai(capture: Capture, policy: AttachmentPolicy | None = None) -> OpenAICompatibleClient:
    return OpenAICompatibleClient(
        "m",
        base_url="http://127.0.0.1:9/v1",
        api_key=KEY,
        http_client=capture.http(OPENAI_ANSWER),
        attachment_policy=policy,
    )


def ollama(capture: Capture, policy: AttachmentPolicy | None = None) -> OllamaClient:
    return OllamaClient(
        base_url="http://127.0.0.1:9",
        http_client=capture.http(OLLAMA_ANSWER),
        tool_protocol="native",
        attachment_policy=policy,
    )


def gemini(capture: Capture, policy: AttachmentPolicy | None = None) -> GeminiClient:
    return GeminiClient(
        api_key=GEMINI_KEY, http_client=capture.http(GEMINI_ANSWER), attachment_policy=policy
    )


def asking(*attachments: Attachment) -> list[Message]:
    return [Message(role="user", content="Look.", attachments=attachments)]


# ---- passing URLs on ---------------------------------------------------------------------


async def test_openai_compatible_sends_a_remote_image_as_its_url() -> None:
    capture = Capture()
    await openai(capture, AttachmentPolicy.safe()).chat(asking(Attachment.from_url(CAT)))
    assert capture.bodies[0]["messages"][0]["content"] == [
        {"type": "text", "text": "Look."},
        {"type": "image_url", "image_url": {"url": CAT}},
    ]


async def test_gemini_sends_a_remote_file_as_file_data() -> None:
    capture = Capture()
    client = gemini(capture, AttachmentPolicy.safe())
    await client.chat(asking(Attachment.from_url(CAT), Attachment.from_url(PDF)))
    assert capture.bodies[0]["contents"][0]["parts"] == [
        {"text": "Look."},
        {"fileData": {"file_uri": CAT, "mime_type": "image/png"}},
        {"fileData": {"file_uri": PDF, "mime_type": "application/pdf"}},
    ]
    await client.aclose()


@pytest.mark.parametrize(
    ("make", "url", "provider"),
    [
        (ollama, CAT, "ollama"),
        (openai, PDF, "openai_compatible"),
        (gemini, CAT, "gemini"),
    ],
)
async def test_urls_a_wire_cannot_take_are_refused_naming_the_provider(
    make: Callable[..., BaseLLMClient], url: str, provider: str
) -> None:
    capture = Capture()
    policy = AttachmentPolicy(remote=provider != "gemini")  # Gemini: URLs turned off
    with pytest.raises(AttachmentError, match="download") as info:
        await make(capture, policy).chat(asking(Attachment.from_url(url)))
    assert info.value.provider == provider
    assert provider in str(info.value) or "passes no URLs" in str(info.value)
    assert capture.bodies == []


async def test_a_refusal_ends_an_agent_run_with_the_typed_error() -> None:
    capture = Capture()
    client = ollama(capture)
    client.model = "llava:7b"  # a vision model (llama3.1:8b's profile refuses images first)
    run = Agent(client).run("Describe it.", attachments=[Attachment.from_url(CAT)])
    with pytest.raises(AttachmentError, match=r"'cat.png' \(image/png\).*ollama cannot take it"):
        await run
    assert capture.bodies == []


# ---- the client's own check of local files -------------------------------------------------


@pytest.mark.parametrize("make", [openai, ollama, gemini])
async def test_a_client_reads_no_file_its_policy_forbids(
    make: Callable[..., BaseLLMClient], tmp_path: Path
) -> None:
    root = tmp_path / "uploads"
    root.mkdir()
    (root / "ok.png").write_bytes(b"\x89PNG ok")
    secret = tmp_path / "secret.png"
    secret.write_bytes(b"\x89PNG secret")
    (root / "link.png").symlink_to(secret)
    capture = Capture()
    client = make(capture, AttachmentPolicy(local_roots=[root]))
    for path in (secret, root / ".." / "secret.png", root / "link.png"):
        with pytest.raises(AttachmentError, match="outside"):
            await client.chat(asking(Attachment.from_path(path)))
    with pytest.raises(AttachmentError, match="no local files"):
        await make(capture, AttachmentPolicy.safe()).chat(asking(Attachment.from_path(secret)))
    assert capture.bodies == []
    await client.chat(asking(Attachment.from_path(root / "ok.png")))
    assert base64.b64encode(b"\x89PNG ok").decode() in json.dumps(capture.bodies)


def test_a_client_policy_must_be_a_policy() -> None:
    with pytest.raises(ConfigurationError, match="AttachmentPolicy"):
        OllamaClient(attachment_policy="safe")  # type: ignore[arg-type]
    assert LlamaClient(attachment_policy=AttachmentPolicy.safe()).tool_protocol == "json"


# ---- downloads ---------------------------------------------------------------------------


async def test_ollama_downloads_and_inlines_when_the_policy_allows(files: FileServer) -> None:
    url = files.serve("/cat", PNG)  # no extension: the server's Content-Type decides
    capture = Capture()
    client = ollama(capture, DOWNLOADS)
    messages = asking(Attachment.from_url(url))
    await client.chat(messages)
    await client.chat(messages)  # the same conversation again: downloaded once
    assert [m["images"] for m in (b["messages"][0] for b in capture.bodies)] == [
        [base64.b64encode(PNG).decode()]
    ] * 2
    assert [path for path, _ in files.seen] == ["/cat"]
    assert not any("authorization" in (k.lower() for k in h) for _, h in files.seen)


async def test_openai_compatible_downloads_what_it_cannot_take_by_url(files: FileServer) -> None:
    pdf = files.serve("/report.pdf", b"%PDF-1.7", mime="application/pdf", length=False)
    note = files.serve("/note.txt", b"hello", mime="text/plain; charset=utf-8")
    image = Attachment.from_url(CAT)
    capture = Capture()
    client = openai(capture, DOWNLOADS)
    await client.chat(asking(image, Attachment.from_url(pdf), Attachment.from_url(note)))
    parts = capture.bodies[0]["messages"][0]["content"]
    assert parts[1:] == [
        {"type": "image_url", "image_url": {"url": CAT}},  # still passed on by URL
        {
            "type": "file",
            "file": {"filename": "report.pdf", "file_data": "data:application/pdf;base64,"
                     + base64.b64encode(b"%PDF-1.7").decode()},
        },
        {"type": "text", "text": "[note.txt]\nhello"},
    ]  # fmt: skip
    assert all(KEY not in str(headers) for _, headers in files.seen)


async def test_without_pass_through_every_url_is_downloaded(files: FileServer) -> None:
    url = files.serve("/cat.png", PNG)
    capture = Capture()
    policy = AttachmentPolicy(remote=False, download=True, allow_private_hosts=True)
    client = gemini(capture, policy)
    await client.chat(asking(Attachment.from_url(url)))
    part = capture.bodies[0]["contents"][0]["parts"][1]
    assert part["inlineData"]["mime_type"] == "image/png"
    assert base64.urlsafe_b64decode(part["inlineData"]["data"]) == PNG
    await client.aclose()


async def test_downloads_reach_no_private_address_unless_allowed(files: FileServer) -> None:
    url = files.serve("/cat.png", PNG)
    capture = Capture()
    for target in (url, url.replace("127.0.0.1", "localhost")):
        with pytest.raises(AttachmentError, match="non-public address"):
            await ollama(capture, AttachmentPolicy(download=True)).chat(
                asking(Attachment.from_url(target))
            )
    assert files.seen == []
    assert capture.bodies == []


async def test_redirects_are_followed_and_checked(files: FileServer) -> None:
    final = files.serve("/final.png", PNG)
    capture = Capture()
    client = ollama(capture, DOWNLOADS)
    await client.chat(asking(Attachment.from_url(files.redirect("/moved.png", "/final.png"))))
    assert capture.bodies[0]["messages"][0]["images"] == [base64.b64encode(PNG).decode()]
    for location in ("file:///etc/passwd", "gopher://127.0.0.1/x"):
        url = files.redirect("/sneaky.png", location)
        with pytest.raises(AttachmentError, match="http: and https: only"):
            await client.chat(asking(Attachment.from_url(url)))
    loop = files.redirect("/loop.png", "/loop.png")
    with pytest.raises(AttachmentError, match="redirected more than 5 times"):
        await client.chat(asking(Attachment.from_url(loop)))
    assert final.endswith("/final.png")


async def test_downloads_are_bounded_in_size_time_and_status(files: FileServer) -> None:
    small = AttachmentPolicy(
        download=True, allow_private_hosts=True, max_download_bytes=1000, download_timeout=0.5
    )
    client = ollama(Capture(), small)
    big = files.serve("/big.png", b"x" * 5000)
    chunked = files.serve("/chunked.png", b"x" * 5000, length=False)
    for url in (big, chunked):
        with pytest.raises(AttachmentError, match="max_download_bytes=1000"):
            await client.chat(asking(Attachment.from_url(url)))
    with pytest.raises(AttachmentError, match=r"took longer than 0\.5 s"):
        await client.chat(asking(Attachment.from_url(files.stall("/slow.png"))))
    with pytest.raises(AttachmentError, match="HTTP 404"):
        await client.chat(asking(Attachment.from_url(files.url("/missing.png"))))
    unreachable = "http://127.0.0.1:9/closed-port.png"
    with pytest.raises(AttachmentError, match="Could not download"):
        await client.chat(asking(Attachment.from_url(unreachable)))
