"""`glassagent run` end to end: a real subprocess, a scripted model on a loopback server."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from glassagent.history import History
from tests.support.cli import TIMEOUT, ScriptedModel, call, cli_env, events, run_cli, say
from tests.support.loopback_server import Reply

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sample_project"
GOODBYE = "print('Goodbye!')\n"

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX commands and signals")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of the sample project to work in."""
    return Path(shutil.copytree(SAMPLE, tmp_path / "project"))


def the_whole_task() -> ScriptedModel:
    return ScriptedModel(
        call(("list_files", {})),
        call(("read_file", {"path": "hello.py"})),
        call(("write_file", {"path": "goodbye.py", "content": GOODBYE})),
        call(("execute_command", {"command": f"{sys.executable} goodbye.py"})),
        say("I wrote goodbye.py and ran it: it prints Goodbye!"),
    )


def one_line_error(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


def test_run_lists_reads_writes_and_runs_a_file(project: Path) -> None:
    with the_whole_task() as model:
        done = run_cli(
            "run", *model.args(), "--workspace", str(project), "--allow-commands", "--yes",
            "--json", "Write goodbye.py and run it.", cwd=project.parent,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (project / "goodbye.py").read_text() == GOODBYE
    stream = events(done.stdout)
    assert next(e["type"] for e in stream) == "llm_request"
    assert stream[-1]["type"] == "complete"
    assert stream[-1]["text"] == "I wrote goodbye.py and ran it: it prints Goodbye!"
    assert len({e["run_id"] for e in stream}) == 1
    assert [e["seq"] for e in stream] == list(range(len(stream)))
    calls = [(e["function_name"], e["args"]) for e in stream if e["type"] == "function_call_start"]
    assert [name for name, _ in calls] == [
        "list_files",
        "read_file",
        "write_file",
        "execute_command",
    ]
    results = {
        e["execution"]["function_name"]: e["execution"]
        for e in stream
        if e["type"] == "function_execution_complete"
    }
    assert not any(r["is_error"] for r in results.values()), results
    assert results["list_files"]["result"].split() == ["README.md", "hello.py"]
    assert "def greet" in results["read_file"]["result"]
    assert "Goodbye!" in results["execute_command"]["result"]
    assert "[exit code 0]" in results["execute_command"]["result"]
    progress = [e["message"] for e in stream if e["type"] == "tool_progress"]
    assert "Goodbye!" in progress
    # the model saw each result, in the conversation it was sent
    assert "def greet" in model.tool_results(2)[1]
    assert "Goodbye!" in model.tool_results(4)[-1]


def test_run_shows_each_step_to_people(project: Path) -> None:
    with the_whole_task() as model:
        done = run_cli(
            "run", *model.args(), "--workspace", str(project), "--allow-commands", "--yes",
            "Write goodbye.py and run it.", cwd=project.parent,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for step in ("list_files()", 'read_file(path="hello.py")', "write_file(", "execute_command("):
        assert step in out
    assert "hello.py" in out
    assert "Goodbye!" in out
    assert "I wrote goodbye.py and ran it" in out
    assert "250 in / 35 out tokens" in out  # 5 calls x (50 in, 7 out)
    assert "5 model calls" in out
    assert "{" not in out.splitlines()[0]  # not the JSON view
    [line] = done.stderr.splitlines()  # how commands run, said once at the start
    assert line.startswith("glassagent: commands run "), line


def test_run_without_yes_declines_writes_and_commands(project: Path) -> None:
    with ScriptedModel(
        call(("write_file", {"path": "goodbye.py", "content": GOODBYE})),
        call(("execute_command", {"command": "touch ran.txt"})),
        say("Nothing was allowed."),
    ) as model:
        done = run_cli(
            "run", *model.args(), "--workspace", str(project), "--allow-commands", "--json",
            "Write goodbye.py.", cwd=project.parent,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert not (project / "goodbye.py").exists()
    assert not (project / "ran.txt").exists()
    completed = [e["execution"] for e in events(done.stdout) if "execution" in e]
    assert [c["is_error"] for c in completed] == [True, True]
    assert all("declined" in c["result"] for c in completed)
    assert "declined" in model.tool_results(1)[0]
    assert "--yes" in done.stderr
    # the answers go through the run's approval of tool calls
    answered = [e for e in events(done.stdout) if e["type"] == "approval_answered"]
    required = [e["call"]["name"] for e in events(done.stdout) if e["type"] == "approval_required"]
    assert required == ["write_file", "execute_command"]
    assert [(e["tool_name"], e["approved"]) for e in answered] == [
        ("write_file", False),
        ("execute_command", False),
    ]


def test_run_continues_and_saves_a_history_file(project: Path, tmp_path: Path) -> None:
    saved = tmp_path / "chat.json"
    with ScriptedModel(say("First answer."), say("Second answer.")) as model:
        for prompt in ("First question", "Second question"):
            done = run_cli(
                "run", *model.args(), "--workspace", str(project), "--history", str(saved),
                prompt, cwd=tmp_path,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
    sent = [m["content"] for m in model.bodies[1]["messages"] if m["role"] != "system"]
    assert sent == ["First question", "First answer.", "Second question"]
    history = History.load(saved)
    contents = [m.content for m in history.thread()]
    assert contents == ["First question", "First answer.", "Second question", "Second answer."]
    with ScriptedModel() as model:
        chat = run_cli(
            "chat", *model.args(), "--history", str(saved), cwd=tmp_path, input="/history"
        )
    assert chat.returncode == 0, chat.stderr
    assert f"(continuing 4 messages of {saved})" in chat.stdout
    assert "assistant: Second answer." in chat.stdout


def test_keys_come_from_dot_env_and_are_never_shown(project: Path, tmp_path: Path) -> None:
    pytest.importorskip("dotenv")
    secret = "sk-cli-test-0123456789abcdef"
    (tmp_path / ".env").write_text(f"OPENAI_COMPATIBLE_API_KEY={secret}\n")
    with ScriptedModel(say("Hi.")) as model:
        done = run_cli(
            "run", *model.args(), "--workspace", str(project), "--json", "Hi", cwd=tmp_path
        )
    assert done.returncode == 0, done.stderr
    assert model.requests[0].headers["authorization"] == f"Bearer {secret}"
    assert secret not in done.stdout + done.stderr


def test_a_failed_run_exits_1_with_one_line(project: Path) -> None:
    refusal = b'{"error": {"message": "context too long", "type": "invalid_request_error"}}'
    with ScriptedModel(Reply.body(refusal, status=400)) as model:
        done = run_cli("run", *model.args(), "--workspace", str(project), "Hi", cwd=project)
    assert done.returncode == 1
    assert "context too long" in one_line_error(done.stderr)
    assert "Traceback" not in done.stdout


def test_debug_shows_the_traceback(project: Path) -> None:
    refusal = b'{"error": {"message": "context too long"}}'
    with ScriptedModel(Reply.body(refusal, status=400)) as model:
        done = run_cli(
            "run", *model.args(), "--workspace", str(project), "--debug", "Hi", cwd=project
        )
    assert done.returncode == 1
    assert "Traceback" in done.stderr


BAD_INPUT = {
    "unknown provider": (["--provider", "nosuch"], "Unknown provider 'nosuch'"),
    "missing key": (["--provider", "openai"], "OPENAI_API_KEY"),
    "missing workspace": (["--workspace", "no/such/folder"], "does not exist"),
    "local with a base url": (["--provider", "local", "--base-url", "http://x"], "--base-url"),
    "local model not a file": (["--provider", "local", "--model", "nope.gguf"], "nope.gguf"),
    "no prompt": ([], "PROMPT"),
    "bad max iterations": (["--max-iterations", "0"], "max-iterations"),
}


@pytest.mark.parametrize("case", BAD_INPUT.values(), ids=BAD_INPUT.keys())
def test_bad_input_exits_2_with_one_line_and_writes_nothing(
    case: tuple[list[str], str], tmp_path: Path
) -> None:
    args, expected = case
    prompt = [] if case is BAD_INPUT["no prompt"] else ["Hi"]
    before = sorted(tmp_path.iterdir())
    done = run_cli("run", *args, "--history", str(tmp_path / "h.json"), *prompt, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert expected in one_line_error(done.stderr)
    assert done.stdout == ""
    assert sorted(tmp_path.iterdir()) == before


def test_an_invalid_history_file_exits_2_and_is_left_alone(tmp_path: Path) -> None:
    broken = tmp_path / "chat.json"
    broken.write_text('{"version": "2.0", "messages": 7}')
    with ScriptedModel(say("Hi.")) as model:
        done = run_cli("run", *model.args(), "--history", str(broken), "Hi", cwd=tmp_path)
    assert done.returncode == 2
    assert "not a usable history file" in one_line_error(done.stderr)
    assert broken.read_text() == '{"version": "2.0", "messages": 7}'
    assert model.requests == []


def test_an_unknown_model_exits_2(project: Path) -> None:
    body = {"error": {"message": "The model `nosuch` does not exist", "code": "model_not_found"}}
    with ScriptedModel(Reply.body(json.dumps(body).encode(), status=404)) as model:
        args = [*model.args()[:-1], "nosuch"]
        done = run_cli("run", *args, "--workspace", str(project), "Hi", cwd=project)
    assert done.returncode == 2
    line = one_line_error(done.stderr)
    assert "'nosuch'" in line
    assert "does not exist" in line


def test_a_closed_pipe_ends_the_run_quietly(project: Path) -> None:
    slow = say("word " * 40, pieces=40, delay=0.05)
    with ScriptedModel(slow) as model:
        process = subprocess.Popen(
            [sys.executable, "-m", "glassagent", "run", *model.args(), "--json",
             "--workspace", str(project), "Hi"],
            cwd=project, env=cli_env(), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        assert process.stdout is not None
        assert process.stderr is not None
        first = process.stdout.readline()
        process.stdout.close()  # like `| head -1`
        stderr = process.stderr.read()
        process.stderr.close()
        code = process.wait(TIMEOUT)
    assert json.loads(first)["type"] == "llm_request"
    assert stderr == b""
    assert code == 141


def test_ctrl_c_aborts_the_run_with_exit_130(project: Path) -> None:
    slow = say("word " * 40, pieces=40, delay=0.1)
    with ScriptedModel(slow) as model:
        process = subprocess.Popen(
            [sys.executable, "-m", "glassagent", "run", *model.args(), "--json",
             "--workspace", str(project), "Hi"],
            cwd=project, env=cli_env(), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert process.stdout is not None
        seen = []
        for line in process.stdout:
            seen.append(json.loads(line))
            if seen[-1]["type"] == "text_chunk":
                process.send_signal(signal.SIGINT)
                break
        rest, stderr = process.communicate(timeout=TIMEOUT)
    assert process.returncode == 130
    last = json.loads(rest.splitlines()[-1])
    assert last["type"] == "aborted"
    assert last["text"].startswith("word")
    assert "aborted" in one_line_error(stderr)


def test_python_dash_m_and_the_console_scripts(tmp_path: Path) -> None:
    done = run_cli("--version", cwd=tmp_path)
    assert done.returncode == 0
    assert done.stdout.startswith("glassagent ")
    tomllib = pytest.importorskip("tomllib")
    pyproject = tomllib.loads((SAMPLE.parents[1] / "pyproject.toml").read_text())
    scripts = pyproject["project"]["scripts"]
    assert scripts == {"glassagent": "glassagent.cli:main", "ai-agent": "glassagent.cli:main"}
    for extra in ("cli", "dev"):
        deps = " ".join(pyproject["project"]["optional-dependencies"][extra])
        assert "rich" in deps
        assert "python-dotenv" in deps


def test_without_workspace_the_command_says_which_folder_it_works_in(project: Path) -> None:
    with ScriptedModel(say("Hello.")) as model:
        done = run_cli("run", *model.args(), "Hi", cwd=project)
    assert done.returncode == 0, done.stderr
    assert f"working in {project} (the current folder; --workspace for another)" in done.stderr
