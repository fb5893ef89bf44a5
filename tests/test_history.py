import copy
import json
import pickle
from pathlib import Path
from typing import Any

import pytest

from glassagent.errors import GlassAgentError, HistoryValidationError, UserError
from glassagent.history import (
    History,
    HistoryAttachment,
    HistoryLimits,
    HistoryMessage,
    HistoryProblem,
    HistoryToolCall,
    add_message_to_history,
    create_standard_history,
    create_standard_message,
    get_conversation_thread,
)
from glassagent.llm import Attachment, Message, ToolCall

FIXTURES = Path(__file__).parent / "fixtures"


def fixture(version: str) -> dict[str, Any]:
    name = "history_v1.json" if version == "1" else "history_v2.json"
    data: dict[str, Any] = json.loads((FIXTURES / name).read_text("utf-8"))
    return data


def ids(messages: list[HistoryMessage]) -> list[str]:
    return [m.id for m in messages]


def problems_of(data: Any, **limits: int) -> list[HistoryProblem]:
    with pytest.raises(HistoryValidationError) as info:
        History.from_dict(data, limits=HistoryLimits(**limits))
    return list(info.value.problems)


def messages_of(history: History, *ids_: str) -> list[HistoryMessage]:
    return [history[i] for i in ids_]


# ---- formats: both versions, lossless ----------------------------------------------------


@pytest.mark.parametrize("version", ["1", "2.0"])
def test_each_fixture_round_trips_unchanged(version: str) -> None:
    data = fixture(version)
    assert History.from_dict(data).to_dict(version) == data


def test_v1_and_v2_fixtures_hold_the_same_conversation() -> None:
    v1, v2 = fixture("1"), fixture("2.0")
    assert History.from_dict(v1).to_dict() == v2
    assert History.from_dict(v2).to_dict("1") == v1


def test_v1_to_v2_to_v1_is_lossless() -> None:
    v1 = fixture("1")
    via_v2 = json.loads(json.dumps(History.from_dict(v1).to_dict("2.0")))
    assert History.from_dict(via_v2).to_dict("1") == v1


def test_v2_only_fields_survive_a_trip_through_v1() -> None:
    v2 = fixture("2.0")
    v2["active_tools"] = ["web_search", {"name": "calculator"}]
    v2["active_supporters"] = ["researcher"]
    v2["mapping"]["a3"]["collapsed"] = True
    history = History.from_dict(v2)
    assert history.active_tools == ["web_search", {"name": "calculator"}]
    v1 = history.to_dict("1")
    assert v1["active_tools"] == v2["active_tools"]
    back = History.from_dict(v1).to_dict()
    del v2["mapping"]["a3"]["collapsed"]  # mapping entries exist only in 2.0
    assert back == v2
    assert History.from_dict(fixture("2.0") | {"active_tools": ["x"]}).to_dict()["active_tools"]


def test_2_0_is_written_by_default_and_a_missing_schema_version_means_v1() -> None:
    history = History.from_dict(fixture("1"))
    assert history.to_dict()["schema_version"] == "2.0"
    assert isinstance(history.to_dict()["messages"], list)
    assert "schema_version" not in history.to_dict("1")


def test_fixture_content_is_read_into_the_tree() -> None:
    history = History.from_dict(fixture("1"))
    assert history.root_id == "sys"
    assert history.current_node == "a2"
    assert ids(history.thread()) == ["sys", "u1", "a1", "t1", "a2"]
    assert history["a2b"].status == "aborted"
    assert history["u1"].attachments == (
        HistoryAttachment(
            type="image",
            mime_type="image/png",
            url="uploads/map.png",
            name="map.png",
            extra={"size": 1234},
        ),
    )
    (call,) = history["a1"].tool_calls
    assert call == HistoryToolCall(
        tool_call_id="call_1",
        function_name="get_weather",
        arguments={"city": "Paris"},
        provider_metadata={"thought_signature": "c2lnbmF0dXJl"},
        extra={"index": 0},
    )
    assert history["a2"].extra == {"feedback": "thumbs_up"}
    assert history.extra == {"folder": "travel"}


