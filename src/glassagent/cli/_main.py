"""`main`: parse, set up, run a command, and turn how it ended into an exit code."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from glassagent import __version__
from glassagent.cli._eval import eval_main
from glassagent.cli._logs import records_shown, same_screen
from glassagent.cli._options import DoctorOptions, Options, ServeOptions, UsageError, parse
from glassagent.cli._rich import INSTALL_HINT, human_view, rich_installed
from glassagent.cli._sandbox import doctor
from glassagent.cli._serve import run_serving, serve_command
from glassagent.cli._session import (
    EXIT_ABORTED,
    EXIT_BAD_INPUT,
    EXIT_ERROR,
    Session,
    chat,
    run_once,
)
from glassagent.cli._setup import BadInput, read_dotenv
from glassagent.cli._view import HumanView, JsonView, View, error_line

EXIT_BROKEN_PIPE = 141
"""Exit code when standard output was closed early (as for a process ended by SIGPIPE)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``glassagent [chat|run|serve|doctor|eval] [options]``; its exit code.

    The console scripts ``glassagent`` and ``ai-agent`` and ``python -m glassagent`` call it.
    Exit codes: 0 when the command completed (``serve``: stopped by Ctrl-C or SIGTERM), 1 on
    an error, 2 on bad input (an unknown provider or model, a missing key, a workspace that
    does not exist, an invalid history or tokens file, a host that needs tokens), 3 when the
    budget stopped ``run``'s turn, 130 when aborted (Ctrl-C), 141 when standard output was
    closed early. ``eval`` has its own (see ``glassagent eval --help``).

    Args:
        argv: The arguments, without the program's name; by default ``sys.argv[1:]``.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["eval"]:
        return eval_main(args[1:])
    try:
        options = parse(args, __version__)
    except UsageError as exc:
        _line(sys.stderr, f"glassagent: {exc}")
        return EXIT_BAD_INPUT
    except SystemExit as exc:  # after --help or --version
        return exc.code if isinstance(exc.code, int) else 0
    if isinstance(options, DoctorOptions):
        return doctor(options, sys.stdout)
    errors = human_view(sys.stderr, colour=_is_terminal(sys.stderr))
    try:
        if isinstance(options, ServeOptions):  # on uvloop when it is installed
            return run_serving(_run(options, errors))
        return asyncio.run(_run(options, errors))
    except BadInput as exc:
        errors.note(f"glassagent: {exc}", "red")
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        return EXIT_ABORTED
    except Exception as exc:  # a failure of the CLI itself or of a provider's setup
        if options.debug:
            import traceback

            traceback.print_exception(exc)
        errors.note(f"glassagent: {error_line(exc)}", "red")
        return EXIT_ERROR


async def _run(options: Options | ServeOptions, errors: HumanView) -> int:
    if isinstance(options, ServeOptions):
        return await _serve(options, errors)
    view = _view(options, errors)
    session = Session(options, view, errors)
    shared = same_screen(sys.stdout, sys.stderr)  # JSON lines all end: no line to end there
    screen = view if shared and isinstance(view, HumanView) else None
    with records_shown(errors, screen):  # a record never starts amid the answer's line
        read_dotenv(Path.cwd(), session.note)
        try:
            if options.command == "run":
                return await run_once(session)
            return await chat(session)
        except asyncio.CancelledError:  # Ctrl-C while the session was being set up
            session.fail("aborted")
            return EXIT_ABORTED


async def _serve(options: ServeOptions, errors: HumanView) -> int:
    def note(text: str) -> None:
        errors.note(f"glassagent: {text}")

    read_dotenv(Path.cwd(), note)
    try:
        return await serve_command(options, note)
    except asyncio.CancelledError:  # Ctrl-C while the model was being set up
        errors.note("glassagent: aborted", "red")
        return EXIT_ABORTED


def _view(options: Options, errors: HumanView) -> View:
    if options.json:
        return JsonView(sys.stdout, errors)
    terminal = _is_terminal(sys.stdout)
    if terminal and not rich_installed():
        errors.note(f"glassagent: {INSTALL_HINT}")
    return human_view(sys.stdout, colour=terminal)


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _line(stream: TextIO, text: str) -> None:
    stream.write(text + "\n")
    stream.flush()


def _silence_stdout() -> None:
    """Point standard output at the null device, so the exit's final flush stays quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # pragma: no cover - no usable stdout at all
        pass
