"""The command line's grammar: `parse` turns arguments into options, or a `UsageError`.

`Options` are those of ``chat`` and ``run``, `ServeOptions` those of ``serve``,
`DoctorOptions` those of ``doctor``.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Literal, NoReturn

from glassagent.server import ServerLimits

DEFAULT_MAX_ITERATIONS = 20
"""Most model calls one turn may make unless ``--max-iterations`` says otherwise."""

DEFAULT_HOST = "127.0.0.1"
"""The address ``serve`` binds unless ``--host`` says otherwise."""

DEFAULT_PORT = 8000
"""The port ``serve`` binds unless ``--port`` says otherwise."""

_COMMANDS = ("chat", "run", "serve", "doctor", "eval")
_ENV_ENTRY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(=.*)?", re.DOTALL)
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
    max_cost: Decimal | None = None
    """The most one turn's model calls may cost, in the model's currency (`None`: no limit)."""
    max_turn_tokens: int | None = None
    """The most tokens one turn's model calls may use (`None`: no limit)."""
    sandbox: Literal["auto", "required", "off"] = "auto"
    """Where commands run: in the sandbox where possible, only there, or never there."""
    allow_network: bool = False
    """Whether sandboxed commands may use the network."""
    env: tuple[str, ...] = ()
    """``--env`` entries: ``NAME`` (its value here) or ``NAME=VALUE``, given to commands."""


@dataclass(frozen=True)
class DoctorOptions:
    """What ``glassagent doctor`` was asked for (nothing yet)."""

    command: Literal["doctor"] = "doctor"
    """Always ``doctor``."""
    debug: bool = False
    """Show tracebacks of errors."""


@dataclass(frozen=True)
class ServeOptions:
    """What ``glassagent serve`` was asked for."""

    provider: str | None
    """The provider's name; `None`: choose one (Gemini with a key, else the local model)."""
    model: str | None
    """The model (for ``local``: a GGUF file); `None`: the provider's default."""
    base_url: str | None
    """The provider's address, when not its default."""
    workspace: Path | None
    """The folder whose workspace tools the server offers; `None`: no tools."""
    allow_commands: bool
    """Whether the workspace tools include ``execute_command``."""
    store: str | None
    """Where chats are kept: a directory, or a database URL (``sqlite+aiosqlite:///...``,
    ``postgresql+asyncpg://...``); `None`: no chats are kept."""
    host: str
    """The address to bind."""
    port: int
    """The port to bind (0: a free one)."""
    tokens: Path | None
    """A JSON file mapping bearer tokens to user ids; `None`: one anonymous user, with a
    random token made at each start (unless `no_token`)."""
    max_iterations: int
    """Most model calls per request (the server's maximum and default)."""
    system: str | None
    """Default system instructions; `None`: the coding agent's with a workspace, else none."""
    max_cost: Decimal | None
    """The most one request's model calls may cost, in the model's currency."""
    max_turn_tokens: int | None
    """The most tokens one request's model calls may use."""
    debug: bool
    """Show tracebacks of errors."""
    sandbox: Literal["auto", "required", "off"] = "auto"
    """Where commands run: in the sandbox where possible, only there, or never there."""
    allow_network: bool = False
    """Whether sandboxed commands may use the network."""
    env: tuple[str, ...] = ()
    """``--env`` entries: ``NAME`` (its value here) or ``NAME=VALUE``, given to commands."""
    no_token: bool = False
    """Serve the anonymous user without any token (loopback hosts only)."""
    allowed_hosts: tuple[str, ...] = ()
    """More host names the server answers to (``--allowed-host``)."""
    allowed_origins: tuple[str, ...] = ()
    """Web origins whose requests are taken (``--allowed-origin``)."""
    durable: str | None = None
    """Run the turns as durable runs in this database (``--durable``); `None`: not."""
    worker_id: str | None = None
    """This server's worker id among the servers of one database (``--worker-id``)."""
    command: Literal["serve"] = "serve"
    """Always ``serve``."""


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


def _amount(text: str) -> Decimal:
    try:
        value = Decimal(text)
    except InvalidOperation:
        value = Decimal(0)
    if not value.is_finite() or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive amount such as 0.05, got {text!r}")
    return value


def _port(text: str) -> int:
    value = int(text) if text.isdigit() else -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 0 to 65535, got {text!r}")
    return value


