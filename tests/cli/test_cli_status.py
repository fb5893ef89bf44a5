"""The status line: while a model call works quietly, the terminal shows time and progress."""

from __future__ import annotations

import time

from glassagent import Agent
from glassagent.cli._view import HumanView, Marks
from glassagent.testing import ScriptedClient


class Recorder:
    def __init__(self) -> None:
        self.parts: list[tuple[str, str]] = []

    def write(self, text: str, style: str | None = None) -> None:
        self.parts.append(("text", text))

    def control(self, codes: str) -> None:
        self.parts.append(("control", codes))

    @property
    def screen(self) -> str:
        return "".join(text for kind, text in self.parts if kind == "text")


def events() -> list:  # type: ignore[type-arg]
    return list(Agent(ScriptedClient(["The sea is wide."])).run_sync("A poem").events)


def test_a_quiet_call_gets_a_status_line_that_gives_way_to_the_answer() -> None:
    request, text, *_ = events()
    assert (request.type, text.type) == ("llm_request", "text_chunk")
    out = Recorder()
    view = HumanView(out, Marks(), live=True)
    view.show(request)
    now = time.monotonic()
    assert view.status_line(now) is None  # not quiet for long yet
    assert view.status_line(now + 12.4) == "  … the model is working: 12 s, nothing streamed yet"
    view.tick(now + 12.4)
    assert out.parts[-2:] == [
        ("control", "\r\x1b[K"),
        ("text", "  … the model is working: 12 s, nothing streamed yet"),
    ]
    view.show(text)  # the answer clears the status line first
    assert out.parts[-2:] == [("control", "\r\x1b[K"), ("text", text.text)]
    line = view.status_line(time.monotonic() + 5)
    assert line is not None
    assert line.endswith(f", {len(text.text)} characters so far")


def test_no_status_line_without_a_terminal_or_between_calls() -> None:
    all_events = events()
    out = Recorder()
    view = HumanView(out, Marks(), live=False)
    view.show(all_events[0])
    view.tick(time.monotonic() + 30)
    assert not [kind for kind, _ in out.parts if kind == "control"]
    live = HumanView(Recorder(), Marks(), live=True)
    for event in all_events:
        live.show(event)
    assert live.status_line(time.monotonic() + 30) is None  # the call has ended
