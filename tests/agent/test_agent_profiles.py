"""The agent follows the model's profile: the JSON tool protocol, modalities, context length.

Profiles are real files in a temporary directory named by ``GLASSAGENT_PROFILE_PATH``; the
scripted client records every request, so "refused before any request" is checked on it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from glassagent import Agent, LLMResponse, Message, ModelSettings, ToolCall, Usage, tool
from glassagent.errors import AttachmentError, ContextLengthError, UserError
from glassagent.events import parse_event
from glassagent.llm import Attachment, ToolDefinition
from glassagent.profiles import profile_file_name, reload_profiles
from glassagent.testing import ScriptedClient

PNG = Attachment(data=b"\x89PNG\r\n", mime_type="image/png", name="cat.png")


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def shout(text: str) -> str:
    """Repeat the text, louder."""
    return text.upper() * 4


def profile_data(
    model_id: str,
    *,
    function_calling: bool = True,
    modalities: tuple[str, ...] = ("text",),
    context_length: int = 8192,
) -> dict[str, Any]:
    return {
        "basic_info": {"id": model_id, "name": model_id, "provider": "acme"},
        "capabilities": {"context_length": context_length},
        "features": {
            "supports_function_calling": function_calling,
            "supports_streaming": True,
            "is_multimodal": modalities != ("text",),
            "input_modalities": list(modalities),
            "supports_reasoning": False,
        },
    }


@pytest.fixture
def profiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A profile directory named by GLASSAGENT_PROFILE_PATH; write profiles into it."""
    directory = tmp_path / "profiles"
    directory.mkdir()
    monkeypatch.setenv("GLASSAGENT_PROFILE_PATH", str(directory))
    reload_profiles()
    yield directory
    reload_profiles()


def write(directory: Path, data: dict[str, Any]) -> None:
    path = directory / profile_file_name(data["basic_info"]["id"])
    path.write_text(json.dumps(data), encoding="utf-8")


# -- the JSON tool protocol for a model without native function calling ---------------------


async def test_a_model_without_function_calling_gets_the_json_tool_protocol(
    profiles: Path,
) -> None:
    write(profiles, profile_data("acme-text", function_calling=False))
    client = ScriptedClient(
        [
            '{"thought": "add them", "tool_call": {"name": "add", "input": {"a": 1, "b": 2}}}',
            '{"thought": "done", "response": "1 + 2 = 3"}',
        ],
        model="acme-text",
    )
    run = Agent(client, [add], system="Be brief.").run("What is 1 + 2?")
    events = [event async for event in run]
    result = run.result
    assert result is not None
    assert result.text == "1 + 2 = 3"
    requests = [e for e in events if e.type == "llm_request"]
    assert [e.tool_protocol for e in requests] == ["json", "json"]
    # the client was offered no native tools: they are in the system prompt
    first, second = client.requests
    assert first.tools == ()
    assert second.tools == ()
    assert first.system is not None
    assert first.system.startswith("Be brief.")
    assert "Reply with exactly one JSON object" in first.system
    assert "- add:" in first.system
    # the tool round went back as protocol JSON
    assert second.messages[-1].role == "user"
    assert json.loads(second.messages[-1].content) == {
        "tool_result": {"name": "add", "result": "3"}
    }
    done = [e for e in events if e.type == "function_execution_complete"]
    assert [(e.execution.function_name, e.execution.result) for e in done] == [("add", "3")]
    # the raw JSON is never streamed as answer text; the thought is thinking
    assert "".join(e.text for e in events if e.type == "text_chunk") == "1 + 2 = 3"
    assert [e.text for e in events if e.type == "thinking_chunk"] == ["add them", "done"]
    # the neutral conversation is kept, and the client itself is unchanged
    assert result.new_messages[1].tool_calls[0].name == "add"
    assert client.tool_protocol == "native"


async def test_a_model_with_function_calling_keeps_native_tools(profiles: Path) -> None:
    write(profiles, profile_data("acme-tools", function_calling=True))
    client = ScriptedClient(
        [LLMResponse(tool_calls=[ToolCall("c1", "add", {"a": 1, "b": 2})]), "3"],
        model="acme-tools",
    )
    result = await Agent(client, [add]).run("1 + 2?")
    assert [r.tools[0].name for r in client.requests] == ["add", "add"]
    assert {e.tool_protocol for e in result.events if e.type == "llm_request"} == {"native"}


async def test_a_client_that_chooses_its_protocol_itself_is_left_to_it(profiles: Path) -> None:
    write(profiles, profile_data("acme-text", function_calling=False))
    client = ScriptedClient(["fine"], model="acme-text")
    client.tool_protocol = "json"  # as a client that speaks the protocol on its own
    await Agent(client, [add]).run("hi")
    assert client.requests[0].tools[0].name == "add"  # not wrapped a second time


async def test_without_a_profile_nothing_changes() -> None:
    client = ScriptedClient(["ok"], model="no-profile-model")
    huge = "word " * 50_000  # far more than any checked window: there is none to check
    result = await Agent(client, [add]).run(huge, attachments=[PNG])
    assert result.text == "ok"
    assert client.requests[0].tools[0].name == "add"


