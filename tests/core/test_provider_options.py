"""Open provider options: the `ProviderOptions` base, a plugin's own class, `AnthropicOptions`."""

from __future__ import annotations

import json
import pickle
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import pytest
import respx

from glassagent import Agent, ModelSettings
from glassagent.errors import ConfigurationError, UserError
from glassagent.events import LLMRequestEvent, parse_event
from glassagent.llm import (
    AnthropicClient,
    AnthropicOptions,
    BaseLLMClient,
    GeminiOptions,
    LLMResponse,
    Message,
    OllamaOptions,
    OpenAICompatibleClient,
    OpenAIOptions,
    ProviderOptions,
    RetryPolicy,
    ToolDefinition,
)

HI = (Message(role="user", content="Hello, Claude"),)
WEATHER = ToolDefinition(
    "get_weather",
    "Get the current weather in a given location",
    {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]},
)
CLOCK = ToolDefinition("get_time", "Get the time", {"type": "object", "properties": {}})
ANTHROPIC_URL = "https://api.anthropic.com/v1/messages"
ANSWER = {
    "id": "msg_01",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5-20250929",
    "content": [{"type": "text", "text": "Hi!"}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 12, "output_tokens": 6},
}


# ---- a plugin's own options, and a client that reads them -----------------------------------


@dataclass(frozen=True, kw_only=True)
class BeamOptions(ProviderOptions):
    """A plugin's options: one checked field, one merged mapping, one portable twin."""

    kind: Literal["beam"] = "beam"
    width: int | None = None
    max_new_tokens: int | None = None
    extra_body: Mapping[str, Any] | None = None

    merged_mappings = ("extra_body",)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.width is not None and (not isinstance(self.width, int) or self.width < 1):
            raise UserError(
                f"BeamOptions.width must be an integer of at least 1, not {self.width!r}."
            )

    def overlaps(self, settings: Any) -> Sequence[tuple[str, str]]:
        if settings.max_tokens is not None and self.max_new_tokens is not None:
            return [("max_tokens", "BeamOptions.max_new_tokens")]
        return ()


class BeamClient(BaseLLMClient):
    """Answers with the options it was given, as JSON."""

    provider_name = "beam"
    model = "beam-1"

    async def chat(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        system: str | None = None,
        *,
        settings: ModelSettings | None = None,
    ) -> LLMResponse:
        options = BeamOptions.from_settings(settings, self.provider_name)
        seen = None if options is None else {"width": options.width, "extra": options.extra_body}
        return LLMResponse(json.dumps(seen))


def test_model_settings_take_any_provider_options_and_refuse_anything_else() -> None:
    for options in (BeamOptions(width=2), AnthropicOptions(top_k=3), OpenAIOptions(seed=1)):
        assert ModelSettings(provider_options=options).provider_options is options
        assert isinstance(options, ProviderOptions)
    with pytest.raises(UserError, match=r"provider_options must be .*ProviderOptions.* not dict"):
        ModelSettings(provider_options={"kind": "beam", "width": 2})  # type: ignore[arg-type]


async def test_a_plugin_client_reads_its_merged_options_and_refuses_another_class() -> None:
    agent = Agent(
        BeamClient(),
        settings=ModelSettings(provider_options=BeamOptions(width=2, extra_body={"a": 1})),
    )
    run_level = ModelSettings(provider_options=BeamOptions(extra_body={"b": 2}))
    result = await agent.run("hi", settings=run_level)
    assert json.loads(result.text) == {"width": 2, "extra": {"a": 1, "b": 2}}
    assert json.loads((await Agent(BeamClient()).run("hi")).text) is None
    with pytest.raises(
        ConfigurationError, match=r"^beam cannot honour .*OpenAIOptions.*BeamOptions"
    ):
        await BeamClient().chat(HI, settings=ModelSettings(provider_options=OpenAIOptions(seed=1)))


