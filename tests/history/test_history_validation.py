import copy
import json
import pickle
import re
from pathlib import Path
from typing import Any

import pytest

from glassagent.errors import GlassAgentError, HistoryValidationError
from glassagent.history import (
    History,
    HistoryLimits,
)
from glassagent.llm import Message
from tests.support.history import fixture, problems_of

# ---- validation ----------------------------------------------------------------------------


def test_validation_error_is_a_value_error_and_lists_every_problem() -> None:
    data = fixture("2.0")
    data["messages"][1]["role"] = "robot"
    data["messages"][2]["status"] = "paused"
    data["current_node"] = "ghost"
    problems = problems_of(data)
    assert [str(p) for p in problems] == [
        "messages[1].role: invalid role 'robot'; expected 'system', 'user', 'assistant' or 'tool'",
        "messages[2].status: invalid status 'paused'; "
        "expected 'completed', 'aborted' or 'unreadable'",
        "current_node: message 'ghost' does not exist",
    ]
    with pytest.raises(ValueError, match="3 problems") as info:
        History.from_dict(data)
    assert isinstance(info.value, GlassAgentError)
    again = pickle.loads(pickle.dumps(info.value))
    assert again.problems == info.value.problems
    assert str(again) == str(info.value)


def test_long_problem_lists_are_summarised_in_the_message() -> None:
    data = fixture("2.0")
    for message in data["messages"]:
        message["role"] = "robot"
        message["status"] = 7
        message["is_error"] = "no"
    with pytest.raises(HistoryValidationError) as info:
        History.from_dict(data)
    assert len(info.value.problems) == 24
    assert "and 4 more (see .problems)" in str(info.value)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda d: d.update(schema_version="3.1"), "schema_version: unknown schema version"),
        (lambda d: d.pop("schema_version"), "$: missing 'schema_version'"),
        (lambda d: d.pop("conversation_id"), "$: missing required field 'conversation_id'"),
        (lambda d: d.pop("mapping"), "$: missing required field 'mapping'"),
        (lambda d: d["messages"][1].pop("role"), "messages[1]: missing required field 'role'"),
        (lambda d: d["messages"][1].pop("timestamp"), "missing required field 'timestamp'"),
        (lambda d: d["messages"].append(dict(d["messages"][6])), "duplicate message id 'u1b'"),
        (lambda d: d["messages"][1].update(parent_id="zz"), "parent 'zz' does not exist"),
        (
            lambda d: d["messages"][0]["children"].remove("u1b"),
            "messages[0].children: does not list 'u1b'",
        ),
        (
            lambda d: d["messages"][4]["children"].append("a3"),
            "messages[4].children: child 'a3' has parent_id 'u1b'",
        ),
        (lambda d: d["messages"][4]["children"].append("zz"), "child 'zz' does not exist"),
        (
            lambda d: d["messages"][6]["children"].append("a3"),
            "lists a child more than once",
        ),
        (
            lambda d: d["mapping"]["a3"].update(parent="sys"),
            "mapping.a3.parent: disagrees with the message's parent_id",
        ),
        (
            lambda d: d["mapping"]["t1"].update(children=["a2b", "a2"]),
            "mapping.t1.children: disagrees",
        ),
        (lambda d: d["mapping"].pop("a3"), "mapping: has no entry for message 'a3'"),
        (lambda d: d["mapping"].update(zz={}), "mapping.zz: no message has this id"),
        (lambda d: d["mapping"].update(a3=[]), "mapping.a3: must be an object"),
        (lambda d: d["mapping"]["a3"].update(id="x"), "mapping.a3.id: 'x' differs"),
        (lambda d: d.update(mapping=[]), "mapping: must be an object"),
        (lambda d: d.update(current_node=None), "current_node: is null but the history has"),
        (lambda d: d.update(current_node=5), "current_node: must be a string or null"),
        (lambda d: d["messages"][2].update(status="paused"), "invalid status 'paused'"),
        (lambda d: d["messages"][3].update(tool_call_id="call_9"), "no matching tool call"),
        (lambda d: d["messages"][3].update(tool_call_id=None), "needs a tool_call_id"),
        (lambda d: d["messages"][1].update(timestamp="yesterday"), "not an ISO 8601 timestamp"),
        (lambda d: d.update(created_at="2026-13"), "created_at: '2026-13' is not an ISO 8601"),
        (lambda d: d.update(title=5), "title: must be a string or null, not number"),
        (lambda d: d.update(active_tools={}), "active_tools: must be an array"),
        (lambda d: d.update(root_id="sys"), "root_id: is a version 1 field"),
        (lambda d: d["messages"][1].update(id="u1"), "messages[1].id: is a version 1 field"),
        (lambda d: d.update(messages={}), "messages: must be an array, not object"),
        (lambda d: d["messages"].append("text"), "messages[8]: a message must be an object"),
        (lambda d: d["messages"][1].update(message_id=""), "must be a non-empty string"),
        (lambda d: d["messages"][1].update(parent_id=1), "parent_id: must be a string or null"),
        (lambda d: d["messages"][1].update(children="a1"), "must be an array of message ids"),
        (
            lambda d: d["messages"][1].update(content=[]),
            "content: must be string or null, not array",
        ),
        (lambda d: d["messages"][1].update(is_error=1), "is_error: must be a boolean"),
        (lambda d: d["messages"][1].update(attachments={}), "attachments: must be an array"),
        (lambda d: d["messages"][1].update(attachments=[1]), "attachments[0]: must be an object"),
        (
            lambda d: d["messages"][1]["attachments"][0].update(type="picture"),
            "invalid attachment type 'picture'",
        ),
        (lambda d: d["messages"][1]["attachments"][0].pop("url"), "url: must be a string"),
        (
            lambda d: d["messages"][2]["tool_calls"][0].update(arguments="not json"),
            "arguments: is a string that does not hold a JSON object",
        ),
        (
            lambda d: d["messages"][2]["tool_calls"][0].update(arguments=[1]),
            "arguments: must be an object, not array",
        ),
        (lambda d: d["messages"][2]["tool_calls"][0].pop("tool_call_id"), "tool_call_id: must"),
        (lambda d: d["messages"][2]["tool_calls"][0].pop("function_name"), "function_name: must"),
        (
            lambda d: d["messages"][2]["tool_calls"][0].update(provider_metadata="x"),
            "provider_metadata: must be object or null",
        ),
        (lambda d: d["messages"][2].update(role="user"), "no matching tool call"),
        (lambda d: d["messages"][1].update(extra={"x": float("nan")}), "not finite"),
        (lambda d: d["messages"][1].update(extra={"n": 10**30}), "integer too large"),
        (lambda d: d["messages"][1].update(extra={"s": {1, 2}}), "contains a set"),
        (lambda d: d["messages"][1].update(extra={"s": "\ud800"}), "lone surrogate"),
        (lambda d: d.update(extra={"s": "\ud800"}), "lone surrogate"),
        (lambda d: d["messages"][1].update({7: "x"}), "has a key that is a number"),
        (lambda d: d.update({7: "x"}), "$: has a key that is a number"),
        (lambda d: d["messages"][1].update(extra={"k": {3: 1}}), "has an object key that is"),
    ],
)
def test_each_kind_of_problem_is_reported_with_its_location(change: Any, expected: str) -> None:
    data = fixture("2.0")
    change(data)
    assert any(expected in str(p) for p in problems_of(data)), problems_of(data)


