"""ModelSettings: validation, per-provider options passed through unchanged, and refusals."""

import json
import math
from typing import Any

import httpx
import pytest
import respx

from glassagent import Agent, ModelSettings
from glassagent.errors import ConfigurationError, UserError
from glassagent.events import LLMRequestEvent, parse_event
from glassagent.llm import (
    GeminiClient,
    GeminiOptions,
    Message,
    OllamaClient,
    OllamaOptions,
    OpenAICompatibleClient,
    OpenAIOptions,
    RetryPolicy,
)
from glassagent.testing import ScriptedClient

HI = (Message(role="user", content="Hi"),)
OPENAI_URL = "http://127.0.0.1:8080/v1/chat/completions"
OLLAMA_URL = "http://127.0.0.1:11434/api/chat"
GEMINI = r".*/models/gemini-2\.5-flash:generateContent$"
GEMINI_KEY = "AIzaSyD3adB33fTestKey0000000000x9Qk"
NO_RETRY = RetryPolicy(max_retries=0)

COMPLETION = {
    "id": "c",
    "object": "chat.completion",
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
    ],
}
OLLAMA_DONE = {"model": "m", "message": {"role": "assistant", "content": "ok"}, "done": True}
OLLAMA_DONE |= {"done_reason": "stop"}
GEMINI_BODY = {
    "candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]}, "index": 0}],
    "modelVersion": "gemini-2.5-flash",
}


def openai() -> OpenAICompatibleClient:
    return OpenAICompatibleClient("m", base_url="http://127.0.0.1:8080/v1", retry=NO_RETRY)


def ollama() -> OllamaClient:
    return OllamaClient("m", base_url="http://127.0.0.1:11434", tool_protocol="native")


def gemini() -> GeminiClient:
    return GeminiClient(api_key=GEMINI_KEY, retry=NO_RETRY)


def sent(route: respx.Route) -> dict[str, Any]:
    return json.loads(route.calls[-1].request.content)


# ---- validation ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("temperature", -0.1),
        ("temperature", 2.5),
        ("temperature", math.nan),
        ("temperature", "hot"),
        ("temperature", True),
        ("max_tokens", 0),
        ("max_tokens", 1.5),
        ("max_tokens", True),
        ("thinking_budget", -2),
        ("thinking_budget", 10.0),
        ("stop_sequences", "END"),
        ("stop_sequences", ("END", "")),
        ("stop_sequences", ("END", 3)),
        ("provider_options", {"top_p": 0.5}),
    ],
)
def test_invalid_settings_raise_user_error_naming_the_field(field: str, value: Any) -> None:
    with pytest.raises(UserError, match=rf"ModelSettings\.{field}"):
        ModelSettings(**{field: value})


def test_valid_bounds_are_accepted_and_a_list_of_stops_becomes_a_tuple() -> None:
    settings = ModelSettings(
        temperature=2.0, max_tokens=1, thinking_budget=-1, stop_sequences=["A", "B"]
    )
    assert settings.stop_sequences == ("A", "B")
    assert ModelSettings(temperature=0, thinking_budget=0).temperature == 0


@pytest.mark.parametrize(
    ("make", "name"),
    [
        (lambda: OpenAIOptions(top_p=1.5), "OpenAIOptions.top_p"),
        (lambda: OpenAIOptions(presence_penalty=-3), "OpenAIOptions.presence_penalty"),
        (lambda: OpenAIOptions(frequency_penalty=2.1), "OpenAIOptions.frequency_penalty"),
        (lambda: OpenAIOptions(seed=1.5), "OpenAIOptions.seed"),
        (lambda: OpenAIOptions(reasoning_effort=""), "OpenAIOptions.reasoning_effort"),
        (lambda: OpenAIOptions(extra_body=[("a", 1)]), "OpenAIOptions.extra_body"),
        (lambda: OllamaOptions(options="num_ctx=4096"), "OllamaOptions.options"),
        (lambda: OllamaOptions(keep_alive=True), "OllamaOptions.keep_alive"),
        (lambda: GeminiOptions(top_k=0), "GeminiOptions.top_k"),
        (lambda: GeminiOptions(safety_settings={"a": 1}), "GeminiOptions.safety_settings"),
        (lambda: GeminiOptions(thinking_level=3), "GeminiOptions.thinking_level"),
    ],
)
def test_invalid_provider_options_raise_user_error_naming_the_field(make: Any, name: str) -> None:
    with pytest.raises(UserError, match=name.replace(".", r"\.")):
        make()