# -- modalities ------------------------------------------------------------------------------


async def test_an_attachment_the_model_cannot_read_is_refused_before_any_request(
    profiles: Path,
) -> None:
    write(profiles, profile_data("acme-text"))
    client = ScriptedClient(["never"], model="acme-text")
    run = Agent(client).run("What is in it?", attachments=[PNG])
    with pytest.raises(AttachmentError) as caught:
        await run
    assert isinstance(caught.value, UserError)
    assert client.requests == []
    message = str(caught.value)
    assert "'cat.png' (image/png) is image input" in message
    assert "reads only text" in message
    assert caught.value.provider == "scripted"
    result = caught.value.result
    assert result is not None
    assert result.stop_reason == "error"
    assert [e.type for e in result.events] == ["error"]


async def test_an_attachment_in_the_history_is_checked_too(profiles: Path) -> None:
    write(profiles, profile_data("acme-text"))
    client = ScriptedClient(["never"], model="acme-text")
    earlier = [Message(role="user", content="see", attachments=(PNG,)), Message(role="assistant")]
    with pytest.raises(AttachmentError):
        await Agent(client).run("And now?", messages=earlier)
    assert client.requests == []


@pytest.mark.parametrize(
    "attachment",
    [
        PNG,
        Attachment(data=b"hello", mime_type="text/plain", name="a.txt"),
        Attachment(data=b"{}", mime_type="application/json", name="a.json"),
        Attachment(data=b"\x00", mime_type="application/octet-stream", name="blob"),
    ],
    ids=["image", "text", "json", "unknown"],
)
async def test_attachments_the_model_reads_or_of_unknown_kind_are_sent(
    profiles: Path, attachment: Attachment
) -> None:
    write(profiles, profile_data("acme-vision", modalities=("text", "image")))
    client = ScriptedClient(["seen"], model="acme-vision")
    result = await Agent(client).run("Look", attachments=[attachment])
    assert result.text == "seen"
    assert client.requests[0].messages[-1].attachments == (attachment,)


async def test_audio_for_a_model_that_reads_images_is_refused(profiles: Path) -> None:
    write(profiles, profile_data("acme-vision", modalities=("text", "image")))
    client = ScriptedClient(["never"], model="acme-vision")
    clip = Attachment(data=b"RIFF", mime_type="audio/wav", name="clip.wav")
    with pytest.raises(AttachmentError, match=r"is audio input.*reads only text, image"):
        await Agent(client).run("Listen", attachments=[clip])
    assert client.requests == []


# -- context length --------------------------------------------------------------------------


async def test_a_conversation_longer_than_the_context_is_refused_before_the_request(
    profiles: Path,
) -> None:
    write(profiles, profile_data("acme-small", context_length=100))
    client = ScriptedClient(["never"], model="acme-small")
    with pytest.raises(ContextLengthError) as caught:
        await Agent(client).run("x" * 1000)  # about 250 tokens at 4 characters a token
    assert client.requests == []
    error = caught.value
    assert isinstance(error, UserError)
    assert (error.estimated_tokens, error.context_length, error.model) == (250, 100, "acme-small")
    assert "about 250 tokens (estimated), more than its context_length of 100" in str(error)
    assert error.result is not None
    assert error.result.stop_reason == "error"


async def test_a_conversation_that_fits_is_sent(profiles: Path) -> None:
    write(profiles, profile_data("acme-small", context_length=100))
    client = ScriptedClient(["fits"], model="acme-small")
    assert (await Agent(client).run("x" * 380)).text == "fits"  # about 95 tokens


async def test_the_next_request_is_sized_from_the_last_reported_prompt(profiles: Path) -> None:
    write(profiles, profile_data("acme-small", context_length=120))
    client = ScriptedClient(
        [
            # the model reports a prompt of 100 tokens (a system prompt, a template, ...)
            LLMResponse(
                tool_calls=[ToolCall("c1", "shout", {"text": "a" * 20})],
                usage=Usage(input_tokens=100, output_tokens=5),
            ),
            "never",
        ],
        model="acme-small",
    )
    with pytest.raises(ContextLengthError) as caught:
        await Agent(client, [shout]).run("hi")
    # 80 characters of tool result and a call: by characters alone the request is small
    assert len(client.requests) == 1
    assert caught.value.estimated_tokens > 120
    events = caught.value.result.events  # type: ignore[union-attr]
    assert [e.type for e in events][-2:] == ["sending_function_response", "error"]
    for event in events:
        assert parse_event(json.loads(json.dumps(event.to_dict()))) == event