def test_v1_specific_problems() -> None:
    data = fixture("1")
    data["messages"]["u1"]["id"] = "other"
    data["messages"]["a1"]["timestamp"] = "2026-01-01T00:00:00Z"
    data["root_id"] = "u1b"
    data["messages"]["a2"]["children_ids"] = "x"
    found = [str(p) for p in problems_of(data)]
    assert "messages.u1.id: 'other' differs from its key 'u1'" in found
    assert "messages.a1.timestamp: is a version 2.0 field, not allowed in 1" in found
    assert "root_id: message 'u1b' has a parent, so it is not the root" in found
    assert "messages.a2.children_ids: must be an array of message ids" in found
    data = fixture("1")
    data["messages"]["copy"] = dict(data["messages"]["a3"])
    assert any("duplicate message id 'a3'" in str(p) for p in problems_of(data))
    data = fixture("1")
    data["mapping"] = {}
    assert "mapping: is a version 2.0 field, not allowed in 1" in map(str, problems_of(data))


def test_cycles_and_several_roots_are_found() -> None:
    data = fixture("2.0")
    by_id = {m["message_id"]: m for m in data["messages"]}
    by_id["sys"]["parent_id"] = "a3"  # sys -> u1b -> a3 -> sys
    by_id["a3"]["children"] = ["sys"]
    data["mapping"]["sys"]["parent"] = "a3"
    data["mapping"]["a3"]["children"] = ["sys"]
    found = [str(p) for p in problems_of(data)]
    assert "messages: no root message (parent_id null): the parent links form a cycle" in found
    assert any("parent links form a cycle: " in p for p in found)
    data = fixture("2.0")
    data["messages"][6]["parent_id"] = None
    data["messages"][0]["children"].remove("u1b")
    data["mapping"]["u1b"]["parent"] = None
    data["mapping"]["sys"]["children"].remove("u1b")
    assert [str(p) for p in problems_of(data)] == [
        "messages: several root messages: 'sys', 'u1b'; a history has one"
    ]


