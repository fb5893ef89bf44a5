"""Regression tests: tool failures that escaped, keys that leaked, values that changed."""

import asyncio
import threading

import pytest
import respx

from glassagent import Agent, LLMResponse, ToolCall, ToolContext, tool
from glassagent.errors import ConfigurationError, ProviderUnavailableError
from glassagent.llm import GeminiClient, Message, OllamaClient, OpenAICompatibleClient
from glassagent.testing import ScriptedClient
from glassagent.tools import to_anthropic_tools, to_gemini_tools, to_openai_tools

KEY = "sk-SECRET0123456789abcdefSECRET"
HI = [Message(role="user", content="Hi")]


def answer_after(*calls: ToolCall) -> ScriptedClient:
    return ScriptedClient([LLMResponse("", calls), "done"])


async def test_a_sync_tool_raising_stop_iteration_is_an_error_result() -> None:
    @tool
    def first(items: list[int]) -> int:
        """The first item."""
        return next(iter(items))

    run = Agent(answer_after(ToolCall("c1", "first", {"items": []})), [first]).run("go")
    result = await asyncio.wait_for(run, 5)  # it used to hang forever
    assert result.text == "done"
    assert result.new_messages[2].is_error
    assert "StopIteration" in result.new_messages[2].content


async def test_a_tool_raising_cancelled_error_is_an_error_result() -> None:
    @tool
    async def waits() -> str:
        """Awaits something that gets cancelled."""
        raise asyncio.CancelledError

    result = await Agent(answer_after(ToolCall("c1", "waits", {})), [waits]).run("go")
    assert result.stop_reason == "end_turn"
    assert result.new_messages[2].content == "Error: tool 'waits' was cancelled from within."
    assert [e.type for e in result.events].count("function_execution_complete") == 1


async def test_a_timed_out_sync_tool_reports_no_progress_after_its_call_ended() -> None:
    release = threading.Event()

    @tool(timeout=0.05)
    def slow(ctx: ToolContext) -> str:
        """Keeps reporting after its timeout."""
        for step in range(3):
            ctx.progress_nowait(f"step {step}")
            release.wait(0.05)
        return "late"

    client = ScriptedClient(
        [LLMResponse("", [ToolCall("c1", "slow", {})]), "done"], chunk_delay=0.05
    )
    result = await Agent(client, [slow]).run("go")
    await asyncio.sleep(0.2)  # let the worker thread finish its reports
    types = [e.type for e in result.events]
    complete = types.index("function_execution_complete")
    assert "tool_progress" not in types[complete:]
    assert types[-1] == "complete"
    release.set()


@respx.mock
async def test_a_key_read_with_its_newline_is_cleaned() -> None:
    route = respx.post("http://127.0.0.1:8080/v1/chat/completions").respond(
        json={"choices": [{"index": 0, "message": {"content": "hi"}, "finish_reason": "stop"}]}
    )
    client = OpenAICompatibleClient("m", base_url="http://127.0.0.1:8080/v1", api_key=KEY + "\n")
    await client.chat(HI)
    assert route.calls[0].request.headers["authorization"] == f"Bearer {KEY}"


@pytest.mark.parametrize(
    "make",
    [
        lambda key: OpenAICompatibleClient("gpt-4o-mini", api_key=key),
        lambda key: GeminiClient(api_key=key),
    ],
    ids=["openai", "gemini"],
)
def test_a_key_with_inner_white_space_is_refused_without_showing_it(make) -> None:
    with pytest.raises(ConfigurationError, match="white space") as info:
        make("sk-SECRET 0123456789abcdef")
    assert "SECRET" not in str(info.value)


@respx.mock
async def test_openai_key_from_the_environment_goes_to_openai_only(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    route = respx.post("http://third-party.example/v1/chat/completions").respond(
        json={"choices": [{"index": 0, "message": {"content": "hi"}, "finish_reason": "stop"}]}
    )
    await OpenAICompatibleClient("m", base_url="http://third-party.example/v1").chat(HI)
    assert "authorization" not in route.calls[0].request.headers


@respx.mock
async def test_a_key_echoed_across_the_body_limit_is_still_masked() -> None:
    body = "x" * 1980 + f" key: {KEY} " + "y" * 100
    respx.post("http://127.0.0.1:8080/v1/chat/completions").respond(503, text=body)
    client = OpenAICompatibleClient("m", base_url="http://127.0.0.1:8080/v1", api_key=KEY)
    with pytest.raises(ProviderUnavailableError) as info:
        await client.chat(HI)
    assert KEY[:8] not in (info.value.body or "")
    assert KEY[:8] not in str(info.value)


@respx.mock
async def test_json_protocol_repair_keeps_python_words_inside_the_answer() -> None:
    reply = "{'thought': 'checked', 'response': 'None of the files match. True story.'}"
    respx.post("http://127.0.0.1:11434/api/chat").respond(
        json={"message": {"role": "assistant", "content": reply}, "done": True}
    )
    client = OllamaClient("m", base_url="http://127.0.0.1:11434", tool_protocol="json")
    response = await client.chat(HI, [lookup.definition])
    assert response.text == "None of the files match. True story."
    assert response.protocol_error is None


@tool
def lookup(meta: dict[str, object] | None = None) -> str:
    """Look something up."""
    return "ok"


def test_default_values_keep_their_title_keys() -> None:
    @tool
    def tag(meta: dict[str, object] = {"title": "Untitled", "tags": []}) -> str:  # noqa: B006
        """Tag a thing."""
        return "ok"

    assert tag.parameters["properties"]["meta"]["default"] == {"title": "Untitled", "tags": []}


def test_exported_definitions_are_copies() -> None:
    for export in (to_openai_tools, to_anthropic_tools, to_gemini_tools):
        exported = export([lookup])
        exported_schema = str(exported)
        exported.clear()
        assert str(export([lookup])) == exported_schema
    schema = to_openai_tools([lookup])[0]["function"]["parameters"]
    schema["properties"]["extra"] = {"type": "integer"}
    assert "extra" not in lookup.parameters["properties"]
