"""Benchmark of `glassagent.history`: load + validate, thread extraction and append.

Run with ``python bench/history_bench.py``. Each history is one chain (the deepest tree for its
size), stored as version 2.0 JSON. Timings are the best of a few repeats and are printed as a
Markdown table; they are machine-dependent and not asserted anywhere.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable

from glassagent.history import History
from glassagent.llm import Message, ToolCall

SIZES = (1_000, 10_000, 100_000)
REPEATS = 3
APPENDS = 1_000
TOOL_RESULTS = 20_000  # results of one assistant message's calls, appended one after another
TARGET_MS = 20.0  # 100k-message thread extraction on an already-loaded history


def chain_document(count: int) -> bytes:
    """A version 2.0 document holding one chain of `count` messages."""
    messages = []
    mapping = {}
    for i in range(count):
        message_id = f"m{i}"
        parent = f"m{i - 1}" if i else None
        children = [f"m{i + 1}"] if i < count - 1 else []
        messages.append(
            {
                "message_id": message_id,
                "role": "user" if i % 2 == 0 else "assistant",
                "content": f"message number {i} of a long conversation",
                "parent_id": parent,
                "children": children,
                "timestamp": "2026-01-05T10:00:00.000Z",
                "status": "completed",
                "attachments": [],
                "tool_calls": [],
                "tool_call_id": None,
            }
        )
        mapping[message_id] = {"id": message_id, "parent": parent, "children": children}
    document = {
        "conversation_id": "bench",
        "title": "benchmark",
        "schema_version": "2.0",
        "messages": messages,
        "mapping": mapping,
        "current_node": f"m{count - 1}",
    }
    return json.dumps(document).encode("utf-8")


def best_ms(action: Callable[[], object], repeats: int = REPEATS) -> float:
    """The fastest of `repeats` runs of `action`, in milliseconds."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        action()
        times.append((time.perf_counter() - started) * 1000)
    return min(times)


def measure(count: int) -> dict[str, float]:
    """Load, thread and append timings for a chain of `count` messages."""
    raw = chain_document(count)
    load = best_ms(lambda: History.from_json(raw))
    history = History.from_json(raw)
    thread = best_ms(history.thread, repeats=10)
    assert len(history.thread()) == count
    per_append = []
    for i in range(APPENDS):
        started = time.perf_counter()
        history.append(Message(role="user", content=f"extra {i}"))
        per_append.append((time.perf_counter() - started) * 1e6)
    after_appends = best_ms(history.thread, repeats=1)
    cold = History.from_json(raw)
    leaf = cold.current_node
    assert leaf is not None
    cold.switch(cold.thread()[0].id)
    cold.thread()  # remember only the root's thread
    walk = best_ms(lambda: cold.thread(leaf), repeats=1)  # walks the whole chain
    return {
        "MB": len(raw) / 1e6,
        "load": load,
        "thread": thread,
        "append": statistics.median(per_append),
        "after": after_appends,
        "walk": walk,
    }


def tool_results_ms(count: int) -> float:
    """Appending the results of `count` calls made by one assistant message, in milliseconds."""
    history = History()
    history.append(Message(role="user", content="go"))
    calls = tuple(ToolCall(id=f"call-{i}", name="lookup", input={}) for i in range(count))
    history.append(Message(role="assistant", content="", tool_calls=calls))
    results = [Message(role="tool", content="ok", tool_call_id=c.id) for c in calls]
    started = time.perf_counter()
    for result in results:
        history.append(result)
    return (time.perf_counter() - started) * 1000


def main() -> None:
    """Print the table."""
    rows = {count: measure(count) for count in SIZES}
    print(
        "| messages | JSON MB | load + validate (ms) | thread at current node (ms) "
        f"| append (µs, median) | thread after {APPENDS:,} appends (ms) "
        "| cold walk of the whole chain (ms) |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for count, r in rows.items():
        print(
            f"| {count:,} | {r['MB']:.1f} | {r['load']:.0f} | {r['thread']:.2f} "
            f"| {r['append']:.1f} | {r['after']:.2f} | {r['walk']:.1f} |"
        )
    largest = rows[SIZES[-1]]
    verdict = "meets" if largest["thread"] <= TARGET_MS else "misses"
    print(
        f"\n100k thread extraction on a loaded history: {largest['thread']:.2f} ms ({verdict} the "
        f"{TARGET_MS:.0f} ms target); a cold walk of a 100k path: {largest['walk']:.1f} ms."
    )
    print(
        f"{TOOL_RESULTS:,} tool results appended below one assistant message: "
        f"{tool_results_ms(TOOL_RESULTS):.0f} ms."
    )


if __name__ == "__main__":
    main()
