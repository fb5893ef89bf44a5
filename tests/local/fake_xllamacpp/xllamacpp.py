"""A stand-in for the `xllamacpp` package, put first on the child's PYTHONPATH by tests.

`Server(params)` serves ``/health`` and a canned ``/v1/chat/completions`` (a JSON body, or
SSE when the request asks for a stream) on 127.0.0.1 from a background thread, like the
real one, and like it answers 401 without one of ``params.api_keys`` (``/health`` stays
open). It logs the settings it got (never the key). The model file's name picks a
behaviour: ``crash`` fails to start, ``unhealthy`` never becomes healthy, ``slow`` reports
llama.cpp timings of a 13-second call.
"""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace


class CommonParams:
    # only names the real CommonParams has, so a misspelt setting fails here too
    __slots__ = (
        "api_keys",
        "chat_template",
        "cors_credentials",
        "cors_origins",
        "cpuparams",
        "cpuparams_batch",
        "endpoint_slots",
        "hostnames",
        "model",
        "model_alias",
        "n_ctx",
        "port",
        "ui",
    )

    def __init__(self) -> None:  # the real defaults
        self.model = SimpleNamespace(path="")
        self.cpuparams = SimpleNamespace(n_threads=-1)
        self.cpuparams_batch = SimpleNamespace(n_threads=-1)
        self.model_alias: set[str] = set()
        self.n_ctx = 0
        self.hostnames = ["127.0.0.1"]
        self.port = 0
        self.chat_template = ""
        self.api_keys: list[str] = []
        self.ui = True
        self.endpoint_slots = True
        self.cors_origins = "*"
        self.cors_credentials = True


def _describe(params: CommonParams) -> str:
    return (
        f"fake server: template={len(params.chat_template)} chars "
        f"threads={params.cpuparams.n_threads}/{params.cpuparams_batch.n_threads} "
        f"keys={len(params.api_keys)} key_chars={sorted({len(k) for k in params.api_keys})} "
        f"ui={params.ui} slots={params.endpoint_slots} cors_origins={params.cors_origins} "
        f"cors_credentials={params.cors_credentials}"
    )


def _handler(params: CommonParams) -> type[BaseHTTPRequestHandler]:
    name = Path(params.model.path).name
    healthy = "unhealthy" not in name
    timings = {"prompt_ms": 4000.0, "predicted_ms": 9000.0} if "slow" in name else {}
    (alias,) = params.model_alias
    keys = [f"Bearer {key}" for key in params.api_keys]

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def reply(self, status: int, body: object) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if healthy:
                self.reply(200, {"status": "ok"})
            else:
                self.reply(503, {"error": {"message": "Loading model"}})

        def do_POST(self) -> None:
            length = int(self.headers["Content-Length"])
            request = json.loads(self.rfile.read(length))
            if keys and self.headers.get("Authorization") not in keys:
                self.reply(401, {"error": {"message": "Invalid API Key", "code": 401}})
                return
            text = f"{alias} saw {request['model']}"
            if request.get("stream"):
                self.stream(text)
                return
            message = {"role": "assistant", "content": text}
            choice = {"index": 0, "message": message, "finish_reason": "stop"}
            self.reply(200, {"choices": [choice], "model": alias, "timings": timings})

        def stream(self, text: str) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            half = len(text) // 2
            chunks = [
                {"choices": [{"index": 0, "delta": {"content": part}}]}
                for part in (text[:half], text[half:])
            ]
            chunks.append(
                {
                    "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                    "timings": timings,
                }
            )
            for chunk in chunks:
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")

    return Handler


class Server:
    def __init__(self, params: CommonParams) -> None:
        if "crash" in Path(params.model.path).name:
            raise RuntimeError("Failed to init server, please check the input params.")
        print(_describe(params), flush=True)
        self._http = ThreadingHTTPServer((params.hostnames[0], params.port), _handler(params))
        self.listening_address = f"http://{params.hostnames[0]}:{params.port}"
        threading.Thread(target=self._http.serve_forever, daemon=True).start()
