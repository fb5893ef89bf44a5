"""The notebook view of a run: its timeline as HTML and Markdown, escaped, redacted, live."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from glassagent import Agent, LLMResponse, ToolCall, Usage
from glassagent.errors import UserError
from glassagent.events import Redactor, load_events
from glassagent.llm import WireRecord
from glassagent.testing import ScriptedClient

ROOT = Path(__file__).resolve().parents[2]
DOCS_RUN = ROOT / "docs" / "assets" / "weather-run.jsonl"
DOCS_TIMELINE = ROOT / "docs" / "assets" / "timeline.html"

HOSTILE = "<script>alert(1)</script>"


def get_weather(city: str) -> str:
    """The weather of a city."""
    if city == "Atlantis":
        raise ValueError(f"no such city {HOSTILE}")
    return f"Sunny in {city}, 21 C"


def hostile_client(**kwargs: Any) -> ScriptedClient:
    return ScriptedClient(
        [
            LLMResponse(
                tool_calls=[
                    ToolCall("c1", "get_weather", {"city": "Paris"}),
                    ToolCall("c2", "get_weather", {"city": "Atlantis"}),
                    ToolCall("c3", "<b>made_up</b>", {"x": '<img src=x onerror="alert(2)">'}),
                ],
                thinking=f"Three calls. {HOSTILE}",
                usage=Usage(input_tokens=120, output_tokens=30),
            ),
            LLMResponse(
                f"Paris is sunny. {HOSTILE} & done",
                usage=Usage(input_tokens=200, output_tokens=25),
            ),
        ],
        model="gpt-4o-mini",
        **kwargs,
    )


async def hostile_run(**kwargs: Any) -> Any:
    return await Agent(hostile_client(), [get_weather], **kwargs).run("Weather?")


async def test_the_html_timeline_shows_every_step_and_escapes_everything() -> None:
    page = (await hostile_run())._repr_html_()

    assert "<script" not in page
    assert "<b>made_up" not in page
    assert "<img" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "Paris is sunny. &lt;script&gt;alert(1)&lt;/script&gt; &amp; done" in page
    # thinking is collapsed
    assert re.search(r"<details class=\"ga-thinking\"><summary>Thinking \(\d+ characters\)", page)
    # each tool call: arguments, result, duration; the failed and the unknown one highlighted
    tools = re.findall(r'<li class="ga-tool( ga-error)?"><div><code>(.*?)</code>', page)
    assert tools == [
        ("", "get_weather"),
        (" ga-error", "get_weather"),
        (" ga-error", "&lt;b&gt;made_up&lt;/b&gt;"),
    ]
    assert "{&quot;city&quot;: &quot;Paris&quot;}" in page
    assert "Sunny in Paris, 21 C" in page
    assert re.search(r"ok · \d+ ms", page)
    assert re.search(r"failed · \d+ ms", page)
    assert "no such tool" in page
    # tokens, cost and latency per model call, and for the run
    assert re.search(r"<b>Model call 1</b> <span class=\"ga-dim\">· \d+ ms</span>", page)
    assert "120 in / 30 out tokens" in page
    assert "200 in / 25 out tokens" in page
    assert "320 in / 55 out tokens" in page
    assert "0.000036 USD" in page
    assert "0.000081 USD" in page
    assert 'class="ga-badge ga-ok">complete<' in page


async def test_a_failed_run_is_highlighted_and_long_results_are_cut() -> None:
    def big() -> str:
        """A lot of text."""
        return "x" * 10_000

    client = ScriptedClient([LLMResponse(tool_calls=[ToolCall("c1", "big", {})])])
    with pytest.raises(UserError) as failed:
        await Agent(client, [big]).run("go")
    page = failed.value.result._repr_html_()  # type: ignore[union-attr]
    assert 'class="ga-badge ga-bad">error<' in page
    assert '<div class="ga-end ga-bad"><b>Error: UserError</b>' in page
    assert "ran out of responses" in page
    assert "… (6000 more characters)" in page
    assert "x" * 4001 not in page


async def test_the_markdown_timeline_keeps_untrusted_text_in_code() -> None:
    text = (await hostile_run())._repr_markdown_()
    outside = re.sub(r"(?ms)^(\s*)(`{3,})text\n.*?^\1\2$", "", text)  # drop fenced blocks
    outside = re.sub(r"(`+).*?\1", "", outside)  # and code spans
    assert "<" not in outside
    assert ">" not in outside
    assert f"Paris is sunny. {HOSTILE} & done" in text
    assert "**Model call 1**" in text
    assert "**Model call 2**" in text
    assert "`120 in / 30 out tokens`" in text
    assert "`0.000081 USD`" in text

    tricky = ScriptedClient(["```\n<script>x</script>\n```"])
    tricky_md = (await Agent(tricky).run("go"))._repr_markdown_()
    assert "````text\n```\n<script>x</script>\n```\n````" in tricky_md


async def test_the_redact_hook_applies_to_what_is_displayed() -> None:
    result = await hostile_run(redact=Redactor(["Paris"], fields=["args"]))
    for shown in (result._repr_html_(), result._repr_markdown_()):
        assert "Paris" not in shown
        assert "[redacted]" in shown
    assert "Paris" in result.text


async def test_a_run_shows_itself_before_during_and_after() -> None:
    agent = Agent(hostile_client(chunk_delay=0.001), [get_weather])
    run = agent.run("Weather?")
    assert "not started" in run._repr_html_()
    assert "**not started**" in run._repr_markdown_()
    async for event in run:
        if event.type == "function_call_start":
            page = run._repr_html_()
            assert ">running<" in page
            assert "running…" in page  # its tool calls have not finished
    assert ">complete<" in run._repr_html_()
    assert run._repr_html_() == run.result._repr_html_()  # type: ignore[union-attr]


def test_display_without_ipython_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "IPython", None)
    run = Agent(ScriptedClient(["hi"])).run("hi")
    with pytest.raises(UserError, match=r"needs IPython"):
        run.display()
    run.close()


class _Capture:
    """IPython's display publisher, keeping what it publishes."""

    def __init__(self) -> None:
        self.published: list[tuple[str, str | None, bool]] = []

    def publish(self, data: dict[str, Any], metadata: Any = None, **kwargs: Any) -> None:
        display_id = (kwargs.get("transient") or {}).get("display_id")
        self.published.append((data["text/html"], display_id, bool(kwargs.get("update"))))

    def clear_output(self, wait: bool = False) -> None:
        pass


