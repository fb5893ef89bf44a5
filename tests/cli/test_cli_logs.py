"""glassagent's log records at the command line: on a line of their own, never amid the answer.

A warning logged when a streamed answer has ended mid-line (as the local client's slow-call
hint is) used to start on the answer's line: ``4glassagent: a call to ... took 53 s``.
"""

from __future__ import annotations

import asyncio
import io
import logging
import os
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path

import pytest

import glassagent.cli
from glassagent import Agent, LLMResponse, Message, ModelSettings
from glassagent.cli._logs import ViewHandler, same_screen
from glassagent.cli._view import HumanView, Marks
from glassagent.llm import StreamPart, TextDelta, ToolDefinition, register_provider
from glassagent.testing import ScriptedClient

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sample_project"
HINT = "glassagent: a call to the local model took 53 s with 4 CPU thread(s)."


class Recorder:
    def __init__(self) -> None:
        self.parts: list[tuple[str, str]] = []

    def write(self, text: str, style: str | None = None) -> None:
        self.parts.append(("text", text))

    def control(self, codes: str) -> None:
        self.parts.append(("control", codes))


class HintingClient(ScriptedClient):
    """Streams its answer and logs `HINT` once `pieces` text pieces are on the screen.

    By default when the whole text is (as the local client's hint comes, after the stream).
    """

    def __init__(self, answer: str, screen: Callable[[], str], pieces: int | None) -> None:
        super().__init__([answer])
        self.screen = screen
        self.pieces = pieces

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        system: str | None = None,
        *,
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[StreamPart]:
        """The scripted stream, with `HINT` logged when the screen shows the text so far."""
        shown, count, logged = "", 0, False
        async for part in super().stream(messages, tools, system, settings=settings):
            if not logged and (count == self.pieces or isinstance(part, LLMResponse)):
                await self.until_shown(shown)
                logging.getLogger("glassagent.local").warning(HINT)
                logged = True
            if isinstance(part, TextDelta):
                shown, count = shown + part.text, count + 1
            yield part

    async def until_shown(self, text: str) -> None:
        """Wait until the view has written `text` (the agent runs ahead of the view)."""
        for _ in range(2000):
            if self.screen().endswith(text):
                return
            await asyncio.sleep(0.001)
        raise AssertionError(f"{text!r} never reached the screen: {self.screen()!r}")


def hinting(answer: str, screen: Callable[[], str], pieces: int | None = None) -> None:
    client = HintingClient(answer, screen, pieces)
    register_provider("hinting", lambda **options: client)


def run(*args: str) -> list[str]:
    return ["run", "--provider", "hinting", "--workspace", str(SAMPLE), *args]


def one_screen(monkeypatch: pytest.MonkeyPatch) -> io.StringIO:
    """Standard output and standard error on one terminal, and logging as in a real process.

    pytest's log capture on the root logger stands aside for glassagent's records, so that
    without the CLI's handler they would reach Python's last-resort handler (standard error).
    """
    screen = io.StringIO()
    monkeypatch.setattr(sys, "stdout", screen)
    monkeypatch.setattr(sys, "stderr", screen)
    monkeypatch.setattr(logging.getLogger("glassagent"), "propagate", False)
    return screen


def handlers() -> list[logging.Handler]:
    return list(logging.getLogger("glassagent").handlers)


def test_a_warning_after_a_streamed_answer_starts_a_line_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    screen = one_screen(monkeypatch)
    hinting("4", screen.getvalue)
    before = handlers()
    code = glassagent.cli.main(run("What is 2+2? Answer with the number only."))
    lines = screen.getvalue().splitlines()
    assert code == 0, screen.getvalue()
    assert handlers() == before  # the CLI's handler is gone with its run
    assert HINT in lines, screen.getvalue()  # at a line start, not after the answer's "4"
    at = lines.index(HINT)
    assert lines[at - 1] == "4"
    assert lines[at + 1].startswith("-- "), lines  # the turn's line next: no empty line
    assert len(lines) == at + 2


def test_a_warning_amid_the_answer_ends_its_line_and_the_answer_goes_on_below(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    screen = one_screen(monkeypatch)
    hinting("Four, as two and two make.", screen.getvalue, pieces=1)
    assert glassagent.cli.main(run("What is 2+2?")) == 0, screen.getvalue()
    lines = screen.getvalue().splitlines()
    at = lines.index(HINT)
    assert lines[at - 1 : at + 2] == ["Four, as ", HINT, "two and two make."]
    assert lines[at + 2].startswith("-- "), lines


def test_a_record_clears_the_status_line_first() -> None:
    out = Recorder()
    view = HumanView(out, Marks(), live=True)
    request, text, *_ = Agent(ScriptedClient(["Hi."])).run_sync("Hi").events
    view.show(request)
    view.tick(time.monotonic() + 12)  # "… the model is working: 12 s" without a line end
    errors = Recorder()
    handler = ViewHandler(HumanView(errors, Marks()), view)
    handler.handle(logging.makeLogRecord({"msg": HINT, "levelno": logging.WARNING}))
    assert out.parts[-1] == ("control", "\r\x1b[K")  # the status line gave way
    assert errors.parts == [("text", HINT + "\n")]
    view.show(text)
    assert out.parts[-1] == ("text", "Hi.")  # no line end or clearing more


def test_a_separate_standard_output_keeps_the_answer_as_it_streamed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    stdout = sys.stdout  # pytest's capture, read while the answer streams
    hinting("Four, as two and two make.", stdout.getvalue, pieces=1)  # mid-answer
    before = handlers()
    code = glassagent.cli.main(run("What is 2+2?"))
    out, err = capsys.readouterr()
    assert code == 0, err
    assert handlers() == before
    assert err == HINT + "\n"
    assert out.splitlines()[1] == "Four, as two and two make."  # not cut by a line end


def test_streams_share_a_screen_when_they_write_to_one_file(tmp_path: Path) -> None:
    read, write = os.pipe()  # as `glassagent run ... 2>&1 | less`: one pipe, two descriptors
    other_read, other_write = os.pipe()
    with (
        open(write, "w") as out,
        open(os.dup(write), "w") as err,
        open(other_write, "w") as elsewhere,
        open(tmp_path / "log.txt", "w") as file,
    ):
        assert same_screen(out, err)
        assert not same_screen(out, elsewhere)
        assert not same_screen(out, file)
        assert not same_screen(out, io.StringIO())  # no file behind it
        assert same_screen(file, file)
    os.close(read)
    os.close(other_read)