def test_provider_metadata_survives_json_round_trips_in_both_versions(tmp_path: Path) -> None:
    history = History()
    history.append(Message(role="user", content="hi"))
    history.append(
        Message(
            role="assistant",
            tool_calls=(ToolCall("c1", "f", {"x": 1}, {"thought_signature": "abc=="}),),
            provider_metadata={"response_id": "r-1", "nested": {"k": [1, 2.5, None]}},
        )
    )
    for version in ("1", "2.0"):
        path = tmp_path / f"chat-{version}.json"
        history.save(path, version=version)  # type: ignore[arg-type]
        loaded = History.load(path).to_messages()
        assert loaded[1].provider_metadata == {
            "response_id": "r-1",
            "nested": {"k": [1, 2.5, None]},
        }
        assert loaded[1].tool_calls[0].provider_metadata == {"thought_signature": "abc=="}
        assert loaded == history.to_messages()


def test_to_messages_gives_neutral_messages_of_the_thread() -> None:
    history = History.from_dict(fixture("1"))
    messages = history.to_messages()
    assert [m.role for m in messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert messages[2].tool_calls == (
        ToolCall("call_1", "get_weather", {"city": "Paris"}, {"thought_signature": "c2lnbmF0dXJl"}),
    )
    assert messages[2].thinking == "I should look the weather up."
    assert (messages[3].tool_call_id, messages[3].name) == ("call_1", "get_weather")
    assert messages[1].attachments == (
        Attachment(path="uploads/map.png", mime_type="image/png", name="map.png"),
    )
    lyon = history.to_messages("a3")
    assert lyon[1].attachments == (
        Attachment(data=b"hello", mime_type="text/plain", name="note.txt"),
    )
    assert history.to_messages("a2b")[-1].status == "aborted"


def test_string_arguments_are_kept_as_written_and_parsed_for_the_model() -> None:
    data = fixture("2.0")
    data["messages"][2]["tool_calls"][0]["arguments"] = '{"city": "Paris"}'
    history = History.from_dict(data)
    assert history.to_dict()["messages"][2]["tool_calls"][0]["arguments"] == '{"city": "Paris"}'
    assert history.to_messages()[2].tool_calls[0].input == {"city": "Paris"}


# ---- attachments -------------------------------------------------------------------------


def test_attachments_map_by_mime_type_and_to_urls(tmp_path: Path) -> None:
    picture = tmp_path / "cat.jpg"
    picture.write_bytes(b"\xff\xd8")
    history = History()
    history.append(
        Message(
            role="user",
            content="look",
            attachments=(
                Attachment.from_path(picture),
                Attachment(data=b"RIFF", mime_type="audio/wav", name="hi.wav"),
                Attachment(data=b"\x00", mime_type="video/mp4"),
                Attachment(data=b"%PDF", mime_type="application/pdf", name="a.pdf"),
            ),
        )
    )
    stored = history.to_dict()["messages"][0]["attachments"]
    assert stored == [
        {"type": "image", "mime_type": "image/jpeg", "url": str(picture), "name": "cat.jpg"},
        {"type": "audio", "mime_type": "audio/wav", "url": "data:audio/wav;base64,UklGRg==",
         "name": "hi.wav"},
        {"type": "video", "mime_type": "video/mp4", "url": "data:video/mp4;base64,AA==",
         "name": None},
        {"type": "file", "mime_type": "application/pdf", "url": "data:application/pdf;base64,"
         "JVBERg==", "name": "a.pdf"},
    ]  # fmt: skip
    back = History.from_dict(history.to_dict()).to_messages()[0].attachments
    assert [a.read_bytes() for a in back] == [b"\xff\xd8", b"RIFF", b"\x00", b"%PDF"]


def test_file_urls_become_paths_and_remote_urls_are_refused() -> None:
    file_url = HistoryAttachment(type="image", url="file:///tmp/a%20b.png", mime_type="image/png")
    assert file_url.to_attachment().path == "/tmp/a b.png"
    plain = HistoryAttachment(type="file", url="data:,hello%20there")
    assert plain.to_attachment().read_bytes() == b"hello there"
    with pytest.raises(UserError, match="https: URL"):
        HistoryAttachment(type="image", url="https://example.com/cat.png").to_attachment()
    with pytest.raises(UserError, match="base64"):
        HistoryAttachment(type="image", url="data:image/png;base64,@@@").to_attachment()
    with pytest.raises(UserError, match="','"):
        HistoryAttachment(type="image", url="data:image/png;base64").to_attachment()


# ---- the tree: append, branch, switch ---------------------------------------------------


def test_append_moves_the_current_node_and_builds_a_chain() -> None:
    history = History(title="t")
    assert (len(history), history.root_id, history.current_node) == (0, None, None)
    assert history.thread() == []
    assert history.leaves() == ()
    first = history.append(Message(role="user", content="hi"))
    second = history.append(Message(role="assistant", content="hello"))
    assert (history.root_id, history.current_node) == (first, second)
    assert history[second].parent_id == first
    assert history.children(first) == (second,)
    assert [m.content for m in history.messages.values()] == ["hi", "hello"]
    assert first in history
    assert "nope" not in history
    assert "messages=2" in repr(history)


def test_branching_keeps_old_branches_as_siblings() -> None:
    history = History()
    q = history.append(Message(role="user", content="2+2?"))
    a = history.append(Message(role="assistant", content="5"))
    history.branch(q)  # regenerate the answer
    a2 = history.append(Message(role="assistant", content="4"))
    assert history.children(q) == (a, a2)
    assert history.siblings(a2) == (a,)
    assert history.siblings(q) == ()
    assert ids(history.thread()) == [q, a2]
    assert set(history.leaves()) == {a, a2}
    history.switch(a)
    assert ids(history.thread()) == [q, a]
    assert [m.content for m in history.thread(a2)] == ["2+2?", "4"]


def test_editing_a_question_branches_from_its_parent() -> None:
    history = History.from_dict(fixture("1"))
    history.branch("sys")
    edited = history.append(Message(role="user", content="And in Nice?"))
    assert history.children("sys") == ("u1", "u1b", edited)
    assert ids(history.thread()) == ["sys", edited]


def test_thread_is_correct_after_switching_around_a_deep_tree() -> None:
    history = History()
    chain = [history.append(Message(role="user", content=str(i))) for i in range(50)]
    history.branch(chain[20])
    side = [history.append(Message(role="user", content=f"s{i}")) for i in range(5)]
    assert ids(history.thread()) == chain[:21] + side
    assert ids(history.thread(chain[49])) == chain
    assert ids(history.thread(chain[10])) == chain[:11]
    assert ids(history.thread(side[2])) == chain[:21] + side[:3]
    assert ids(get_conversation_thread(history)) == chain[:21] + side


def test_append_refuses_unknown_parents_duplicates_and_unanswerable_tool_results() -> None:
    history = History()
    user = history.append(Message(role="user", content="hi"))
    with pytest.raises(UserError, match="no message 'nope'"):
        history.append(Message(role="assistant"), parent="nope")
    with pytest.raises(UserError, match="already has"):
        history.append(create_standard_message("user", "again", message_id=user))
    with pytest.raises(UserError, match="not an ISO 8601 timestamp"):
        history.append(create_standard_message("user", "late", timestamp="yesterday"))
    with pytest.raises(UserError, match="must follow the assistant"):
        history.append(Message(role="tool", content="1", tool_call_id="c1"))
    history.append(Message(role="assistant", tool_calls=(ToolCall("c1", "f", {}),)))
    history.append(Message(role="tool", content="1", tool_call_id="c1"))
    history.append(Message(role="tool", content="2", tool_call_id="c1"))  # a run of results
    with pytest.raises(UserError, match="'c9'"):
        history.append(Message(role="tool", content="3", tool_call_id="c9"))
    with pytest.raises(UserError, match="Append a Message"):
        history.append("text")  # type: ignore[arg-type]
    for unknown in ("switch", "branch", "children", "siblings", "thread", "to_messages"):
        with pytest.raises(UserError):
            getattr(history, unknown)("nope")


def test_helpers_with_the_application_names() -> None:
    history = create_standard_history(title="Chat", model="m", platform="cli", conversation_id="c")
    assert (history.title, history.model, history.platform) == ("Chat", "m", "cli")
    assert history.conversation_id == "c"
    message = create_standard_message(
        "user",
        "hi",
        attachments=[Attachment(data=b"x", mime_type="image/gif")],
        message_id="m1",
        timestamp="2026-01-01T00:00:00.000Z",
    )
    assert add_message_to_history(history, message) == "m1"
    call = create_standard_message(
        "assistant", tool_calls=[ToolCall("c1", "f", {"a": 1})], message_id="m2"
    )
    add_message_to_history(history, call, parent_id="m1")
    result = create_standard_message("tool", "ok", tool_call_id="c1", status="aborted")
    add_message_to_history(history, result)
    thread = get_conversation_thread(history)
    assert ids(thread)[:2] == ["m1", "m2"]
    assert thread[0].created_at == "2026-01-01T00:00:00.000Z"
    assert thread[0].attachments[0].type == "image"
    assert thread[1].tool_calls[0].function_name == "f"
    assert thread[2].status == "aborted"
    assert History.from_dict(history.to_dict()).to_dict() == history.to_dict()


def test_new_timestamps_are_iso_8601_with_milliseconds_and_z() -> None:
    history = History()
    history.append(Message(role="user", content="hi"))
    stamp = history.to_dict()["messages"][0]["timestamp"]
    assert len(stamp) == len("2026-01-05T10:00:00.000Z")
    assert stamp.endswith("Z")
    assert stamp[19] == "."


# ---- files --------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["1", "2.0"])
def test_save_and_load_files_in_both_versions(tmp_path: Path, version: str) -> None:
    history = History.from_dict(fixture("1"))
    path = tmp_path / "chat.json"
    history.save(path, version=version)  # type: ignore[arg-type]
    assert json.loads(path.read_text("utf-8")) == fixture(version)
    assert "°" in path.read_text("utf-8")  # written as UTF-8, not escaped
    assert History.load(path).to_dict(version) == fixture(version)  # type: ignore[arg-type]
    assert History.from_json(path.read_text("utf-8")).to_dict() == fixture("2.0")


def test_unknown_versions_cannot_be_written() -> None:
    with pytest.raises(UserError, match="Unknown history version"):
        History().to_dict("3")  # type: ignore[arg-type]


def test_values_that_are_not_json_are_refused_when_writing() -> None:
    history = History()
    history.extra["when"] = object()
    with pytest.raises(UserError, match="cannot be written as JSON"):
        history.to_json()


# ---- validation ----------------------------------------------------------------------------


def test_validation_error_is_a_value_error_and_lists_every_problem() -> None:
    data = fixture("2.0")
    data["messages"][1]["role"] = "robot"
    data["messages"][2]["status"] = "paused"
    data["current_node"] = "ghost"
    problems = problems_of(data)
    assert [str(p) for p in problems] == [
        "messages[1].role: invalid role 'robot'; expected 'system', 'user', 'assistant' or 'tool'",
        "messages[2].status: invalid status 'paused'; expected 'completed' or 'aborted'",
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


def test_a_100k_message_chain_loads_validates_and_threads_without_recursion() -> None:
    count = 100_000
    history = History.from_dict(chain(count))
    thread = history.thread()
    assert len(thread) == count
    assert (thread[0].id, thread[-1].id) == ("m0", f"m{count - 1}")
    middle = f"m{count // 2}"
    assert len(history.thread(middle)) == count // 2 + 1
    assert history.to_messages()[-1].content == f"message {count - 1}"


def test_a_long_cycle_is_found_without_recursion() -> None:
    count = 20_000  # far beyond any recursion limit
    data = chain(count)
    data["messages"][0]["parent_id"] = f"m{count - 1}"
    data["mapping"]["m0"]["parent"] = f"m{count - 1}"
    data["messages"][-1]["children"] = ["m0"]
    data["mapping"][f"m{count - 1}"]["children"] = ["m0"]
    found = [str(p) for p in problems_of(data)]
    assert found[0] == "messages: no root message (parent_id null): the parent links form a cycle"
    assert found[1].startswith("messages[0]: parent links form a cycle: 'm0', ")
    assert found[1].endswith("and 19995 more")


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
