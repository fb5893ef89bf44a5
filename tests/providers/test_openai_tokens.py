"""Token counts of OpenAI's models by tiktoken (`OpenAICompatibleClient.count_tokens`).

tiktoken's encodings are downloaded on first use and there is no network here, so each test
builds a real `tiktoken.Encoding` (bytes and a few merges) and replaces only the loader
(`tiktoken.get_encoding`, the network edge) with one that returns it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
import respx
import tiktoken

from glassagent import Agent
from glassagent._providers import tiktoken_count
from glassagent.context import FitWindow
from glassagent.events import ContextCompactedEvent
from glassagent.history import History
from glassagent.llm import AzureOpenAIClient, OpenAICompatibleClient, create_llm_client

KEY = "sk-test-0123456789abcdefXYZ"
OPENAI_URL = "https://api.openai.com/v1/chat/completions"
PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
ASKED = "hello " * 20  # "hello", 19 times " hello" (2 tokens each), " ": 40 tokens
MERGES = (b"he", b"ll", b"llo", b"hello", b" w", b"or", b" wor", b"ld", b" world")


class BytesEncoding(tiktoken.Encoding):
    """A real byte-level encoding with a few merges; it notes the threads that encode."""

    def __init__(self) -> None:
        ranks = {bytes([i]): i for i in range(256)}
        for merge in MERGES:
            ranks[merge] = len(ranks)
        super().__init__(
            name="test_bytes", pat_str=PATTERN, mergeable_ranks=ranks, special_tokens={}
        )
        self.threads: set[int] = set()

    def encode_ordinary(self, text: str) -> list[int]:
        self.threads.add(threading.get_ident())
        return super().encode_ordinary(text)


class Loader:
    """Stands in for `tiktoken.get_encoding`: records the names asked for."""

    def __init__(self, answer: Callable[[str], tiktoken.Encoding]) -> None:
        self.answer = answer
        self.asked: list[str] = []

    def __call__(self, name: str) -> tiktoken.Encoding:
        self.asked.append(name)
        return self.answer(name)


@pytest.fixture(autouse=True)
def fresh_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test loads its encodings anew (the loads are kept per process)."""
    monkeypatch.setattr(tiktoken_count, "_loads", {})


@pytest.fixture
def encoding() -> BytesEncoding:
    return BytesEncoding()


@pytest.fixture
def loader(monkeypatch: pytest.MonkeyPatch, encoding: BytesEncoding) -> Loader:
    loader = Loader(lambda name: encoding)
    monkeypatch.setattr(tiktoken, "get_encoding", loader)
    return loader


def failing_loader(monkeypatch: pytest.MonkeyPatch) -> Loader:
    def no_network(name: str) -> tiktoken.Encoding:
        raise OSError(f"cannot download {name}.tiktoken: no network")

    loader = Loader(no_network)
    monkeypatch.setattr(tiktoken, "get_encoding", loader)
    return loader


def openai(model: str = "gpt-4o-mini") -> OpenAICompatibleClient:
    return OpenAICompatibleClient(model, api_key=KEY)


async def test_openai_models_are_counted_exactly_by_their_encoding(loader: Loader) -> None:
    client = openai()
    assert client.provider_name == "openai"
    assert client.tokenizer == "tiktoken o200k_base"
    texts = ["hello world", "hello, hello!", "héllo", "", "<|endoftext|>"]
    # "hello" and " world" are one token each; " hello" is " " + "hello"; é is two bytes;
    # a special token's text is ordinary text (13 bytes, 3 pieces, no merges)
    assert await client.count_tokens(texts) == [2, 5, 4, 0, 13]
    assert await client.count_tokens(["hello world"]) == [2]
    assert loader.asked == ["o200k_base"]  # loaded once for both counts


async def test_the_encoding_follows_the_model_and_defaults_to_o200k(loader: Loader) -> None:
    assert openai("gpt-4").tokenizer == "tiktoken cl100k_base"
    assert openai("gpt-4o-2024-08-06").tokenizer == "tiktoken o200k_base"
    assert openai("a-model-of-next-year").tokenizer == "tiktoken o200k_base"
    assert await openai("gpt-4").count_tokens(["hello"]) == [1]
    assert await openai("a-model-of-next-year").count_tokens(["hello"]) == [1]
    assert loader.asked == ["cl100k_base", "o200k_base"]


async def test_azure_deployments_count_too(loader: Loader) -> None:
    endpoint = "https://my-resource.openai.azure.com"
    named = AzureOpenAIClient("gpt-4", endpoint=endpoint, api_key=KEY)
    assert named.tokenizer == "tiktoken cl100k_base"
    deployment = AzureOpenAIClient("support-bot-prod", endpoint=endpoint, api_key=KEY)
    assert deployment.tokenizer == "tiktoken o200k_base"
    assert await deployment.count_tokens(["hello world"]) == [2]


async def test_other_compatible_servers_count_nothing(loader: Loader) -> None:
    local = OpenAICompatibleClient("llama-3.2-3b", base_url="http://127.0.0.1:8080/v1")
    made = create_llm_client("openai_compatible", base_url="http://127.0.0.1:11434/v1", model="x")
    ollama = create_llm_client("ollama", model="llama3.2")
    for client in (local, made, ollama):
        assert client.tokenizer is None
        assert await client.count_tokens(["hello world"]) is None
    assert loader.asked == []