@pytest.mark.parametrize(
    ("settings", "clash"),
    [
        (dict(temperature=0.2, provider_options=OllamaOptions(options={"temperature": 0.3})),
         "ModelSettings.temperature and OllamaOptions.options['temperature']"),
        (dict(max_tokens=5, provider_options=OllamaOptions(options={"num_predict": 9})),
         "ModelSettings.max_tokens and OllamaOptions.options['num_predict']"),
        (dict(thinking_budget=0, provider_options=OllamaOptions(think="high")),
         "ModelSettings.thinking_budget and OllamaOptions.think"),
        (dict(thinking_budget=64, provider_options=GeminiOptions(thinking_level="low")),
         "ModelSettings.thinking_budget and GeminiOptions.thinking_level"),
    ],
)  # fmt: skip
def test_an_option_repeating_a_portable_field_is_refused(
    settings: dict[str, Any], clash: str
) -> None:
    with pytest.raises(UserError) as info:
        ModelSettings(**settings)
    assert clash in str(info.value)


# ---- merge -----------------------------------------------------------------------------


def test_merge_combines_options_of_one_provider_field_by_field() -> None:
    agent_level = ModelSettings(
        temperature=0.2,
        provider_options=OpenAIOptions(seed=7, top_p=0.9, extra_body={"a": 1, "b": 2}),
    )
    run_level = ModelSettings(provider_options=OpenAIOptions(top_p=0.5, extra_body={"b": 3}))
    merged = agent_level.merge(run_level)
    assert merged.temperature == 0.2
    assert merged.provider_options == OpenAIOptions(seed=7, top_p=0.5, extra_body={"a": 1, "b": 3})
    assert agent_level.merge(ModelSettings()).provider_options == agent_level.provider_options
    assert ModelSettings().merge(run_level).provider_options == run_level.provider_options


def test_merge_of_ollama_options_combines_the_options_object() -> None:
    agent_level = ModelSettings(provider_options=OllamaOptions(options={"num_ctx": 8192}))
    run_level = ModelSettings(provider_options=OllamaOptions(options={"top_k": 20}, think=True))
    merged = agent_level.merge(run_level).provider_options
    assert merged == OllamaOptions(options={"num_ctx": 8192, "top_k": 20}, think=True)


def test_merge_of_options_for_different_providers_is_refused() -> None:
    agent_level = ModelSettings(provider_options=GeminiOptions(top_k=4))
    with pytest.raises(UserError, match=r"OpenAIOptions\(\.\.\.\) into GeminiOptions"):
        agent_level.merge(ModelSettings(provider_options=OpenAIOptions(seed=1)))


def test_merge_that_makes_an_option_repeat_a_field_is_refused() -> None:
    agent_level = ModelSettings(provider_options=OllamaOptions(options={"temperature": 0.3}))
    with pytest.raises(UserError, match="temperature"):
        agent_level.merge(ModelSettings(temperature=0.9))


# ---- events ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        OpenAIOptions(seed=3, response_format={"type": "json_object"}, extra_body={"x": [1]}),
        OllamaOptions(options={"num_ctx": 4096}, keep_alive="10m", think="high"),
        GeminiOptions(
            top_k=3,
            safety_settings=({"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"},),
            thinking_level="low",
        ),
    ],
)
async def test_provider_options_round_trip_through_llm_request_events(options: Any) -> None:
    agent = Agent(ScriptedClient(["ok"]), settings=ModelSettings(temperature=0.5))
    settings = ModelSettings(max_tokens=9, provider_options=options)
    events = [e async for e in agent.run("hi", settings=settings)]
    request = next(e for e in events if isinstance(e, LLMRequestEvent))
    assert request.settings.provider_options == options
    data = json.loads(json.dumps(request.to_dict()))
    assert data["settings"]["provider_options"]["kind"] == options.kind
    again = parse_event(data)
    assert again == request
    assert type(again.settings.provider_options) is type(options)  # type: ignore[union-attr]


# ---- OpenAI-compatible -----------------------------------------------------------------