def test_a_cycle_beside_a_valid_root_is_found() -> None:
    history = History()
    history.append(Message(role="user", content="root"))
    data = history.to_dict()
    for name, parent in (("x", "y"), ("y", "x")):
        data["messages"].append(
            {"message_id": name, "role": "user", "content": "", "parent_id": parent,
             "children": ["y" if name == "x" else "x"], "timestamp": "2026-01-01T00:00:00Z"}
        )  # fmt: skip
        data["mapping"][name] = {"id": name, "parent": parent, "children": [parent]}
    assert [str(p) for p in problems_of(data)] == [
        "messages[1]: parent links form a cycle: 'x', 'y'"
    ]


def test_not_an_object_and_bad_json_files(tmp_path: Path) -> None:
    assert [str(p) for p in problems_of([1])] == ["$: a history must be a JSON object, not array"]
    assert "missing 'schema_version'" in str(problems_of({"messages": []})[0])
    path = tmp_path / "bad.json"
    for content, expected in [
        (b"{", "not valid JSON"),
        (b"\xff\xfe", "not UTF-8"),
        (b"[" * 100_000 + b"]" * 100_000, "nests too deeply"),
        (b'{"a": 1' + b"0" * 5000 + b"}", "not valid JSON"),
    ]:
        path.write_bytes(content)
        with pytest.raises(HistoryValidationError, match=expected):
            History.load(path)


def test_limits_are_enforced() -> None:
    data = fixture("2.0")
    assert "8 messages exceed max_messages=5" in str(problems_of(data, max_messages=5)[0])
    found = problems_of(data, max_message_bytes=60)
    assert "the message exceeds max_message_bytes=60" in str(found[0])
    assert "deeper than max_depth=3" in str(problems_of(data, max_depth=3)[0])
    data["messages"][1]["deep"] = [[[["x"]]]]
    assert "nests deeper than max_nesting=3" in str(problems_of(data, max_nesting=3)[0])
    assert "exceeds max_total_bytes=500" in str(problems_of(fixture("2.0"), max_total_bytes=500))


def test_an_oversized_file_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_bytes(b" " * 2000)
    with pytest.raises(HistoryValidationError, match="2000 bytes exceed max_total_bytes=1000"):
        History.load(path, limits=HistoryLimits(max_total_bytes=1000))
    with pytest.raises(HistoryValidationError, match="exceed max_total_bytes"):
        History.from_json(b" " * 2000, limits=HistoryLimits(max_total_bytes=1000))


def chain(count: int) -> dict[str, Any]:
    """A version 2.0 document holding one chain of `count` messages."""
    messages = [
        {
            "message_id": f"m{i}",
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"message {i}",
            "parent_id": f"m{i - 1}" if i else None,
            "children": [f"m{i + 1}"] if i < count - 1 else [],
            "timestamp": "2026-01-01T00:00:00.000Z",
        }
        for i in range(count)
    ]
    mapping = {
        m["message_id"]: {
            "id": m["message_id"],
            "parent": m["parent_id"],
            "children": m["children"],
        }
        for m in messages
    }
    return {
        "conversation_id": "long",
        "schema_version": "2.0",
        "messages": messages,
        "mapping": mapping,
        "current_node": f"m{count - 1}",
    }


@pytest.mark.parametrize(
    "count",
    [
        10_000,  # ten times the recursion limit
        pytest.param(100_000, marks=pytest.mark.attack),  # the size the docs promise (slow)
    ],
    ids=["10k", "100k"],
)
def test_a_long_message_chain_loads_validates_and_threads_without_recursion(count: int) -> None:
    history = History.from_dict(chain(count))
    thread = history.thread()
    assert len(thread) == count
    assert (thread[0].id, thread[-1].id) == ("m0", f"m{count - 1}")
    middle = f"m{count // 2}"
    assert len(history.thread(middle)) == count // 2 + 1
    assert history.to_messages()[-1].content == f"message {count - 1}"