@respx.mock
async def test_a_shipped_client_refuses_a_plugins_options_before_sending() -> None:
    route = respx.post("http://127.0.0.1:9/v1/chat/completions")
    client = OpenAICompatibleClient("m", base_url="http://127.0.0.1:9/v1", api_key="k")
    async with client:
        with pytest.raises(ConfigurationError, match=r"BeamOptions.*takes OpenAIOptions"):
            await client.chat(HI, settings=ModelSettings(provider_options=BeamOptions(width=1)))
    assert not route.called


def test_a_plugins_checks_and_portable_twins_are_enforced() -> None:
    with pytest.raises(UserError, match=r"BeamOptions\.width"):
        BeamOptions(width=0)
    settings = ModelSettings(provider_options=BeamOptions(max_new_tokens=5))
    with pytest.raises(UserError, match=r"ModelSettings\.max_tokens and BeamOptions\.max_new"):
        ModelSettings(max_tokens=9).merge(settings)


def test_merge_combines_only_the_declared_mappings_and_refuses_another_class() -> None:
    first = BeamOptions(width=2, extra_body={"a": 1, "b": 1})
    assert first.merge(BeamOptions(extra_body={"b": 2})) == BeamOptions(
        width=2, extra_body={"a": 1, "b": 2}
    )
    first_anthropic = AnthropicOptions(metadata={"user_id": "u1"}, extra_body={"x": 1})
    second = AnthropicOptions(metadata={"tier": "t"}, extra_body={"y": 2}, cache_system=False)
    merged = first_anthropic.merge(second)
    assert merged.metadata == {"tier": "t"}  # replaced whole: not a merged mapping
    assert merged.extra_body == {"x": 1, "y": 2}
    assert merged.cache_system is False  # False is set: it overrides
    with pytest.raises(UserError, match=r"BeamOptions\(\.\.\.\) into AnthropicOptions"):
        first_anthropic.merge(first)  # type: ignore[arg-type]


def test_classes_must_fix_a_kind_of_their_own_and_the_base_is_not_options() -> None:
    with pytest.raises(UserError, match="must fix its provider family"):

        @dataclass(frozen=True, kw_only=True)
        class NoKind(ProviderOptions):
            width: int | None = None

    with pytest.raises(UserError, match="cannot take kind 'anthropic': AnthropicOptions has it"):

        @dataclass(frozen=True, kw_only=True)
        class Impostor(ProviderOptions):
            kind: Literal["anthropic"] = "anthropic"

    with pytest.raises(UserError, match="is the base class"):
        ProviderOptions(kind="beam")
    with pytest.raises(UserError, match=r"OpenAIOptions\.kind is 'openai', not 'gemini'"):
        OpenAIOptions(kind="gemini")  # type: ignore[arg-type]


# ---- from_dict: extra="forbid" ---------------------------------------------------------------


def test_from_dict_refuses_unknown_keys_naming_the_fields_and_the_closest_one() -> None:
    with pytest.raises(UserError) as caught:
        AnthropicOptions.from_dict({"top_k": 3, "topp": 0.9, "colour": "red"})
    message = str(caught.value)
    assert message.startswith("AnthropicOptions has no fields 'topp' (did you mean 'top_p'?), ")
    assert "'colour';" in message
    assert "its fields are: top_k, top_p, metadata, service_tier, cache_control" in message
    with pytest.raises(UserError, match=r"no field 'widht' \(did you mean 'width'\?\)"):
        ProviderOptions.from_dict({"kind": "beam", "widht": 2})


def test_from_dict_picks_the_class_by_kind_and_checks_values() -> None:
    assert ProviderOptions.from_dict({"kind": "beam", "width": 3}) == BeamOptions(width=3)
    assert BeamOptions.from_dict({"width": 3}) == BeamOptions(width=3)
    assert OllamaOptions.from_dict({"kind": "ollama", "think": True}) == OllamaOptions(think=True)
    gemini = GeminiOptions.from_dict({"safety_settings": [{"category": "C", "threshold": "T"}]})
    assert gemini.safety_settings == ({"category": "C", "threshold": "T"},)
    for data, error in [
        ({"width": 3}, "needs a 'kind'"),
        ({"kind": "nope"}, r"no provider options have kind 'nope' \(known: anthropic, beam"),
        ({"kind": "beam", "width": 0}, r"BeamOptions\.width"),
    ]:
        with pytest.raises(UserError, match=rf"(?i){error}"):
            ProviderOptions.from_dict(data)
    with pytest.raises(UserError, match="BeamOptions has kind 'beam', not 'openai'"):
        BeamOptions.from_dict({"kind": "openai"})
    with pytest.raises(UserError, match="takes a mapping"):
        ProviderOptions.from_dict([("kind", "beam")])  # type: ignore[arg-type]


