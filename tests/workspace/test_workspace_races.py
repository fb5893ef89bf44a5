"""The file tools against a workspace that changes under them: swapped links, hard links, FIFOs.

A separate process swaps folders and files for symbolic links to an outside folder (and a file
for a FIFO) as fast as it can, while the tools run in a loop. Nothing may be created, changed
or read outside, and no call may block.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from glassagent import ToolCall
from glassagent._workspace import beneath, paths
from glassagent.errors import ToolError
from glassagent.workspace import Workspace
from tests.support.workspace import names, run_one, tools

pytestmark = pytest.mark.skipif(not paths.DESCRIPTORS, reason="race-free only with dir_fd")

# Swaps each pair of names in the folder argv[1], atomically where Linux's renameat2 can
# (RENAME_EXCHANGE), else by three renames; prints "ready", then swaps until it is stopped.
FLIPPER = r"""
import ctypes, os, sys
os.chdir(sys.argv[1])
pairs = [(a.encode(), b.encode()) for a, b in zip(sys.argv[2::2], sys.argv[3::2])]
exchange = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
if exchange is not None and exchange(-100, pairs[0][0], -100, pairs[0][1], 2) != 0:
    exchange = None
print("ready", flush=True)
while True:
    for a, b in pairs:
        if exchange is not None:
            exchange(-100, a, -100, b, 2)
            continue
        try:
            os.rename(a, b"swap.tmp")
            os.rename(b, a)
            os.rename(b"swap.tmp", b)
        except OSError:
            pass
"""

SECRET = "SECRET content\n"
INSIDE = "inside content\n"


@contextlib.contextmanager
def flipping(folder: Path, *pairs: tuple[str, str]) -> Iterator[None]:
    """A process swapping each pair of names in `folder` until the block ends."""
    names = [name for pair in pairs for name in pair]
    process = subprocess.Popen(
        [sys.executable, "-I", "-c", FLIPPER, str(folder), *names], stdout=subprocess.PIPE
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == b"ready\n"
        yield
    finally:
        process.terminate()
        process.wait(10)
        assert process.stdout is not None
        process.stdout.close()


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder next to the workspace, with a secret file and a secret name in it."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "f.txt").write_text(SECRET)
    (folder / "SECRET-NAME.txt").write_text(SECRET)
    return folder


@pytest.fixture
def root(tmp_path: Path, outside: Path) -> Path:
    """A workspace whose ``d`` and ``f.txt`` have a twin link to `outside` to swap with."""
    folder = tmp_path / "ws"
    folder.mkdir()
    (folder / "d").mkdir()
    (folder / "d" / "f.txt").write_text(INSIDE)
    (folder / "d.swap").symlink_to(outside, target_is_directory=True)
    (folder / "f.txt").write_text(INSIDE)
    (folder / "f.txt.swap").symlink_to(outside / "f.txt")
    return folder


class Attack:
    """The tools in a loop; what came back, and what happened outside."""

    def __init__(self, workspace: Workspace, outside: Path) -> None:
        self.tools = tools(workspace)
        self.outside = outside
        self.expected = {p.name: p.read_bytes() for p in outside.iterdir()}
        self.seen: Counter[str] = Counter()

    async def call(self, name: str, *args: Any) -> str | None:
        """The tool's result, or `None` for an error result; a call may not block."""
        tool = self.tools[name]
        call = (
            tool(*args) if name in ("write_file", "edit_file") else asyncio.to_thread(tool, *args)
        )
        try:
            result: str = await asyncio.wait_for(call, 10)
        except ToolError as exc:
            self.seen[f"{name} refused"] += 1
            self.seen["outside refused"] += "outside the workspace" in str(exc)
            return None
        self.seen[f"{name} done"] += 1
        self.seen["secret shown"] += "SECRET" in result
        return result

    def check_outside(self) -> None:
        """Count (and undo) every change outside: new files, changed content."""
        for path in self.outside.iterdir():
            if path.name not in self.expected:
                self.seen["created outside"] += 1
                if path.is_dir():
                    shutil.rmtree(path)
                else:
                    path.unlink()
            elif path.read_bytes() != self.expected[path.name]:
                self.seen["changed outside"] += 1
                path.write_bytes(self.expected[path.name])

    async def run(self, seconds: float) -> Counter[str]:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            await self.call("list_files", "d")
            await self.call("list_files", ".")
            await self.call("read_file", "d/f.txt")
            await self.call("read_file", "f.txt")
            await self.call("write_file", "d/new.txt", "new\n")
            await self.call("write_file", "d/sub/new.txt", "new\n")
            await self.call("edit_file", "d/f.txt", "content", "kontent")
            await self.call("edit_file", "d/f.txt", "kontent", "content")
            await self.call("edit_file", "f.txt", "content", "kontent")
            await self.call("edit_file", "f.txt", "kontent", "content")
            self.check_outside()
        return self.seen


