"""What `ResponsesClient` sends, checked against the Responses API's documented shapes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from contract_suite import KEY, NO_RETRY, WEATHER, Call, Reply, WireServer, ask
from glassagent_responses import ResponsesClient, ResponsesOptions, ResponsesWire
from glassagent_responses.wire import REASONING, RESPONSE_ID
from test_contract import RESPONSES, function_call, response

from glassagent.errors import (
    ConfigurationError,
    ProviderUnavailableError,
    RateLimitError,
    ResponseParseError,
    UserError,
)
from glassagent.llm import (
    Attachment,
    Message,
    ModelRequest,
    ModelSettings,
    OpenAIOptions,
    OutputSchema,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    ToolDefinition,
    Usage,
)


def body(settings: ModelSettings | None = None, **request: Any) -> dict[str, Any]:
    """The body `ResponsesWire` writes for one request."""
    request.setdefault("messages", [Message(role="user", content="Hi")])
    built = ModelRequest.build(settings=settings, **request)
    return ResponsesWire().request_body("gpt-test", built, stream=False)


def reply(payload: dict[str, Any]) -> Reply:
    return Reply(body=[json.dumps(payload).encode()])


async def test_a_tool_round_trip_goes_as_input_items() -> None:
    call = ToolCall("call_1", "get_weather", {"city": "Paris"})
    messages = [
        Message(role="user", content="Weather in Paris?"),
        Message(role="assistant", content="", tool_calls=(call,)),
        Message(role="tool", content="Sunny", tool_call_id="call_1", name="get_weather"),
    ]
    settings = ModelSettings(tool_choice="required", temperature=0.2, max_tokens=50)
    message = {"type": "message", "role": "assistant", "content": [{"type": "output_text"}]}
    message["content"] = [{"type": "output_text", "text": "Ok"}]
    answer = response("completed", [message])
    async with WireServer(reply(answer)) as server, RESPONSES.client(server) as client:
        result = await client.chat(messages, [WEATHER], "Be brief.", settings=settings)
    (request,) = server.requests
    assert (request.path, request.headers["authorization"]) == ("/v1/responses", f"Bearer {KEY}")
    assert request.json() == {
        "model": "gpt-test",
        "input": [
            {"role": "user", "content": "Weather in Paris?"},
            {
                "type": "function_call",
                "call_id": "call_1",
                "name": "get_weather",
                "arguments": '{"city": "Paris"}',
            },
            {"type": "function_call_output", "call_id": "call_1", "output": "Sunny"},
        ],
        "instructions": "Be brief.",
        "tools": [
            {
                "type": "function",
                "name": "get_weather",
                "description": WEATHER.description,
                "parameters": WEATHER.parameters,
                "strict": False,
            }
        ],
        "tool_choice": "required",
        "temperature": 0.2,
        "max_output_tokens": 50,
    }
    assert (result.text, result.provider_metadata[RESPONSE_ID]) == ("Ok", "resp_1")


@pytest.mark.parametrize(
    ("choice", "sent"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("get_weather", {"type": "function", "name": "get_weather"}),
    ],
)
def test_tool_choices(choice: str, sent: Any) -> None:
    assert body(ModelSettings(tool_choice=choice), tools=[WEATHER])["tool_choice"] == sent


def test_a_structured_answer_goes_as_text_format() -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    output = OutputSchema(name="place", schema=schema, strict=True)
    fmt = {"type": "json_schema", "name": "place", "schema": schema, "strict": True}
    assert body(ModelSettings(output_schema=output))["text"] == {"format": fmt}


def test_options_go_into_the_body() -> None:
    options = ResponsesOptions(
        reasoning_effort="low",
        reasoning_summary="auto",
        store=False,
        previous_response_id="resp_0",
        top_p=0.5,
        extra_body={"service_tier": "flex"},
    )
    sent = body(ModelSettings(provider_options=options))
    assert sent["reasoning"] == {"effort": "low", "summary": "auto"}
    assert (sent["store"], sent["include"]) == (False, ["reasoning.encrypted_content"])
    assert (sent["previous_response_id"], sent["top_p"], sent["service_tier"]) == (
        "resp_0",
        0.5,
        "flex",
    )


@pytest.mark.parametrize(
    "wrong",
    [
        {"reasoning_effort": "max"},
        {"reasoning_summary": True},
        {"store": "no"},
        {"previous_response_id": ""},
        {"top_p": 1.5},
        {"top_p": float("nan")},
        {"extra_body": ["x"]},
    ],
)
def test_options_are_checked_when_made(wrong: dict[str, Any]) -> None:
    with pytest.raises(UserError, match="ResponsesOptions"):
        ResponsesOptions(**wrong)


def test_options_from_a_mapping_refuse_unknown_keys() -> None:
    assert ResponsesOptions.from_dict({"top_p": 0.1}) == ResponsesOptions(top_p=0.1)
    with pytest.raises(UserError, match="did you mean 'top_p'"):
        ResponsesOptions.from_dict({"top_pp": 0.1})


@pytest.mark.parametrize(
    "settings",
    [
        ModelSettings(stop_sequences=("END",)),
        ModelSettings(thinking_budget=1024),
        ModelSettings(provider_options=OpenAIOptions(top_p=0.5)),  # another provider's
        ModelSettings(provider_options=ResponsesOptions(extra_body={"model": "other"})),
        ModelSettings(provider_options=ResponsesOptions(top_p=0.5, extra_body={"top_p": 1})),
    ],
)
def test_what_the_api_cannot_honour_is_refused(settings: ModelSettings) -> None:
    with pytest.raises(ConfigurationError):
        body(settings)


def test_attachments_go_as_input_parts() -> None:
    image = Attachment(data=b"\x89PNG", mime_type="image/png", name="a.png")
    note = Attachment(data=b"hello", mime_type="text/plain", name="a.txt")
    message = Message(role="user", content="Look", attachments=(image, note))
    (item,) = body(messages=[message])["input"]
    assert item["content"] == [
        {"type": "input_text", "text": "Look"},
        {"type": "input_image", "image_url": "data:image/png;base64,iVBORw=="},
        {"type": "input_text", "text": "[a.txt]\nhello"},
    ]


async def test_reasoning_is_read_and_sent_back_with_the_next_request() -> None:
    summary = [{"type": "summary_text", "text": "Paris, so the weather tool."}]
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": summary, "encrypted_content": "gA"}
    call = function_call(Call("call_9", "get_weather", {}))
    first = response("completed", [reasoning, call])
    first["usage"] = {
        "input_tokens": 9,
        "input_tokens_details": {"cached_tokens": 5},
        "output_tokens": 40,
        "output_tokens_details": {"reasoning_tokens": 30},
    }
    async with WireServer(reply(first)) as server, RESPONSES.client(server) as client:
        answer = await client.chat([Message(role="user", content="Weather?")], [WEATHER])
        assert answer.thinking == "Paris, so the weather tool."
        assert answer.provider_metadata[REASONING] == [reasoning]
        assert answer.usage == Usage(9, 10, 30, cache_read_tokens=5)
        result = Message(role="tool", content="Sunny", tool_call_id="call_9", name="get_weather")
        history = [
            Message(role="user", content="Weather?"),
            client.format_assistant_message(answer),
        ]
        await client.chat([*history, result], [WEATHER])
    sent = server.requests[1].json()["input"]
    assert [item.get("type") for item in sent] == [
        None,
        "reasoning",
        "function_call",
        "function_call_output",
    ]
    assert sent[1] == reasoning


async def test_a_streamed_reasoning_summary_comes_as_thinking() -> None:
    delta = "response.reasoning_summary_text.delta"
    events = [
        (delta, {"type": delta, "item_id": "rs_1", "output_index": 0, "delta": "Hm"}),
        (delta, {"type": delta, "item_id": "rs_1", "output_index": 0, "delta": "m."}),
        (
            "response.completed",
            {"type": "response.completed", "response": response("completed", [])},
        ),
    ]
    async with WireServer(RESPONSES.stream(events)) as server, RESPONSES.client(server) as client:
        answer, parts = await ask(client, True)
    assert [p.text for p in parts if isinstance(p, ThinkingDelta)] == ["Hm", "m."]
    assert answer.thinking == "Hmm."


@pytest.mark.parametrize(
    ("last", "stop"),
    [
        ({"type": "response.completed", "response": {}}, "end_turn"),
        (
            {"type": "response.incomplete", "response": {"incomplete_details": {"reason": "x"}}},
            "other",
        ),
    ],
)
async def test_the_last_event_ends_a_stream_whose_response_has_no_status(
    last: dict[str, Any], stop: str
) -> None:
    text = {"type": "response.output_text.delta", "output_index": 0, "delta": "Sunny."}
    stream = RESPONSES.stream([(None, text), (None, last)])
    async with WireServer(stream) as server, RESPONSES.client(server) as client:
        answer, _ = await ask(client, True)
    assert (answer.text, answer.stop_reason) == ("Sunny.", stop)


async def test_failures_the_api_reports_are_typed() -> None:
    failed = {**response("completed", []), "status": "failed"}
    limited = {**failed, "error": {"code": "rate_limit_exceeded", "message": "Slow down."}}
    broken = {**failed, "error": {"code": "server_error", "message": "Oops."}}
    stream = RESPONSES.stream(
        [("response.failed", {"type": "response.failed", "response": broken})]
    )
    no_retry = ModelSettings(retry=NO_RETRY)
    async with WireServer(reply(limited), stream) as server, RESPONSES.client(server) as client:
        with pytest.raises(RateLimitError, match="Slow down"):
            await ask(client, False, settings=no_retry)
        with pytest.raises(ProviderUnavailableError, match="Oops"):
            await ask(client, True, settings=no_retry)


async def test_the_openai_key_goes_to_openai_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        ResponsesClient("gpt-test")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    assert ResponsesClient("gpt-test").get_masked_api_key() == f"{KEY[:4]}...{KEY[-4:]}"
    answer = response("completed", [])
    async with WireServer(reply(answer)) as server:
        client = ResponsesClient("gpt-test", base_url=server.url + "/v1")
        async with client:
            await client.chat([Message(role="user", content="Hi")])
    assert "authorization" not in server.requests[0].headers


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_field_of_the_wrong_type_is_named_and_the_key_kept_out(streamed: bool) -> None:
    echo = {"echo": KEY}  # an object where text belongs, echoing the key
    part = {"type": "output_text", "text": echo}
    whole = reply(response("completed", [{"type": "message", "content": [part]}]))
    delta = {"type": "response.output_text.delta", "output_index": 0, "delta": echo}
    served = RESPONSES.stream([(None, delta)]) if streamed else whole
    async with WireServer(served) as server, RESPONSES.client(server) as client:
        with pytest.raises(ResponseParseError) as caught:
            await ask(client, streamed)
    where = "a response.output_text.delta event" if streamed else "a content part"
    key = "delta" if streamed else "text"
    assert f"{where} whose {key!r} is an object, not a string" in str(caught.value)
    assert KEY not in str(caught.value)
    assert KEY not in str(caught.value.body)


async def test_malformed_bookkeeping_is_dropped_not_raised() -> None:
    answer = response("incomplete", [])
    answer["incomplete_details"] = {"reason": 5}
    answer["model"], answer["id"] = ["gpt"], ""
    answer["usage"] = {
        "input_tokens": 9.0,
        "output_tokens": True,
        "input_tokens_details": {"cached_tokens": 2**60},
        "output_tokens_details": "none",
    }
    async with WireServer(reply(answer)) as server, RESPONSES.client(server) as client:
        result, _ = await ask(client, False)
    assert (result.stop_reason, result.raw_stop_reason) == ("other", "incomplete")
    assert result.usage == Usage(input_tokens=9)
    assert result.model == "gpt-test"
    assert RESPONSE_ID not in result.provider_metadata


def test_function_tools_are_sent_non_strict() -> None:
    # Left out, ``strict`` is True in the Responses API: optional fields would be required.
    optional = {"type": "object", "properties": {"unit": {"type": "string"}}, "required": []}
    tool = ToolDefinition(name="temperature", description="Now.", parameters=optional)
    (sent,) = body(tools=[tool])["tools"]
    assert (sent["strict"], sent["parameters"]) == (False, optional)


def test_a_tool_results_attachments_go_as_parts_of_its_output() -> None:
    chart = Attachment(data=b"\x89PNG", mime_type="image/png", name="chart.png")
    report = Attachment(data=b"%PDF", mime_type="application/pdf", name="r.pdf")
    result = Message(role="tool", content="Done", tool_call_id="call_1", attachments=(chart,))
    bare = Message(role="tool", content="", tool_call_id="call_2", attachments=(report,))
    calls = (ToolCall("call_1", "plot", {}), ToolCall("call_2", "report", {}))
    asked = [Message(role="user", content="Plot it"), Message(role="assistant", tool_calls=calls)]
    items = body(messages=[*asked, result, bare])["input"][-2:]
    assert items == [
        {
            "type": "function_call_output",
            "call_id": "call_1",
            "output": [
                {"type": "input_text", "text": "Done"},
                {"type": "input_image", "image_url": "data:image/png;base64,iVBORw=="},
            ],
        },
        {
            "type": "function_call_output",
            "call_id": "call_2",
            "output": [
                {
                    "type": "input_file",
                    "filename": "r.pdf",
                    "file_data": "data:application/pdf;base64,JVBERg==",
                }
            ],
        },
    ]


def continued(previous: str) -> ModelSettings:
    return ModelSettings(provider_options=ResponsesOptions(previous_response_id=previous))


async def test_with_previous_response_id_only_the_new_items_are_sent() -> None:
    call = function_call(Call("call_9", "get_weather", {"city": "Paris"}))
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": []}
    first = reply(response("completed", [reasoning, call]))
    async with WireServer(first) as server, RESPONSES.client(server) as client:
        question = Message(role="user", content="Weather in Paris?")
        answer = await client.chat([question], [WEATHER], "Be brief.")
        assert answer.provider_metadata[RESPONSE_ID] == "resp_1"
        result = Message(role="tool", content="Sunny", tool_call_id="call_9")
        history = [question, client.format_assistant_message(answer), result]
        await client.chat(history, [WEATHER], "Be brief.", settings=continued("resp_1"))
    sent = server.requests[1].json()
    assert sent["previous_response_id"] == "resp_1"
    assert sent["input"] == [
        {"type": "function_call_output", "call_id": "call_9", "output": "Sunny"}
    ]
    assert sent["instructions"] == "Be brief."  # not carried over by the stored response


def turn(response_id: str | None, *calls: ToolCall) -> Message:
    metadata = {RESPONSE_ID: response_id} if response_id else {}
    text = "" if calls else "Hello."
    return Message(role="assistant", content=text, tool_calls=calls, provider_metadata=metadata)


def chat(question: str, response_id: str) -> list[Message]:
    return [Message(role="user", content=question), turn(response_id)]


CALL = ToolCall("call_1", "get_weather", {})
RESULT = Message(role="tool", content="Sunny", tool_call_id="call_1")


@pytest.mark.parametrize(
    ("history", "sent"),
    [
        # the last assistant turn, when no turn says which response it is
        ([Message(role="user", content="a"), turn(None, CALL), RESULT], ["function_call_output"]),
        # the turn of the stored response, though a newer one (of this run) follows it
        (
            [*chat("a", "resp_0"), Message(role="user", content="b"), turn("resp_1", CALL), RESULT],
            [None, "function_call", "function_call_output"],
        ),
        # a turn of another response only: the stored one saw none of these (the last
        # assistant turn would do here, but its function call would then be missing)
        (
            [Message(role="user", content="a"), turn("resp_1", CALL), RESULT],
            [None, "function_call", "function_call_output"],
        ),
    ],
)
def test_the_stored_response_is_found_by_its_id(history: list[Message], sent: list[Any]) -> None:
    items = body(continued("resp_0"), messages=history)["input"]
    assert [item.get("type") for item in items] == sent


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_refusal_is_the_text_and_stops_for_content_filter(streamed: bool) -> None:
    refusal = {"type": "refusal", "refusal": "I can't help with that."}
    message = {"type": "message", "role": "assistant", "content": [refusal]}
    whole = response("completed", [message])
    delta = "response.refusal.delta"
    events = [
        (delta, {"type": delta, "output_index": 0, "content_index": 0, "delta": "I can't "}),
        (delta, {"type": delta, "output_index": 0, "content_index": 0, "delta": "help with that."}),
        ("response.completed", {"type": "response.completed", "response": whole}),
    ]
    served = RESPONSES.stream(events) if streamed else reply(whole)
    async with WireServer(served) as server, RESPONSES.client(server) as client:
        answer, parts = await ask(client, streamed)
    assert answer.text == "I can't help with that."
    assert (answer.stop_reason, answer.raw_stop_reason) == ("content_filter", "refusal")
    if streamed:
        assert [p.text for p in parts if isinstance(p, TextDelta)] == [
            "I can't ",
            "help with that.",
        ]