def test_the_shipped_classes_are_public_picklable_and_rebuilt_from_their_dict() -> None:
    shipped = [
        AnthropicOptions(top_k=5, cache_tools="1h", metadata={"user_id": "u1"}),
        GeminiOptions(top_k=2, safety_settings=({"category": "C", "threshold": "T"},)),
        OllamaOptions(options={"num_ctx": 4096}, keep_alive="5m"),
        OpenAIOptions(seed=3, extra_body={"x": [1]}),
    ]
    for options in shipped:
        cls = type(options)
        assert cls.__module__ == "glassagent.llm"
        assert pickle.loads(pickle.dumps(options)) == options
        data = json.loads(json.dumps(asdict(options)))
        assert ProviderOptions.from_dict(data) == options
    assert ProviderOptions.__module__ == "glassagent.llm"


async def test_plugin_options_round_trip_through_llm_request_events() -> None:
    options = BeamOptions(width=4, extra_body={"n": [1, 2]})
    agent = Agent(BeamClient(), settings=ModelSettings(provider_options=options))
    events = [e async for e in agent.run("hi")]
    request = next(e for e in events if isinstance(e, LLMRequestEvent))
    data = json.loads(json.dumps(request.to_dict()))
    assert data["settings"]["provider_options"]["kind"] == "beam"
    again = parse_event(data)
    assert again == request
    assert type(again.settings.provider_options) is BeamOptions  # type: ignore[union-attr]
    data["settings"]["provider_options"]["widht"] = 5
    with pytest.raises(UserError, match=r"(?s)Not a valid event dict.*did you mean 'width'"):
        parse_event(data)


def test_events_with_shipped_options_parse_without_importing_glassagent_llm() -> None:
    code = (
        "import sys\n"
        "from glassagent.events import parse_event\n"
        "assert 'glassagent.llm' not in sys.modules\n"
        "settings = {'provider_options': {'kind': 'anthropic', 'top_k': 3}}\n"
        "event = parse_event({'type': 'llm_request', 'run_id': 'r', 'seq': 1, 'iteration': 1,\n"
        "    'provider': 'anthropic', 'model': 'm', 'messages': [], 'tools': [],\n"
        "    'system': None, 'settings': settings})\n"
        "print(type(event.settings.provider_options).__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "AnthropicOptions"


# ---- AnthropicOptions on the wire -------------------------------------------------------------


@pytest.fixture
async def anthropic():
    key = "sk-ant-api03-test0123456789abcdefXYZ"
    async with AnthropicClient(
        "claude-sonnet-4-5", api_key=key, retry=RetryPolicy(max_retries=0)
    ) as client:
        yield client


def _body(route: respx.Route, n: int = 0) -> dict[str, Any]:
    return json.loads(route.calls[n].request.content)


@respx.mock
async def test_anthropic_options_go_into_the_body_exactly(anthropic) -> None:
    route = respx.post(ANTHROPIC_URL).respond(json=ANSWER)
    options = AnthropicOptions(
        top_k=40,
        top_p=0.9,
        metadata={"user_id": "4f1c9a"},
        service_tier="standard_only",
        cache_control={"type": "ephemeral"},
        cache_system=True,
        cache_tools="1h",
        extra_body={"container": "c-1"},
    )
    settings = ModelSettings(temperature=0.2, provider_options=options)
    await anthropic.chat(HI, [WEATHER, CLOCK], system="Be brief.", settings=settings)
    assert _body(route) == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hello, Claude"}]}],
        "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        "tools": [
            {
                "name": "get_weather",
                "description": WEATHER.description,
                "input_schema": WEATHER.parameters,
            },
            {
                "name": "get_time",
                "description": "Get the time",
                "input_schema": CLOCK.parameters,
                "cache_control": {"type": "ephemeral", "ttl": "1h"},
            },
        ],
        "temperature": 0.2,
        "top_k": 40,
        "top_p": 0.9,
        "metadata": {"user_id": "4f1c9a"},
        "service_tier": "standard_only",
        "cache_control": {"type": "ephemeral"},
        "container": "c-1",
    }