def test_a_long_cycle_is_found_without_recursion() -> None:
    count = 5_000  # far beyond the recursion limit (1,000)
    data = chain(count)
    data["messages"][0]["parent_id"] = f"m{count - 1}"
    data["mapping"]["m0"]["parent"] = f"m{count - 1}"
    data["messages"][-1]["children"] = ["m0"]
    data["mapping"][f"m{count - 1}"]["children"] = ["m0"]
    found = [str(p) for p in problems_of(data)]
    assert found[0] == "messages: no root message (parent_id null): the parent links form a cycle"
    assert found[1].startswith("messages[0]: parent links form a cycle: 'm0', ")
    assert found[1].endswith("and 4995 more")


def test_validation_never_modifies_its_input() -> None:
    data = fixture("2.0")
    before = copy.deepcopy(data)
    History.from_dict(data).append(Message(role="user", content="more"))
    assert data == before


def deep_list(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    "change",
    [
        lambda d, v: d["messages"][1].update(role=v),
        lambda d, v: d["messages"][1].update(message_id=v),
        lambda d, v: d["messages"][1].update(parent_id=v),
        lambda d, v: d["messages"][1].update(children=v),
        lambda d, v: d["messages"][1].update(provider_metadata={"deep": v}),
        lambda d, v: d["messages"][2]["tool_calls"][0].update(tool_call_id=v),
        lambda d, v: d["messages"][1]["attachments"][0].update(type=v),
        lambda d, v: d.update(schema_version=v),
        lambda d, v: d.update(current_node=v),
        lambda d, v: d.update(title=v),
        lambda d, v: d["mapping"]["a3"].update(id=v),
        lambda d, v: d["mapping"].update({("t", 1): v}),
    ],
)
@pytest.mark.parametrize(
    ("make", "may_be_valid"),
    [(lambda: deep_list(100_000), False), (lambda: 10**5000, False), (lambda: "x" * 10**6, True)],
    ids=["deep", "huge-int", "long-text"],
)
def test_hostile_python_values_anywhere_give_short_validation_errors(
    change: Any, make: Any, may_be_valid: bool
) -> None:
    data = fixture("2.0")
    change(data, make())
    try:  # a long text may be valid where text is expected; all else must be refused
        History.from_dict(data)
        report = ""
    except HistoryValidationError as exc:
        report = str(exc)
    assert len(report) < 5000
    assert report or may_be_valid


@pytest.mark.parametrize(
    "key", [10**5000, ("a", 1), 3, "a b"], ids=["huge-int", "tuple", "int", "spaced"]
)
def test_message_keys_of_any_type_are_reported_not_crashed_on(key: Any) -> None:
    data = fixture("1")
    data["messages"][key] = data["messages"].pop("a3")
    found = problems_of(data)
    assert any("differs from its key" in p.message for p in found)
    assert all(p.location for p in found)


# ---- the documented minimal documents ----------------------------------------------------


def documented_json(page: str) -> list[Any]:
    """The JSON blocks of a docs page, parsed."""
    path = Path(__file__).resolve().parents[2] / "docs" / page
    blocks = re.findall(r"^```json\n(.*?)^```$", path.read_text(encoding="utf-8"), re.M | re.S)
    return [json.loads(block) for block in blocks]


def test_the_minimal_documents_in_the_docs_load_and_need_every_field() -> None:
    version_1, version_2 = documented_json("history.md")
    assert "schema_version" not in version_1
    assert version_2["schema_version"] == "2.0"
    for document in (version_1, version_2):
        history = History.from_dict(document)
        assert [(m.role, m.content) for m in history.thread()] == [
            ("user", "Weather in Paris?"),
            ("assistant", "18°C and sunny."),
        ]
        for key in document:  # "every field in them is required"
            smaller = {k: v for k, v in document.items() if k != key}
            with pytest.raises(HistoryValidationError):
                History.from_dict(smaller)
        messages = document["messages"]
        first = messages["m1"] if isinstance(messages, dict) else messages[0]
        for key in list(first):
            smaller = copy.deepcopy(document)
            inner = smaller["messages"]
            del (inner["m1"] if isinstance(inner, dict) else inner[0])[key]
            with pytest.raises(HistoryValidationError):
                History.from_dict(smaller)
    assert History.from_dict(version_1).to_dict("2.0") == History.from_dict(version_2).to_dict()


@pytest.mark.parametrize(
    "empty",
    [
        {"conversation_id": "c", "root_id": None, "current_node": None, "messages": {}},
        {
            "schema_version": "2.0",
            "conversation_id": "c",
            "current_node": None,
            "messages": [],
            "mapping": {},
        },
    ],
    ids=["1", "2.0"],
)
def test_an_empty_document_has_null_pointers(empty: dict[str, Any]) -> None:
    assert History.from_dict(empty).thread() == []
