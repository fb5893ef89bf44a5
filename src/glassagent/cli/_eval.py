"""``glassagent eval run|compare|bfcl``: evaluate a model over a dataset, compare two reports.

Exit codes: 0 when done (``run`` and ``bfcl``: the mean score meets ``--min-score``;
``compare``: no case regressed or was removed), 1 when the mean score is below
``--min-score``, a case regressed or was removed, or the evaluation failed (no cases, or
every attempt failed), 2 on bad input (options, dataset, report files).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from glassagent.cli._options import UsageError, _positive, _shared
from glassagent.cli._options import _Parser as Parser
from glassagent.cli._setup import (
    BadInput,
    budget_for,
    open_client,
    provider_of,
    read_dotenv,
    settings_for,
)

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_ABORTED = 0, 1, 2, 130

TOOL_PROTOCOLS: dict[str, dict[str, Any]] = {
    "native": {"tool_protocol": "native"},
    "json": {"tool_protocol": "json", "json_grammar": False},
    "json-grammar": {"tool_protocol": "json", "json_grammar": True},
}
"""``--tool-protocol``: the client options of each choice (``json-grammar``: replies
constrained to the JSON tool protocol's schema, where the server can)."""

EVAL_SYSTEM = "You are a helpful assistant. Answer the user's request directly and briefly."
"""The system instructions of ``eval run`` unless ``--system`` replaces them."""


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"expected a score from 0 to 1, got {text!r}")
    return value


