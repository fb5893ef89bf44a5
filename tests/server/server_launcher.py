"""Serve the invoke API against an OpenAI-compatible server: ``python server_launcher.py URL``.

What the ``glassagent serve`` command does, for the tests that run the server as a real
process: an `OpenAICompatibleClient` on the given base URL, `create_app` and `serve` on
127.0.0.1 and a free port (uvicorn logs which). Runs until it is terminated.
"""

from __future__ import annotations

import sys

from glassagent.llm import OpenAICompatibleClient
from glassagent.server import create_app, serve


def main() -> None:
    base_url, store = sys.argv[1], sys.argv[2]
    client = OpenAICompatibleClient("loopback-model", base_url=base_url, api_key="")
    serve(create_app(model=client, store=store), host="127.0.0.1", port=0, log_level="info")


if __name__ == "__main__":
    main()
