"""How well the real default model follows each tool protocol on the embedded server.

Runs a handful of arithmetic questions through an agent with an `add` tool, once with native
tool calls and once with the JSON tool protocol, and prints a table: replies read as protocol
(parse rate), first calls exactly right, wall time. Needs ``glassagent[local]``; fetches the
default model on first use. Usage:
``python bench/local_json_protocol.py [N] [native,json]`` (N questions, the protocols to run).
"""

from __future__ import annotations

import asyncio
import sys
import time

from glassagent import Agent, ModelSettings, tool
from glassagent.local import LocalServer

SETTINGS = ModelSettings(temperature=0, max_tokens=96)
QUESTIONS = [
    ("What is 17 + 25?", 17, 25),
    ("Add 3 and 4.", 3, 4),
    ("What is 120 plus 55?", 120, 55),
    ("Compute 9 + 10 with the tool.", 9, 10),
    ("How much is 1000 + 24?", 1000, 24),
    ("Please add 7 to 8.", 7, 8),
    ("What do 250 and 750 add up to?", 250, 750),
    ("Sum 31 and 11.", 31, 11),
    ("What is 6 + 66?", 6, 66),
    ("I have 12 apples and buy 30 more. Use the tool: how many now?", 12, 30),
]


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first addend.
        b: The second addend.
    """
    return a + b


async def measure(server: LocalServer, protocol: str, n: int) -> dict[str, object]:
    replies = parsed = right = 0
    started = time.perf_counter()
    async with server.client(tool_protocol=protocol) as client:
        agent = Agent(client, [add], max_iterations=3, settings=SETTINGS)
        for question, a, b in QUESTIONS[:n]:
            events = [event async for event in agent.run(question)]
            responses = [e for e in events if e.type == "llm_response"]
            replies += len(responses)
            parsed += sum(1 for e in responses if e.protocol_error is None)
            calls = [e for e in events if e.type == "function_call_start"]
            right += bool(calls) and (calls[0].function_name, calls[0].args) == (
                "add",
                {"a": a, "b": b},
            )
            for e in responses:
                if e.protocol_error:
                    print(f"  [{protocol}] unparsed reply to {question!r}: {e.text[:120]!r}")
    return {
        "protocol": protocol,
        "questions": n,
        "replies": replies,
        "parsed": f"{parsed}/{replies} ({100 * parsed / max(replies, 1):.0f}%)",
        "first call exact": f"{right}/{n}",
        "seconds": f"{time.perf_counter() - started:.1f}",
    }


async def main(n: int, protocols: list[str]) -> None:
    async with LocalServer() as server:
        rows = [await measure(server, protocol, n) for protocol in protocols]
    headers = list(rows[0])
    widths = [max(len(h), *(len(str(r[h])) for r in rows)) for h in headers]
    print(" | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    print("-+-".join("-" * w for w in widths))
    for row in rows:
        print(" | ".join(str(row[h]).ljust(w) for h, w in zip(headers, widths, strict=True)))


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else len(QUESTIONS)
    asyncio.run(main(count, sys.argv[2].split(",") if len(sys.argv) > 2 else ["native", "json"]))