def _env_entry(text: str) -> str:
    if not _ENV_ENTRY.fullmatch(text):
        raise argparse.ArgumentTypeError(f"expected NAME or NAME=VALUE, got {text!r}")
    return text


def _sandbox_options(parser: argparse.ArgumentParser) -> None:
    """The options of the command sandbox (``chat``, ``run`` and ``serve``)."""
    add = parser.add_argument
    add(
        "--sandbox",
        choices=("auto", "required", "off"),
        default="auto",
        help="where commands run: auto (the default) in a sandbox where this machine can make "
        "one (Linux: namespaces and Landlock; see `glassagent doctor`), else without; "
        "required: only in one; off: never in one",
    )
    add(
        "--allow-network",
        action="store_true",
        help="let sandboxed commands use the network (they have none otherwise)",
    )
    add(
        "--env",
        metavar="NAME[=VALUE]",
        type=_env_entry,
        action="append",
        default=[],
        help="give commands this variable (NAME alone: its value here); repeatable. They get "
        "only PATH, HOME, LANG, LC_*, TERM, USER, LOGNAME, SHELL, TZ and TMPDIR otherwise",
    )


def _shared() -> _Parser:
    """The options every command takes: the model, its instructions and limits."""
    shared = _Parser(add_help=False)
    add = shared.add_argument
    add(
        "--provider",
        metavar="NAME",
        help="the model provider: local, gemini, ollama, llama, openai, openai_compatible, "
        "anthropic or a plugin's name (default: gemini when GEMINI_API_KEY is set, else the "
        "embedded local model)",
    )
    add("--model", metavar="NAME", help="the model (for local: a GGUF file)")
    add("--base-url", metavar="URL", help="the provider's address, e.g. http://127.0.0.1:8080/v1")
    add("--system", metavar="TEXT", help="system instructions, instead of the default ones")
    add(
        "--max-cost",
        metavar="AMOUNT",
        type=_amount,
        help="most a turn's model calls may cost, in the model's currency (e.g. 0.05 for "
        "5 US cents); needs a model with prices",
    )
    add(
        "--max-turn-tokens",
        metavar="N",
        type=_positive,
        help="most tokens (input, output and thinking) a turn's model calls may use",
    )
    add("--debug", action="store_true", help="show tracebacks of errors")
    return shared


def _common() -> _Parser:
    """The options of the coding agent's commands, ``chat`` and ``run``."""
    common = _Parser(add_help=False)
    add = common.add_argument
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
    add(
        "--history",
        metavar="FILE",
        type=Path,
        help="continue the conversation in FILE and save it there (standard history format)",
    )
    add("--json", action="store_true", help="print each event as one JSON line on stdout")
    _sandbox_options(common)
    return common


def _serve_options(serve: argparse.ArgumentParser) -> None:
    """The options of ``serve``."""
    add = serve.add_argument
    add(
        "--max-iterations",
        metavar="N",
        type=_positive,
        default=ServerLimits().max_iterations,
        help="most model calls per request, also the most a request may ask for "
        f"(default: {ServerLimits().max_iterations})",
    )
    add(
        "--store",
        metavar="DIR|URL",
        help="keep chats in DIR, or in a database: sqlite+aiosqlite:///chats.db, "
        "postgresql+asyncpg://user:password@host/db (default: keep none)",
    )
    add(
        "--durable",
        metavar="URL",
        help="run each turn as a durable run kept in this database (sqlite:///turns.sqlite, "
        "or postgresql://user:password@host/db for several servers): it survives a crash "
        "of the server (needs glassagent[durable])",
    )
    add(
        "--worker-id",
        metavar="ID",
        help="with --durable: this server's id among those on the database (default: "
        "host name and process id)",
    )
    add("--host", default=DEFAULT_HOST, help=f"the address to bind (default: {DEFAULT_HOST})")
    add(
        "--port",
        type=_port,
        default=DEFAULT_PORT,
        help=f"the port to bind, 0 for a free one (default: {DEFAULT_PORT})",
    )
    add(
        "--tokens",
        metavar="FILE",
        type=Path,
        help="a JSON object mapping bearer tokens to user ids (without it: one anonymous "
        "user with a random token made at each start, and only a loopback --host)",
    )
    add(
        "--no-token",
        action="store_true",
        help="no token at all (loopback --host only): any program or user of this machine "
        "can then drive the agent and its tools",
    )
    add(
        "--allowed-host",
        metavar="HOST",
        action="append",
        default=[],
        help="also answer requests for HOST (e.g. the server's name behind a proxy); "
        "repeatable; '*' for any",
    )
    add(
        "--allowed-origin",
        metavar="ORIGIN",
        action="append",
        default=[],
        help="also take requests made by web pages of ORIGIN (e.g. https://app.example.com); "
        "repeatable",
    )
    add(
        "--workspace",
        metavar="DIR",
        type=Path,
        help="offer the coding agent's workspace tools on DIR, without asking before changes",
    )
    add(
        "--allow-commands",
        action="store_true",
        help="with --workspace: also offer execute_command (shell commands in DIR)",
    )


