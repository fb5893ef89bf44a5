"""The path a newcomer walks first: ``glassagent run`` on the embedded model (real model).

``pytest -m real_model``. Each test runs the real command line as a subprocess, on a copy of
the sample project, against one warm local model server that the module starts on first use
in a private runtime folder and stops at its end (by its pid, `stop_warm_server`).

- A plain request answers: its text streams before the answer is complete, every call has a
  ``max_tokens``, and the turn ends (no hang).
- The saved history holds exactly what the user typed as user messages.
- The README's coding-agent commands do what the README says they do, and its main example
  (``examples/quickstart.py``) ends with the answer.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from glassagent.history import History
from glassagent.local import ensure_default_model, stop_warm_server
from tests.support.cli import cli_env, events, run_cli

pytestmark = [
    pytest.mark.real_model,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the warm server is Linux"),
]

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "sample_project"
sys.path.insert(0, str(ROOT / "bench"))
from example_checks import CHECKS  # noqa: E402 - what each example prompt promises


@pytest.fixture(scope="module")
def env() -> Iterator[dict[str, str]]:
    """The CLI's environment, with a runtime folder of its own; its warm server is stopped."""
    ensure_default_model()  # fetched once, outside the measured commands
    runtime = tempfile.mkdtemp(prefix="glassagent-run-")
    previous = os.environ.get("XDG_RUNTIME_DIR")
    os.environ["XDG_RUNTIME_DIR"] = runtime
    try:
        yield cli_env(XDG_RUNTIME_DIR=runtime, GLASSAGENT_LOCAL_KEEP_ALIVE="300")
    finally:
        stop_warm_server()
        if previous is None:
            del os.environ["XDG_RUNTIME_DIR"]
        else:
            os.environ["XDG_RUNTIME_DIR"] = previous
        shutil.rmtree(runtime, ignore_errors=True)


def project(tmp_path: Path) -> Path:
    return Path(shutil.copytree(SAMPLE, tmp_path / "examples" / "sample_project"))


def local_run(env: dict[str, str], cwd: Path, *args: str) -> list[dict[str, Any]]:
    done = run_cli("run", "--provider", "local", "--json", *args, cwd=cwd, env=env)
    assert done.returncode == 0, done.stderr
    return events(done.stdout)


def test_a_plain_request_streams_its_answer_and_ends(env: dict[str, str], tmp_path: Path) -> None:
    folder = project(tmp_path)
    prompt = "Write a short poem about the sea. Do not use tools."
    stream = local_run(env, tmp_path, "--workspace", str(folder), prompt)
    requests = [e for e in stream if e["type"] == "llm_request"]
    assert requests
    assert all(e["settings"]["max_tokens"] == 1024 for e in requests)  # the profile's default
    last = stream[-1]
    assert last["type"] == "complete", last
    assert len(last["text"].split()) >= 5, last["text"]
    # the answer's text streamed in pieces before the model call was over
    kinds = [e["type"] for e in stream]
    answer_call = max(i for i, kind in enumerate(kinds) if kind == "llm_response")
    chunks = [i for i, kind in enumerate(kinds[:answer_call]) if kind == "text_chunk"]
    assert len(chunks) > 1, kinds


def test_the_saved_history_holds_what_the_user_typed(env: dict[str, str], tmp_path: Path) -> None:
    folder = project(tmp_path)
    saved = tmp_path / "chat.json"
    typed = ["hi", "What can you do?"]
    for text in typed:
        local_run(env, tmp_path, "--workspace", str(folder), "--history", str(saved), text)
    thread = History.load(saved).thread()
    users = [m for m in thread if m.role == "user"]
    assert [m.content for m in users if not m.protocol] == typed
    assert all(m.protocol for m in users if m.content not in typed)
    assert thread[-1].role == "assistant"
    assert thread[-1].status == "completed"
    assert thread[-1].content.strip()


# ---- the README's commands ---------------------------------------------------------------


def readme_runs() -> list[list[str]]:
    """The ``glassagent run`` commands of README.md's "The coding agent" section.

    Those for the embedded model: a command naming another ``--provider`` is for a stronger
    model, and says so.
    """
    text = (ROOT / "README.md").read_text("utf-8")
    section = text.split("## The coding agent", 1)[1].split("\n## ", 1)[0]
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", section, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            embedded = "--provider" not in words or "local" in words
            if words[:2] == [".venv/bin/glassagent", "run"] and embedded:
                commands.append(words[2:])
    return commands


def test_the_readme_has_coding_agent_commands_with_a_workspace() -> None:
    commands = readme_runs()
    assert commands
    for args in commands:
        assert "--workspace" in args, args
        assert args[-1] in CHECKS, f"no check for the README's command {args}"


@pytest.mark.parametrize("args", readme_runs(), ids=lambda args: args[-1])
def test_a_readme_command_does_what_it_says(
    args: list[str], env: dict[str, str], tmp_path: Path
) -> None:
    folder = project(tmp_path)  # the README's relative --workspace, in a copy
    stream = local_run(env, tmp_path, *args)
    calls = [e["function_name"] for e in stream if e["type"] == "function_call_start"]
    last = stream[-1]
    assert last["type"] == "complete", last
    assert CHECKS[args[-1]](folder, last["text"], calls), (last["text"], calls)


def test_the_main_example_answers_on_the_embedded_model(tmp_path: Path) -> None:
    # the README's first command runs it: it must end with an answer, not max_iterations
    environment = cli_env()
    environment.pop("GEMINI_API_KEY", None)
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py")],
        cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=300,
        check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("done after "), done.stdout
    assert "42" in last, done.stdout
