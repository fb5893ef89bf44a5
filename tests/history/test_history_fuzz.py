"""Fuzzing: valid documents, built through the API, then mutated in structure-aware ways."""

import contextlib
import copy
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from glassagent.errors import HistoryValidationError, UserError
from glassagent.history import History, HistoryLimits, HistoryMessage
from glassagent.llm import Attachment, Message, ToolCall

# how many examples: the hypothesis profile (tests/conftest.py), 500 in CI's deep run
FUZZ = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
SMALL = HistoryLimits(max_messages=40, max_depth=30, max_message_bytes=4000, max_nesting=6)

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
hostile_values = st.one_of(
    json_values,
    st.sampled_from(
        [
            float("nan"),
            float("inf"),
            10**40,
            "\ud800",
            "x" * 5000,
            {1: "int key"},
            {"a", "set"},
            ("a", "tuple"),
            b"bytes",
            object(),
            [[[[[[[[[["deep"]]]]]]]]]],
            {"message_id": "m0"},
            "2026-01-01T00:00:00.000Z",
            "completed",
            "aborted",
            "tool",
        ]
    ),
)


@st.composite
def valid_histories(draw: st.DrawFn) -> History:
    """A history grown through the public API: branches, tool calls, attachments, aborts."""
    history = History(title=draw(st.none() | st.text(max_size=10)), conversation_id="fuzz")
    open_calls: dict[str, list[str]] = {}

    def append(message: Message) -> None:  # fixed ids keep hypothesis' draws reproducible
        history.append(HistoryMessage.from_message(message, id=f"m{len(history)}"))

    for step in range(draw(st.integers(1, 12))):
        if len(history) and draw(st.booleans()):
            history.switch(draw(st.sampled_from(sorted(history.messages))))
        current = history.current_node
        kind = draw(st.sampled_from(["user", "assistant", "tool", "system"]))
        calls = open_calls.get(current or "", [])
        if kind == "tool" and calls:
            append(Message(role="tool", content="ok", tool_call_id=calls[0]))
            open_calls[history.current_node or ""] = calls
        elif kind == "assistant":
            ids = [f"c{step}-{i}" for i in range(draw(st.integers(0, 2)))]
            append(
                Message(
                    role="assistant",
                    content=draw(st.text(max_size=10)),
                    tool_calls=tuple(ToolCall(i, "f", {"x": step}, {"sig": "s"}) for i in ids),
                    status=draw(st.sampled_from(["completed", "aborted"])),
                    provider_metadata=draw(st.dictionaries(st.text(max_size=3), json_scalars)),
                )
            )
            open_calls[history.current_node or ""] = ids
        else:
            attachments = (Attachment(data=b"x", mime_type="image/png"),) * draw(st.integers(0, 1))
            append(Message(role="user", content="q", attachments=attachments))
    return history


def containers(document: Any) -> list[tuple[Any, Any]]:
    """Every (container, key) position in a document, found without recursion."""
    found: list[tuple[Any, Any]] = []
    stack = [document]
    while stack:
        node = stack.pop()
        keys = list(node) if isinstance(node, dict) else range(len(node))
        for key in keys:
            found.append((node, key))
            if isinstance(node[key], (dict, list)):
                stack.append(node[key])
    return found


@st.composite
def mutated_documents(draw: st.DrawFn) -> dict[str, Any]:
    history = draw(valid_histories())
    document = copy.deepcopy(history.to_dict(draw(st.sampled_from(["1", "2.0"]))))
    ids = [*sorted(history.messages), "ghost", ""]
    for _ in range(draw(st.integers(1, 4))):
        positions = containers(document)
        container, key = draw(st.sampled_from(positions))
        action = draw(st.sampled_from(["delete", "replace", "id", "duplicate", "add"]))
        if action == "delete":
            del container[key]
        elif action == "replace":
            container[key] = copy.deepcopy(draw(hostile_values))  # sampled constants stay
        elif action == "id":  # re-point a link: parents, children, current node, cycles
            container[key] = draw(st.sampled_from(ids))
        elif action == "duplicate" and isinstance(container, list):
            container.append(copy.deepcopy(container[key]))
        elif isinstance(container, dict):
            container[draw(st.text(max_size=12))] = copy.deepcopy(draw(hostile_values))
    return document


def check_loaded(history: History) -> None:
    """A history that passed validation works everywhere and round-trips exactly."""
    for version in ("1", "2.0"):
        data = history.to_dict(version)  # type: ignore[arg-type]
        assert History.from_dict(data).to_dict(version) == data  # type: ignore[arg-type]
    assert History.from_json(history.to_json()).to_dict() == history.to_dict()
    for leaf in history.leaves():
        assert history.thread(leaf)[-1].id == leaf
    with contextlib.suppress(UserError):  # e.g. a fuzzed attachment URL that cannot be sent
        history.to_messages()


@FUZZ
@given(mutated_documents(), st.booleans())
def test_mutated_documents_load_or_fail_with_a_validation_error(
    document: dict[str, Any], small: bool
) -> None:
    try:
        history = History.from_dict(document, limits=SMALL if small else None)
    except HistoryValidationError as exc:
        problems = exc.problems
    else:
        check_loaded(history)
        return
    assert problems
    assert all(p.location and p.message for p in problems)


@FUZZ
@given(valid_histories(), st.sampled_from(["1", "2.0"]))
def test_generated_histories_round_trip_losslessly(history: History, version: str) -> None:
    data = json.loads(history.to_json(version))  # type: ignore[arg-type]
    loaded = History.from_dict(data)
    assert loaded.to_dict(version) == data  # type: ignore[arg-type]
    other = "2.0" if version == "1" else "1"
    assert History.from_dict(loaded.to_dict(other)).to_dict(version) == data  # type: ignore[arg-type]
    assert loaded.to_messages() == history.to_messages()


@FUZZ
@given(valid_histories(), st.data())
def test_corrupted_bytes_fail_only_with_a_validation_error(history: History, data: Any) -> None:
    raw = bytearray(history.to_json())
    for _ in range(data.draw(st.integers(1, 3))):
        index = data.draw(st.integers(0, len(raw) - 1))
        raw[index : index + data.draw(st.integers(0, 3))] = data.draw(st.binary(max_size=3))
    try:
        loaded = History.from_json(bytes(raw))
    except HistoryValidationError:
        return
    check_loaded(loaded)


@FUZZ
@given(valid_histories(), st.data())
def test_threads_match_a_plain_walk_in_any_order(history: History, data: Any) -> None:
    loaded = History.from_dict(history.to_dict())
    order = data.draw(st.lists(st.sampled_from(sorted(loaded.messages)), max_size=12))
    for node in order:
        expected = []
        step: str | None = node
        while step is not None:
            expected.append(step)
            step = loaded.messages[step].parent_id
        assert [m.id for m in loaded.thread(node)] == expected[::-1]
        if data.draw(st.booleans()):
            loaded.append(Message(role="user", content="more"), parent=node)
