"""`run_sync` and `await run` on one client, against a real keep-alive server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import threading

from glassagent import Agent
from glassagent.llm import Message, OllamaClient, OpenAICompatibleClient
from tests.support.loopback_server import LoopbackServer, Reply, openai_reply


def answering(text: str) -> LoopbackServer:
    return LoopbackServer(openai_reply(text))


def test_repeated_run_sync_reuses_one_kept_alive_connection() -> None:
    with answering("hi") as server:
        agent = Agent(OpenAICompatibleClient("m", base_url=server.url + "/v1", api_key=""))
        answers = [agent.run_sync(f"question {n}").text for n in range(5)]
        assert answers == ["hi"] * 5
        assert len(server.requests) == 5
        assert server.connections == 1  # one pool, one loop, one connection
        asyncio.run(agent.client.aclose())  # closes the pool of the sync loop, from another
        assert agent.run_sync("after closing").text == "hi"
        assert server.connections == 2
        asyncio.run(agent.client.aclose())


def test_run_sync_then_await_run_then_aclose() -> None:
    with answering("hi") as server:
        client = OpenAICompatibleClient("m", base_url=server.url + "/v1", api_key="")
        agent = Agent(client)
        assert agent.run_sync("one").text == "hi"

        async def later() -> list[str]:
            texts = [(await agent.run("two")).text]
            texts.append(agent.run_sync("three inside a running loop").text)
            texts.append((await agent.run("four")).text)
            await client.aclose()
            return texts

        assert asyncio.run(later()) == ["hi", "hi", "hi"]
        assert len(server.requests) == 4


def test_asyncio_run_twice_on_one_client() -> None:
    """Scripts call asyncio.run more than once with one client: each loop gets its own pool."""
    with answering("hi") as server:
        client = OpenAICompatibleClient("m", base_url=server.url + "/v1", api_key="")

        async def ask() -> str:
            response = await client.chat([Message(role="user", content="hello")])
            return response.text

        assert [asyncio.run(ask()) for _ in range(3)] == ["hi"] * 3
        asyncio.run(client.aclose())


def test_run_sync_from_several_threads_at_once() -> None:
    with answering("hi") as server:
        agent = Agent(OpenAICompatibleClient("m", base_url=server.url + "/v1", api_key=""))
        answers: list[str] = []

        def ask() -> None:
            answers.append(agent.run_sync("hello").text)

        threads = [threading.Thread(target=ask) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert answers == ["hi"] * 4
        asyncio.run(agent.client.aclose())


def test_ollama_client_survives_repeated_run_sync() -> None:
    import json

    body = (
        json.dumps({"message": {"role": "assistant", "content": "hi"}, "done": False})
        + "\n"
        + json.dumps({"message": {"role": "assistant", "content": ""}, "done": True})
        + "\n"
    ).encode()
    with LoopbackServer(lambda request: Reply.body(body)) as server:
        agent = Agent(OllamaClient("m", base_url=server.url, tool_protocol="native"))
        assert [agent.run_sync("hello").text for _ in range(3)] == ["hi"] * 3
        assert server.connections == 1
        asyncio.run(agent.client.aclose())


def test_a_client_dropped_without_aclose_closes_its_connections() -> None:
    """No reference cycle keeps a dropped client's pool (and socket) alive until a GC run."""
    import gc
    import time

    gc.disable()
    try:
        with answering("hi") as server:
            for _ in range(3):
                client = OpenAICompatibleClient("m", base_url=server.url + "/v1", api_key="")
                assert Agent(client).run_sync("hello").text == "hi"
                del client
            deadline = time.monotonic() + 10
            while server.closed < 3 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert server.connections == 3
            assert server.closed == 3
    finally:
        gc.enable()


def test_run_sync_works_in_a_forked_child() -> None:
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        """
        import os
        from glassagent import Agent
        from glassagent.testing import ScriptedClient

        agent = Agent(ScriptedClient(["parent", "child"]))
        assert agent.run_sync("hi").text == "parent"
        pid = os.fork()
        if pid == 0:
            os._exit(0 if agent.run_sync("hi").text == "child" else 1)
        _, status = os.waitpid(pid, 0)
        raise SystemExit(os.waitstatus_to_exitcode(status))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], timeout=60, capture_output=True)
    assert done.returncode == 0, done.stderr.decode()