def _run_options(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--concurrency", metavar="N", type=_positive, default=4, help="attempts at once (4)")
    add("--repeat", metavar="K", type=_positive, default=1, help="attempts per case (1)")
    add("--timeout", metavar="S", type=_seconds, help="seconds each attempt may take")
    add("--max-iterations", metavar="N", type=_positive, default=10, help="model calls (10)")
    add("--report", metavar="FILE", type=Path, help="write the report as an HTML page")
    add("--json", metavar="FILE", type=Path, help="write the report as JSON")
    add("--record", metavar="DIR", type=Path, help="record each attempt's events in DIR")
    add(
        "--min-score",
        metavar="X",
        type=_share,
        help="exit with 1 when the mean score is below X (0 to 1), for CI",
    )
    add("--name", help="the report's name (default: the dataset's)")
    add(
        "--judge",
        action="store_true",
        help="also grade every answer with the same model (LLM-as-judge; a case's rubric is "
        "its metadata's 'rubric'); needed by cases that name the 'judge' evaluator",
    )
    add("--no-progress", action="store_true", help="no progress bar, even on a terminal")


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``glassagent eval {run,compare,bfcl}``."""
    parser = Parser(
        prog="glassagent eval",
        description="Evaluate a model over a dataset of cases, or compare two reports. Exit "
        "code 0 when done, 1 when the mean score is below --min-score or a case regressed, "
        "2 on bad input.",
    )
    commands = parser.add_subparsers(dest="command", metavar="{run,compare,bfcl}", required=True)
    shared = _shared()
    run = commands.add_parser(
        "run",
        parents=[shared],
        help="run a dataset (.jsonl, .yaml or .json) and report",
        description="Each case runs on an agent of the model (with the tools of its "
        "metadata's 'functions', if any); its attempts are scored and summed up in a table.",
    )
    run.add_argument("dataset", metavar="DATASET", type=Path, help="the dataset file")
    _run_options(run)
    compare = commands.add_parser(
        "compare",
        help="what changed between two JSON reports (exit code 1 when a case regressed or "
        "was removed)",
    )
    compare.add_argument("before", metavar="A.json", type=Path, help="the baseline report")
    compare.add_argument("after", metavar="B.json", type=Path, help="the new report")
    compare.add_argument(
        "--report", metavar="FILE", type=Path, help="write the comparison as an HTML page"
    )
    bfcl = commands.add_parser(
        "bfcl",
        parents=[shared],
        help="BFCL's function-calling questions (needs bfcl-eval, or --data)",
        description="A category of the Berkeley Function Calling Leaderboard as a dataset: "
        "each question's functions are the tools, and the calls are scored BFCL's way.",
    )
    bfcl.add_argument("--category", default="simple_python", help="(default: simple_python)")
    bfcl.add_argument("--data", metavar="PATH", help="a bfcl-eval wheel or data folder")
    bfcl.add_argument("--count", metavar="N", type=_positive, help="cases, spread over the set")
    bfcl.add_argument(
        "--tool-protocol",
        choices=tuple(TOOL_PROTOCOLS),
        help="how tools are offered: native, json, or json-grammar (default: the client's)",
    )
    _run_options(bfcl)
    return parser


@dataclass
class _Output:
    out: TextIO
    err: TextIO

    def note(self, text: str) -> None:
        self.err.write(f"glassagent: {text}\n")
        self.err.flush()


def eval_main(argv: Sequence[str], out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run ``glassagent eval ...`` (without ``eval``); its exit code."""
    output = _Output(out or sys.stdout, err or sys.stderr)
    try:
        ns = build_parser().parse_args(list(argv))
    except UsageError as exc:
        output.note(str(exc))
        return EXIT_BAD_INPUT
    except SystemExit as exc:  # after --help
        return exc.code if isinstance(exc.code, int) else 0
    try:
        if ns.command == "compare":
            return _compare(ns, output)
        read_dotenv(Path.cwd(), output.note)
        return asyncio.run(_evaluate(ns, output))
    except BadInput as exc:
        output.note(str(exc))
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return EXIT_ABORTED
    except Exception as exc:
        from glassagent.errors import UserError

        if getattr(ns, "debug", False):
            import traceback

            traceback.print_exception(exc, file=output.err)
        output.note(" ".join(f"{type(exc).__name__}: {exc}".split()))
        return EXIT_BAD_INPUT if isinstance(exc, UserError) else EXIT_FAILED


def _compare(ns: argparse.Namespace, output: _Output) -> int:
    from glassagent.errors import UserError
    from glassagent.evals import Report, compare

    try:
        before, after = Report.load(ns.before), Report.load(ns.after)
    except UserError as exc:
        raise BadInput(str(exc)) from exc
    comparison = compare(before, after)
    comparison.print(file=output.out)
    if ns.report is not None:
        comparison.save_html(ns.report)
        output.note(f"HTML comparison written to {ns.report}")
    if comparison.removed and not comparison.regressed:
        output.note(f"{len(comparison.removed)} case(s) of {ns.before} are not in {ns.after}")
    return EXIT_FAILED if comparison.has_regressions else EXIT_OK


def _dataset(ns: argparse.Namespace) -> Any:
    from glassagent.errors import GlassAgentError
    from glassagent.evals import Dataset, load_bfcl

    try:
        if ns.command == "bfcl":
            return load_bfcl(ns.category, data=ns.data, count=ns.count)
        return Dataset.load(ns.dataset)
    except GlassAgentError as exc:
        raise BadInput(str(exc)) from exc


async def _evaluate(ns: argparse.Namespace, output: _Output) -> int:
    from glassagent import Agent
    from glassagent.evals import Judge, bfcl_agent, evaluate

    dataset = _dataset(ns)  # before the model starts: a bad file costs nothing
    judged = next((case.name for case in dataset if "judge" in case.evaluators), None)
    if judged is not None and not ns.judge:
        raise BadInput(f"the case {judged!r} names the 'judge' evaluator: add --judge")
    provider = provider_of(ns.provider, output.note)
    protocol = getattr(ns, "tool_protocol", None)
    options = TOOL_PROTOCOLS[protocol] if protocol else None
    settings = settings_for(provider)
    async with open_client(provider, ns.model, ns.base_url, output.note, options) as client:
        budget = budget_for(ns.max_cost, ns.max_turn_tokens, client)

        def agent_for(case: Any) -> Agent[Any, Any]:
            if case.metadata.get("functions"):
                return bfcl_agent(client, case, settings=settings)
            system = ns.system or EVAL_SYSTEM
            return Agent(client, system=system, settings=settings, max_iterations=ns.max_iterations)

        factory: Callable[[Any], Agent[Any, Any]] = agent_for
        report = await evaluate(
            factory,
            dataset,
            evaluators=[Judge(client)] if ns.judge else [],
            concurrency=ns.concurrency,
            repeat=ns.repeat,
            timeout=ns.timeout,
            budget=budget,
            record_dir=ns.record,
            name=ns.name,
            progress=False if ns.no_progress else None,
        )
    return _finish(report, ns, output, protocol)


def _finish(report: Any, ns: argparse.Namespace, output: _Output, protocol: str | None) -> int:
    if protocol:
        report = dataclasses.replace(report, config={**report.config, "tool_protocol": protocol})
        if ns.record is not None:  # evaluate saved it without the protocol
            report.save(ns.record / "report.json")
    report.print(file=output.out)
    if ns.json is not None:
        report.save(ns.json)
        output.note(f"report written to {ns.json}")
    if ns.report is not None:
        report.save_html(ns.report)
        output.note(f"HTML report written to {ns.report}")
    if ns.record is not None:
        output.note(f"events recorded in {ns.record / 'cases'}")
    summary = report.summary
    if summary.attempts == 0:
        output.note("the dataset has no cases: nothing was evaluated")
        return EXIT_FAILED
    if all(attempt.error for case in report.cases for attempt in case.attempts):
        output.note(f"every attempt failed ({summary.attempts}): see the errors above")
        return EXIT_FAILED
    mean = summary.mean_score
    if ns.min_score is not None and mean < ns.min_score:
        output.note(f"the mean score {mean:.3f} is below --min-score {ns.min_score:g}")
        return EXIT_FAILED
    return EXIT_OK
