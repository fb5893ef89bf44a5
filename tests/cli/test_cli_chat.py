"""`glassagent chat` driven like a person would: through a pseudo-terminal, keys and all.

The CLI runs as a real subprocess whose controlling terminal is the pty, so Ctrl-C (\\x03)
and Ctrl-D (\\x04) go through the terminal's line discipline as they do for a user.
Waits are generous and nothing is timed: each step waits for what it expects to see.
"""

from __future__ import annotations

import os
import re
import select
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import TIMEOUT, ScriptedModel, call, cli_env, run_cli, say

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sample_project"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

# The child makes the pty its controlling terminal, then becomes the CLI.
TAKE_TERMINAL = (
    "import fcntl, os, sys, termios\n"
    "fcntl.ioctl(0, termios.TIOCSCTTY, 0)\n"
    "os.execv(sys.executable, [sys.executable, '-m', 'glassagent', *sys.argv[1:]])\n"
)


class Terminal:
    """A CLI process on a pseudo-terminal: type into it, wait for what it shows."""

    def __init__(self, args: list[str], cwd: Path) -> None:
        self.master, slave = os.openpty()
        self.process = subprocess.Popen(
            [sys.executable, "-c", TAKE_TERMINAL, *args],
            cwd=cwd,
            env=cli_env(TERM="xterm", COLUMNS="120", LINES="40"),
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
        )
        os.close(slave)
        self.screen = ""  # everything shown so far, without colour codes
        self.seen = 0  # how much of it `expect` has consumed

    def type(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return True
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: the process closed the terminal
            return False
        if not data:
            return False
        self.screen += ANSI.sub("", data.decode("utf-8", "replace"))
        return True

    def expect(self, text: str, timeout: float = TIMEOUT) -> str:
        """Wait until `text` appears after what was already expected; return what came before."""
        deadline = time.monotonic() + timeout
        while (found := self.screen.find(text, self.seen)) < 0:
            if time.monotonic() > deadline or not self._read(0.2):
                raise AssertionError(f"never saw {text!r}; the screen:\n{self.screen}")
        before = self.screen[self.seen : found]
        self.seen = found + len(text)
        return before

    def wait(self) -> int:
        while self._read(0.2) and self.process.poll() is None:
            pass
        return self.process.wait(TIMEOUT)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(TIMEOUT)
        os.close(self.master)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return Path(shutil.copytree(SAMPLE, tmp_path / "project"))


@pytest.fixture
def terminals() -> Iterator[list[Terminal]]:
    started: list[Terminal] = []
    yield started
    for terminal in started:
        terminal.close()


def test_ctrl_c_aborts_a_turn_keeping_the_partial_answer(
    project: Path, terminals: list[Terminal]
) -> None:
    story = "Once upon a time " + "there was a tiny program " * 20
    with ScriptedModel(say(story, pieces=60, delay=0.2), say("Still here.")) as model:
        term = Terminal(["chat", *model.args(), "--workspace", str(project)], project)
        terminals.append(term)
        term.expect("/help for commands")
        term.expect("> ")
        term.type("Tell me a story\r")
        term.expect("Once upon")
        term.type("\x03")  # Ctrl-C: abort the turn
        term.expect("aborted")
        term.expect("> ")
        term.type("/history\r")
        term.expect("user: Tell me a story")
        term.expect("assistant [aborted]: Once upon")
        term.expect("> ")
        term.type("And then?\r")
        term.expect("Still here.")
        term.expect("> ")
        term.type("\x04")  # Ctrl-D: leave
        assert term.wait() == 0
    # the partial answer went back to the model as context, marked as cut short
    second = model.bodies[1]["messages"]
    assert [m["role"] for m in second if m["role"] != "system"] == ["user", "assistant", "user"]
    assert second[-2]["content"].startswith("Once upon")
    assert len(second[-2]["content"]) < len(story)


def test_chat_asks_before_a_write_and_obeys_the_answer(
    project: Path, terminals: list[Terminal]
) -> None:
    with ScriptedModel(
        call(("write_file", {"path": "yes.txt", "content": "yes\n"})),
        call(("write_file", {"path": "no.txt", "content": "no\n"})),
        say("Wrote one of two."),
    ) as model:
        term = Terminal(["chat", *model.args(), "--workspace", str(project)], project)
        terminals.append(term)
        term.expect("> ")
        term.type("Write two files\r")
        term.expect("Allow the agent to write yes.txt (4 bytes)? [y/N] ")
        term.type("y\r")
        term.expect("Allow the agent to write no.txt (3 bytes)? [y/N] ")
        term.type("n\r")
        term.expect("Wrote one of two.")
        term.expect("> ")
        term.type("/exit\r")
        assert term.wait() == 0
    assert (project / "yes.txt").read_text() == "yes\n"
    assert not (project / "no.txt").exists()
    assert "declined" in model.tool_results(2)[-1]


def test_ctrl_c_while_a_question_is_open_aborts_the_turn(
    project: Path, terminals: list[Terminal]
) -> None:
    with ScriptedModel(
        call(("write_file", {"path": "maybe.txt", "content": "maybe\n"})),
        say("Back again."),
    ) as model:
        term = Terminal(["chat", *model.args(), "--workspace", str(project)], project)
        terminals.append(term)
        term.expect("> ")
        term.type("Write a file\r")
        term.expect("Allow the agent to write maybe.txt (6 bytes)? [y/N] ")
        term.type("\x03")  # Ctrl-C: abort the turn rather than answer
        term.expect("aborted")
        term.expect("> ")
        term.type("Hello\r")
        term.expect("Back again.")
        term.expect("> ")
        term.type("/exit\r")
        assert term.wait() == 0
    assert not (project / "maybe.txt").exists()
    second = model.bodies[1]["messages"]
    assert "aborted" in second[-2]["content"]  # the call's result, marked cut short


def test_ctrl_c_at_the_prompt_leaves(project: Path, terminals: list[Terminal]) -> None:
    with ScriptedModel() as model:
        term = Terminal(["chat", *model.args(), "--workspace", str(project)], project)
        terminals.append(term)
        term.expect("> ")
        term.type("\x03")
        assert term.wait() == 0
    assert model.requests == []


def test_chat_reads_piped_input_and_answers_commands(project: Path) -> None:
    with ScriptedModel(say("First."), say("Fresh start.")) as model:
        done = run_cli(
            "chat", *model.args(), "--workspace", str(project),
            cwd=project, input="Hello\n/history\n/help\n/nope\n/reset\n/history\nAgain\n",
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "user: Hello\nassistant: First.\n" in out
    assert "/reset starts a new one" in out
    assert "unknown command /nope" in out
    assert "(a new conversation)\n(the conversation is empty)" in out
    # after /reset the model sees only the new question
    assert [m["content"] for m in model.bodies[1]["messages"] if m["role"] == "user"] == ["Again"]
