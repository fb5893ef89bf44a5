"""How often the coding agent's example commands do what they say, on the embedded model.

Each example runs ``glassagent run ... --json`` as a user would (the warm local model, a
fresh copy of ``examples/sample_project`` each time), N times, and is checked for what it
promises. The README shows only examples that were right at least 9 times out of 10.

    .venv/bin/python bench/cli_examples.py [--repeat 10]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from example_checks import CHECKS, Check

SAMPLE = Path(__file__).resolve().parent.parent / "examples" / "sample_project"
EXAMPLES: list[list[str]] = [
    ["List the files."],
    ["Write a short poem about the sea. Do not use tools."],
    ["hi"],
    ["--yes", "Create notes.txt that says: Remember the milk."],
    ["--allow-commands", "--yes", "Write goodbye.py that prints Goodbye! and run it."],
]


def once(args: list[str], check: Check) -> tuple[bool, float, str]:
    """One run of the example: right or not, seconds, the answer."""
    root = Path(tempfile.mkdtemp(prefix="glassagent-example-"))
    shutil.copytree(SAMPLE, root, dirs_exist_ok=True)
    command = [sys.executable, "-m", "glassagent", "run", "--provider", "local", "--json"]
    started = time.perf_counter()
    done = subprocess.run(
        [*command, "--workspace", str(root), *args],
        capture_output=True, text=True, timeout=600, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    seconds = time.perf_counter() - started
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    calls = [e["function_name"] for e in events if e["type"] == "function_call_start"]
    text = next((e["text"] for e in events if e["type"] == "complete"), "")
    right = done.returncode == 0 and check(root, text, calls)
    shutil.rmtree(root, ignore_errors=True)
    return right, seconds, text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    rows = []
    for example in EXAMPLES:
        outcomes = [once(example, CHECKS[example[-1]]) for _ in range(args.repeat)]
        right = sum(1 for ok, _, _ in outcomes if ok)
        seconds = sorted(s for _, s, _ in outcomes)
        median = seconds[len(seconds) // 2]
        rows.append((" ".join(example), right, median))
        answer = outcomes[-1][2].replace("\n", " ")[:70]
        print(f"{right}/{args.repeat} right, median {median:.1f} s: {example} -> {answer}")
    print(f"\n| example | right of {args.repeat} | median s |\n|---|---|---|")
    for example, right, median in rows:
        print(f"| `{example}` | {right} | {median:.1f} |")


if __name__ == "__main__":
    main()