@respx.mock
async def test_anthropic_cache_marks_need_something_to_mark_and_streams_keep_them(
    anthropic,
) -> None:
    route = respx.post(ANTHROPIC_URL).respond(json=ANSWER)
    marks = ModelSettings(provider_options=AnthropicOptions(cache_system="5m", cache_tools=True))
    await anthropic.chat(HI, settings=marks)  # no system prompt, no tools: nothing marked
    body = _body(route)
    assert "system" not in body
    assert "tools" not in body
    assert "cache_control" not in json.dumps(body)
    off = ModelSettings(provider_options=AnthropicOptions(cache_system=False))
    await anthropic.chat(HI, system="Be brief.", settings=off)
    assert _body(route, 1)["system"] == "Be brief."
    events = (
        "event: message_start\n"
        'data: {"type": "message_start", "message": {"id": "m", "type": "message", '
        '"role": "assistant", "content": [], "model": "c", "usage": {"input_tokens": 1, '
        '"output_tokens": 1}}}\n\n'
        "event: message_delta\n"
        'data: {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, '
        '"usage": {"output_tokens": 1}}\n\n'
        'event: message_stop\ndata: {"type": "message_stop"}\n\n'
    )
    route.respond(text=events, headers={"content-type": "text/event-stream"})
    parts = [p async for p in anthropic.stream(HI, system="Be brief.", settings=marks)]
    assert isinstance(parts[-1], LLMResponse)
    sent = _body(route, 2)
    assert sent["stream"] is True
    assert sent["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "5m"}


@respx.mock
@pytest.mark.parametrize(
    ("options", "key"),
    [
        (AnthropicOptions(extra_body={"max_tokens": 10}), "extra_body['max_tokens']"),
        (AnthropicOptions(extra_body={"model": "other"}), "extra_body['model']"),
        (AnthropicOptions(extra_body={"system": "other"}), "extra_body['system']"),
    ],
)
async def test_anthropic_extra_body_may_not_overwrite_what_glassagent_sets(
    anthropic, options: AnthropicOptions, key: str
) -> None:
    route = respx.post(ANTHROPIC_URL).respond(json=ANSWER)
    settings = ModelSettings(provider_options=options)
    with pytest.raises(
        ConfigurationError, match="^anthropic cannot take " + re.escape(f"AnthropicOptions.{key}:")
    ):
        await anthropic.chat(HI, system="Be brief.", settings=settings)
    assert not route.called


@respx.mock
async def test_anthropic_refuses_another_providers_options(anthropic) -> None:
    route = respx.post(ANTHROPIC_URL).respond(json=ANSWER)
    settings = ModelSettings(provider_options=GeminiOptions(top_k=3))
    with pytest.raises(
        ConfigurationError,
        match=r"^anthropic cannot honour .*GeminiOptions.*takes AnthropicOptions",
    ):
        await anthropic.chat(HI, settings=settings)
    assert not route.called


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"top_k": 0}, "top_k"),
        ({"top_p": 1.5}, "top_p"),
        ({"metadata": ["user_id"]}, "metadata"),
        ({"service_tier": ""}, "service_tier"),
        ({"cache_control": "ephemeral"}, "cache_control"),
        ({"cache_system": "2h"}, "cache_system"),
        ({"cache_tools": 1}, "cache_tools"),
        ({"extra_body": [("a", 1)]}, "extra_body"),
    ],
)
def test_invalid_anthropic_options_raise_user_error_naming_the_field(
    values: dict[str, Any], field: str
) -> None:
    with pytest.raises(UserError, match=rf"AnthropicOptions\.{field}"):
        AnthropicOptions(**values)