@pytest.mark.parametrize(
    "seconds", [1.5, pytest.param(30, marks=pytest.mark.attack, id="30s")], ids=["1.5s", "30s"]
)
async def test_swapping_folders_and_files_for_links_outside_leaks_nothing(
    root: Path, outside: Path, seconds: float
) -> None:
    attack = Attack(Workspace(root), outside)
    with flipping(root, ("d", "d.swap"), ("f.txt", "f.txt.swap")):
        seen = await attack.run(seconds)
    assert seen["created outside"] == 0, seen
    assert seen["changed outside"] == 0, seen
    assert seen["secret shown"] == 0, seen
    # The attack was on: the tools met the links (refused) and the real things (done).
    assert seen["outside refused"] > 0, seen
    assert seen["read_file done"] > 0, seen
    assert seen["write_file done"] > 0, seen
    assert names(outside) == ["SECRET-NAME.txt", "f.txt"]
    assert (outside / "f.txt").read_text() == SECRET


@pytest.mark.parametrize(
    "seconds", [1.0, pytest.param(30, marks=pytest.mark.attack, id="30s")], ids=["1s", "30s"]
)
async def test_a_file_swapped_for_a_fifo_never_blocks_a_read(
    root: Path, outside: Path, seconds: float
) -> None:
    (root / "p").write_text(INSIDE)
    os.mkfifo(root / "p.swap")
    attack = Attack(Workspace(root), outside)
    try:
        with flipping(root, ("p", "p.swap")):
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                await attack.call("read_file", "p")
    except TimeoutError:
        for name in ("p", "p.swap"):  # let the blocked reader go, so that the test can end
            with contextlib.suppress(OSError):
                os.close(os.open(root / name, os.O_WRONLY | os.O_NONBLOCK))
        raise
    assert attack.seen["read_file refused"] > 0, attack.seen  # it met the FIFO
    assert attack.seen["read_file done"] > 0, attack.seen


# ---- hard links -------------------------------------------------------------------------


async def test_a_hard_link_to_an_outside_file_is_refused(root: Path, outside: Path) -> None:
    os.link(outside / "f.txt", root / "planted.txt")  # as an unpacked archive may do
    ws = Workspace(root)
    for name, args, verb in [
        ("read_file", {"path": "planted.txt"}, "read"),
        ("edit_file", {"path": "planted.txt", "old": "content", "new": "x"}, "edited"),
        ("write_file", {"path": "planted.txt", "content": "x"}, "replaced"),
    ]:
        outcome = await run_one(ws, name, **args)
        assert outcome.is_error
        assert "'planted.txt' has 2 hard links" in outcome.result
        assert f"one may be outside the workspace, so it is not {verb}" in outcome.result
        assert "SECRET" not in outcome.result
    assert (outside / "f.txt").read_text() == SECRET
    assert (root / "planted.txt").read_text() == SECRET  # left as it was


# ---- links that stay inside -------------------------------------------------------------


