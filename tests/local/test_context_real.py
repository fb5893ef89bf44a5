"""The embedded server counts tokens with the model's tokenizer (``pytest -m real_model``)."""

from collections.abc import Iterator

import httpx
import pytest

from glassagent import Agent, ModelSettings
from glassagent.context import FitWindow
from glassagent.events import ContextCompactedEvent
from glassagent.history import History
from glassagent.local import LocalServer, ensure_default_model

pytestmark = pytest.mark.real_model


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    ensure_default_model()
    with LocalServer(context_size=1024) as running:
        yield running


async def test_count_tokens_asks_the_servers_tokenizer(server: LocalServer) -> None:
    texts = ["Hello, world!", "", "def add(a, b):\n    return a + b\n" * 5]
    async with server.client() as client:
        assert client.tokenizer == "llama.cpp /tokenize"
        counts = await client.count_tokens(texts)
    root = server.base_url.removesuffix("/v1")
    headers = {"Authorization": f"Bearer {server.api_key}"}
    async with httpx.AsyncClient(trust_env=False) as http:
        expected = [
            len((await http.post(f"{root}/tokenize", json={"content": t}, headers=headers))
                .json()["tokens"])
            for t in texts
        ]  # fmt: skip
    assert counts == expected
    assert counts[0] > 1
    assert counts[1] == 0
    assert counts[2] > counts[0]


async def test_a_policy_measures_with_the_servers_tokenizer(server: LocalServer) -> None:
    async with server.client() as client:
        policy = FitWindow(window=100, reserve=20)
        agent = Agent(client, settings=ModelSettings(temperature=0, max_tokens=24),
                      context_policy=policy)  # fmt: skip
        history = History()
        events: list[ContextCompactedEvent] = []
        for n in range(6):
            result = await agent.run(f"Say the number {n} in words.", history=history,
                                     append_to_history=True)  # fmt: skip
            events += [e for e in result.events if isinstance(e, ContextCompactedEvent)]
    assert events
    assert all(e.tokenizer == "llama.cpp /tokenize" and e.tokens_after <= 80 for e in events)


async def test_a_stopped_server_counts_nothing() -> None:
    ensure_default_model()
    with LocalServer(context_size=512) as running:
        client = running.client()
    assert await client.count_tokens(["Hello"]) is None
