"""Work that must grow linearly with the number of messages, measured without a clock.

The measure is the number of Python lines glassagent executes (counted with `sys.settrace`,
only in the package's own frames): exact and the same on every machine, unlike a timing. Work
that is linear grows four times when the input does; quadratic work grows sixteen times.
"""

import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

import glassagent
from glassagent.history import History, HistoryStore
from glassagent.llm import Message, ToolCall

PACKAGE = str(Path(glassagent.__file__).parent)
LINEAR = 4.4  # how many times the work may grow when the input grows four times


def lines_run(action: Callable[[], object]) -> int:
    """How many lines of glassagent's own code run while `action` does."""
    count = 0

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "line":
            count += 1
        return local

    def start(frame: FrameType, event: str, arg: Any) -> Any:
        return local if frame.f_code.co_filename.startswith(PACKAGE) else None

    previous = sys.gettrace()
    sys.settrace(start)
    try:
        action()
    finally:
        sys.settrace(previous)
    return count


def asked(count: int) -> tuple[History, str]:
    """A history whose last message is an assistant message making `count` tool calls."""
    history = History()
    history.append(Message(role="user", content="go"))
    calls = tuple(ToolCall(id=f"call-{i}", name="lookup", input={"i": i}) for i in range(count))
    return history, history.append(Message(role="assistant", content="", tool_calls=calls))


def answer_all(history: History, count: int, *, below: str | None = None) -> None:
    for i in range(count):
        history.append(Message(role="tool", content=f"result {i}", tool_call_id=f"call-{i}"), below)


def append_cost(count: int, *, as_siblings: bool) -> int:
    history, assistant = asked(count)
    below = assistant if as_siblings else None
    return lines_run(lambda: answer_all(history, count, below=below))


def test_appending_many_tool_results_below_one_assistant_message_is_linear() -> None:
    # The agent appends a turn's results one after another (a chain below the assistant
    # message); each result used to walk back over all earlier ones and scan every call.
    for as_siblings in (False, True):
        small = append_cost(1_000, as_siblings=as_siblings)
        large = append_cost(4_000, as_siblings=as_siblings)
        assert large <= LINEAR * small, (as_siblings, small, large)


@pytest.mark.parametrize(
    "count",
    [5_000, pytest.param(20_000, marks=pytest.mark.attack)],  # 20,000 took two minutes once
    ids=["5k", "20k"],
)
def test_thousands_of_tool_results_append_and_round_trip(count: int) -> None:
    history, _ = asked(count)
    answer_all(history, count)
    loaded = History.from_json(history.to_json())
    assert len(loaded) == count + 2
    assert loaded.thread()[-1].tool_call_id == f"call-{count - 1}"


def test_appending_below_a_loaded_run_of_results_walks_it_once() -> None:
    def cost(count: int) -> int:
        history, _ = asked(2 * count)
        answer_all(history, count)
        loaded = History.from_json(history.to_json())
        more = [
            Message(role="tool", content="r", tool_call_id=f"call-{count + i}")
            for i in range(count)
        ]
        return lines_run(lambda: [loaded.append(message) for message in more])

    assert cost(4_000) <= LINEAR * cost(1_000)


def test_saving_and_loading_many_siblings_is_linear(tmp_path: Path) -> None:
    def cost(count: int, version: str) -> int:
        history, assistant = asked(count)
        answer_all(history, count, below=assistant)  # `count` siblings
        store = HistoryStore(tmp_path / f"{count}-{version}")

        def save_and_load() -> None:
            store.save("chat", history, version=version)  # type: ignore[arg-type]
            assert len(store.load("chat").children(assistant)) == count

        return lines_run(save_and_load)

    for version in ("1", "2.0"):
        assert cost(2_000, version) <= LINEAR * cost(500, version), version
