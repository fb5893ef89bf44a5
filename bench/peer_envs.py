"""The optional peers (``bench/run.py --peers``): each in its own virtual environment.

Each peer framework is installed by pip into ``bench/.peers/<name>/`` (made once, reused while
its requirements are unchanged) and driven by ``bench/peers/<name>_driver.py``, which measures
with the same loop as bench/driver.py (bench/measure.py, standard library only) on the OpenAI
chat-completions wire, non-streamed. Import time, installed package count and version are
measured inside the peer's environment. A peer that cannot be installed or cannot do the task
is reported as skipped, with the reason; it never stops the run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from measure import driver_options

HERE = Path(__file__).resolve().parent
VENVS = HERE / ".peers"
# Telemetry and tracing off, and dummy keys: the peers talk to the fake server only.
ENV = {
    "OPENAI_API_KEY": "bench-key-not-secret",
    "OPENAI_AGENTS_DISABLE_TRACING": "1",
    "AGNO_TELEMETRY": "false",
    "OTEL_SDK_DISABLED": "true",
    "DO_NOT_TRACK": "1",
}
INSTALL_TIMEOUT = 1200.0


@dataclass(frozen=True, kw_only=True)
class Peer:
    """One peer framework and what its OpenAI chat-completions model needs."""

    distribution: str
    """The framework's distribution, whose version the table shows."""
    requirements: tuple[str, ...]
    """What pip installs into the peer's environment."""
    imports: str
    """The imports the peer's driver needs, timed as its import cost."""


PEERS = {
    "pydantic_ai": Peer(
        distribution="pydantic-ai-slim",
        requirements=("pydantic-ai-slim[openai]",),
        imports="from pydantic_ai import Agent; from pydantic_ai.models.openai import "
        "OpenAIChatModel; from pydantic_ai.providers.openai import OpenAIProvider",
    ),
    "openai_agents": Peer(
        distribution="openai-agents",
        requirements=("openai-agents",),
        imports="from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool; "
        "from openai import AsyncOpenAI",
    ),
    "smolagents": Peer(
        distribution="smolagents",
        requirements=("smolagents[openai]",),
        imports="from smolagents import OpenAIServerModel, ToolCallingAgent, tool",
    ),
    "agno": Peer(
        distribution="agno",
        requirements=("agno", "openai"),
        imports="from agno.agent import Agent; from agno.models.openai.like import OpenAILike",
    ),
    "strands": Peer(
        distribution="strands-agents",
        requirements=("strands-agents[openai]",),
        imports="from openai import AsyncOpenAI; from strands import Agent, tool; "
        "from strands.models.openai import OpenAIModel",
    ),
}


class Skipped(Exception):
    """A peer that cannot take part; the message says why."""


def env() -> dict[str, str]:
    return {**os.environ, **ENV}


def reason(stderr: str) -> str:
    """The telling line of a failed command's stderr: pip's last error, else its last line."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR")]
    return (errors or lines or ["no output"])[-1][:200]


def venv_python(name: str) -> Path:
    """The peer's interpreter, installing its environment first unless it is up to date."""
    peer = PEERS[name]
    venv = VENVS / name
    python = venv / "bin" / "python"
    stamp = venv / "bench-requirements.txt"
    wanted = "\n".join(peer.requirements) + "\n"
    if python.exists() and stamp.exists() and stamp.read_text() == wanted:
        return python
    print(f"installing {name} into {venv} ...", file=sys.stderr, flush=True)
    commands = [
        [sys.executable, "-m", "venv", "--clear", str(venv)],
        [str(python), "-m", "pip", "install", "-q", *peer.requirements],
    ]
    for command in commands:
        try:
            out = subprocess.run(
                command, capture_output=True, text=True, timeout=INSTALL_TIMEOUT, env=env()
            )
        except subprocess.TimeoutExpired:
            raise Skipped(f"install timed out after {INSTALL_TIMEOUT:g} s") from None
        if out.returncode != 0:
            raise Skipped(f"install failed: {reason(out.stderr)}")
    stamp.write_text(wanted)
    return python


_FACTS = """
import json, importlib.metadata as md
names = {d.metadata["Name"].lower() for d in md.distributions()} - {"pip", "setuptools", "wheel"}
print(json.dumps({"packages": len(names), "version": md.version(%r)}))
"""


def facts(name: str, python: Path) -> dict[str, Any]:
    """Version and installed package count (the peer and all it brought), in its own venv.

    Raises:
        Skipped: The peer's environment cannot say.
    """
    out = subprocess.run(
        [str(python), "-c", _FACTS % PEERS[name].distribution],
        capture_output=True,
        text=True,
        env=env(),
    )
    if out.returncode != 0:
        raise Skipped(f"no package facts: {reason(out.stderr)}")
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def run_driver(name: str, python: Path, base_url: str, pin: list[str], args: Any) -> dict[str, Any]:
    """Measure one peer like bench/driver.py measures the others.

    Raises:
        Skipped: The peer's driver failed or timed out.
    """
    command = [*pin, str(python), str(HERE / "peers" / f"{name}_driver.py"), name]
    command += driver_options(base_url, args)
    try:
        out = subprocess.run(
            command, capture_output=True, text=True, timeout=args.timeout, env=env()
        )
    except subprocess.TimeoutExpired:
        raise Skipped(f"timed out after {args.timeout:g} s") from None
    if out.returncode != 0:
        raise Skipped(f"the task failed: {reason(out.stderr)}")
    result: dict[str, Any] = json.loads(out.stdout)
    return result
