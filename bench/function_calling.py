"""Function-calling accuracy of the default local model, in the style of BFCL's "simple" set.

Each entry is one question, one function (a JSON Schema, made a tool with
`Tool.from_schema`) and the acceptable values of each argument. The model is asked once per
entry and protocol; a call is right when it names the function, gives every required argument
an acceptable value, leaves out only arguments that may be left out and adds none. Protocols:
``native`` (llama.cpp's own tool calls), ``json`` (the JSON tool protocol, prompt only) and
``json-grammar`` (the JSON tool protocol with replies constrained to its schema).

The entries come from the Berkeley Function Calling Leaderboard's ``simple_python`` set
(Apache-2.0), read at run time from the ``bfcl-eval`` package: installed, or its wheel or
unpacked ``data`` folder given with ``--data`` (``pip download bfcl-eval --no-deps -d DIR``).
Nothing of it is copied here. Checking follows BFCL's AST checker in simplified form (strings
compared without case, spaces and ``,./-_*^``; an integer passes for a float).

Usage: ``python bench/function_calling.py [--data PATH] [--count 40] [--protocols ...]``.
Needs ``glassagent[local]``; fetches the default model on first use.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import re
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

from local_json_protocol import print_table

from glassagent import Message, ModelSettings, Tool
from glassagent.local import LocalServer

SETTINGS = ModelSettings(temperature=0, max_tokens=160)
PROTOCOLS = {
    "native": {"tool_protocol": "native"},
    "json": {"tool_protocol": "json", "json_grammar": False},
    "json-grammar": {"tool_protocol": "json", "json_grammar": True},
}
_TYPES = {"dict": "object", "float": "number", "tuple": "array"}
_IGNORED = re.compile(r"[ ,./\-_*^]")
Entry = tuple[str, Tool, dict[str, list[Any]], str]  # question, tool, answer, BFCL name


def _read_lines(data: str | None) -> tuple[list[str], list[str]]:
    """The question and answer lines of the newest ``simple_python`` set found."""
    root: Path | zipfile.Path
    if data is None:
        spec = importlib.util.find_spec("bfcl_eval")
        if spec is None or not spec.submodule_search_locations:
            sys.exit(
                "No BFCL data: install bfcl-eval, or pass --data with its wheel "
                "(pip download bfcl-eval --no-deps -d DIR) or its data folder."
            )
        root = Path(next(iter(spec.submodule_search_locations))) / "data"
    elif data.endswith(".whl"):
        root = zipfile.Path(data) / "bfcl_eval" / "data"
    else:
        root = Path(data)
    names = sorted(
        p.name for p in root.iterdir() if re.fullmatch(r"BFCL_v\d+_simple_python\.json", p.name)
    )
    if not names:
        sys.exit(f"No BFCL_v*_simple_python.json in {data}.")
    questions = (root / names[-1]).read_text(encoding="utf-8").splitlines()
    answers = (root / "possible_answer" / names[-1]).read_text(encoding="utf-8").splitlines()
    return questions, answers


def _schema(value: Any) -> Any:
    """A BFCL parameter schema as JSON Schema (``dict``, ``float``, ``tuple``, ``any``)."""
    if isinstance(value, list):
        return [_schema(item) for item in value]
    if not isinstance(value, dict):
        return value
    out = {key: _schema(item) for key, item in value.items() if key != "optional"}
    kind = out.get("type")
    if kind == "any":
        del out["type"]
    elif isinstance(kind, str):
        out["type"] = _TYPES.get(kind, kind)
    return out


def load(data: str | None, count: int) -> list[Entry]:
    """`count` entries spread evenly over the set."""
    questions, answers = _read_lines(data)
    by_id = {row["id"]: row["ground_truth"][0] for row in map(json.loads, answers)}
    rows = [json.loads(line) for line in questions]
    step = max(len(rows) // count, 1)
    entries: list[Entry] = []
    for row in rows[::step][:count]:
        function = row["function"][0]
        name = function["name"].replace(".", "_")  # tool names take no dots
        tool = Tool.from_schema(
            name, function["description"], _schema(function["parameters"]), lambda **_: ""
        )
        (answer,) = by_id[row["id"]].values()
        entries.append((row["question"][0][-1]["content"], tool, answer, function["name"]))
    return entries


def _same(value: Any, expected: Any) -> bool:
    if isinstance(expected, str):
        return (
            isinstance(value, str)
            and _IGNORED.sub("", value).lower() == _IGNORED.sub("", expected).lower()
        )
    if isinstance(expected, bool) or isinstance(value, bool):
        return value is expected
    if isinstance(expected, int | float):
        return isinstance(value, int | float) and float(value) == float(expected)
    if isinstance(expected, list):
        return (
            isinstance(value, list)
            and len(value) == len(expected)
            and all(_same(v, e) for v, e in zip(value, expected, strict=True))
        )
    if isinstance(expected, dict):
        return isinstance(value, dict) and _arguments_ok(value, expected)
    return bool(value == expected)


def _arguments_ok(args: dict[str, Any], answer: dict[str, list[Any]]) -> bool:
    """Whether `args` fit BFCL's acceptable values (``""`` among them: may be left out)."""
    if set(args) - set(answer):
        return False
    for key, acceptable in answer.items():
        acceptable = acceptable if isinstance(acceptable, list) else [acceptable]
        if key not in args:
            if "" not in acceptable:
                return False
        elif not any(_same(args[key], option) for option in acceptable if option != ""):
            return False
    return True


async def measure(server: LocalServer, protocol: str, entries: list[Entry]) -> dict[str, Any]:
    right = called = 0
    started = time.perf_counter()
    async with server.client(**PROTOCOLS[protocol]) as client:
        for question, tool, answer, _ in entries:
            messages = [Message(role="user", content=question)]
            response = await client.chat(messages, [tool.definition], settings=SETTINGS)
            calls = response.tool_calls
            called += bool(calls)
            ok = (
                bool(calls) and calls[0].name == tool.name and _arguments_ok(calls[0].input, answer)
            )
            right += ok
            if not ok:
                got = (calls[0].name, calls[0].input) if calls else response.text[:80]
                print(f"  [{protocol}] {tool.name}: {got!r}")
    n = len(entries)
    return {
        "protocol": protocol,
        "entries": n,
        "called a tool": f"{called}/{n}",
        "accuracy": f"{right}/{n} ({100 * right / max(n, 1):.0f}%)",
        "seconds": f"{time.perf_counter() - started:.0f}",
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="a bfcl-eval wheel or its data folder")
    parser.add_argument("--count", type=int, default=40)
    parser.add_argument("--protocols", default=",".join(PROTOCOLS))
    options = parser.parse_args()
    entries = load(options.data, options.count)
    async with LocalServer(context_size=2048) as server:
        rows = [await measure(server, p, entries) for p in options.protocols.split(",")]
    print_table(rows)


if __name__ == "__main__":
    asyncio.run(main())
