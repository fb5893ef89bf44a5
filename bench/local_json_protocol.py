"""How well the real default model follows each tool protocol on the embedded server.

Runs 32 requests through an agent offered three tools (`add`, `multiply`, `get_weather`):
some need `add`, some another tool, some no tool at all. Each protocol is measured on all:
``native`` (llama.cpp's own tool calls), ``json`` (the JSON tool protocol, prompt only) and
``json-grammar`` (the JSON tool protocol with replies constrained to its schema). The table
shows replies read as protocol (parse rate), first decisions exactly right (the right call
with the right arguments, or no call where none is needed) and wall time. Needs
``glassagent[local]``; fetches the default model on first use. Usage:
``python bench/local_json_protocol.py [N] [native,json,json-grammar]`` (the first N requests).
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

from glassagent import Agent, ModelSettings, tool
from glassagent.local import LocalServer

SETTINGS = ModelSettings(temperature=0, max_tokens=96)
PROTOCOLS = {
    "native": {"tool_protocol": "native"},
    "json": {"tool_protocol": "json", "json_grammar": False},
    "json-grammar": {"tool_protocol": "json", "json_grammar": True},
}
# (request, expected first call as (name, arguments), or None where no tool is needed)
REQUESTS: list[tuple[str, tuple[str, dict[str, Any]] | None]] = [
    ("What is 17 + 25?", ("add", {"a": 17, "b": 25})),
    ("Add 3 and 4.", ("add", {"a": 3, "b": 4})),
    ("What is 120 plus 55?", ("add", {"a": 120, "b": 55})),
    ("Compute 9 + 10 with the tool.", ("add", {"a": 9, "b": 10})),
    ("How much is 1000 + 24?", ("add", {"a": 1000, "b": 24})),
    ("Please add 7 to 8.", ("add", {"a": 7, "b": 8})),
    ("What do 250 and 750 add up to?", ("add", {"a": 250, "b": 750})),
    ("Sum 31 and 11.", ("add", {"a": 31, "b": 11})),
    ("What is 6 + 66?", ("add", {"a": 6, "b": 66})),
    ("I have 12 apples and buy 30 more. How many now?", ("add", {"a": 12, "b": 30})),
    ("What is 6 times 7?", ("multiply", {"a": 6, "b": 7})),
    ("Multiply 12 by 9.", ("multiply", {"a": 12, "b": 9})),
    ("What's the product of 15 and 4?", ("multiply", {"a": 15, "b": 4})),
    ("Compute 8 * 25.", ("multiply", {"a": 8, "b": 25})),
    ("How much is 13 multiplied by 3?", ("multiply", {"a": 13, "b": 3})),
    ("A box holds 24 eggs. How many eggs are in 5 boxes?", ("multiply", {"a": 24, "b": 5})),
    ("Use the tool to multiply 11 and 11.", ("multiply", {"a": 11, "b": 11})),
    ("What is 7 x 9?", ("multiply", {"a": 7, "b": 9})),
    ("What's the weather in Paris?", ("get_weather", {"city": "Paris"})),
    ("Is it raining in Tokyo right now?", ("get_weather", {"city": "Tokyo"})),
    ("Tell me the current weather for Berlin.", ("get_weather", {"city": "Berlin"})),
    ("How warm is it in Madrid today?", ("get_weather", {"city": "Madrid"})),
    ("Weather report for Oslo, please.", ("get_weather", {"city": "Oslo"})),
    ("Should I take an umbrella in London today?", ("get_weather", {"city": "London"})),
    ("Hello! Who are you?", None),
    ("What is the capital of France?", None),
    ("Translate 'good morning' into Spanish.", None),
    ("Write a haiku about the sea.", None),
    ("What does HTTP stand for?", None),
    ("Thanks, that's all.", None),
    ("Name a primary color.", None),
    ("Is Python a programming language? Answer yes or no.", None),
]


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first addend.
        b: The second addend.
    """
    return a + b


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers.

    Args:
        a: The first factor.
        b: The second factor.
    """
    return a * b


@tool
def get_weather(city: str) -> str:
    """The current weather in a city.

    Args:
        city: The city's name, e.g. "Paris".
    """
    return f"Sunny, 21 °C in {city}."


def first_is_right(calls: list[Any], expected: tuple[str, dict[str, Any]] | None) -> bool:
    """Whether the first decision is right: the expected call (operands in any order)."""
    if expected is None:
        return not calls
    if not calls or calls[0].function_name != expected[0]:
        return False
    args, want = calls[0].args, expected[1]
    if "city" in want:
        return str(args.get("city", "")).lower() == want["city"].lower()
    return bool(args == want or args == {"a": want["b"], "b": want["a"]})


async def measure(server: LocalServer, protocol: str, n: int) -> dict[str, object]:
    replies = parsed = right = 0
    started = time.perf_counter()
    async with server.client(**PROTOCOLS[protocol]) as client:
        agent = Agent(client, [add, multiply, get_weather], max_iterations=2, settings=SETTINGS)
        for request, expected in REQUESTS[:n]:
            events = [event async for event in agent.run(request)]
            responses = [e for e in events if e.type == "llm_response"]
            replies += len(responses)
            parsed += sum(1 for e in responses if e.protocol_error is None)
            calls = [e for e in events if e.type == "function_call_start"]
            right += first_is_right(calls, expected)
            for e in responses:
                if e.protocol_error:
                    print(f"  [{protocol}] unparsed reply to {request!r}: {e.text[:120]!r}")
    return {
        "protocol": protocol,
        "requests": n,
        "replies": replies,
        "parsed": f"{parsed}/{replies} ({100 * parsed / max(replies, 1):.0f}%)",
        "first decision right": f"{right}/{n} ({100 * right / max(n, 1):.0f}%)",
        "seconds": f"{time.perf_counter() - started:.0f}",
    }


def print_table(rows: list[dict[str, object]]) -> None:
    headers = list(rows[0])
    widths = [max(len(h), *(len(str(r[h])) for r in rows)) for h in headers]
    print(" | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    print("-+-".join("-" * w for w in widths))
    for row in rows:
        print(" | ".join(str(row[h]).ljust(w) for h, w in zip(headers, widths, strict=True)))


async def main(n: int, protocols: list[str]) -> None:
    async with LocalServer(context_size=2048) as server:
        rows = [await measure(server, protocol, n) for protocol in protocols]
    print_table(rows)


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else len(REQUESTS)
    chosen = sys.argv[2].split(",") if len(sys.argv) > 2 else list(PROTOCOLS)
    asyncio.run(main(count, chosen))
