import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import glassagent
import glassagent._history.store as store_module
from glassagent.errors import HistoryConflictError, HistoryValidationError, UserError
from glassagent.history import History, HistoryLimits, HistoryStore
from glassagent.llm import Message


def chat(*contents: str) -> History:
    history = History(title="chat")
    for content in contents:
        history.append(Message(role="user", content=content))
    return history


def files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if not p.name.endswith(".lock"))


def test_save_load_list_delete(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "chats")
    assert store.list() == []
    assert "a" not in store
    revision = store.save("a", chat("one"))
    store.save("b-2.x_y", chat("two"))
    assert store.list() == ["a", "b-2.x_y"]
    assert "a" in store
    loaded = store.load("a")
    assert [m.content for m in loaded.thread()] == ["one"]
    assert loaded.revision == revision
    assert store.path("a") == tmp_path / "chats" / "a.json"
    store.delete("a")
    store.delete("a")  # deleting twice is fine
    assert store.list() == ["b-2.x_y"]
    with pytest.raises(UserError, match="no chat 'a'"):
        store.load("a")
    assert repr(store) == f"HistoryStore({str(tmp_path / 'chats')!r})"


def test_list_ignores_files_that_are_not_chats(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    store.save("kept", chat("x"))
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / ".hidden.json").write_text("{}")
    (tmp_path / "sub.json").mkdir()
    assert store.list() == ["kept"]


@pytest.mark.parametrize(
    "chat_id",
    [
        "../escape",
        "..",
        ".",
        "a/b",
        "a\\b",
        "/etc/passwd",
        "a\x00b",
        "",
        ".hidden",
        "a..b",
        "x" * 129,
        "C:evil",
        "name with spaces",
        5,
        None,
    ],
)
def test_chat_ids_that_could_name_other_files_are_rejected(tmp_path: Path, chat_id: Any) -> None:
    store = HistoryStore(tmp_path / "chats")
    (tmp_path / "escape.json").write_text("{}")
    for action in (
        lambda: store.save(chat_id, chat("x")),
        lambda: store.load(chat_id),
        lambda: store.delete(chat_id),
        lambda: chat_id in store,
    ):
        with pytest.raises(UserError, match="Invalid chat id"):
            action()
    assert files(tmp_path / "chats") == []
    assert (tmp_path / "escape.json").read_text() == "{}"


