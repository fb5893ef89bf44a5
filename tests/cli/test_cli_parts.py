"""The command line's parts in process: its imports, options, provider choice, views, input."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import glassagent.cli
from glassagent import LLMResponse, ToolCall
from glassagent.cli import _options, _setup, _terminal, _view
from glassagent.errors import ProviderError
from glassagent.events import (
    FunctionCallStartEvent,
    FunctionExecutionCompleteEvent,
    LLMResponseEvent,
    LLMRetryEvent,
    OutputRetryEvent,
    TextChunkEvent,
    ThinkingChunkEvent,
    ToolExecution,
    ToolProgressEvent,
)
from glassagent.history import History
from glassagent.llm import Usage, register_provider
from glassagent.testing import FunctionClient, ScriptedClient

CLI = Path(glassagent.cli.__file__).parent
SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sample_project"


# ---- a thin layer over the public API -------------------------------------------------------


def imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_the_cli_imports_only_the_public_api() -> None:
    sources = [*CLI.glob("*.py"), CLI.parent / "__main__.py"]
    assert len(sources) >= 5
    for source in sources:
        for module in imported_modules(source):
            parts = module.split(".")
            if parts[0] != "glassagent" or parts[:2] == ["glassagent", "cli"]:
                continue
            private = [p for p in parts[1:] if p.startswith("_") and not p.endswith("__")]
            assert not private, f"{source.name} imports {module}"


def test_importing_glassagent_imports_neither_the_cli_nor_its_extras() -> None:
    code = (
        "import sys, glassagent, glassagent.agent, glassagent.history\n"
        "print([m for m in ('glassagent.cli', 'rich', 'dotenv') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# ---- options --------------------------------------------------------------------------------


def test_no_command_means_chat_and_defaults_are_sensible() -> None:
    options = _options.parse(["--provider", "ollama"], "1.0")
    assert (options.command, options.provider, options.prompt) == ("chat", "ollama", None)
    assert options.workspace == Path(".")
    assert options.max_iterations == _options.DEFAULT_MAX_ITERATIONS
    assert not (options.yes)
    assert not (options.allow_commands)
    assert not (options.json)
    assert not (options.debug)
    run = _options.parse(["run", "--yes", "--history", "h.json", "Do it"], "1.0")
    assert (run.command, run.prompt, run.yes, run.history) == ("run", "Do it", True, Path("h.json"))


def test_usage_errors_are_one_line() -> None:
    with pytest.raises(_options.UsageError, match=r"^argument --max-iterations: .*'x'"):
        _options.parse(["run", "--max-iterations", "x", "hi"], "1.0")


# ---- the default provider -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("environ", "genai", "expected"),
    [
        ({"GEMINI_API_KEY": "k"}, True, ("gemini", "GEMINI_API_KEY is set")),
        ({"GEMINI_API_KEY": "k"}, False, ("local", "GEMINI_API_KEY is set but google-genai")),
        ({"GEMINI_API_KEY": " "}, True, ("local", "GEMINI_API_KEY is not set")),
        ({}, True, ("local", "GEMINI_API_KEY is not set")),
    ],
)
def test_gemini_with_a_key_and_the_sdk_else_the_local_model(
    environ: dict[str, str], genai: bool, expected: tuple[str, str]
) -> None:
    name, why = _setup.choose_provider(environ, genai_installed=genai)
    assert name == expected[0]
    assert why.startswith(expected[1])


def test_the_chosen_provider_is_named_and_the_key_is_not(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "secret-gemini-key")
    monkeypatch.setattr(_setup, "genai_installed", lambda: True)
    notes: list[str] = []
    assert _setup.provider_of(None, notes.append) == "gemini"
    assert _setup.provider_of(" Ollama ", notes.append) == "ollama"
    assert notes == [
        "using the gemini provider (GEMINI_API_KEY is set; choose another with --provider)"
    ]


def test_dot_env_without_python_dotenv_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".env").write_text("GLASSAGENT_CLI_TEST=1\n")
    monkeypatch.setitem(sys.modules, "dotenv", None)
    notes: list[str] = []
    _setup.read_dotenv(tmp_path, notes.append)
    assert "GLASSAGENT_CLI_TEST" not in os.environ
    assert len(notes) == 1
    assert "glassagent[cli]" in notes[0]


def test_a_history_in_a_missing_folder_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(_setup.BadInput, match="its folder does not exist"):
        _setup.load_history(tmp_path / "no" / "h.json")
    with pytest.raises(_setup.BadInput, match="not a usable history file"):
        _setup.load_history(tmp_path)  # a folder, not a file


# ---- the human view -------------------------------------------------------------------------

IDS = {"run_id": "r", "seq": 0}


def plain() -> tuple[_view.HumanView, io.StringIO]:
    out = io.StringIO()
    return _view.HumanView(_view.PlainWriter(out), _view.PLAIN_MARKS), out


def execution(result: str, *, error: bool = False, ui: object = None) -> ToolExecution:
    return ToolExecution("read_file", "read_file", {}, result, error, 3.0, ui is not None, ui, "c")


def test_thinking_then_answer_each_start_their_own_line() -> None:
    view, out = plain()
    for event in (
        ThinkingChunkEvent(**IDS, text="Let me "),
        ThinkingChunkEvent(**IDS, text="think."),
        TextChunkEvent(**IDS, text="The ", is_follow_up=False),
        TextChunkEvent(**IDS, text="answer.", is_follow_up=False),
        LLMResponseEvent(
            **IDS,
            iteration=1,
            text="The answer.",
            tool_calls=(),
            stop_reason="max_tokens",
            thinking="Let me think.",
            usage=Usage(),
            latency_ms=5.0,
        ),
    ):
        view.show(event)
    assert out.getvalue() == (
        "Let me think.\nThe answer.\n  (the answer was cut short: max_tokens)\n"
    )


def test_calls_progress_and_results_are_shown_and_cut() -> None:
    view, out = plain()
    long_value = "x" * 500
    args = {"path": "a.py", "content": long_value}
    start = {"function_name": "write_file", "tool_name": "write_file", "call_id": "c"}
    view.show(FunctionCallStartEvent(**IDS, **start, args=args))
    view.show(
        FunctionCallStartEvent(**IDS, function_name="nope", tool_name=None, args={}, call_id="d")
    )
    view.show(ToolProgressEvent(**IDS, tool="execute_command", message="line\n", call_id="c"))
    lines = "\n".join(f"line {i}" for i in range(20))
    view.show(FunctionExecutionCompleteEvent(**IDS, execution=execution(lines)))
    view.show(FunctionExecutionCompleteEvent(**IDS, execution=execution("Error: no", error=True)))
    declined = execution("Error: the user declined", error=True, ui={"declined": True})
    view.show(FunctionExecutionCompleteEvent(**IDS, execution=declined))
    retry = {"iteration": 1, "attempt": 1, "delay": 2.0, "error_type": "RateLimitError"}
    view.show(LLMRetryEvent(**IDS, **retry, error="busy\nnow"))
    errors = ("population: Field required", "name: Input should be a valid string")
    view.show(OutputRetryEvent(**IDS, iteration=1, attempt=1, text="{}", errors=errors))
    shown = out.getvalue().splitlines()
    assert shown[0].startswith('-> write_file(path="a.py", content="xxx')
    assert shown[0].endswith("...)")
    assert len(shown[0]) < 120
    assert shown[1] == "-> nope() (no such tool)"
    assert shown[2] == "  | line"
    assert shown[3] == "  ok read_file (3 ms)"
    assert shown[4:12] == [f"    line {i}" for i in range(8)]
    assert shown[12] == "    ... (12 more lines)"
    assert shown[13:] == [
        "  !! read_file failed (3 ms)",
        "    Error: no",
        "  !! read_file declined",
        "* retry 1 in 2.0 s: busy now",
        "* not valid output, asked again: population: Field required; name: Input should be "
        "a valid string",
    ]


def test_the_json_view_prints_one_event_per_line_and_notes_elsewhere() -> None:
    notes_view, notes = plain()
    out = io.StringIO()
    view = _view.JsonView(out, notes_view)
    view.show(TextChunkEvent(**IDS, timestamp=1.5, text="hi", is_follow_up=False))
    view.note("a note")
    view.turn_done(_view.Turn(None, None, 1.0))
    assert [json.loads(line) for line in out.getvalue().splitlines()] == [
        {
            "type": "text_chunk",
            "run_id": "r",
            "seq": 0,
            "timestamp": 1.5,
            "text": "hi",
            "is_follow_up": False,
        }
    ]
    assert notes.getvalue() == "a note\n"


def test_the_rich_writer_writes_the_text_itself() -> None:
    pytest.importorskip("rich")
    from glassagent.cli._rich import RichWriter

    out = io.StringIO()
    view = _view.HumanView(RichWriter(out), _view.Marks())
    view.show(TextChunkEvent(**IDS, text="[bold]not markup[/bold]", is_follow_up=False))
    view.note("done")
    assert out.getvalue() == "[bold]not markup[/bold]\ndone\n"


# ---- reading the terminal -------------------------------------------------------------------


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    read, write = os.pipe()
    yield read, write
    for fd in (read, write):
        with contextlib.suppress(OSError):
            os.close(fd)


async def test_lines_are_read_as_they_come_and_the_last_one_without_an_end(
    pipe: tuple[int, int],
) -> None:
    read, write = pipe
    prompts = io.StringIO()
    reader = _terminal.LineReader(read, prompts)
    os.write(write, b"first\r\nsecond\nthi")
    assert await reader.readline("> ") == "first"
    assert await reader.readline("> ") == "second"
    pending = asyncio.create_task(reader.readline("> "))
    await asyncio.sleep(0.05)
    assert not pending.done()
    os.write(write, "rd é".encode())
    os.close(write)
    assert await pending == "third é"
    assert await reader.readline() is None
    assert prompts.getvalue() == "> > > "


async def test_an_interrupt_ends_the_wait_for_a_line(pipe: tuple[int, int]) -> None:
    reader = _terminal.LineReader(pipe[0], io.StringIO())
    pending = asyncio.create_task(reader.readline())
    await asyncio.sleep(0.05)
    reader.interrupt()
    assert await pending is None
    os.write(pipe[1], b"later\n")
    assert await reader.readline() == "later"


def test_questions_describe_the_change() -> None:
    describe = _terminal.describe
    assert describe(ToolCall("c", "write_file", {"path": "a.py", "content": "é"})) == (
        "write a.py (2 bytes)"
    )
    assert describe(ToolCall("c", "edit_file", {"path": "a.py"})) == "edit a.py"
    assert describe(ToolCall("c", "execute_command", {"command": "ls"})) == "run the command: ls"
    assert describe(ToolCall("c", "other", {"x": 1})) == "other(x=...)"


# ---- main, in process -----------------------------------------------------------------------


def scripted(*answers: LLMResponse | str) -> None:
    register_provider("scripted", lambda **options: ScriptedClient(list(answers)))


def test_main_runs_one_turn(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scripted(LLMResponse(tool_calls=[ToolCall("c1", "list_files", {})]), "Two files.")
    code = glassagent.cli.main(
        ["run", "--provider", "scripted", "--workspace", str(SAMPLE), "--json", "List"]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    stream = [json.loads(line) for line in out.splitlines()]
    assert stream[-1] == {**stream[-1], "type": "complete", "text": "Two files."}
    assert err == ""


def test_main_chats_over_piped_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    call = ToolCall("c1", "write_file", {"path": "new.txt", "content": "new\n"})
    scripted(LLMResponse(tool_calls=[call]), "Written.")
    read, write = os.pipe()
    os.write(write, b"Write it\nyes\n/history\n/exit\n")
    os.close(write)
    with open(read, encoding="utf-8") as stdin:
        monkeypatch.setattr(sys, "stdin", stdin)
        code = glassagent.cli.main(["--provider", "scripted", "--workspace", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert (tmp_path / "new.txt").read_text() == "new\n"
    assert "user: Write it\n" in out
    assert "assistant: Written.\n" in out
    assert "Allow the agent to write new.txt (4 bytes)? [y/N] " in err


def test_main_reports_bad_input_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = glassagent.cli.main(["run", "--workspace", str(tmp_path / "missing"), "hi"])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err == f"glassagent: the workspace {str(tmp_path / 'missing')!r} does not exist\n"


def failing(error: Exception) -> None:
    def answer(*_: object) -> str:
        raise error

    register_provider("failing", lambda **options: FunctionClient(answer))


@pytest.mark.parametrize(
    ("error", "code", "message"),
    [
        (ProviderError("no such model", status=404), 2, "does not know the model 'function'"),
        (ProviderError("overloaded", status=500), 1, "ProviderError: overloaded"),
    ],
)
def test_main_turns_a_failed_run_into_an_exit_code(
    error: Exception, code: int, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    failing(error)
    args = ["run", "--provider", "failing", "--workspace", str(SAMPLE), "hi"]
    assert glassagent.cli.main(args) == code
    err = capsys.readouterr().err
    assert message in err
    assert len(err.strip().splitlines()) == 1


def test_main_saves_an_aborted_turn_and_exits_130(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def answer(*_: object) -> str:
        raise KeyboardInterrupt  # as a client interrupted mid-call does

    register_provider("interrupted", lambda **options: FunctionClient(answer))
    saved = tmp_path / "h.json"
    args = ["run", "--provider", "interrupted", "--workspace", str(SAMPLE), "--history"]
    assert glassagent.cli.main([*args, str(saved), "hi"]) == 130
    assert [m.content for m in History.load(saved).thread()] == ["hi"]
    assert "aborted: interrupted (KeyboardInterrupt)" in capsys.readouterr().err
