"""Which tool protocol the coding agent should use with the embedded model, by the numbers.

Runs the coding agent's own prompts (its instructions for the local model, its workspace
tools, temperature 0, `stop_repeats`) against the embedded llama.cpp model with each
protocol: ``native`` (llama.cpp parses the model's tool calls with the chat template),
``json`` (the JSON tool protocol in the prompt) and ``json+grammar`` (the same, with replies
constrained to the protocol's JSON Schema).
For each it reports whether the turn did what was asked, the model calls, the unreadable
replies, the seconds to the first streamed answer text and to the end.

    .venv/bin/python bench/cli_protocols.py [--repeat 3] [--max-tokens 1024]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from example_checks import CHECKS, Check

from glassagent import Agent, ModelSettings
from glassagent.cli._session import LOCAL_SYSTEM
from glassagent.local import LocalServer
from glassagent.workspace import Workspace

SAMPLE = Path(__file__).resolve().parent.parent / "examples" / "sample_project"


PROMPTS: list[tuple[str, Check]] = [
    (prompt, CHECKS[prompt])
    for prompt in (
        "Write a short poem about the sea. Do not use tools.",
        "hi",
        "Write goodbye.py that prints Goodbye! and run it.",
        "Which files are in this project?",
    )
]

PROTOCOLS: dict[str, dict[str, Any]] = {
    "native": {"tool_protocol": "native"},
    "json": {"tool_protocol": "json", "json_grammar": False},
    "json+grammar": {"tool_protocol": "json", "json_grammar": True},
}


@dataclass
class Outcome:
    protocol: str
    prompt: str
    right: bool
    calls: int
    unreadable: int
    first_text_s: float | None
    total_s: float
    stop: str
    text: str


async def one_turn(
    server: LocalServer, protocol: str, prompt: str, check: Any, max_tokens: int
) -> Outcome:
    root = Path(tempfile.mkdtemp(prefix="glassagent-bench-"))
    shutil.copytree(SAMPLE, root, dirs_exist_ok=True)
    workspace = Workspace(root, allow_commands=True)
    settings = ModelSettings(temperature=0, max_tokens=max_tokens, timeout=300)
    async with server.client(**PROTOCOLS[protocol]) as client:
        agent = Agent(
            client,
            workspace.tools,
            system=LOCAL_SYSTEM,
            settings=settings,
            max_iterations=8,
            stop_repeats=True,
        )
        started = time.perf_counter()
        first: float | None = None
        calls: list[str] = []
        run = agent.run(prompt)
        try:
            async for event in run:
                if event.type == "text_chunk" and first is None:
                    first = time.perf_counter() - started
                elif event.type == "function_call_start":
                    calls.append(event.function_name)
            result = run.result
        except Exception as exc:
            result = getattr(exc, "result", None)
        total = time.perf_counter() - started
    text = result.text if result is not None else ""
    events = result.events if result is not None else ()
    unreadable = sum(1 for e in events if e.type == "llm_response" and e.protocol_error)
    outcome = Outcome(
        protocol=protocol,
        prompt=prompt,
        right=result is not None and result.stop_reason == "end_turn" and check(root, text, calls),
        calls=sum(1 for e in events if e.type == "llm_request"),
        unreadable=unreadable,
        first_text_s=first,
        total_s=total,
        stop=result.stop_reason if result is not None else "error",
        text=text[:80],
    )
    shutil.rmtree(root, ignore_errors=True)
    return outcome


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--max-tokens", type=int, default=1024)
    parser.add_argument("--protocols", default=",".join(PROTOCOLS))
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    outcomes: list[Outcome] = []
    async with LocalServer(context_size=8192) as server:
        for protocol in args.protocols.split(","):
            for prompt, check in PROMPTS:
                for _ in range(args.repeat):
                    outcome = await one_turn(server, protocol, prompt, check, args.max_tokens)
                    outcomes.append(outcome)
                    print(json.dumps(outcome.__dict__), flush=True)
    print("\n| protocol | prompt | right | model calls | unreadable | first text s | total s |")
    print("|---|---|---|---|---|---|---|")
    for o in outcomes:
        first = "-" if o.first_text_s is None else f"{o.first_text_s:.1f}"
        print(
            f"| {o.protocol} | {o.prompt[:40]} | {'yes' if o.right else 'no'} | {o.calls} "
            f"| {o.unreadable} | {first} | {o.total_s:.1f} |"
        )
    if args.output:
        args.output.write_text(json.dumps([o.__dict__ for o in outcomes], indent=2))


if __name__ == "__main__":
    asyncio.run(main())
