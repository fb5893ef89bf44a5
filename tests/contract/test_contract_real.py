"""The design's client contract against the real embedded model (``pytest -m real_model``).

One llama.cpp server with the default model (0.5B) serves the module, started as
``tests/local/test_local_real.py`` starts its own. Each test speaks to it through
`ContractClient` over an `OpenAICompatibleClient` (native tool calls, llama.cpp's own
parser), with greedy decoding and short answers:

- ``send_request`` answers a question; ``send_request_stream`` yields ``text_chunk`` events
  and ends with one ``complete``;
- an ``abort_signal`` set after the first chunk of a long answer ends the stream with
  ``aborted`` (``user_abort``) within a few seconds, and the client still answers after it;
- ``tool_choice="required"`` makes the model call the tool; ``handle_function_calls`` runs
  it and ends with the model's answer (the follow-up is not forced to call again);
- a plugin folder ``ai_client/openai_compatible/`` whose entry point is one
  ``contract_class`` line loads, and its no-argument class answers through the server.
"""

from __future__ import annotations

import shutil
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from glassagent import tool
from glassagent.contract import ContractClient, find_ai_clients, load_ai_client
from glassagent.llm import OpenAICompatibleClient
from glassagent.local import LocalServer, ensure_default_model

pytestmark = pytest.mark.real_model

SHORT: dict[str, Any] = {"temperature": 0, "max_output_tokens": 16}
PROFILES = Path(__file__).resolve().parents[2] / "src/glassagent/_core/profiles/data"


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first addend.
        b: The second addend.
    """
    return a + b


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    ensure_default_model()
    with LocalServer(context_size=2048) as running:
        yield running


@pytest.fixture
def contract(server: LocalServer) -> Iterator[ContractClient]:
    """`ContractClient` over a plain `OpenAICompatibleClient` of the server."""
    client = OpenAICompatibleClient(
        server.model_name, base_url=server.base_url, api_key=server.api_key
    )
    with ContractClient(client) as adapter:
        yield adapter


def test_send_request_by_provider_name_answers(server: LocalServer) -> None:
    with ContractClient(
        "openai_compatible",
        base_url=server.base_url,
        api_key=server.api_key,
        model=server.model_name,
    ) as client:
        assert client.get_provider_name() == "openai_compatible"
        response = client.send_request(
            server.model_name, {}, "What is the capital of France? One word.", [], **SHORT
        )
    text = client.extract_response_text(response)
    assert "paris" in text.lower(), text
    assert response.tool_calls == ()
    assert response.response.raw_request["max_tokens"] == 16


def test_send_request_stream_yields_chunks_then_one_complete(contract: ContractClient) -> None:
    stream = contract.send_request_stream("", None, "Count from 1 to 10.", None, **SHORT)
    events = list(stream)
    types = [e["type"] for e in events]
    assert types[-1] == "complete", events
    assert set(types[:-1]) == {"text_chunk"}
    assert len(types) > 2  # streamed in pieces, not one block
    chunks = "".join(e["text"] for e in events[:-1])
    assert events[-1]["text"] == chunks
    assert "1" in chunks
    assert not any(e["is_follow_up"] for e in events[:-1])
    assert stream.response is not None
    assert stream.response.text == chunks


def test_an_abort_after_the_first_chunk_ends_the_stream_promptly(
    contract: ContractClient,
) -> None:
    signal = threading.Event()
    stream = contract.send_request_stream(
        "", None, "Write a long story about a lighthouse keeper.", None,
        temperature=0, max_output_tokens=400, abort_signal=signal,
    )  # fmt: skip
    first = next(stream)
    assert first["type"] == "text_chunk", first
    signal.set()
    started = time.monotonic()
    rest = list(stream)
    waited = time.monotonic() - started
    assert waited < 3.0, waited
    assert rest[-1]["type"] == "aborted", rest
    assert rest[-1]["reason"] == "user_abort"
    assert [e["type"] for e in rest[:-1]] == []  # nothing after the abort was seen
    assert rest[-1]["text"] == first["text"]
    assert stream.response is None
    answer = contract.send_request("", None, "Say yes.", None, **SHORT)
    assert answer.text.strip()  # the client and the server still answer


def test_a_required_tool_call_runs_and_the_model_answers(contract: ContractClient) -> None:
    response = contract.send_request(
        "", None, "What is 17 + 25?", None,
        temperature=0, max_output_tokens=64, tools=[add], tool_choice="required",
    )  # fmt: skip
    assert [(c.name, dict(c.input)) for c in response.tool_calls] == [("add", {"a": 17, "b": 25})]
    contract.max_tool_rounds = 2  # the answer may call once more; no more than that
    final, executions = contract.handle_function_calls(response, "", None, {})
    assert executions[0]["function_name"] == "add"
    assert executions[0]["args"] == {"a": 17, "b": 25}
    assert executions[0]["result"] == "42"
    assert final.tool_calls == ()
    assert "42" in final.text, final.text
    assert final.settings.tool_choice == "auto"


def write_plugin(root: Path, model: str) -> Path:
    """The design's folder layout for the server: ``ai_client/openai_compatible/``."""
    folder = root / "ai_client" / "openai_compatible"
    (folder / "ai_profile").mkdir(parents=True)
    (folder / "requirements.txt").write_text("glassagent\n", encoding="utf-8")
    shutil.copy(PROFILES / "qwen2.5-coder-0.5b-instruct.json", folder / "ai_profile")
    entry = f"""
        from pathlib import Path

        from glassagent.contract import contract_class

        OpenAICompatibleClient = contract_class(
            "openai_compatible", profile_dir=Path(__file__).parent / "ai_profile", model={model!r}
        )
    """
    (folder / "openai_compatible_client.py").write_text(textwrap.dedent(entry), "utf-8")
    return root / "ai_client"


def test_a_plugin_folder_loads_a_class_that_answers_through_the_server(
    server: LocalServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = write_plugin(tmp_path, server.model_name)
    monkeypatch.setenv("OPENAI_COMPATIBLE_API_BASE", server.base_url)  # as the design: env
    monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", server.api_key)
    [plugin] = find_ai_clients(root)
    assert (plugin.ok, plugin.problems, plugin.warnings) == (True, (), ())
    assert plugin.missing_requirements == ()
    cls = load_ai_client(root, "openai_compatible")
    assert cls.__name__ == "OpenAICompatibleClient"
    with cls() as client:
        assert client.get_provider_name() == "openai_compatible"
        assert client.get_profile_dir() == root / "openai_compatible" / "ai_profile"
        response = client.send_request(
            "", None, "What is the capital of France? One word.", None, **SHORT
        )
        text = client.extract_response_text(response)
    assert "paris" in text.lower(), text