async def test_links_inside_are_followed_component_by_component(root: Path) -> None:
    (root / "v2" / "sub").mkdir(parents=True)
    (root / "v2" / "a.txt").write_text("two\n")
    (root / "latest").symlink_to("v2/")
    (root / "v2" / "sub" / "back.txt").symlink_to("../a.txt")
    (root / "v2" / "via.txt").symlink_to("sub/../a.txt")
    (root / "abs.txt").symlink_to(root / "v2" / "a.txt")
    (root / "deeper").symlink_to("latest/sub")
    ws = Workspace(root)
    read, listing = tools(ws)["read_file"], tools(ws)["list_files"]
    for path in ["latest/a.txt", "v2/sub/back.txt", "v2/via.txt", "abs.txt", "deeper/../a.txt"]:
        assert read(path) == "     1\ttwo", path
    assert listing("latest").splitlines() == [
        "v2/a.txt",
        "v2/sub/",
        "v2/sub/back.txt",
        "v2/via.txt",
    ]
    assert (await run_one(ws, "write_file", path="latest/new/b.txt", content="b\n")).result == (
        "Created 'latest/new/b.txt': 2 bytes, 1 line."
    )
    assert (root / "v2" / "new" / "b.txt").read_text() == "b\n"
    edited = await run_one(ws, "edit_file", path="v2/sub/back.txt", old="two", new="three")
    assert not edited.is_error
    assert (root / "v2" / "sub" / "back.txt").is_symlink()
    assert (root / "v2" / "a.txt").read_text() == "three\n"


async def test_links_leading_out_and_link_loops_are_refused(root: Path, outside: Path) -> None:
    (root / "up").symlink_to("d/../..")  # '..' above the root, through a link
    (root / "abs").symlink_to(outside / "f.txt")
    (root / "dangling").symlink_to("../outside/new")
    (root / "loop").symlink_to("loop")
    ws = Workspace(root)
    for name, args in [
        ("read_file", {"path": "up/outside/f.txt"}),
        ("read_file", {"path": "abs"}),
        ("list_files", {"path": "up"}),
        ("write_file", {"path": "dangling/x.txt", "content": "x"}),
        ("edit_file", {"path": "abs", "old": "content", "new": "x"}),
    ]:
        outcome = await run_one(ws, name, **args)
        assert outcome.is_error
        assert "a symbolic link on the way leads out of it" in outcome.result, outcome.result
    loop = await run_one(ws, "read_file", path="loop")
    assert loop.result == (
        f"Error: 'loop' cannot be resolved: more than {beneath.MAX_LINKS} symbolic links on "
        "the way (a loop?)."
    )
    assert names(outside) == ["SECRET-NAME.txt", "f.txt"]


# ---- the root ---------------------------------------------------------------------------


async def test_a_replaced_root_is_not_used(tmp_path: Path, root: Path, outside: Path) -> None:
    ws = Workspace(root)
    os.rename(root, tmp_path / "moved")
    assert "cannot be opened (No such file" in (await run_one(ws, "list_files")).result
    os.symlink(outside, root)
    for name, args in [
        ("read_file", {"path": "f.txt"}),
        ("list_files", {"path": "."}),
        ("write_file", {"path": "new.txt", "content": "x"}),
    ]:
        outcome = await run_one(ws, name, **args)
        assert outcome.is_error
        assert "The workspace folder was moved or replaced" in outcome.result
        assert "SECRET" not in outcome.result
    assert names(outside) == ["SECRET-NAME.txt", "f.txt"]


# ---- a change not asked about (it would have failed) never goes ahead -------------------------


@pytest.mark.parametrize(
    ("first", "arguments"),
    [
        ("X\n", {"path": "a.txt", "old": "absent", "new": "Y"}),
        (None, {"path": "d/a.txt", "content": "new\n"}),
    ],
)
async def test_a_call_not_asked_about_cannot_succeed_after_a_change_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, first: str | None, arguments: dict[str, str]
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    if first is None:
        (tmp_path / "outside").mkdir()
        (root / "d").symlink_to(tmp_path / "outside")  # leads out: not asked about
    else:
        (root / "a.txt").write_text(first)
    original = Workspace._would_change

    async def then_changed(self: Workspace, call: ToolCall) -> bool:
        answer = await original(self, call)
        # another process changes the folder after the check, before the tool runs
        if first is None:
            (root / "d").unlink()
            (root / "d").mkdir()
        else:
            (root / "a.txt").write_text("absent\n")
        return answer

    monkeypatch.setattr(Workspace, "_would_change", then_changed)
    asked: list[ToolCall] = []
    workspace = Workspace(root, confirm=lambda c: asked.append(c) is None and False)
    name = "edit_file" if "old" in arguments else "write_file"
    outcome = await run_one(workspace, name, **arguments)
    assert not asked  # it was not asked about: it would have failed
    assert outcome.is_error
    assert "not approved" in outcome.result
    if first is None:
        assert not (root / "d" / "a.txt").exists()
    else:
        assert (root / "a.txt").read_text() == "absent\n"
