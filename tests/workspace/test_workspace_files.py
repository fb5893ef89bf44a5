"""The workspace's file tools on real files: confinement, reading, listing, writing, editing."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from glassagent._workspace import paths
from glassagent.errors import ToolError, UserError
from glassagent.workspace import Workspace
from tests.support.workspace import call, executions, names, run_calls, run_one, tools


@pytest.fixture(autouse=True, params=["descriptors", "paths"])
def walk(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test runs race-free (folder descriptors) and as on Windows (paths checked once)."""
    if request.param == "paths":
        monkeypatch.setattr(paths, "DESCRIPTORS", False)
    elif not paths.DESCRIPTORS:
        pytest.skip("no folder descriptors (dir_fd) on this system")
    return str(request.param)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    return folder


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder next to the workspace, with a secret file in it."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text("the secret\n")
    return folder


# ---- confinement ------------------------------------------------------------------------


async def test_dotdot_escapes_are_refused_and_the_run_goes_on(root: Path, outside: Path) -> None:
    ws = Workspace(root)
    result = await run_calls(
        ws,
        call("read_file", "c1", path="../outside/secret.txt"),
        call("list_files", "c2", path="sub/../.."),
        call("write_file", "c3", path="../outside/new.txt", content="x"),
        call("edit_file", "c4", path="../outside/secret.txt", old="the", new="a"),
    )
    done = executions(result)
    for call_id in ("c1", "c2", "c3", "c4"):
        assert done[call_id].is_error
        assert "outside the workspace" in done[call_id].result
        assert "'..' leads out of it" in done[call_id].result
        assert "secret" not in done[call_id].result.replace("secret.txt", "")
    assert not (outside / "new.txt").exists()
    assert (outside / "secret.txt").read_text() == "the secret\n"
    assert result.text == "done"


async def test_absolute_paths_outside_are_refused_and_inside_accepted(
    root: Path, outside: Path
) -> None:
    (root / "a.txt").write_text("inside\n")
    ws = Workspace(root)
    refused = await run_one(ws, "read_file", path=str(outside / "secret.txt"))
    assert refused.is_error
    assert "outside the workspace (it is an absolute path)" in refused.result
    accepted = await run_one(ws, "read_file", path=str(root / "a.txt"))
    assert (accepted.is_error, accepted.result) == (False, "     1\tinside")
    with pytest.raises(ToolError, match="outside the workspace"):
        tools(ws)["list_files"]("/")


async def test_a_file_symlink_pointing_outside_is_refused(root: Path, outside: Path) -> None:
    (root / "link.txt").symlink_to(outside / "secret.txt")
    ws = Workspace(root)
    for name, args in [
        ("read_file", {"path": "link.txt"}),
        ("write_file", {"path": "link.txt", "content": "overwritten"}),
        ("edit_file", {"path": "link.txt", "old": "the", "new": "a"}),
    ]:
        outcome = await run_one(ws, name, **args)
        assert outcome.is_error
        assert "a symbolic link on the way leads out of it" in outcome.result
    assert (outside / "secret.txt").read_text() == "the secret\n"
    assert (root / "link.txt").is_symlink()


async def test_a_dangling_symlink_pointing_outside_cannot_be_written(
    root: Path, outside: Path
) -> None:
    (root / "dangling").symlink_to(outside / "not-yet.txt")
    outcome = await run_one(Workspace(root), "write_file", path="dangling", content="x")
    assert outcome.is_error
    assert "outside the workspace" in outcome.result
    assert not (outside / "not-yet.txt").exists()


async def test_a_folder_symlink_pointing_outside_is_refused(root: Path, outside: Path) -> None:
    (root / "out").symlink_to(outside, target_is_directory=True)
    ws = Workspace(root)
    read = await run_one(ws, "read_file", path="out/secret.txt")
    listed = await run_one(ws, "list_files", path="out")
    for outcome in (read, listed):
        assert outcome.is_error
        assert "symbolic link" in outcome.result
    # Listing the workspace names the link but does not go through it.
    assert (await run_one(ws, "list_files")).result == "out/"


