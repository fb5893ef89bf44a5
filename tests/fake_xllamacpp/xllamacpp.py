"""A stand-in for the `xllamacpp` package, put first on the child's PYTHONPATH by tests.

`Server(params)` serves ``/health`` and a canned ``/v1/chat/completions`` on 127.0.0.1 from a
background thread, like the real one. The model file's name picks a behaviour: ``crash``
fails to start, ``unhealthy`` never becomes healthy.
"""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace


class CommonParams:
    def __init__(self) -> None:
        self.model = SimpleNamespace(path="")
        self.cpuparams = SimpleNamespace(n_threads=-1)
        self.cpuparams_batch = SimpleNamespace(n_threads=-1)
        self.model_alias = ""
        self.n_ctx = 0
        self.hostnames = ["127.0.0.1"]
        self.port = 0
        self.chat_template = ""


class Server:
    def __init__(self, params: CommonParams) -> None:
        name = Path(params.model.path).name
        if "crash" in name:
            raise RuntimeError("Failed to init server, please check the input params.")
        print(f"fake server: template={len(params.chat_template)} chars", flush=True)
        healthy = "unhealthy" not in name
        alias = params.model_alias

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
                text = f"{alias} saw {request['model']}"
                if self.headers.get("Authorization"):
                    text += " (with a key)"
                message = {"role": "assistant", "content": text}
                choice = {"index": 0, "message": message, "finish_reason": "stop"}
                self.reply(200, {"choices": [choice], "model": alias})

        self._http = ThreadingHTTPServer((params.hostnames[0], params.port), Handler)
        self.listening_address = f"http://{params.hostnames[0]}:{params.port}"
        threading.Thread(target=self._http.serve_forever, daemon=True).start()
