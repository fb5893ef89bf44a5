"""No surprise traffic: what glassagent does without being asked opens no network socket.

Each check runs in a fresh interpreter with an audit hook (`sys.addaudithook`) installed before
anything else, which records every socket created, connected, bound or looked up: the lowest
level there is, below asyncio, httpx and every SDK.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from tests.support.cli import ScriptedModel, call, say

ROOT = Path(__file__).resolve().parents[2]

AUDIT = """
import json, socket, sys

SEEN = []

def _audit(event, args):
    if event == "socket.__new__":
        SEEN.append(["new", int(args[1])])
    elif event in ("socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg"):
        SEEN.append([event, repr(args[1])])
    elif event in ("socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyname_ex",
                   "socket.gethostbyaddr", "socket.getnameinfo"):
        SEEN.append([event, repr(args[0])])

sys.addaudithook(_audit)


def mark(label):
    SEEN.append(["mark", label])
"""


def audited(body: str, *args: str) -> list[list[Any]]:
    """Run `body` under the audit hook in a fresh interpreter; what it saw, with marks."""
    script = AUDIT + textwrap.dedent(body) + "\nprint('AUDIT ' + json.dumps(SEEN))\n"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith("AUDIT "))
    seen: list[list[Any]] = json.loads(line.removeprefix("AUDIT "))
    return seen


def test_import_clients_agents_and_a_full_scripted_run_open_no_network_socket() -> None:
    seen = audited(
        """
        import glassagent
        from glassagent import Agent, LLMResponse, ToolCall
        from glassagent.events import load_events, save_events
        from glassagent.testing import ReplayClient, ScriptedClient
        mark("imported")

        from glassagent.llm import (
            AnthropicClient, GeminiClient, LlamaClient, OllamaClient, OpenAICompatibleClient,
        )
        def add(a: int, b: int) -> int:
            "Add."
            return a + b
        clients = [
            OpenAICompatibleClient("gpt-4o-mini", api_key="sk-not-used"),
            OpenAICompatibleClient("m", base_url="http://model.example:8080/v1"),
            AnthropicClient("claude-sonnet-4-5", api_key="not-used"),
            GeminiClient("gemini-2.5-flash", api_key="not-used"),
            OllamaClient("llama3.1:8b"),
            LlamaClient("qwen"),
        ]
        agents = [Agent(client, [add], system="s") for client in clients]
        mark("built")

        import asyncio, tempfile, os
        script = lambda: ScriptedClient([
            LLMResponse(tool_calls=[ToolCall("c1", "add", {"a": 1, "b": 2})], thinking="t"),
            "3",
        ], model="gpt-4o-mini")
        result = Agent(script(), [add]).run_sync("1 + 2?")
        path = os.path.join(tempfile.mkdtemp(), "run.jsonl")
        result.save_events(path)
        async def main():
            again = await Agent(script(), [add]).run("1 + 2?")
            replay = ReplayClient.from_events(path)
            replay.check(await Agent(replay, [add]).run("1 + 2?"))
            again._repr_html_()
            return again
        assert asyncio.run(main()).text == "3"
        mark("ran")
        """
    )
    marks = [entry[1] for entry in seen if entry[0] == "mark"]
    assert marks == ["imported", "built", "ran"]
    before_run = seen[: seen.index(["mark", "built"])]
    assert before_run == [["mark", "imported"]]  # not one socket, of any kind
    network = [e for e in seen if e[0] != "mark" and e != ["new", int(socket.AF_UNIX)]]
    assert network == []  # the runs: only asyncio's own AF_UNIX wake-up pairs, no network


def test_import_glassagent_does_not_import_ipython_or_httpx_heavy_parts() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, glassagent, glassagent.events, glassagent.testing; "
            "print(sorted(m for m in ('IPython', 'nbformat', 'google.genai') if m in sys.modules))",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        check=True,
    )
    assert done.stdout.strip() == "[]"


def test_a_real_client_talks_only_to_its_configured_base_url() -> None:
    server = ScriptedModel(call(("add", {"a": 1, "b": 2})), say("3"))
    with server:
        host, port = server.url.removeprefix("http://").split(":")
        seen = audited(
            """
            import asyncio
            from glassagent import Agent
            from glassagent.llm import OpenAICompatibleClient

            def add(a: int, b: int) -> int:
                "Add."
                return a + b

            async def main():
                url = sys.argv[1]
                async with OpenAICompatibleClient("gpt-4o-mini", base_url=url) as client:
                    return await Agent(client, [add]).run("1 + 2?")

            assert asyncio.run(main()).text == "3"
            """,
            f"{server.url}/v1",
        )
    assert len(server.bodies) == 2
    connects = [e[1] for e in seen if e[0] == "socket.connect"]
    assert connects, seen
    assert set(connects) == {repr((host, int(port)))}
    lookups = {e[1] for e in seen if e[0].startswith("socket.get")}
    assert lookups <= {repr(host)}
    assert not [e for e in seen if e[0] in ("socket.bind", "socket.sendto", "socket.sendmsg")]