async def test_writing_through_a_symlinked_parent_folder_is_refused(
    root: Path, outside: Path
) -> None:
    (root / "out").symlink_to(outside, target_is_directory=True)
    ws = Workspace(root)
    outcome = await run_one(ws, "write_file", path="out/deeper/new.txt", content="x")
    assert outcome.is_error
    assert "symbolic link" in outcome.result
    assert names(outside) == ["secret.txt"]


async def test_symlinks_that_stay_inside_are_followed(root: Path) -> None:
    (root / "real").mkdir()
    (root / "real" / "a.txt").write_text("one\n")
    (root / "alias.txt").symlink_to(root / "real" / "a.txt")
    (root / "dir").symlink_to("real", target_is_directory=True)
    ws = Workspace(root)
    assert (await run_one(ws, "read_file", path="dir/a.txt")).result == "     1\tone"
    written = await run_one(ws, "write_file", path="alias.txt", content="two\n")
    assert not written.is_error
    assert (root / "alias.txt").is_symlink()  # the link stays; its target was replaced
    assert (root / "real" / "a.txt").read_text() == "two\n"


async def test_bad_paths_are_tool_errors(root: Path) -> None:
    (root / "loop").symlink_to("loop")
    ws = Workspace(root)
    with pytest.raises(ToolError, match="NUL"):
        tools(ws)["read_file"]("a\0b")
    assert (await run_one(ws, "read_file", path="loop")).is_error


