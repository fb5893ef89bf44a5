"""bench/durable_bench.py in its smoke mode, on SQLite: it runs, and its JSON has every row.

No figure is held to a threshold: timings depend on the machine. What is checked is the shape
of the results (each kind of run, with its model and tool calls), that what was measured is a
positive number, and that DBOS's statements per step were counted.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("dbos")

pytestmark = pytest.mark.durable

BENCH = Path(__file__).resolve().parents[2] / "bench" / "durable_bench.py"
BUDGET_SECONDS = 90  # the smoke mode takes a few seconds


def bench(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH), *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=BUDGET_SECONDS,
        check=False,
    )


def positive(row: dict[str, Any], *keys: str) -> None:
    for key in keys:
        assert isinstance(row[key], float), (key, row[key])
        assert math.isfinite(row[key]), (key, row[key])
        assert row[key] > 0, (key, row[key])


def test_the_quick_mode_writes_every_row(tmp_path: Path) -> None:
    output = tmp_path / "results" / "durable.json"
    out = bench(tmp_path, "--quick", "--backends", "sqlite", "--output", str(output))
    assert out.returncode == 0, out.stderr[-3000:]

    results = json.loads(output.read_text(encoding="utf-8"))
    meta = results["meta"]
    assert meta["quick"] is True
    assert (meta["size"], meta["cpu_count"]) == (4, os.cpu_count())
    assert meta["dbos"].split(".")[0].isdigit()
    runs = results["runs"]
    assert [(r["backend"], r["run"], r["model_calls"], r["tool_calls"]) for r in runs] == [
        ("sqlite", "answer", 1, 0),
        ("sqlite", "answers", 5, 0),
        ("sqlite", "rounds", 5, 4),
        ("sqlite", "at_once", 2, 4),
    ]
    for row in runs:
        positive(row, "plain_ms", "durable_ms")
        assert all(math.isfinite(row[k]) for k in ("added_ms", "plain_cpu_ms", "added_cpu_ms"))
    [steps] = results["steps"]
    assert steps["backend"] == "sqlite"
    positive(steps, "import_ms", "launch_ms", "stop_ms")
    for step in ("model_step", "tool_step", "tool_step_at_once", "run"):
        assert math.isfinite(steps[f"{step}_ms"]), steps
        assert math.isfinite(steps[f"{step}_cpu_ms"]), steps
    # counted, not timed: each step writes to the database
    positive(steps, "statements_per_model_step", "commits_per_model_step")
    positive(steps, "statements_per_tool_step", "commits_per_tool_step")
    assert results["skipped"] == {"postgresql": "not asked for (--backends)"}
    assert set(results["floors"]) == {"fsync_ms", "sqlite_commit_ms"}

    # the report: the machine, then the tables, in Markdown
    assert f"{os.cpu_count()} cores" in out.stdout
    assert f"dbos {meta['dbos']}" in out.stdout
    assert "| run | model calls | tool calls | plain ms | SQLite ms |" in out.stdout
    assert "| per model call step |" in out.stdout
    assert "- PostgreSQL: skipped: not asked for (--backends)" in out.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--backends", "mysql"], "--backends takes sqlite, postgresql"),
        (["--size", "1"], "--size must be 2 or more"),
    ],
)
def test_bad_options_are_refused(tmp_path: Path, args: list[str], message: str) -> None:
    out = bench(tmp_path, *args, "--output", str(tmp_path / "never.json"))
    assert out.returncode == 2
    assert message in out.stderr
    assert not (tmp_path / "never.json").exists()
