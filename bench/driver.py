"""One benchmark driver, run in its own process; prints its measurements as JSON.

Drivers: ``raw_httpx`` and ``raw_httpx_stream`` (hand-written loops on the OpenAI wire: the
floor); ``raw_httpx_sweeping_pool_stream`` (the streamed loop over the connection pool of
glassagent's own clients, which assigns connections with less work than httpcore's); and
glassagent with each client: ``glassagent_openai[_stream]``, ``glassagent_ollama[_stream]``,
``glassagent_gemini[_stream]``. The tool is a plain function, which glassagent runs on a
worker thread, except in ``glassagent_openai_async_tool_stream``, where it is the same
function written ``async def`` (run on the event loop).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from measure import POOL, PROMPT, Factory, Run, counter, k_of, main

COUNTER_TOOL = {
    "type": "function",
    "function": {
        "name": "counter",
        "description": "Return n + 1.",
        "parameters": {
            "type": "object",
            "properties": {"n": {"type": "integer"}},
            "required": ["n"],
        },
    },
}


# ---- the floor: a hand-written loop on raw httpx ---------------------------------------


async def _raw_call(http: Any, url: str, body: dict[str, Any], stream: bool) -> dict[str, Any]:
    if not stream:
        response = await http.post(url, json=body)
        response.raise_for_status()
        message: dict[str, Any] = response.json()["choices"][0]["message"]
        return message
    content: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    async with http.stream("POST", url, json={**body, "stream": True}) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            for choice in json.loads(line[6:]).get("choices", []):
                delta = choice.get("delta", {})
                if delta.get("content"):
                    content.append(delta["content"])
                for call in delta.get("tool_calls", []):
                    slot = calls.setdefault(call["index"], {"id": call.get("id"), "args": []})
                    function = call.get("function", {})
                    slot["name"] = function.get("name") or slot.get("name")
                    slot["args"].append(function.get("arguments", ""))
    tool_calls = [
        {
            "id": c["id"],
            "type": "function",
            "function": {"name": c["name"], "arguments": "".join(c["args"])},
        }
        for c in calls.values()
    ]
    return {"role": "assistant", "content": "".join(content) or None, "tool_calls": tool_calls}


def raw_driver(base_url: str, model: str, stream: bool, sweeping: bool = False) -> Run:
    import httpx

    limits = httpx.Limits(max_connections=POOL, max_keepalive_connections=POOL)
    http = httpx.AsyncClient(timeout=60, limits=limits)  # the pool glassagent's clients keep
    if sweeping:  # the same loop over glassagent's cheaper connection assignment
        from glassagent._providers.connection_pool import speed_up

        speed_up(http)
    url = f"{base_url}/v1/chat/completions"

    async def run() -> str:
        messages: list[dict[str, Any]] = [{"role": "user", "content": PROMPT}]
        while True:
            body = {"model": model, "messages": messages, "tools": [COUNTER_TOOL]}
            message = await _raw_call(http, url, body, stream)
            messages.append(message)
            if not message.get("tool_calls"):
                return str(message["content"])
            for call in message["tool_calls"]:
                result = counter(**json.loads(call["function"]["arguments"]))
                messages.append(
                    {"role": "tool", "tool_call_id": call["id"], "content": str(result)}
                )

    return run


# ---- glassagent ------------------------------------------------------------------------


def make_client(kind: str, base_url: str, model: str) -> Any:
    """A glassagent client of `kind` (openai, ollama, gemini) pointed at the fake server."""
    from glassagent import llm

    if kind == "openai":
        return llm.OpenAICompatibleClient(model, base_url=f"{base_url}/v1")  # type: ignore[attr-defined]
    if kind == "ollama":
        return llm.OllamaClient(model, base_url=base_url, tool_protocol="native")  # type: ignore[attr-defined]
    return llm.GeminiClient(model, api_key="bench-key-not-secret", base_url=base_url)


async def async_counter(n: int) -> int:
    """Return n + 1.

    Args:
        n: The number to count from.
    """
    return n + 1


async_counter.__name__ = "counter"  # the same tool, run on the event loop: no thread handoff


def glassagent_driver(
    kind: str, base_url: str, model: str, stream: bool, async_tool: bool = False
) -> Run:
    from glassagent import Agent, BaseLLMClient, tool

    # The table measures ``pip install glassagent`` (its packages column counts that install),
    # so no optional extra: without ``[prices]`` the unknown bench model costs no price
    # lookup, where a development environment would load genai-prices' data (about 6 MB).
    sys.modules["genai_prices"] = None  # type: ignore[assignment]

    client = make_client(kind, base_url, model)
    if not stream:  # one whole answer per call: the base class's `stream` calls `chat`
        client.stream = BaseLLMClient.stream.__get__(client)
    counter_tool = tool(async_counter if async_tool else counter)
    max_iterations = k_of(model) + 5  # K tool calls and the answer, whatever K

    async def run() -> str:
        result = await Agent(client, [counter_tool], max_iterations=max_iterations).run(PROMPT)
        return result.text

    return run


DRIVERS: dict[str, Factory] = {
    "raw_httpx": lambda url, model: raw_driver(url, model, False),
    "raw_httpx_stream": lambda url, model: raw_driver(url, model, True),
    "raw_httpx_sweeping_pool_stream": lambda url, model: raw_driver(url, model, True, True),
}
for _kind in ("openai", "ollama", "gemini"):
    DRIVERS[f"glassagent_{_kind}"] = lambda url, model, k=_kind: glassagent_driver(
        k, url, model, False
    )
    DRIVERS[f"glassagent_{_kind}_stream"] = lambda url, model, k=_kind: glassagent_driver(
        k, url, model, True
    )
# A sync tool runs on a worker thread; the same tool written `async def` runs on the loop.
DRIVERS["glassagent_openai_async_tool_stream"] = lambda url, model: glassagent_driver(
    "openai", url, model, True, async_tool=True
)

IMPORTS = {
    "raw_httpx": "import httpx; httpx.AsyncClient()",
    "raw_httpx_stream": "import httpx; httpx.AsyncClient()",
}
for _name in DRIVERS:
    if _name.startswith("glassagent"):
        IMPORTS[_name] = "import glassagent, glassagent.llm"


if __name__ == "__main__":
    main(DRIVERS, __doc__)
