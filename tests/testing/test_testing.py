import pytest

from glassagent import Agent, LLMResponse, Message, ModelSettings
from glassagent.errors import UserError
from glassagent.llm import TextDelta, ThinkingDelta
from glassagent.testing import FunctionClient, RecordedRequest, ScriptedClient


async def test_scripted_client_streams_text_in_several_chunks_and_records() -> None:
    client = ScriptedClient([LLMResponse("one two three four five", thinking="let me see")])
    messages = [Message(role="user", content="hi")]
    parts = [
        p
        async for p in client.stream(messages, system="sys", settings=ModelSettings(temperature=0))
    ]
    deltas = [p for p in parts if isinstance(p, TextDelta)]
    assert len(deltas) > 1
    assert "".join(d.text for d in deltas) == "one two three four five"
    assert "".join(p.text for p in parts if isinstance(p, ThinkingDelta)) == "let me see"
    assert parts[-1] == LLMResponse("one two three four five", thinking="let me see")
    assert client.requests == [
        RecordedRequest(tuple(messages), (), "sys", ModelSettings(temperature=0))
    ]
    assert client.remaining == 0


async def test_scripted_client_says_clearly_when_it_runs_out() -> None:
    client = ScriptedClient(["only one"])
    assert (await client.chat([])).text == "only one"
    with pytest.raises(
        UserError, match=r"ran out of responses: request 2 arrived but the script has 1"
    ):
        await client.chat([])


async def test_function_client_accepts_sync_and_async_functions() -> None:
    def sync_fn(messages, tools, system, settings):
        return f"{len(messages)} messages, system={system}"

    async def async_fn(messages, tools, system, settings):
        return LLMResponse(messages[-1].content.upper())

    assert (
        await Agent(FunctionClient(sync_fn), system="s").run("hi")
    ).text == "1 messages, system=s"
    client = FunctionClient(async_fn)
    assert (await Agent(client).run("shout")).text == "SHOUT"
    assert client.requests[0].messages[0].content == "shout"


async def test_function_client_rejects_wrong_return_types() -> None:
    client = FunctionClient(lambda *_: 42)  # type: ignore[arg-type,return-value]
    with pytest.raises(UserError, match="must return an LLMResponse or str"):
        await client.chat([])


async def test_chunk_delay_slows_the_stream() -> None:
    import time

    client = ScriptedClient(["a b c"], chunk_delay=0.02)
    started = time.perf_counter()
    _ = [p async for p in client.stream([])]
    assert time.perf_counter() - started >= 0.05
