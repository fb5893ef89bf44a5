"""`ResponsesClient` keeps glassagent's provider contract (the suite of contract_suite.py).

`RESPONSES` writes answers as the Responses API documents them: a ``response`` object whose
``output`` holds ``message`` and ``function_call`` items, and its stream of named events
(``response.output_text.delta``, ``response.function_call_arguments.delta``...) ended by
``response.completed`` or ``response.incomplete``.
"""

from __future__ import annotations

import json
from itertools import count
from typing import Any

from contract_suite import Answer, Call, ContractSuite, Event, ProviderCase
from glassagent_responses import ResponsesClient

from glassagent.llm import BaseLLMClient


def function_call(call: Call, arguments: str | None = None) -> dict[str, Any]:
    if arguments is None:
        arguments = json.dumps(call.arguments)
    names = {"call_id": call.id, "name": call.name, "arguments": arguments}
    return {"type": "function_call", "id": f"fc_{call.id}", **names, "status": "completed"}


def response(finish: str, output: list[dict[str, Any]]) -> dict[str, Any]:
    done = finish == "completed"
    usage = {
        "input_tokens": 9,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 4,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 13,
    }
    return {
        "id": "resp_1",
        "object": "response",
        "status": "completed" if done else "incomplete",
        "incomplete_details": None if done else {"reason": finish},
        "model": "gpt-test",
        "output": output,
        "usage": usage,
    }


def responses_body(answer: Answer) -> dict[str, Any]:
    output = []
    if answer.text:
        text = {"type": "output_text", "text": answer.text, "annotations": []}
        message = {"type": "message", "id": "msg_1", "role": "assistant", "content": [text]}
        output.append({**message, "status": "completed"})
    output += [function_call(call) for call in answer.calls]
    return response(answer.finish, output)


def responses_events(answer: Answer) -> list[Event]:
    numbers = count()

    def event(kind: str, **data: Any) -> Event:
        return kind, {"type": kind, "sequence_number": next(numbers), **data}

    started = {**response("completed", []), "status": "in_progress"}
    events = [event("response.created", response=started)]
    index = 0
    if answer.deltas:
        message = {"type": "message", "id": "msg_1", "role": "assistant", "content": []}
        events.append(event("response.output_item.added", output_index=0, item=message))
        for delta in answer.deltas:
            where = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
            events.append(event("response.output_text.delta", **where, delta=delta))
        index = 1
    for position, call in enumerate(answer.calls, start=index):
        arguments = json.dumps(call.arguments)
        item = function_call(call, "")
        events.append(event("response.output_item.added", output_index=position, item=item))
        where = {"item_id": item["id"], "output_index": position}
        for piece in (arguments[: len(arguments) // 2], arguments[len(arguments) // 2 :]):
            events.append(event("response.function_call_arguments.delta", **where, delta=piece))
        done = "response.function_call_arguments.done"
        events.append(event(done, **where, arguments=arguments))
    final = "response.completed" if answer.finish == "completed" else "response.incomplete"
    return [*events, event(final, response=responses_body(answer))]


def responses(base_url: str, api_key: str, **options: Any) -> BaseLLMClient:
    return ResponsesClient("gpt-test", base_url=base_url + "/v1", api_key=api_key, **options)


RESPONSES = ProviderCase(
    name="openai_responses",
    make=responses,
    path="/v1/responses",
    body=responses_body,
    events=responses_events,
    finish_reasons={
        "end_turn": "completed",
        "max_tokens": "max_output_tokens",
        "tool_use": "completed",
    },
    error_body=lambda message: {"error": {"message": message, "type": "invalid_request_error"}},
    error_event=lambda message: ("error", {"type": "error", "code": "bad", "message": message}),
    malformed_bodies=[
        {"status": "completed", "output": "Sunny"},
        {
            "status": "completed",
            "output": [{"type": "message", "content": [{"type": "output_text", "text": 5}]}],
        },
        {"status": "completed", "output": [{"type": "function_call", "name": ["get_weather"]}]},
    ],
    malformed_events=[
        ("response.output_text.delta", {"type": "response.output_text.delta", "delta": 5}),
        ("response.completed", {"type": "response.completed", "response": "done"}),
        (
            "response.function_call_arguments.delta",
            {"type": "response.function_call_arguments.delta", "output_index": "0", "delta": "{"},
        ),
    ],
)


class TestResponsesContract(ContractSuite):
    cases = (RESPONSES,)
