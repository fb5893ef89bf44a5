"""A Hugging Face endpoint on 127.0.0.1, for ``HF_ENDPOINT``: it serves files the way the hub does.

``HEAD`` and ``GET`` of ``/{repo}/resolve/{revision}/{file}`` answer with the headers
huggingface_hub's downloads need: ``X-Repo-Commit`` (the revision), ``ETag`` (the SHA-256
of the bytes, as the hub gives for large files) and ``Content-Length``. No Xet headers, so
the download is a plain HTTP GET. Anything else is a 404 the hub's way.
"""

from __future__ import annotations

import hashlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType


class FakeHub:
    """Serves `files` (``"{repo}/{file}"`` -> bytes) at `revision`; records the requests."""

    def __init__(self, files: dict[str, bytes], *, revision: str) -> None:
        self.files = files
        self.revision = revision
        self.requests: list[tuple[str, str]] = []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_HEAD(self) -> None:
                hub.answer(self, body=False)

            def do_GET(self) -> None:
                hub.answer(self, body=True)

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._http.server_address[1]}"
        self._thread = threading.Thread(
            target=self._http.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )

    def answer(self, handler: BaseHTTPRequestHandler, *, body: bool) -> None:
        """Answer one request like the hub's ``resolve`` route."""
        self.requests.append((handler.command, handler.path))
        repo, _, rest = handler.path.lstrip("/").partition("/resolve/")
        revision, _, name = rest.partition("/")
        data = self.files.get(f"{repo}/{name}")
        if data is None or revision != self.revision:
            handler.send_response(404)
            handler.send_header("X-Error-Code", "EntryNotFound")
            handler.send_header("Content-Length", "0")
            handler.end_headers()
            return
        handler.send_response(200)
        handler.send_header("Content-Type", "application/octet-stream")
        handler.send_header("Content-Length", str(len(data)))
        handler.send_header("ETag", f'"{hashlib.sha256(data).hexdigest()}"')
        handler.send_header("X-Repo-Commit", self.revision)
        handler.end_headers()
        if body:
            handler.wfile.write(data)

    def __enter__(self) -> FakeHub:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._thread.join(5)