def build_parser(version: str) -> argparse.ArgumentParser:
    """The parser of ``glassagent [chat|run|serve] [options]``."""
    parser = _Parser(
        prog="glassagent",
        description="A coding agent whose every step is visible: it lists, reads, writes and "
        "edits the files of a folder and, when allowed, runs commands there.",
    )
    parser.add_argument("--version", action="version", version=f"glassagent {version}")
    commands = parser.add_subparsers(
        dest="command", metavar="{chat,run,serve,doctor,eval}", parser_class=_Parser
    )
    shared, common = _shared(), _common()
    commands.add_parser(
        "chat",
        parents=[shared, common],
        help="talk with the agent (the default)",
        description="An interactive session. Ctrl-C aborts the current turn; Ctrl-C at the "
        "prompt, Ctrl-D or /exit leaves. /reset starts a new conversation, /history shows it.",
    )
    run = commands.add_parser(
        "run",
        parents=[shared, common],
        help="one turn, not interactive",
        description="One turn. Exit code 0 when it completed, 1 on an error, 2 on bad input, "
        "3 when the budget (--max-cost, --max-turn-tokens) stopped it, 130 when aborted.",
    )
    run.add_argument("prompt", metavar="PROMPT", help="what to ask the agent")
    serve = commands.add_parser(
        "serve",
        parents=[shared],
        help="serve the agent over HTTP (POST /api/ai/invoke)",
        description="The invoke API (glassagent.server) on HOST:PORT until Ctrl-C or SIGTERM. "
        "Needs the server extra: pip install 'glassagent[server]'.",
    )
    _serve_options(serve)
    _sandbox_options(serve)
    commands.add_parser(
        "doctor",
        help="show what this machine supports (the command sandbox)",
        description="Shows whether commands can run in a sandbox here, and why not. Exit code "
        "0 when they can, 1 when not.",
    )
    commands.add_parser(
        "eval",
        help="evaluate a model over a dataset, compare reports (glassagent eval --help)",
        add_help=False,
    )
    return parser


def parse(argv: Sequence[str], version: str) -> Options | ServeOptions | DoctorOptions:
    """Parse the command line (without the program name); no command means ``chat``.

    Raises:
        UsageError: On arguments that do not parse.
        SystemExit: After printing ``--help`` or ``--version``.
    """
    args = list(argv)
    if not args or (args[0] not in _COMMANDS and args[0] not in _HELP_FLAGS):
        args.insert(0, "chat")
    ns = build_parser(version).parse_args(args)
    if ns.command == "eval":  # `main` hands `eval` to its own parser (cli/_eval.py)
        raise UsageError("eval has its own options (see `glassagent eval --help`)")
    if ns.command == "doctor":
        return DoctorOptions()
    if ns.command == "serve":
        return ServeOptions(
            provider=ns.provider,
            model=ns.model,
            base_url=ns.base_url,
            workspace=ns.workspace,
            allow_commands=ns.allow_commands,
            store=ns.store,
            host=ns.host,
            port=ns.port,
            tokens=ns.tokens,
            max_iterations=ns.max_iterations,
            system=ns.system,
            max_cost=ns.max_cost,
            max_turn_tokens=ns.max_turn_tokens,
            debug=ns.debug,
            sandbox=ns.sandbox,
            allow_network=ns.allow_network,
            env=tuple(ns.env),
            no_token=ns.no_token,
            allowed_hosts=tuple(ns.allowed_host),
            allowed_origins=tuple(ns.allowed_origin),
            durable=ns.durable,
            worker_id=ns.worker_id,
        )
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
        max_cost=ns.max_cost,
        max_turn_tokens=ns.max_turn_tokens,
        sandbox=ns.sandbox,
        allow_network=ns.allow_network,
        env=tuple(ns.env),
    )