@respx.mock
async def test_openai_options_go_into_the_body_unchanged() -> None:
    route = respx.post(OPENAI_URL).respond(json=COMPLETION)
    schema = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}
    options = OpenAIOptions(
        top_p=0.9,
        seed=42,
        presence_penalty=0.5,
        frequency_penalty=-0.5,
        reasoning_effort="low",
        response_format=schema,
        extra_body={"chat_template_kwargs": {"enable_thinking": False}},
    )
    settings = ModelSettings(temperature=0.3, max_tokens=20, provider_options=options)
    response = await openai().chat(HI, settings=settings)
    assert sent(route) == {
        "model": "m",
        "messages": [{"role": "user", "content": "Hi"}],
        "temperature": 0.3,
        "max_tokens": 20,
        "top_p": 0.9,
        "seed": 42,
        "presence_penalty": 0.5,
        "frequency_penalty": -0.5,
        "reasoning_effort": "low",
        "response_format": schema,
        "chat_template_kwargs": {"enable_thinking": False},
    }
    assert response.raw_request == sent(route)


@respx.mock
async def test_openai_compatible_refuses_thinking_budget_naming_the_provider() -> None:
    route = respx.post(OPENAI_URL).respond(json=COMPLETION)
    client = openai()
    with pytest.raises(ConfigurationError, match=r"^openai_compatible cannot honour .*thinking_b"):
        await client.chat(HI, settings=ModelSettings(thinking_budget=512))
    with pytest.raises(ConfigurationError, match="thinking_budget"):
        [p async for p in client.stream(HI, settings=ModelSettings(thinking_budget=0))]
    assert not route.called


@respx.mock
async def test_extra_body_may_not_overwrite_what_glassagent_sets() -> None:
    route = respx.post(OPENAI_URL).respond(json=COMPLETION)
    for extra in ({"messages": []}, {"temperature": 1}, {"stream": False}):
        settings = ModelSettings(temperature=0.1, provider_options=OpenAIOptions(extra_body=extra))
        with pytest.raises(ConfigurationError, match=r"extra_body\['"):
            [p async for p in openai().stream(HI, settings=settings)]
    assert not route.called


@respx.mock
async def test_response_format_clashing_with_the_json_tool_protocol_is_refused() -> None:
    from glassagent.llm import ToolDefinition

    tool = ToolDefinition("add", "Add.", {"type": "object", "properties": {}})
    client = OpenAICompatibleClient(
        "m", base_url="http://127.0.0.1:8080/v1", tool_protocol="json", retry=NO_RETRY
    )
    settings = ModelSettings(provider_options=OpenAIOptions(response_format={"type": "text"}))
    with pytest.raises(ConfigurationError, match="response_format"):
        await client.chat(HI, [tool], settings=settings)


@pytest.mark.parametrize("options", [OllamaOptions(keep_alive=0), GeminiOptions(top_k=1)])
@respx.mock
async def test_openai_compatible_refuses_another_providers_options(options: Any) -> None:
    route = respx.post(OPENAI_URL).respond(json=COMPLETION)
    with pytest.raises(
        ConfigurationError, match=rf"^openai_compatible cannot honour .*{type(options).__name__}"
    ):
        await openai().chat(HI, settings=ModelSettings(provider_options=options))
    assert not route.called


# ---- Ollama ----------------------------------------------------------------------------


@respx.mock
async def test_ollama_options_go_into_the_body_unchanged() -> None:
    route = respx.post(OLLAMA_URL).respond(json=OLLAMA_DONE)
    options = OllamaOptions(
        options={"num_ctx": 8192, "top_k": 20, "seed": 1}, keep_alive="10m", think="high"
    )
    settings = ModelSettings(temperature=0.2, stop_sequences=("END",), provider_options=options)
    await ollama().chat(HI, settings=settings)
    assert sent(route) == {
        "model": "m",
        "messages": [{"role": "user", "content": "Hi"}],
        "stream": False,
        "keep_alive": "10m",
        "think": "high",
        "options": {"temperature": 0.2, "stop": ["END"], "num_ctx": 8192, "top_k": 20, "seed": 1},
    }