def test_the_longest_accepted_chat_id(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    store.save("x" * 128, chat("x"))
    assert store.list() == ["x" * 128]


@pytest.mark.parametrize("failing", ["replace", "fsync", "write"])
def test_a_crash_mid_write_keeps_the_old_chat_and_leaves_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    store = HistoryStore(tmp_path)
    store.save("c", chat("old"))
    before = store.path("c").read_bytes()
    history = store.load("c")
    history.append(Message(role="user", content="new"))

    def crash(*args: Any, **kwargs: Any) -> None:
        raise OSError("disk on fire")

    if failing == "write":
        real_fdopen = os.fdopen

        def fdopen(*args: Any, **kwargs: Any) -> Any:
            handle = real_fdopen(*args, **kwargs)
            handle.write = crash  # type: ignore[method-assign]
            return handle

        monkeypatch.setattr(os, "fdopen", fdopen)
    else:
        monkeypatch.setattr(os, failing, crash)
    with pytest.raises(OSError, match="disk on fire"):
        store.save("c", history)
    monkeypatch.undo()
    assert store.path("c").read_bytes() == before
    assert files(tmp_path) == ["c.json"]
    assert [m.content for m in store.load("c").thread()] == ["old"]
    store.save("c", history)  # the history is still based on the stored revision
    assert [m.content for m in store.load("c").thread()] == ["old", "new"]


def test_history_save_is_atomic_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "chat.json"
    chat("old").save(path)
    before = path.read_bytes()

    def crash(*args: Any) -> None:
        raise OSError("power cut")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="power cut"):
        chat("new").save(path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chat.json"]


def test_concurrent_writers_are_detected(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    store.save("c", chat("start"))
    first, second = store.load("c"), store.load("c")
    first.append(Message(role="user", content="from first"))
    second.append(Message(role="user", content="from second"))
    store.save("c", first)
    with pytest.raises(HistoryConflictError) as info:
        store.save("c", second)
    assert info.value.chat_id == "c"
    assert info.value.expected_revision == second.revision
    assert info.value.actual_revision == first.revision
    assert "changed since this history was loaded" in str(info.value)
    assert [m.content for m in store.load("c").thread()] == ["start", "from first"]
    fresh = store.load("c")  # reload, re-apply, save
    fresh.append(Message(role="user", content="from second"))
    store.save("c", fresh)
    store.save("c", fresh)  # saving again after a save is fine: the revision moved along
    assert [m.content for m in store.load("c").thread()] == ["start", "from first", "from second"]


def test_a_new_history_cannot_overwrite_an_existing_chat(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    store.save("c", chat("existing"))
    with pytest.raises(HistoryConflictError, match="found") as info:
        store.save("c", chat("newcomer"))
    assert info.value.expected_revision is None
    loaded = store.load("c")
    store.delete("c")
    with pytest.raises(HistoryConflictError) as gone:
        store.save("c", loaded)
    assert gone.value.actual_revision is None


def test_racing_threads_lose_no_turn(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    store.save("c", chat("start"))
    errors: list[BaseException] = []

    def writer(name: str) -> None:
        for i in range(5):
            while True:
                history = store.load("c")
                history.append(Message(role="user", content=f"{name}-{i}"))
                try:
                    store.save("c", history)
                    break
                except HistoryConflictError:
                    continue
                except BaseException as exc:  # pragma: no cover - reported below
                    errors.append(exc)
                    return

    threads = [threading.Thread(target=writer, args=(n,)) for n in ("a", "b", "c")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    contents = [m.content for m in store.load("c").thread()]
    assert sorted(contents[1:]) == sorted(f"{n}-{i}" for n in "abc" for i in range(5))


def test_invalid_and_oversized_files_are_refused(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path, limits=HistoryLimits(max_total_bytes=200))
    store.path("bad").write_text('{"schema_version": "9"}')
    with pytest.raises(HistoryValidationError, match="unknown schema version"):
        store.load("bad")
    store.path("big").write_bytes(b" " * 201)
    with pytest.raises(HistoryValidationError, match="201 bytes exceed"):
        store.load("big")


# ---- leftovers of killed saves -------------------------------------------------------------

# A child process that saves a 1 MB chat and stops after writing it, before the fsync and the
# rename: it holds the store's lock and its temporary file exists, as in any save under way.
STUCK_SAVE = """
import os, sys, time
from glassagent.history import History, HistoryStore
from glassagent.llm import Message

store = HistoryStore(sys.argv[1])
history = History()
history.append(Message(role="user", content="x" * 1_000_000))

def stuck(fd):
    print("writing", flush=True)
    time.sleep(60)

os.fsync = stuck
store.save(sys.argv[2], history)
"""


def start_stuck_save(directory: Path, chat_id: str) -> "subprocess.Popen[str]":
    source = str(Path(glassagent.__file__).parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([source, os.environ.get("PYTHONPATH", "")])}
    child = subprocess.Popen(
        [sys.executable, "-c", STUCK_SAVE, str(directory), chat_id],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert child.stdout is not None
    if child.stdout.readline() != "writing\n":  # pragma: no cover - the child failed
        child.kill()
        child.wait()
        pytest.fail("the saving child did not start writing")
    return child


def kill(child: "subprocess.Popen[str]") -> None:
    os.kill(child.pid, signal.SIGKILL)
    child.wait(10)
    assert child.stdout is not None
    child.stdout.close()


def temp_files(directory: Path, chat_id: str) -> list[Path]:
    return sorted(directory.glob(f".{chat_id}.json.*.tmp"))


def backdate(path: Path, seconds: float = 3600) -> None:
    old = time.time() - seconds
    os.utime(path, (old, old))


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL and flock are POSIX")
def test_temp_files_of_killed_saves_are_removed_but_never_a_live_one(tmp_path: Path) -> None:
    HistoryStore(tmp_path).save("kept", chat("x"))
    names = ("notes.tmp", ".kept.json.tmp", "a.json.abcdefgh.tmp", ".-a.json.abcdefgh.tmp")
    unrelated = [tmp_path / name for name in names]  # not names a save's temporary file has
    for path in unrelated:
        path.write_text("not a leftover of a save")
        backdate(path)

    first = start_stuck_save(tmp_path, "a")
    try:
        [live] = temp_files(tmp_path, "a")
        assert live.stat().st_size > 1_000_000
        backdate(live)  # even an old-looking file of a save under way is left alone
        HistoryStore(tmp_path)
        assert live.exists()
    finally:
        kill(first)
    [leftover] = temp_files(tmp_path, "a")  # SIGKILL ran no cleanup

    second = start_stuck_save(tmp_path, "b")  # it got the lock its killed predecessor held
    kill(second)
    [fresh] = temp_files(tmp_path, "b")

    store = HistoryStore(tmp_path)
    assert not leftover.exists()  # older than ten minutes, and no save under way
    assert fresh.exists()  # could still belong to a writer outside the lock (History.save)
    assert all(path.exists() for path in unrelated)
    assert store.list() == ["kept"]
    assert [m.content for m in store.load("kept").thread()] == ["x"]


def test_a_long_open_store_sweeps_when_it_saves_at_most_every_ten_minutes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [1_000.0]
    monkeypatch.setattr(store_module, "monotonic", lambda: clock[0])
    store = HistoryStore(tmp_path)
    first = tmp_path / ".c.json.abcd_123.tmp"
    first.write_bytes(b"{")
    backdate(first)
    store.save("c", chat("one"))
    assert first.exists()  # swept on opening, a moment ago
    clock[0] += 601
    history = store.load("c")
    history.append(Message(role="user", content="two"))
    store.save("c", history)
    assert not first.exists()
    assert files(tmp_path) == ["c.json"]
