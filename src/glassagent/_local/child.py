"""The child process that runs the embedded llama.cpp server (``python -m`` this module).

It reads its configuration as one line of JSON from standard input (model path, port, context
size, threads, chat template, alias, API key, log path): the key never appears in the process
list, as command-line arguments would. It then starts xllamacpp's server on 127.0.0.1 and
blocks until its standard input closes: the parent closes it to stop the server, and the OS
closes it when the parent dies, so the server never outlives the process that started it. The
parent may also terminate it at any time.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from typing import Any

HOST = "127.0.0.1"


def configure(params: Any, config: dict[str, Any]) -> Any:
    """Fill xllamacpp's ``CommonParams`` from `config` and return it.

    Besides the model settings: requests need the API key (``/health`` and ``/v1/models``
    stay open, as llama.cpp keeps them), no web UI and no ``/slots`` endpoint are served,
    and CORS allows only the server's own origin, without credentials, instead of
    echoing every origin.
    """
    params.model.path = config["model_path"]
    # recent xllamacpp versions hold the aliases in a set, older ones in a string
    alias = config["alias"]
    params.model_alias = {alias} if isinstance(params.model_alias, set) else alias
    params.n_ctx = config["context_size"]
    params.hostnames = [HOST]
    params.port = config["port"]
    params.cpuparams.n_threads = config["threads"]
    params.cpuparams_batch.n_threads = config["threads"]
    if config["chat_template"]:
        params.chat_template = config["chat_template"]
    params.api_keys = [config["api_key"]]
    params.ui = False
    params.endpoint_slots = False
    params.cors_origins = f"http://{HOST}:{config['port']}"
    params.cors_credentials = False
    return params


def main() -> int:
    """Start the server described by the first line of stdin and serve until stdin closes."""
    config: dict[str, Any] = json.loads(sys.stdin.buffer.readline())
    import xllamacpp  # type: ignore[import-not-found,import-untyped,unused-ignore]

    params = configure(xllamacpp.CommonParams(), config)
    try:
        server = xllamacpp.Server(params)
    except RuntimeError as exc:  # the reason is in llama.cpp's log lines above
        print(f"glassagent: the llama.cpp server failed to start: {exc}", flush=True)
        return 1
    print(f"glassagent: llama.cpp server listening on {server.listening_address}", flush=True)
    sys.stdin.buffer.read()  # returns at EOF: the parent stopped us or died
    with contextlib.suppress(OSError):
        os.unlink(config["log_path"])  # a parent that died cannot remove it
    os._exit(0)  # skip interpreter teardown; the OS releases the port and the memory


if __name__ == "__main__":
    sys.exit(main())
