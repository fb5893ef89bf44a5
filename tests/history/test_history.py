import json
from pathlib import Path

import pytest

from glassagent.errors import UserError
from glassagent.history import (
    History,
    HistoryAttachment,
    HistoryToolCall,
    add_message_to_history,
    create_standard_history,
    create_standard_message,
    get_conversation_thread,
)
from glassagent.llm import Attachment, Message, ToolCall
from tests.support.history import fixture, ids

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


def test_file_urls_become_paths_https_urls_stay_remote_and_other_schemes_are_refused() -> None:
    file_url = HistoryAttachment(type="image", url="file:///tmp/a%20b.png", mime_type="image/png")
    assert file_url.to_attachment().path == "/tmp/a b.png"
    plain = HistoryAttachment(type="file", url="data:,hello%20there")
    assert plain.to_attachment().read_bytes() == b"hello there"
    remote = HistoryAttachment(type="image", url="https://example.com/cat.png").to_attachment()
    assert remote == Attachment(url="https://example.com/cat.png", mime_type="image/png")
    assert remote.name == "cat.png"
    with pytest.raises(UserError, match="ftp: URL"):
        HistoryAttachment(type="file", url="ftp://example.com/a.txt").to_attachment()
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