@pytest.mark.parametrize(("budget", "think"), [(0, False), (1024, True), (-1, True)])
@respx.mock
async def test_ollama_turns_thinking_on_or_off_from_the_budget(budget: int, think: bool) -> None:
    route = respx.post(OLLAMA_URL).respond(json=OLLAMA_DONE)
    await ollama().chat(HI, settings=ModelSettings(thinking_budget=budget))
    assert sent(route)["think"] is think


@respx.mock
async def test_ollama_refuses_another_providers_options() -> None:
    route = respx.post(OLLAMA_URL).respond(json=OLLAMA_DONE)
    settings = ModelSettings(provider_options=OpenAIOptions(seed=1))
    with pytest.raises(ConfigurationError, match=r"^ollama cannot honour .*OpenAIOptions"):
        await ollama().chat(HI, settings=settings)
    assert not route.called


# ---- Gemini (through google-genai, over respx) -----------------------------------------


@respx.mock
async def test_gemini_options_reach_the_generation_config() -> None:
    route = respx.post(url__regex=GEMINI).respond(json=GEMINI_BODY)
    safety = {"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_ONLY_HIGH"}
    options = GeminiOptions(
        top_p=0.8,
        top_k=20,
        seed=5,
        presence_penalty=0.1,
        frequency_penalty=0.2,
        safety_settings=(safety,),
        response_mime_type="application/json",
        response_json_schema={"type": "object"},
        thinking_level="low",
        extra_config={"candidate_count": 1},
    )
    settings = ModelSettings(temperature=0.4, max_tokens=64, provider_options=options)
    response = await gemini().chat(HI, settings=settings)
    assert response.text == "ok"
    request = sent(route)
    assert request["generationConfig"] == {
        "temperature": 0.4,
        "maxOutputTokens": 64,
        "topP": 0.8,
        "topK": 20,
        "seed": 5,
        "presencePenalty": 0.1,
        "frequencyPenalty": 0.2,
        "responseMimeType": "application/json",
        "responseJsonSchema": {"type": "object"},
        "candidateCount": 1,
        # google-genai sends the level as its enum's name
        "thinkingConfig": {"thinking_level": "LOW", "include_thoughts": True},
    }
    assert request["safetySettings"] == [safety]


@respx.mock
async def test_gemini_dynamic_thinking_budget_is_sent_as_minus_one() -> None:
    route = respx.post(url__regex=GEMINI).respond(json=GEMINI_BODY)
    await gemini().chat(HI, settings=ModelSettings(thinking_budget=-1))
    assert sent(route)["generationConfig"]["thinkingConfig"]["thinking_budget"] == -1


@respx.mock
async def test_gemini_refuses_extra_config_overwriting_a_setting_and_foreign_options() -> None:
    route = respx.post(url__regex=GEMINI).respond(json=GEMINI_BODY)
    settings = ModelSettings(
        max_tokens=5, provider_options=GeminiOptions(extra_config={"max_output_tokens": 9})
    )
    with pytest.raises(ConfigurationError, match=r"extra_config\['max_output_tokens'\]"):
        await gemini().chat(HI, settings=settings)
    foreign = ModelSettings(provider_options=OllamaOptions(keep_alive="1m"))
    with pytest.raises(ConfigurationError, match=r"^gemini cannot honour .*OllamaOptions"):
        await gemini().chat(HI, settings=foreign)
    assert not route.called


@respx.mock
async def test_gemini_refuses_a_config_key_google_genai_does_not_know_before_sending() -> None:
    route = respx.post(url__regex=GEMINI).respond(json=GEMINI_BODY)
    settings = ModelSettings(provider_options=GeminiOptions(extra_config={"bogus": 1}))
    with pytest.raises(ConfigurationError, match=r"^gemini cannot take these GeminiOptions: bogus"):
        await gemini().chat(HI, settings=settings)
    assert not route.called


# ---- agent -----------------------------------------------------------------------------


@respx.mock
async def test_a_run_with_an_unhonourable_setting_fails_with_configuration_error() -> None:
    route = respx.post(OPENAI_URL).respond(json=COMPLETION)
    agent = Agent(openai(), settings=ModelSettings(thinking_budget=256))
    with pytest.raises(ConfigurationError, match="thinking_budget"):
        await agent.run("hi")
    assert not route.called
    _ = httpx  # the transport stays unused: nothing was sent
