"""What the coding agent's example prompts promise, checked on a turn's outcome.

Each check takes the project folder the turn worked in, the turn's final text and the names
of the tools it called. Shared by `cli_examples.py`, `cli_protocols.py` and the real-model
tests of the README's commands.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

Check = Callable[[Path, str, list[str]], bool]


def lists_the_files(root: Path, text: str, calls: list[str]) -> bool:
    """The answer names the sample project's files."""
    return "hello.py" in text and "README.md" in text


def writes_a_poem(root: Path, text: str, calls: list[str]) -> bool:
    """A few lines of prose, no tool called, not the protocol's JSON."""
    return not calls and len(text.split()) >= 8 and not text.lstrip().startswith("{")


def greets(root: Path, text: str, calls: list[str]) -> bool:
    """An answer, no tool called."""
    return not calls and bool(text.strip())


def writes_and_runs_goodbye(root: Path, text: str, calls: list[str]) -> bool:
    """goodbye.py exists, was run, and prints ``Goodbye!``."""
    script = root / "goodbye.py"
    if not script.is_file() or "execute_command" not in calls:
        return False
    ran = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=30, check=False
    )
    return ran.stdout.strip() == "Goodbye!"


def writes_notes(root: Path, text: str, calls: list[str]) -> bool:
    """notes.txt exists and holds the note."""
    notes = root / "notes.txt"
    return notes.is_file() and "milk" in notes.read_text().lower()


CHECKS: dict[str, Check] = {
    "List the files.": lists_the_files,
    "Which files are in this project?": lists_the_files,
    "Write a short poem about the sea. Do not use tools.": writes_a_poem,
    "hi": greets,
    "Write goodbye.py that prints Goodbye! and run it.": writes_and_runs_goodbye,
    "Create notes.txt that says: Remember the milk.": writes_notes,
}
"""Each example prompt's check, by the prompt."""
