"""`ReplayClient`: a recorded run answered again with no network, and told apart when it differs."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from glassagent import (
    Agent,
    BaseLLMClient,
    LLMResponse,
    Message,
    ModelSettings,
    ToolCall,
    ToolContext,
    Usage,
    tool,
)
from glassagent.errors import (
    GlassAgentError,
    MaxIterationsExceeded,
    RateLimitError,
    ReplayMismatchError,
    ToolCallFormatError,
)
from glassagent.events import Event
from glassagent.llm import (
    OpenAICompatibleClient,
    RetryNotice,
    StreamPart,
    TextDelta,
    ToolDefinition,
)
from glassagent.testing import FunctionClient, ReplayClient, ScriptedClient
from tests.support.cli import ScriptedModel, call, say

PROMPT = "Weather in Paris and Atlantis?"


def get_weather(city: str) -> str:
    """The weather of a city."""
    if city == "Atlantis":
        raise ValueError("no such city")
    return f"Sunny in {city}, 21 C"


def script() -> list[LLMResponse]:
    return [
        LLMResponse(
            "Let me look both up.",
            tool_calls=[
                ToolCall("c1", "get_weather", {"city": "Paris"}),
                ToolCall("c2", "get_weather", {"city": "Atlantis"}),
            ],
            thinking="Two cities, two calls.",
            usage=Usage(input_tokens=100, output_tokens=20),
        ),
        LLMResponse(
            "Paris is sunny and warm; Atlantis could not be found.",
            usage=Usage(input_tokens=180, output_tokens=12),
        ),
    ]


def agent_for(client: BaseLLMClient, **kwargs: Any) -> Agent[Any]:
    kwargs.setdefault("system", "Be brief.")
    return Agent(client, kwargs.pop("tools", [get_weather]), **kwargs)


async def record(tmp_path: Path) -> tuple[Path, Any]:
    result = await agent_for(ScriptedClient(script(), model="gpt-4o-mini")).run(PROMPT)
    path = tmp_path / "weather.jsonl"
    result.save_events(path)
    return path, result


def shape(events: Sequence[Event]) -> list[tuple[Any, ...]]:
    """What a replay must reproduce: types, order, texts, tool calls and their results."""
    out: list[tuple[Any, ...]] = []
    for e in events:
        d = e.to_dict()
        execution = d.get("execution") or {}
        out.append(
            (
                e.type,
                d.get("text"),
                json.dumps(d.get("tool_calls")),
                d.get("args"),
                execution.get("call_id"),
                execution.get("result"),
                execution.get("is_error"),
            )
        )
    return out


async def test_replaying_reexecutes_the_tools_and_yields_the_same_events(tmp_path: Path) -> None:
    path, recorded = await record(tmp_path)
    replay = ReplayClient.from_events(path)
    assert (replay.provider_name, replay.model) == ("scripted", "gpt-4o-mini")

    replayed = await agent_for(replay).run(PROMPT)

    assert shape(_sorted(replayed.events)) == shape(_sorted(recorded.events))
    assert replayed.text == recorded.text
    assert replayed.usage == recorded.usage
    assert replayed.cost == recorded.cost  # the same model, priced alike
    assert replay.remaining == 0
    replay.check(replayed)
    chunks = [e.text for e in replayed.events if e.type == "text_chunk"]  # type: ignore[union-attr]
    assert chunks == [e.text for e in recorded.events if e.type == "text_chunk"]  # type: ignore[union-attr]
    assert len(chunks) > 2  # streamed in the recorded pieces, not in one


def _sorted(events: Sequence[Event]) -> list[Event]:
    """Concurrent tool calls may finish in either order: put their results in call order."""
    done = sorted(
        (e for e in events if e.type == "function_execution_complete"),
        key=lambda e: e.execution.call_id,  # type: ignore[union-attr]
    )
    it = iter(done)
    return [next(it) if e.type == "function_execution_complete" else e for e in events]


async def test_the_recording_replays_from_events_and_dicts_too(tmp_path: Path) -> None:
    _, recorded = await record(tmp_path)
    for source in (recorded.events, [e.to_dict() for e in recorded.events]):
        replay = ReplayClient.from_events(source)
        replay.check(await agent_for(replay).run(PROMPT))


async def test_a_changed_system_prompt_fails_with_a_diff(tmp_path: Path) -> None:
    path, _ = await record(tmp_path)
    replay = ReplayClient.from_events(path)
    with pytest.raises(ReplayMismatchError) as caught:
        await agent_for(replay, system="Be very brief.").run(PROMPT)
    error = caught.value
    assert isinstance(error, GlassAgentError)
    assert error.call == 1
    assert "Model call 1 sent a request the recording did not expect (different system)" in str(
        error
    )
    assert '-system: "Be brief."' in error.diff.splitlines()
    assert '+system: "Be very brief."' in error.diff.splitlines()
    assert error.diff.startswith("--- recorded request 1\n+++ actual request 1")
    assert error.result is not None
    assert error.result.events[-1].type == "error"


async def test_a_changed_tool_result_fails_at_the_request_that_carries_it(tmp_path: Path) -> None:
    path, _ = await record(tmp_path)

    @tool(name="get_weather")
    def rainy(city: str) -> str:
        """The weather of a city."""
        if city == "Atlantis":
            raise ValueError("no such city")
        return f"Rain in {city}, 12 C"

    replay = ReplayClient.from_events(path)
    with pytest.raises(ReplayMismatchError, match=r"Model call 2 .*different messages\[2\]") as e:
        await agent_for(replay, tools=[rainy]).run(PROMPT)
    assert '-    content: "Sunny in Paris, 21 C"' in e.value.diff.splitlines()
    assert '+    content: "Rain in Paris, 12 C"' in e.value.diff.splitlines()


async def test_a_changed_tool_definition_or_prompt_fails_at_once(tmp_path: Path) -> None:
    path, _ = await record(tmp_path)

    def get_weather(city: str, unit: str = "C") -> str:
        """The weather of a city, in a unit."""
        return "Sunny"

    with pytest.raises(ReplayMismatchError, match=r"Model call 1 .*different tools\[0\]") as e:
        await agent_for(ReplayClient.from_events(path), tools=[get_weather]).run(PROMPT)
    assert '-    description: "The weather of a city."' in e.value.diff.splitlines()
    with pytest.raises(ReplayMismatchError, match=r"different messages\[0\]"):
        await agent_for(ReplayClient.from_events(path)).run("Weather in Rome?")


async def test_more_or_fewer_model_calls_than_recorded_are_reported(tmp_path: Path) -> None:
    path, _recorded = await record(tmp_path)
    replay = ReplayClient.from_events(path)
    with pytest.raises(MaxIterationsExceeded) as stopped:
        await agent_for(replay, max_iterations=1).run(PROMPT)
    with pytest.raises(ReplayMismatchError, match=r"1 recorded model call\(s\) were not made"):
        replay.check(stopped.value.result)  # type: ignore[arg-type]

    replay = ReplayClient.from_events(path)
    result = await agent_for(replay).run(PROMPT)
    with pytest.raises(ReplayMismatchError, match="Model call 3 was not recorded: the recording"):
        await agent_for(replay).run(PROMPT, messages=result.all_messages)


async def test_check_shows_events_that_differ_without_changing_a_request(tmp_path: Path) -> None:
    @tool
    async def count(ctx: ToolContext[Any], to: int) -> str:
        """Count."""
        for i in range(to):
            await ctx.progress(f"at {i}")
        return "done"

    answers = [LLMResponse(tool_calls=[ToolCall("c1", "count", {"to": 2})]), "counted"]
    recorded = await Agent(ScriptedClient(answers), [count]).run("count")

    @tool(name="count")
    async def quiet(to: int) -> str:
        """Count."""
        return "done"

    replay = ReplayClient.from_events(recorded.events)
    replayed = await Agent(replay, [quiet]).run("count")
    assert replayed.text == "counted"
    with pytest.raises(ReplayMismatchError, match="events differ from the recording") as e:
        replay.check(replayed)
    assert '-  message: "at 0"' in e.value.diff.splitlines()


class _RetryingClient(BaseLLMClient):
    """Streams a retry notice, then text; or fails with a rate limit."""

    provider_name = "flaky"
    model = "flaky-1"

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail

    async def chat(self, messages: Sequence[Message], *args: Any, **kwargs: Any) -> LLMResponse:
        raise NotImplementedError

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        system: str | None = None,
        *,
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[StreamPart]:
        yield RetryNotice(
            attempt=1, delay=0.5, error="busy", error_type="RateLimitError", status=429
        )
        if self.fail:
            raise RateLimitError("The flaky client is busy.", retry_after=1.0, provider="flaky")
        yield TextDelta("fine")
        yield LLMResponse("fine")


async def test_retries_and_a_recorded_provider_failure_replay_as_they_happened() -> None:
    recorded = await Agent(_RetryingClient()).run("hi")
    replay = ReplayClient.from_events(recorded.events)
    replayed = await Agent(replay).run("hi")
    replay.check(replayed)
    retry = next(e for e in replayed.events if e.type == "llm_retry")
    assert (retry.attempt, retry.status, retry.error) == (1, 429, "busy")  # type: ignore[union-attr]

    with pytest.raises(RateLimitError) as failed:
        await Agent(_RetryingClient(fail=True)).run("hi")
    replay = ReplayClient.from_events(failed.value.result.events)  # type: ignore[union-attr]
    with pytest.raises(RateLimitError, match=r"The flaky client is busy\.") as again:
        await Agent(replay).run("hi")
    replay.check(again.value.result)  # type: ignore[arg-type]


async def test_a_reply_the_server_could_not_read_replays_as_it_happened(tmp_path: Path) -> None:
    answers: list[LLMResponse | ToolCallFormatError] = [
        ToolCallFormatError("llama_cpp could not read the model's reply", provider="llama_cpp"),
        LLMResponse(tool_calls=[ToolCall("c1", "get_weather", {"city": "Paris"})]),
        LLMResponse("Sunny."),
    ]

    def answer(*_: object) -> LLMResponse:
        reply = answers.pop(0)
        if isinstance(reply, ToolCallFormatError):
            raise reply
        return reply

    recorded = await agent_for(FunctionClient(answer)).run(PROMPT)
    unreadable = recorded.events[1]
    assert unreadable.type == "llm_response"
    assert unreadable.raw_stop_reason == "unreadable_tool_call"  # type: ignore[union-attr]
    assert "could not read" in (unreadable.protocol_error or "")  # type: ignore[union-attr]
    path = tmp_path / "run.jsonl"
    recorded.save_events(path)
    replay = ReplayClient.from_events(path)
    replayed = await agent_for(replay).run(PROMPT)
    replay.check(replayed)
    assert (replayed.text, replayed.iterations) == ("Sunny.", 3)


async def test_an_aborted_recording_says_it_cannot_be_replayed() -> None:
    async def slow(*_: Any) -> str:
        await asyncio.sleep(30)
        return "late"

    run = Agent(FunctionClient(slow)).run("hi")
    async for event in run:
        if event.type == "llm_request":
            run.abort("enough")
    replay = ReplayClient.from_events(run.result.events)  # type: ignore[union-attr]
    with pytest.raises(ReplayMismatchError, match=r"the recorded run was aborted \(enough\)"):
        await Agent(replay).run("hi")


async def test_provider_data_of_an_answer_is_sent_again_as_recorded() -> None:
    def model(messages: Any, *_: Any) -> LLMResponse | str:
        if messages[-1].role == "tool":
            return "done"
        call = ToolCall("c1", "get_weather", {"city": "Paris"}, {"signature": "abc"})
        return LLMResponse("", tool_calls=[call], provider_metadata={"thought": "sig-1"})

    recorded = await agent_for(FunctionClient(model)).run(PROMPT)
    replay = ReplayClient.from_events(recorded.events)
    replay.check(await agent_for(replay).run(PROMPT))
    assert replay.requests[1].messages[1].provider_metadata == {"thought": "sig-1"}


async def test_a_json_tool_protocol_recording_replays_without_rewrapping() -> None:
    client = ScriptedClient(script(), model="gpt-4o-mini")
    client.tool_protocol = "json"
    recorded = await agent_for(client).run(PROMPT)
    replay = ReplayClient.from_events(recorded.events)
    assert replay.tool_protocol == "json"
    replay.check(await agent_for(replay).run(PROMPT))


async def test_a_real_http_session_becomes_an_offline_regression_test(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    server = ScriptedModel(call(("get_weather", {"city": "Paris"})), say("Sunny in Paris."))
    with server:
        async with OpenAICompatibleClient("gpt-4o-mini", base_url=f"{server.url}/v1") as client:
            recorded = await agent_for(client).run("Paris?").save_events(path)
    assert recorded.text == "Sunny in Paris."

    # the server is gone: the replay needs none
    replay = ReplayClient.from_events(path)
    replay.check(await agent_for(replay).run("Paris?"))
    assert replay.provider_name == "openai_compatible"
