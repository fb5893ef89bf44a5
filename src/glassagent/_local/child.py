"""The child process that runs the embedded llama.cpp server (``python -m`` this module).

It takes one JSON argument (model path, port, context size, threads, chat template, alias,
log path),
starts xllamacpp's server on 127.0.0.1 and then blocks until its standard input closes: the
parent closes it to stop the server, and the OS closes it when the parent dies, so the server
never outlives the process that started it. The parent may also terminate it at any time.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from typing import Any


def main(argv: list[str]) -> int:
    """Start the server described by ``argv[1]`` (JSON) and serve until stdin closes."""
    config: dict[str, Any] = json.loads(argv[1])
    import xllamacpp  # type: ignore[import-not-found,import-untyped,unused-ignore]

    params = xllamacpp.CommonParams()
    params.model.path = config["model_path"]
    params.model_alias = config["alias"]
    params.n_ctx = config["context_size"]
    params.hostnames = ["127.0.0.1"]
    params.port = config["port"]
    if config["threads"]:
        params.cpuparams.n_threads = config["threads"]
        params.cpuparams_batch.n_threads = config["threads"]
    if config["chat_template"]:
        params.chat_template = config["chat_template"]
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
    sys.exit(main(sys.argv))
