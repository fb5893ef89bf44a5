"""Micro-benchmarks of glassagent's own costs; prints JSON (used by bench/run.py)."""

from __future__ import annotations

import gc
import json
import sys
import timeit
import tracemalloc
from typing import Any

from glassagent import Agent, LLMResponse, Tool, tool
from glassagent.events import FunctionExecutionCompleteEvent, TextChunkEvent, ToolExecution
from glassagent.testing import ScriptedClient


def per_call_us(fn: Any, number: int) -> float:
    best = min(timeit.repeat(fn, number=number, repeat=5))
    return best / number * 1e6


def counter(n: int, step: int = 1) -> int:
    """Return n + step.

    Args:
        n: The number to count from.
        step: How much to add.
    """
    return n + step


def agent_costs() -> dict[str, float]:
    client = ScriptedClient([LLMResponse("x")])
    counter_tool = tool(counter)
    us = per_call_us(lambda: Agent(client, [counter_tool]), 20000)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    agents = [Agent(client, [counter_tool]) for _ in range(10000)]
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    size = sum(s.size_diff for s in after.compare_to(before, "filename")) / len(agents)
    return {"agent_construction_us": us, "agent_bytes": size}


def schema_costs() -> dict[str, float]:
    client = ScriptedClient([LLMResponse("x")])
    Agent(client, [counter])  # wraps and caches the plain function
    return {
        "schema_cold_us": per_call_us(lambda: Tool(counter), 200),
        "schema_warm_us": per_call_us(lambda: Agent(client, [counter]), 20000),
    }


def event_costs() -> dict[str, float]:
    chunk = TextChunkEvent(run_id="r", seq=1, text="hello", is_follow_up=False)
    execution = ToolExecution(
        function_name="counter",
        tool_name="counter",
        args={"n": 1},
        result="2",
        is_error=False,
        duration_ms=0.1,
        has_ui=False,
        ui_info=None,
        call_id="c1",
    )
    complete = FunctionExecutionCompleteEvent(run_id="r", seq=2, execution=execution)
    return {
        "event_create_us": per_call_us(
            lambda: TextChunkEvent(run_id="r", seq=1, text="hello", is_follow_up=False), 50000
        ),
        "event_to_dict_us": per_call_us(chunk.to_dict, 50000),
        "tool_event_to_dict_us": per_call_us(complete.to_dict, 20000),
    }


def history_costs() -> dict[str, float]:
    try:
        from glassagent import history
    except ImportError:
        return {}
    h = history.History()
    from glassagent import Message

    for i in range(100_000):
        h.append(Message(role="user" if i % 2 == 0 else "assistant", content=f"m{i}"))
    runs = 5
    seconds = min(timeit.repeat(h.thread, number=1, repeat=runs))
    return {"history_thread_100k_ms": seconds * 1000}


if __name__ == "__main__":
    results: dict[str, float] = {}
    for part in (agent_costs, schema_costs, event_costs, history_costs):
        try:
            results.update(part())
        except Exception as exc:  # a missing optional part must not sink the others
            print(f"{part.__name__} skipped: {exc}", file=sys.stderr)
    json.dump(results, sys.stdout)