async def test_earlier_tool_rounds_go_as_protocol_json_also_without_tools(
    profiles: Path,
) -> None:
    write(profiles, profile_data("acme-text", function_calling=False))
    earlier = [
        Message(role="user", content="1 + 2?"),
        Message(role="assistant", tool_calls=(ToolCall("c1", "add", {"a": 1, "b": 2}),)),
        Message(role="tool", content="3", tool_call_id="c1", name="add"),
        Message(role="assistant", content="3"),
    ]
    client = ScriptedClient(["Plain text, no tools offered."], model="acme-text")
    result = await Agent(client).run("Thanks", messages=earlier)
    assert result.text == "Plain text, no tools offered."
    sent = client.requests[0].messages
    assert [m.role for m in sent] == ["user", "assistant", "user", "assistant", "user"]
    assert json.loads(sent[1].content) == {"tool_call": {"name": "add", "input": {"a": 1, "b": 2}}}
    assert client.requests[0].system is None
    # a plain answer stays plain without tools: shown as {"response": ...}, small models copy it
    assert sent[3].content == "3"


async def test_with_tools_plain_answers_of_earlier_turns_go_as_protocol_json(
    profiles: Path,
) -> None:
    write(profiles, profile_data("acme-text", function_calling=False))
    earlier = [Message(role="user", content="Hi"), Message(role="assistant", content="Hello.")]
    client = ScriptedClient(['{"response": "Sure."}'], model="acme-text")
    result = await Agent(client, [add]).run("Add?", messages=earlier)
    assert result.text == "Sure."
    assert json.loads(client.requests[0].messages[1].content) == {"response": "Hello."}


async def test_the_wrapped_client_answers_chat_by_the_protocol_too() -> None:
    from glassagent._agent.json_tools import JsonToolsClient

    inner = ScriptedClient(['{"tool_call": {"name": "add", "input": {"a": 2, "b": 2}}}'])
    client = JsonToolsClient(inner)
    response = await client.chat([Message(role="user", content="2 + 2?")], [add.definition])
    assert [(c.name, c.input) for c in response.tool_calls] == [("add", {"a": 2, "b": 2})]
    assert inner.requests[0].tools == ()
    assert (client.provider_name, client.model, client.tool_protocol) == (
        "scripted",
        "scripted",
        "json",
    )


def test_the_request_size_counts_new_messages_and_sees_a_rewritten_history() -> None:
    from glassagent._agent.guard import RequestSize, request_chars

    tools = (ToolDefinition("add", "Add two numbers.", {"type": "object", "properties": {}}),)
    call = ToolCall("c1", "add", {"a": 1, "b": [2, 3]})
    history = [Message(role="user", content="hello")]
    size = RequestSize()
    for turn in range(3):
        assert size.chars(history, tools, "be brief") == request_chars(history, tools, "be brief")
        history += [
            Message(role="assistant", content="", thinking="hm", tool_calls=(call,)),
            Message(role="tool", content=f"{turn}", tool_call_id="c1", name="add"),
        ]
    rewritten = [Message(role="user", content="a much longer first message"), *history[1:]]
    assert size.chars(rewritten, (), None) == request_chars(rewritten, (), None)
    assert size.chars(history[:2], tools, None) == request_chars(history[:2], tools, None)


# -- the profile's max_tokens as every call's default ------------------------------------------


def settings_sent(client: ScriptedClient) -> list[Any]:
    return [request.settings.max_tokens for request in client.requests]


async def test_a_call_without_max_tokens_gets_the_profiles_and_it_fits_the_window(
    profiles: Path,
) -> None:
    data = profile_data("acme-small", context_length=1000)
    data["capabilities"]["max_completion_tokens"] = 600
    write(profiles, data)
    client = ScriptedClient(["short", "long", "mine"], model="acme-small")
    agent = Agent(client)
    await agent.run("hi")  # a prompt of about 1 token: the answer may have all 600
    await agent.run("x" * 2000)  # about 500 tokens of prompt leave about 500 for the answer
    first, second = settings_sent(client)
    assert first == 600
    assert 480 <= second <= 510
    await agent.run("x" * 2000, settings=ModelSettings(max_tokens=700))  # the caller's wins
    assert settings_sent(client)[-1] == 700


async def test_no_max_tokens_default_for_a_model_that_does_not_take_it(profiles: Path) -> None:
    data = profile_data("acme-reasoner")
    data["capabilities"]["max_completion_tokens"] = 600
    data["capabilities"]["supported_parameters"] = ["temperature"]
    write(profiles, data)
    client = ScriptedClient(["ok"], model="acme-reasoner")
    await Agent(client).run("hi")
    assert settings_sent(client) == [None]


@pytest.mark.parametrize("name", ["max_output_tokens", "max_completion_tokens", "max_tokens"])
async def test_the_design_documents_name_for_the_limit_takes_the_default(
    profiles: Path, name: str
) -> None:
    # ai_client_rule.txt §7 lists "max_output_tokens" among supported_parameters
    data = profile_data("acme-seed")
    data["capabilities"]["max_completion_tokens"] = 600
    data["capabilities"]["supported_parameters"] = ["temperature", name]
    write(profiles, data)
    client = ScriptedClient(["ok"], model="acme-seed")
    await Agent(client).run("hi")
    assert settings_sent(client) == [600]
