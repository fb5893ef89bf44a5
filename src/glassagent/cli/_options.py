"""The command line's grammar: `parse` turns arguments into `Options`, or a `UsageError`."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, NoReturn

DEFAULT_MAX_ITERATIONS = 20
"""Most model calls one turn may make unless ``--max-iterations`` says otherwise."""

_COMMANDS = ("chat", "run")
_HELP_FLAGS = ("-h", "--help", "--version")


class UsageError(Exception):
    """The arguments do not parse: reported as one line, exit code 2."""


@dataclass(frozen=True)
class Options:
    """Everything the command line asked for."""

    command: Literal["chat", "run"]
    """``chat`` (interactive) or ``run`` (one turn)."""
    prompt: str | None
    """The prompt of ``run``; `None` for ``chat``."""
    provider: str | None
    """The provider's name; `None`: choose one (Gemini with a key, else the local model)."""
    model: str | None
    """The model (for ``local``: a GGUF file); `None`: the provider's default."""
    base_url: str | None
    """The provider's address, when not its default."""
    workspace: Path
    """The folder the agent works in."""
    allow_commands: bool
    """Whether the agent may run shell commands."""
    yes: bool
    """Approve every write and command without asking."""
    max_iterations: int
    """Most model calls per turn."""
    system: str | None
    """System instructions that replace the default ones."""
    history: Path | None
    """A conversation file to continue and save."""
    json: bool
    """Print each event as one JSON line instead of the human view."""
    debug: bool
    """Show tracebacks of errors."""


class _Parser(argparse.ArgumentParser):
    """An `argparse.ArgumentParser` whose errors are one line (a `UsageError`), not usage."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}")
    return value


def _common() -> _Parser:
    """The options both commands take."""
    common = _Parser(add_help=False)
    add = common.add_argument
    add(
        "--provider",
        metavar="NAME",
        help="the model provider: local, gemini, ollama, llama, openai, openai_compatible, "
        "anthropic or a plugin's name (default: gemini when GEMINI_API_KEY is set, else the "
        "embedded local model)",
    )
    add("--model", metavar="NAME", help="the model (for local: a GGUF file)")
    add("--base-url", metavar="URL", help="the provider's address, e.g. http://127.0.0.1:8080/v1")
    add(
        "--workspace",
        metavar="DIR",
        type=Path,
        default=Path("."),
        help="the folder the agent works in (default: the current folder)",
    )
    add("--allow-commands", action="store_true", help="let the agent run shell commands")
    add(
        "--yes",
        action="store_true",
        help="approve every write and command without asking (without it, chat asks and run "
        "declines)",
    )
    add(
        "--max-iterations",
        metavar="N",
        type=_positive,
        default=DEFAULT_MAX_ITERATIONS,
        help=f"most model calls per turn (default: {DEFAULT_MAX_ITERATIONS})",
    )
    add("--system", metavar="TEXT", help="system instructions, instead of the default ones")
    add(
        "--history",
        metavar="FILE",
        type=Path,
        help="continue the conversation in FILE and save it there (standard history format)",
    )
    add("--json", action="store_true", help="print each event as one JSON line on stdout")
    add("--debug", action="store_true", help="show tracebacks of errors")
    return common


def build_parser(version: str) -> argparse.ArgumentParser:
    """The parser of ``glassagent [chat|run] [options]``."""
    parser = _Parser(
        prog="glassagent",
        description="A coding agent whose every step is visible: it lists, reads, writes and "
        "edits the files of a folder and, when allowed, runs commands there.",
    )
    parser.add_argument("--version", action="version", version=f"glassagent {version}")
    commands = parser.add_subparsers(dest="command", metavar="{chat,run}", parser_class=_Parser)
    common = _common()
    commands.add_parser(
        "chat",
        parents=[common],
        help="talk with the agent (the default)",
        description="An interactive session. Ctrl-C aborts the current turn; Ctrl-C at the "
        "prompt, Ctrl-D or /exit leaves. /reset starts a new conversation, /history shows it.",
    )
    run = commands.add_parser(
        "run",
        parents=[common],
        help="one turn, not interactive",
        description="One turn. Exit code 0 when it completed, 1 on an error, 2 on bad input, "
        "130 when aborted.",
    )
    run.add_argument("prompt", metavar="PROMPT", help="what to ask the agent")
    return parser


def parse(argv: Sequence[str], version: str) -> Options:
    """Parse the command line (without the program name); no command means ``chat``.

    Raises:
        UsageError: On arguments that do not parse.
        SystemExit: After printing ``--help`` or ``--version``.
    """
    args = list(argv)
    if not args or (args[0] not in _COMMANDS and args[0] not in _HELP_FLAGS):
        args.insert(0, "chat")
    ns = build_parser(version).parse_args(args)
    return Options(
        command=ns.command,
        prompt=getattr(ns, "prompt", None),
        provider=ns.provider,
        model=ns.model,
        base_url=ns.base_url,
        workspace=ns.workspace,
        allow_commands=ns.allow_commands,
        yes=ns.yes,
        max_iterations=ns.max_iterations,
        system=ns.system,
        history=ns.history,
        json=ns.json,
        debug=ns.debug,
    )
