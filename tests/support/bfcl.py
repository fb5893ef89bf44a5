"""Small data sets in the file layout of the Berkeley Function Calling Leaderboard."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from glassagent._core.messages import ToolCall
from glassagent._evals.model import Case, EvalContext, Score
from glassagent._evals.trajectory import Trajectory

Entry = tuple[str, str, Sequence[Mapping[str, Any]], Sequence[Mapping[str, Any]]]
"""A BFCL entry: id, user message, functions (BFCL's schema), ground truth."""


def function(
    name: str, properties: Mapping[str, Any], required: Sequence[str] = ()
) -> dict[str, Any]:
    """A function description as BFCL writes it (``"type": "dict"``)."""
    return {
        "name": name,
        "description": f"The function {name}.",
        "parameters": {"type": "dict", "properties": dict(properties), "required": list(required)},
    }


def write_bfcl(root: Path, category: str, entries: Iterable[Entry], *, version: int = 4) -> Path:
    """Write `entries` as ``BFCL_v<version>_<category>.json`` and its possible answers."""
    (root / "possible_answer").mkdir(parents=True, exist_ok=True)
    questions, answers = [], []
    for entry_id, question, functions, truth in entries:
        questions.append(
            {
                "id": entry_id,
                "question": [[{"role": "user", "content": question}]],
                "function": list(functions),
            }
        )
        answers.append({"id": entry_id, "ground_truth": list(truth)})
    name = f"BFCL_v{version}_{category}.json"
    (root / name).write_text("".join(json.dumps(q) + "\n" for q in questions), encoding="utf-8")
    (root / "possible_answer" / name).write_text(
        "".join(json.dumps(a) + "\n" for a in answers), encoding="utf-8"
    )
    return root


def call(name: str, **arguments: Any) -> ToolCall:
    """A tool call the model made."""
    return ToolCall(f"c-{name}", name, arguments)


def judge(case: Case, calls: Sequence[ToolCall], **options: Any) -> Score:
    """What `Trajectory` makes of `calls` for `case`."""
    context = EvalContext(case=case, output=None, text="", result=None, tool_calls=tuple(calls))
    return Trajectory(**options)(context)
