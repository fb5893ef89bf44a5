"""The coding agent on the embedded local model (``pytest -m real_model``).

`glassagent chat --provider local` runs as a real subprocess on a copy of the sample
project, with two prompts piped in. The 0.5B model is small: the test asserts that it lists
the files and reads ``hello.py`` (the calls and what the tools returned), not its prose.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from glassagent.local import ensure_default_model
from tests.support.cli import cli_env, events, run_cli

pytestmark = [
    pytest.mark.real_model,
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX only"),
]

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sample_project"


def test_the_local_model_lists_and_reads_the_sample_project(tmp_path: Path) -> None:
    ensure_default_model()  # fetched once, outside the CLI's run
    project = Path(shutil.copytree(SAMPLE, tmp_path / "project"))
    done = run_cli(
        "chat", "--provider", "local", "--workspace", str(project), "--max-iterations", "3",
        "--json", cwd=tmp_path, input="List the files.\nRead the file hello.py.\n",
        env=cli_env(GLASSAGENT_LOCAL_KEEP_ALIVE="0"),  # its own server, stopped at its end
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    stream = events(done.stdout)
    runs = [e["run_id"] for e in stream if e["type"] == "llm_request" and e["iteration"] == 1]
    assert len(runs) == 2, done.stdout  # one run per prompt
    by_run = {run: [e for e in stream if e["run_id"] == run] for run in runs}
    for run_events in by_run.values():
        assert run_events[-1]["type"] in ("complete", "error")  # max_iterations may cut it

    def results(run: str, tool: str) -> list[dict[str, Any]]:
        return [
            e["execution"]
            for e in by_run[run]
            if e["type"] == "function_execution_complete"
            and e["execution"]["function_name"] == tool
        ]

    listed = results(runs[0], "list_files")
    assert listed, [e for e in by_run[runs[0]] if e["type"] == "llm_response"]
    assert any("hello.py" in str(r["result"]) and not r["is_error"] for r in listed)
    read = results(runs[1], "read_file")
    assert read, [e for e in by_run[runs[1]] if e["type"] == "llm_response"]
    assert any(r["args"]["path"].endswith("hello.py") for r in read)
    assert any("A tiny program" in str(r["result"]) and not r["is_error"] for r in read)
    assert "starting the embedded local model" in done.stderr