def test_the_root_must_be_an_existing_folder(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not an existing folder"):
        Workspace(tmp_path / "missing")
    (tmp_path / "file").write_text("")
    with pytest.raises(UserError, match="not an existing folder"):
        Workspace(tmp_path / "file")
    with pytest.raises(UserError, match="max_read_bytes"):
        Workspace(tmp_path, max_read_bytes=0)
    with pytest.raises(UserError, match="confirm"):
        Workspace(tmp_path, confirm=True)  # type: ignore[arg-type]


@pytest.mark.parametrize("given", [123, None, b"/tmp", 1.5], ids=["int", "None", "bytes", "float"])
def test_a_root_that_is_not_a_path_is_a_user_error(given: object) -> None:
    with pytest.raises(UserError, match="must be a path"):
        Workspace(given)  # type: ignore[arg-type]


# ---- read_file --------------------------------------------------------------------------


def test_read_file_numbers_lines_and_pages_with_offset_and_limit(root: Path) -> None:
    (root / "f.txt").write_text("".join(f"line {n}\n" for n in range(1, 11)))
    read = tools(Workspace(root))["read_file"]
    assert read("f.txt").splitlines()[0] == "     1\tline 1"
    assert len(read("f.txt").splitlines()) == 10
    page = read("f.txt", offset=4, limit=3).splitlines()
    assert page[:3] == ["     4\tline 4", "     5\tline 5", "     6\tline 6"]
    assert "read on with offset=7" in page[3]
    assert read("f.txt", offset=8, limit=3).splitlines()[-1] == "    10\tline 10"  # no note
    assert read("f.txt", offset=20) == "'f.txt' has only 10 lines; there is nothing at offset=20."


def test_a_last_line_without_newline_and_crlf_are_read(root: Path) -> None:
    (root / "f.txt").write_bytes(b"a\r\nb")
    read = tools(Workspace(root))["read_file"]
    assert read("f.txt") == "     1\ta\n     2\tb"
    assert read("f.txt", offset=3) == "'f.txt' has only 2 lines; there is nothing at offset=3."


def test_a_large_file_is_cut_at_max_read_bytes_with_a_note(root: Path) -> None:
    line = "x" * 99 + "\n"
    (root / "big.txt").write_text(line * 50_000)  # 5 MB
    read = tools(Workspace(root, max_read_bytes=1_000))["read_file"]
    shown = read("big.txt")
    lines = shown.splitlines()
    assert len(lines) == 11  # ten whole lines of 100 bytes, then the note
    assert lines[-1] == (
        "[shown: lines 1-10 of 'big.txt' (5000000 bytes); the file goes on: read on with offset=11]"
    )
    assert len(shown) < 2_000
    assert read("big.txt", offset=49_999).splitlines()[-1] == f"{50_000:>6}\t{'x' * 99}"


def test_a_line_longer_than_the_limit_is_shown_in_part(root: Path) -> None:
    (root / "min.js").write_text("y" * 5_000 + "\nnext\n")
    shown = tools(Workspace(root, max_read_bytes=100))["read_file"]("min.js").splitlines()
    assert shown[0] == "     1\t" + "y" * 100
    assert shown[1] == (
        "[line 1 is longer than 100 bytes: only its start is shown; read on with offset=2]"
    )


async def test_binary_missing_empty_and_special_files(root: Path) -> None:
    (root / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + bytes(range(256)))
    (root / "empty.txt").write_bytes(b"")
    (root / "sub").mkdir()
    os.mkfifo(root / "pipe")  # opening it for reading would block forever
    ws = Workspace(root)
    binary = await run_one(ws, "read_file", path="img.png")
    assert (binary.is_error, binary.result) == (
        False,
        "'img.png' is a binary file (272 bytes); its content is not shown.",
    )
    missing = await run_one(ws, "read_file", path="nope.txt")
    assert (missing.is_error, missing.result) == (True, "Error: 'nope.txt' does not exist.")
    assert (await run_one(ws, "read_file", path="empty.txt")).result == "'empty.txt' is empty."
    folder = await run_one(ws, "read_file", path="sub")
    assert folder.is_error
    assert "is a folder" in folder.result
    fifo = await run_one(ws, "read_file", path="pipe")
    assert fifo.is_error
    assert "not a regular file" in fifo.result


async def test_offset_and_limit_must_be_positive(root: Path) -> None:
    (root / "f.txt").write_text("a\n")
    outcome = await run_one(Workspace(root), "read_file", path="f.txt", offset=0)
    assert outcome.is_error
    assert "invalid arguments" in outcome.result


# ---- list_files -------------------------------------------------------------------------


def test_list_files_is_recursive_sorted_marks_folders_and_skips_tool_folders(root: Path) -> None:
    for name in ["b.txt", "a/z.py", "a/c/d.md", "src/main.py", "A.txt"]:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("")
    for skipped in [".git/HEAD", "node_modules/x/index.js", "a/__pycache__/z.pyc", ".venv/bin/p"]:
        (root / skipped).parent.mkdir(parents=True, exist_ok=True)
        (root / skipped).write_text("")
    (root / "empty").mkdir()
    listing = tools(Workspace(root))["list_files"]
    assert listing().splitlines() == [
        "A.txt",
        "a/",
        "a/c/",
        "a/c/d.md",
        "a/z.py",
        "b.txt",
        "empty/",
        "src/",
        "src/main.py",
    ]
    assert listing("a").splitlines() == ["a/c/", "a/c/d.md", "a/z.py"]
    assert listing(pattern="*.py").splitlines() == ["a/z.py", "src/main.py"]
    assert listing("a", pattern="c/*").splitlines() == ["a/c/d.md"]
    assert listing(pattern="*.rs") == "Nothing under '.' matches '*.rs'."
    assert listing("empty") == "'empty' is empty."
    assert listing(".git") == ".git/HEAD"  # asked for by name, it is listed


def test_list_files_shows_500_entries_and_says_how_many_were_left_out(root: Path) -> None:
    (root / "deep").mkdir()
    for n in range(520):
        (root / "deep" / f"f{n:03}.txt").write_text("")
    (root / "top.txt").write_text("")
    lines = tools(Workspace(root))["list_files"]().splitlines()
    assert len(lines) == 501
    assert lines[-1].startswith("[22 more entries not shown")
    assert "top.txt" in lines
    assert "deep/" in lines


async def test_list_files_refuses_files_and_missing_folders(root: Path) -> None:
    (root / "f.txt").write_text("")
    ws = Workspace(root)
    assert "is a file" in (await run_one(ws, "list_files", path="f.txt")).result
    assert (await run_one(ws, "list_files", path="nope")).result == "Error: 'nope' does not exist."


# ---- write_file -------------------------------------------------------------------------


async def test_write_file_creates_folders_replaces_and_leaves_no_temporary_files(
    root: Path,
) -> None:
    ws = Workspace(root)
    created = await run_one(ws, "write_file", path="a/b/c.txt", content="one\ntwo\n")
    assert created.result == "Created 'a/b/c.txt': 8 bytes, 2 lines."
    replaced = await run_one(ws, "write_file", path="a/b/c.txt", content="three")
    assert replaced.result == "Replaced 'a/b/c.txt': 5 bytes, 1 line."
    assert (root / "a/b/c.txt").read_text() == "three"
    assert names(root / "a/b") == ["c.txt"]


async def test_a_failed_write_keeps_the_old_file_and_removes_its_temporary_file(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (root / "keep.txt").write_text("old")

    def broken_replace(src: object, dst: object, **dir_fds: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    outcome = await run_one(Workspace(root), "write_file", path="keep.txt", content="new")
    assert (outcome.is_error, outcome.result) == (
        True,
        "Error: 'keep.txt' cannot be written: No space left on device.",
    )
    assert names(root) == ["keep.txt"]
    assert (root / "keep.txt").read_text() == "old"


async def test_a_replaced_file_keeps_its_mode(root: Path) -> None:
    script = root / "run.sh"
    script.write_text("echo old\n")
    script.chmod(0o750)
    await tools(Workspace(root))["write_file"]("run.sh", "echo new\n")
    assert stat.S_IMODE(script.stat().st_mode) == 0o750


async def test_write_file_refuses_folders_and_files_in_the_way(root: Path) -> None:
    (root / "sub").mkdir()
    (root / "file").write_text("")
    ws = Workspace(root)
    assert "is a folder" in (await run_one(ws, "write_file", path="sub", content="")).result
    blocked = await run_one(ws, "write_file", path="file/x.txt", content="")
    assert blocked.is_error
    assert "cannot be written" in blocked.result


# ---- edit_file --------------------------------------------------------------------------


async def test_edit_file_replaces_exactly_one_occurrence(root: Path) -> None:
    (root / "m.py").write_text("a = 1\nb = 2\nc = 3\n")
    outcome = await run_one(Workspace(root), "edit_file", path="m.py", old="b = 2", new="b = 20")
    assert outcome.result == "Edited 'm.py' at line 2: 1 line replaced by 1 line."
    assert (root / "m.py").read_text() == "a = 1\nb = 20\nc = 3\n"
    assert names(root) == ["m.py"]


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("x = 1", "y", "found 3 times"),
        ("z = 1", "y", "was not found"),
        ("x", "x", "the same"),
        ("", "y", "empty"),
    ],
    ids=["several", "none", "same", "empty"],
)
async def test_edit_file_refuses_zero_or_several_occurrences(
    root: Path, old: str, new: str, expected: str
) -> None:
    (root / "m.py").write_text("x = 1\nx = 1\nx = 1\n")
    outcome = await run_one(Workspace(root), "edit_file", path="m.py", old=old, new=new)
    assert outcome.is_error
    assert expected in outcome.result
    assert (root / "m.py").read_text() == "x = 1\nx = 1\nx = 1\n"


async def test_edit_file_refuses_binary_and_missing_files(root: Path) -> None:
    (root / "b.bin").write_bytes(b"ab\0cd")
    (root / "latin.txt").write_bytes("café".encode("latin-1"))
    ws = Workspace(root)
    assert "binary" in (await run_one(ws, "edit_file", path="b.bin", old="ab", new="x")).result
    latin = await run_one(ws, "edit_file", path="latin.txt", old="caf", new="x")
    assert "not UTF-8" in latin.result
    missing = await run_one(ws, "edit_file", path="nope.py", old="a", new="b")
    assert missing.result == "Error: 'nope.py' does not exist."
