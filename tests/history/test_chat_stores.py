"""The `ChatStore` contract, on every store: files, SQLite and (``-m postgres``) PostgreSQL."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from glassagent.errors import HistoryConflictError, HistoryValidationError, UserError
from glassagent.history import (
    AttachmentPolicy,
    ChatStore,
    History,
    HistoryLimits,
    HistoryStore,
    SQLHistoryStore,
)
from glassagent.llm import Message
from tests.support.store import Place, as_json, chat, contents, rich_history


def test_both_stores_are_chat_stores(tmp_path: Any) -> None:
    assert isinstance(HistoryStore(tmp_path), ChatStore)
    assert isinstance(SQLHistoryStore(f"sqlite:///{tmp_path}/x.db"), ChatStore)
    assert not isinstance("chats", ChatStore)


async def test_save_load_list_delete(place: Place) -> None:
    store = await place.open()
    assert await store.alist() == []
    assert await store.aload("a") is None
    history = chat("one", "two")
    revision = await store.asave("a", history)
    assert history.revision == revision
    await store.asave("b-2.x_y", chat("three"))
    assert await store.alist() == ["a", "b-2.x_y"]
    for thread in (False, True):
        loaded = await store.aload("a", thread=thread)
        assert loaded is not None
        assert contents(loaded) == ["one", "two"]
        assert loaded.revision == revision
        assert loaded.title == "chat"
    await store.adelete("a")
    await store.adelete("a")  # deleting twice is fine
    assert await store.alist() == ["b-2.x_y"]
    assert await store.aload("a") is None


async def test_a_chat_round_trips_with_everything_it_holds(place: Place) -> None:
    store = await place.open()
    history = rich_history()
    await store.asave("rich", history)
    loaded = await store.aload("rich")
    assert loaded is not None
    assert as_json(loaded) == as_json(history)
    assert loaded.extra == {"folder": "travel"}
    thread = await store.aload("rich", thread=True)
    assert thread is not None
    assert [m.id for m in thread.thread()] == [m.id for m in history.thread()]
    assert thread.current_node == history.current_node


async def test_an_empty_history_is_a_chat_too(place: Place) -> None:
    store = await place.open()
    await store.asave("empty", History(title="nothing yet"))
    loaded = await store.aload("empty", thread=True)
    assert loaded is not None
    assert (len(loaded), loaded.current_node, loaded.title) == (0, None, "nothing yet")
    loaded.append(Message(role="user", content="first"))
    await store.asave("empty", loaded)
    again = await store.aload("empty")
    assert again is not None
    assert contents(again) == ["first"]


@pytest.mark.parametrize("chat_id", ["../escape", "a/b", "", ".hidden", "a..b", "x" * 129, 5])
async def test_invalid_chat_ids_are_refused(place: Place, chat_id: Any) -> None:
    store = await place.open()
    for call in (
        lambda: store.aload(chat_id),
        lambda: store.asave(chat_id, chat("x")),
        lambda: store.adelete(chat_id),
    ):
        with pytest.raises(UserError, match="Invalid chat id"):
            await call()


async def test_a_stale_history_is_a_conflict_and_the_first_turn_is_kept(place: Place) -> None:
    store = await place.open()
    await store.asave("c", chat("seed"))
    first, second = await store.aload("c"), await store.aload("c", thread=True)
    assert first is not None
    assert second is not None
    first.append(Message(role="assistant", content="first"))
    second.append(Message(role="assistant", content="second"))
    saved = await store.asave("c", first)
    stale = second.revision
    with pytest.raises(HistoryConflictError) as info:
        await store.asave("c", second)
    assert (info.value.expected_revision, info.value.actual_revision) == (stale, saved)
    assert info.value.chat_id == "c"
    assert second.revision == stale  # unchanged: reload and re-apply
    kept = await store.aload("c")
    assert kept is not None
    assert contents(kept) == ["seed", "first"]


async def test_a_new_history_cannot_overwrite_an_existing_chat(place: Place) -> None:
    store = await place.open()
    revision = await store.asave("c", chat("kept"))
    with pytest.raises(HistoryConflictError) as info:
        await store.asave("c", chat("other"))
    assert (info.value.expected_revision, info.value.actual_revision) == (None, revision)
    kept = await store.aload("c")
    assert kept is not None
    assert contents(kept) == ["kept"]


async def test_saving_a_deleted_chat_is_a_conflict(place: Place) -> None:
    store = await place.open()
    await store.asave("c", chat("x"))
    loaded = await store.aload("c")
    assert loaded is not None
    await store.adelete("c")
    loaded.append(Message(role="user", content="y"))
    with pytest.raises(HistoryConflictError) as info:
        await store.asave("c", loaded)
    assert info.value.actual_revision is None
    assert await store.aload("c") is None


async def test_a_loaded_thread_extends_and_saves_without_losing_other_branches(
    place: Place,
) -> None:
    store = await place.open()
    history = chat("root")
    root = history.current_node
    assert root is not None
    for branch in ("left", "right"):
        history.branch(root)
        history.append(Message(role="user", content=branch))
        history.append(Message(role="assistant", content=f"{branch} answer"))
    await store.asave("tree", history)
    thread = await store.aload("tree", thread=True)
    assert thread is not None
    assert contents(thread) == ["root", "right", "right answer"]
    thread.append(Message(role="user", content="more"))
    await store.asave("tree", thread)
    whole = await store.aload("tree")
    assert whole is not None
    assert len(whole) == 6
    assert contents(whole) == ["root", "right", "right answer", "more"]
    assert [whole[c].content for c in whole.children(root)] == ["left", "right"]
    (leaf,) = [m.id for m in whole.messages.values() if m.content == "left answer"]
    assert [m.content for m in whole.thread(leaf)] == ["root", "left", "left answer"]


async def test_each_user_has_only_their_own_chats(place: Place) -> None:
    root = await place.open()
    alice, bob = root.for_user("alice"), root.for_user("bob")
    await alice.asave("c", chat("alice's"))
    assert await bob.aload("c") is None
    assert await bob.alist() == []
    await bob.asave("c", chat("bob's"))  # the same id, another chat
    await bob.adelete("c")
    kept = await alice.aload("c")
    assert kept is not None
    assert contents(kept) == ["alice's"]
    assert await alice.alist() == ["c"]
    assert await root.alist() == []  # the root's own chats are nobody's
    again = root.for_user("alice")
    assert await again.alist() == ["c"]


async def test_for_user_keeps_the_limits_and_sets_the_attachment_policy(place: Place) -> None:
    limits = HistoryLimits(max_messages=10)
    root = await place.open(limits=limits)
    safe = AttachmentPolicy.safe()
    alice = root.for_user("alice", attachment_policy=safe)
    await alice.asave("c", chat("x"))
    loaded = await alice.aload("c")
    assert loaded is not None
    assert loaded.attachment_policy is safe
    assert alice.limits == limits  # type: ignore[attr-defined]


async def test_a_chat_over_the_limits_is_refused_when_loaded(place: Place) -> None:
    writer = await place.open()
    await writer.asave("big", chat("1", "2", "3", "4"))
    reader = await place.open(limits=HistoryLimits(max_messages=3))
    for thread in (False, True):
        with pytest.raises(HistoryValidationError, match="max_messages"):
            await reader.aload("big", thread=thread)
    deep = await place.open(limits=HistoryLimits(max_depth=2))
    with pytest.raises(HistoryValidationError, match="max_depth"):
        await deep.aload("big", thread=True)


async def test_concurrent_appenders_never_lose_a_turn(place: Place) -> None:
    """Writers as separate processes would be (each its own store and connections) append
    turns to one chat at once, reloading on each conflict: every turn is kept, once."""
    await (await place.open()).asave("shared", chat("seed"))
    writers, turns = 4, 5
    conflicts = 0

    async def writer(number: int) -> None:
        nonlocal conflicts
        store = await place.open()
        for turn in range(turns):
            while True:
                history = await store.aload("shared", thread=True)
                assert history is not None
                history.append(Message(role="user", content=f"w{number}-t{turn}"))
                try:
                    await store.asave("shared", history)
                    break
                except HistoryConflictError:
                    conflicts += 1
                    await asyncio.sleep(0)

    await asyncio.wait_for(asyncio.gather(*(writer(n) for n in range(writers))), 120)
    final = await (await place.open()).aload("shared")
    assert final is not None
    found = [m.content for m in final.messages.values()]
    expected = ["seed"] + [f"w{n}-t{t}" for n in range(writers) for t in range(turns)]
    assert sorted(found) == sorted(expected)  # each once: no turn lost, none twice
    assert len(final.thread()) == 1 + writers * turns  # one line: each append saw the last


# ---- merging a turn into a chat that changed --------------------------------------------


async def test_a_merge_adds_the_new_messages_to_the_chat_as_it_is(place: Place) -> None:
    store = await place.open()
    await store.asave("c", chat("seed"))
    first, second = await store.aload("c"), await store.aload("c", thread=True)
    assert first is not None
    assert second is not None
    seed = first.current_node
    first.append(Message(role="user", content="first"))
    await store.asave("c", first)
    second.append(Message(role="user", content="second"))
    second.append(Message(role="assistant", content="second answer"))
    second.title = "renamed"
    stale = second.revision
    revision = await store.asave("c", second, merge=True)
    assert second.revision == stale  # it lacks what the first writer saved
    with pytest.raises(HistoryConflictError):
        await store.asave("c", second)
    merged = await store.aload("c")
    assert merged is not None
    assert merged.revision == revision
    assert [merged[c].content for c in merged.children(seed)] == ["first", "second"]
    assert contents(merged) == ["seed", "second", "second answer"]  # the merged turn's thread
    assert merged.title == "renamed"
    assert len(merged) == 4


async def test_a_merge_into_an_unchanged_chat_is_a_plain_save(place: Place) -> None:
    store = await place.open()
    history = chat("one")
    await store.asave("c", history, merge=True)  # a new chat
    history.append(Message(role="user", content="two"))
    revision = await store.asave("c", history, merge=True)
    assert history.revision == revision
    history.append(Message(role="user", content="three"))
    await store.asave("c", history)  # checked again: still the stored revision
    loaded = await store.aload("c")
    assert loaded is not None
    assert contents(loaded) == ["one", "two", "three"]


async def test_a_merge_is_refused_when_the_message_it_follows_is_gone(place: Place) -> None:
    store = await place.open()
    await store.asave("c", chat("seed"))
    loaded = await store.aload("c")
    assert loaded is not None
    loaded.append(Message(role="user", content="late"))
    await store.adelete("c")
    await store.asave("c", chat("another chat"))
    for history in (loaded, chat("a second first message")):
        with pytest.raises(HistoryConflictError, match="deleted or replaced"):
            await store.asave("c", history, merge=True)
    await store.adelete("c")
    with pytest.raises(HistoryConflictError, match="deleted or replaced"):
        await store.asave("c", loaded, merge=True)  # its chat is gone: nothing to follow
    assert await store.aload("c") is None


async def test_concurrent_merges_never_conflict_nor_lose_a_turn(place: Place) -> None:
    """Writers that loaded the chat at once save their turns at once, merging: each is
    kept, once, as a sibling branch below the message they all continued."""
    seed = chat("seed")
    await (await place.open()).asave("shared", seed)
    stores = [await place.open() for _ in range(6)]
    loaded = [await store.aload("shared", thread=True) for store in stores]

    async def writer(number: int, store: ChatStore, history: History | None) -> None:
        assert history is not None
        history.append(Message(role="user", content=f"w{number}"))
        history.append(Message(role="assistant", content=f"answer {number}"))
        await store.asave("shared", history, merge=True)

    await asyncio.wait_for(
        asyncio.gather(
            *(writer(n, s, h) for n, (s, h) in enumerate(zip(stores, loaded, strict=True)))
        ),
        120,
    )
    final = await stores[0].aload("shared")
    assert final is not None
    assert seed.current_node is not None
    branches = final.children(seed.current_node)
    assert sorted(final[b].content for b in branches) == [f"w{n}" for n in range(6)]
    for branch in branches:
        (answer,) = final.children(branch)
        assert final[answer].content == "answer " + final[branch].content[1:]
    assert len(final) == 13


async def test_the_store_gives_a_conversation_thread_as_the_seeds_chat_manager(
    place: Place,
) -> None:
    """``chat_manager.get_conversation_thread(history)`` (the design, section 4) on a store."""
    store = await place.open()
    history = History(title="branched")
    question = history.append(Message(role="user", content="Pick a colour."))
    blue = history.append(Message(role="assistant", content="Blue."))
    history.branch(question)
    history.append(Message(role="assistant", content="Green."))
    await store.asave("colours", history)
    loaded = await store.aload("colours")
    assert loaded is not None
    thread = store.get_conversation_thread(loaded)
    assert [m.content for m in thread] == ["Pick a colour.", "Green."]
    assert [m.content for m in store.get_conversation_thread(loaded, blue)] == [
        "Pick a colour.",
        "Blue.",
    ]
    # the standard dict, as the seed's tools hold it, in either version
    for version in ("2.0", "1"):
        document = loaded.to_dict(version)  # type: ignore[arg-type]
        assert [m.id for m in store.get_conversation_thread(document)] == [m.id for m in thread]
    assert store.get_conversation_thread(History()) == []
    with pytest.raises(HistoryValidationError):
        store.get_conversation_thread({"schema_version": "2.0", "messages": "not messages"})
    with pytest.raises(UserError, match="History or a standard history dict"):
        store.get_conversation_thread(["not", "a", "history"])  # type: ignore[arg-type]


async def test_a_thread_from_a_dict_is_read_within_the_stores_limits(place: Place) -> None:
    store = await place.open(limits=HistoryLimits(max_messages=2))
    document = chat("one", "two", "three").to_dict()
    with pytest.raises(HistoryValidationError, match="2"):
        store.get_conversation_thread(document)
    assert [m.content for m in store.get_conversation_thread(chat("one", "two"))] == ["one", "two"]