async def test_a_failed_load_gives_none_once_and_is_not_retried(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    loader = failing_loader(monkeypatch)
    client = openai()
    assert client.tokenizer == "tiktoken o200k_base"  # not known yet to fail
    with caplog.at_level(logging.DEBUG, logger="glassagent"):
        assert await client.count_tokens(["hello"]) is None
        assert await client.count_tokens(["hello"]) is None
        assert await openai("gpt-4.1").count_tokens(["hello"]) is None  # also o200k_base
    assert loader.asked == ["o200k_base"]
    assert client.tokenizer is None  # the agent estimates from now on
    assert openai("gpt-4").tokenizer == "tiktoken cl100k_base"  # another encoding may load
    logged = [r for r in caplog.records if r.name == "glassagent"]
    assert len(logged) == 1
    assert logged[0].levelno == logging.DEBUG
    assert "o200k_base" in logged[0].getMessage()
    assert "no network" in logged[0].getMessage()


async def test_a_slow_load_is_waited_for_once_and_used_when_done(
    monkeypatch: pytest.MonkeyPatch, encoding: BytesEncoding
) -> None:
    release = threading.Event()

    def slow(name: str) -> tiktoken.Encoding:
        release.wait(10)
        return encoding

    monkeypatch.setattr(tiktoken, "get_encoding", Loader(slow))
    monkeypatch.setattr(tiktoken_count, "LOAD_SECONDS", 0.05)
    client = openai()
    try:
        loop = asyncio.get_running_loop()
        started = loop.time()
        assert await client.count_tokens(["hello"]) is None  # waited LOAD_SECONDS
        waited = loop.time() - started
        assert 0.04 <= waited < 1
        started = loop.time()
        assert await client.count_tokens(["hello"]) is None  # does not wait again
        assert loop.time() - started < 0.04
    finally:
        release.set()
    load = tiktoken_count._loads["o200k_base"]
    await asyncio.wrap_future(load.future)
    assert await client.count_tokens(["hello world"]) == [2]
    assert client.tokenizer == "tiktoken o200k_base"


async def test_long_texts_are_counted_off_the_event_loop(
    loader: Loader, encoding: BytesEncoding
) -> None:
    client = openai()
    loop_thread = threading.get_ident()
    assert await client.count_tokens(["hello world\n" * 10]) == [30]
    assert encoding.threads == {loop_thread}  # short: on the loop, no thread hop
    encoding.threads.clear()
    long = "hello world\n" * 1000  # 12,000 characters
    assert len(long) > tiktoken_count.INLINE_CHARS
    assert await client.count_tokens([long, "hello"]) == [3000, 1]
    assert encoding.threads
    assert loop_thread not in encoding.threads


def test_without_tiktoken_nothing_is_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tiktoken", None)  # import tiktoken raises ImportError
    monkeypatch.setattr(tiktoken_count, "_tiktoken", None)
    monkeypatch.setattr(tiktoken_count, "_missing", False)
    client = openai()
    assert client.tokenizer is None
    assert asyncio.run(client.count_tokens(["hello"])) is None
    assert tiktoken_count._missing


def test_importing_glassagent_does_not_import_tiktoken() -> None:
    code = (
        "import sys, glassagent, glassagent.llm, glassagent.context\n"
        "client = glassagent.llm.OpenAICompatibleClient('gpt-4o-mini', api_key='sk-x')\n"
        "print('tiktoken' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def streamed(text: str) -> httpx.Response:
    """An answer as OpenAI streams it (the agent streams)."""
    chunks: list[dict[str, Any]] = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": text}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}},
    ]
    common = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "gpt-4o-mini"}
    body = "".join(f"data: {json.dumps({**common, **c})}\n\n" for c in chunks)
    body += "data: [DONE]\n\n"
    return httpx.Response(200, text=body, headers={"content-type": "text/event-stream"})


@pytest.fixture
def answers() -> Iterator[respx.Route]:
    with respx.mock:
        yield respx.post(OPENAI_URL).mock(side_effect=lambda request: streamed("hello world"))


@pytest.mark.parametrize("loads", [True, False], ids=["tiktoken", "failed load"])
async def test_the_context_compacted_event_names_the_tokenizer(
    loads: bool,
    answers: respx.Route,
    monkeypatch: pytest.MonkeyPatch,
    encoding: BytesEncoding,
) -> None:
    loader = Loader(lambda name: encoding) if loads else failing_loader(monkeypatch)
    monkeypatch.setattr(tiktoken, "get_encoding", loader)
    # a model name of its own: counts of texts are kept per tokenizer and model
    client = openai("gpt-4o-mini-tokens-test" + ("" if loads else "-failing"))
    agent = Agent(client, system="hello", context_policy=FitWindow(window=150, reserve=0))
    history = History()
    events: list[ContextCompactedEvent] = []
    for _ in range(6):
        result = await agent.run(ASKED, history=history, append_to_history=True)
        events += [e for e in result.events if isinstance(e, ContextCompactedEvent)]
    assert events
    assert loader.asked == ["o200k_base"]
    if not loads:
        assert {e.tokenizer for e in events} == {"estimate"}
        return
    assert {e.tokenizer for e in events} == {"tiktoken o200k_base"}
    # the system "hello": 1 token; the question 40 and the answer "hello world" 2, and 4 more
    # a message for the chat template
    sent = json.loads(answers.calls[-1].request.content)["messages"]
    roles = [m["role"] for m in sent]
    assert roles == ["system"] + ["user", "assistant"] * (len(sent) // 2 - 1) + ["user"]
    assert events[-1].tokens_after == 1 + 44 * roles.count("user") + 6 * roles.count("assistant")
    # messages older than the window reaches are left out uncounted: estimated
    assert events[-1].tokens_after < events[-1].tokens_before < 1 + 44 * 6 + 6 * 5