@pytest.fixture
def notebook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A real IPython shell, whose displays are captured instead of sent to a front end."""
    pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    monkeypatch.setenv("IPYTHONDIR", str(tmp_path))
    config = Config()
    config.HistoryManager.enabled = False
    shell = InteractiveShell.instance(config=config)
    capture = _Capture()
    monkeypatch.setattr(shell, "display_pub", capture)
    yield capture
    InteractiveShell.clear_instance()


async def test_display_updates_one_output_in_place_while_the_run_streams(notebook: Any) -> None:
    def outside_a_notebook() -> None:
        from IPython.core.interactiveshell import InteractiveShell

        InteractiveShell.clear_instance()
        run = Agent(ScriptedClient(["hi"])).run("hi")
        with pytest.raises(UserError, match="needs a running notebook"):
            run.display()
        run.close()

    result = await Agent(hostile_client(chunk_delay=0.06), [get_weather]).run("Weather?").display()

    shown = notebook.published
    first_html, display_id, update = shown[0]
    assert display_id
    assert not update
    assert "not started" in first_html
    assert all(d == display_id and u for _, d, u in shown[1:])  # the same output, updated
    assert any(">running<" in html for html, _, _ in shown[1:-1])  # seen while it streamed
    assert len(shown) < len(result.events)  # updates are batched, not one per chunk
    assert shown[-1][0] == result._repr_html_()
    count = len(shown)
    await asyncio.sleep(0.3)
    assert len(notebook.published) == count  # nothing pending after the end
    outside_a_notebook()


async def test_displaying_an_ended_run_shows_it_once(notebook: Any) -> None:
    run = Agent(ScriptedClient(["hi"])).run("hi")
    await run
    assert run.display() is run
    assert [(d is not None, u) for _, d, u in notebook.published] == [(True, False)]


def test_the_docs_timeline_is_the_rendering_of_the_docs_recording() -> None:
    from glassagent._core.record.render import html_timeline

    page = html_timeline([e.to_dict() for e in load_events(DOCS_RUN)])
    if os.environ.get("GLASSAGENT_WRITE_DOCS") == "1":
        DOCS_TIMELINE.write_text(page + "\n", encoding="utf-8")
    assert DOCS_TIMELINE.read_text(encoding="utf-8") == page + "\n", (
        "docs/assets/timeline.html is out of date: run "
        "GLASSAGENT_WRITE_DOCS=1 pytest tests/core/test_notebook_view.py -k docs_timeline"
    )
    assert "\n\n" not in page  # one HTML block for Markdown: no blank line ends it early


async def test_recorded_wire_bodies_are_shown_collapsed_and_escaped() -> None:
    wire = WireRecord(request={"q": HOSTILE}, response=[{"chunk": "one"}], streamed=True)
    result = await Agent(ScriptedClient([LLMResponse("ok", wire=wire)])).run("hi")
    page = result._repr_html_()
    assert '<details class="ga-wire">' in page
    assert "Wire: request and response bodies" in page
    assert HOSTILE not in page
    assert "&lt;script&gt;" in page
    assert "&quot;chunk&quot;: &quot;one&quot;" in page
    plain = await Agent(ScriptedClient(["ok"])).run("hi")
    assert "ga-wire" not in plain._repr_html_()
