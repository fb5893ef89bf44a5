"""The invoke request's ``params.prompt_cache``: true or false, for the turn's model calls."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import respx

from glassagent import ModelSettings
from glassagent.llm import OpenAICompatibleClient, PromptCache, RetryPolicy
from glassagent.server import create_app
from tests.support.server import INVOKE, echo_client, http

OPENAI_URL = "https://api.openai.com/v1/chat/completions"


async def test_prompt_cache_true_or_false_reaches_the_models_settings() -> None:
    client = echo_client()
    server_settings = ModelSettings(max_tokens=50, prompt_cache=PromptCache(key="tenant-a"))
    async with http(create_app(model=client, settings=server_settings)) as api:
        for params in ({"prompt_cache": False}, {"prompt_cache": True}, {}, None):
            body = {"message": "x", "params": params}
            assert (await api.post(INVOKE, json=body)).status_code == 200
    off, on, empty, absent = (request.settings for request in client.requests)
    assert off == ModelSettings(max_tokens=50, prompt_cache=False)
    assert on == ModelSettings(max_tokens=50, prompt_cache=True)
    assert empty == absent == server_settings  # not given: the server's own


@pytest.mark.parametrize("given", ["false", 0, 1, {"key": "tenant-b"}, ["on"]])
async def test_a_prompt_cache_that_is_not_a_boolean_is_a_422(given: Any) -> None:
    client = echo_client()
    async with http(create_app(model=client)) as api:
        response = await api.post(INVOKE, json={"message": "x", "params": {"prompt_cache": given}})
    assert response.status_code == 422
    [problem] = response.json()["error"]["problems"]
    assert problem["location"] == "params.prompt_cache"
    assert problem["message"].startswith("must be true or false, not ")
    assert client.requests == []


async def test_unknown_params_name_prompt_cache_among_the_known() -> None:
    async with http(create_app(model=echo_client())) as api:
        response = await api.post(INVOKE, json={"message": "x", "params": {"cache": True}})
    assert response.status_code == 422
    [problem] = response.json()["error"]["problems"]
    assert problem["location"] == "params.cache"
    assert "prompt_cache" in problem["message"]


def streamed(request: httpx.Request) -> httpx.Response:
    """A short answer as OpenAI streams it."""
    chunks: list[dict[str, Any]] = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Noon."}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    common = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "gpt-4o-mini"}
    body = "".join(f"data: {json.dumps({**common, **c})}\n\n" for c in chunks)
    body += "data: [DONE]\n\n"
    return httpx.Response(200, text=body, headers={"content-type": "text/event-stream"})


@respx.mock
async def test_openai_gets_a_cache_key_for_a_short_prompt_only_when_asked() -> None:
    route = respx.post(OPENAI_URL).mock(side_effect=streamed)
    model = OpenAICompatibleClient(
        "gpt-4o-mini", api_key="sk-test-0", retry=RetryPolicy(max_retries=0)
    )
    async with http(create_app(model=model)) as api:
        for params in ({"prompt_cache": True}, {}, {"prompt_cache": False}):
            body = {"message": "High tide?", "params": params}
            assert (await api.post(INVOKE, json=body)).status_code == 200
    sent = [json.loads(call.request.content) for call in route.calls]
    asked, automatic, off = ("prompt_cache_key" in body for body in sent)
    assert (asked, automatic, off) == (True, False, False)  # automatic: under 1024 tokens
