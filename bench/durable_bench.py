"""What a durable step costs: `DurableAgent` next to the plain `Agent`, on SQLite and PostgreSQL.

Run with ``python bench/durable_bench.py [--size 10] [--runs 30] [--repeat 3]
[--backends sqlite,postgresql] [--require-postgres] [--sqlite-dir DIR] [--quick]``.

The model is an in-process `FunctionClient` that answers at once, so every figure is the cost
of the framework and its database, not of a model. One agent serves four kinds of run, told
apart by the prompt (N is ``--size``):

- ``1 answer``: one model call, no tool;
- ``N+1 answers``: N+1 model calls, no tool (the first N answers fail the output check, and
  the run asks again, as it does for a real model's invalid answer);
- ``N rounds``: N rounds of one tool call each, then the answer (N+1 model calls, N tool calls);
- ``N at once``: one answer asking for N tool calls, which run concurrently, then the answer
  (2 model calls, N tool calls).

Each database runs in a process of its own (DBOS is one per process), on a new database: a
temporary SQLite file, or a database of a throwaway PostgreSQL cluster (initdb and pg_ctl as in
tests/support/postgres.py, on 127.0.0.1, fsync on, as a deployment runs it; skipped when its
binaries are missing, unless ``--require-postgres``). In it, plain and durable runs alternate,
``--runs`` of each kind after a warm-up; each figure is their median, then the median over
``--repeat`` processes per database. What durability adds to a run (durable minus plain) gives:

- per model call step: the slope from ``1 answer`` to ``N+1 answers``;
- per tool call step, one at a time: ``N rounds`` minus ``N+1 answers``, over N;
- per tool call step, N at once: ``N at once`` minus two answers, over N;
- per run: ``1 answer`` minus one model call step (the workflow's start and end).

Every figure comes with the CPU time this process spent (all its threads, SQLite's work
included, PostgreSQL's server not): what is not CPU is waiting, for the disk or the server.
The SQL statements and commits DBOS makes are counted the same way, in a few untimed runs, and
the floors under them are measured apart: an fsync and a commit of SQLite in the same folder
(``--sqlite-dir``, a temporary folder by default), a round trip and a commit of the PostgreSQL
cluster. DBOS's import, launch (on the new database, once per process) and stop are timed once
per process. Results go to bench/results/durable.json (``--output``). Timings are
machine-dependent and asserted nowhere; ``--quick`` (N=4, 5 runs, one process per database) is
a smoke test that ends in seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from importlib.metadata import version
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # tests.support.postgres: the tests' throwaway cluster

from glassagent import Agent, LLMResponse, Message, ModelSettings, ToolCall, tool  # noqa: E402
from glassagent.llm import ToolDefinition  # noqa: E402
from glassagent.testing import FunctionClient  # noqa: E402

BACKENDS = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}
KINDS = ("answer", "answers", "rounds", "at_once")
FIGURES = ("plain_ms", "plain_cpu_ms", "durable_ms", "durable_cpu_ms")
WORKING = "working"  # every answer but the last: the same text, asking for tools or not
WARM_UP = 3
COUNT_PASSES = 3  # statements are counted as the least of a few runs: DBOS's pollers add some
WORKER_SECONDS = 600
NO_POSTGRES = (
    "no initdb and pg_ctl on PATH or in /usr/lib/postgresql/*/bin (apt-get install postgresql)"
)


# ---- the agent -----------------------------------------------------------------------------


def shapes(n: int) -> dict[str, tuple[str, int, int, str]]:
    """Each kind of run: its label, model calls, tool calls and prompt."""
    return {
        "answer": ("1 answer", 1, 0, "answers 1"),
        "answers": (f"{n + 1} answers", n + 1, 0, f"answers {n + 1}"),
        "rounds": (f"{n} rounds of 1 tool call", n + 1, n, f"rounds {n}"),
        "at_once": (f"{n} tool calls at once", 2, n, f"at_once {n}"),
    }


@tool
async def count(n: int) -> int:
    """Return n + 1.

    Args:
        n: The number to count from.
    """
    return n + 1


def answer(
    messages: tuple[Message, ...],
    tools: tuple[ToolDefinition, ...],
    system: str | None,
    settings: ModelSettings | None,
) -> LLMResponse | str:
    """The scripted model: what the prompt (``<kind> <size>``) asks, from the messages so far."""
    kind, size = next(m.content for m in messages if m.role == "user").split()
    n, results = int(size), sum(1 for m in messages if m.role == "tool")
    if kind == "answers":
        asked = sum(1 for m in messages if m.role == "user")
        return size if asked >= n else WORKING
    if kind == "rounds" and results < n:
        call = ToolCall(f"call_{results}", "count", {"n": results})
        return LLMResponse(WORKING, tool_calls=(call,))
    if kind == "at_once" and results == 0:
        calls = tuple(ToolCall(f"call_{i}", "count", {"n": i}) for i in range(n))
        return LLMResponse(WORKING, tool_calls=calls)
    return size


def make_agent(n: int) -> Agent[Any, int]:
    """The agent every run uses: an integer answer, asked again while it is not one."""
    return Agent(
        FunctionClient(answer),
        [count],
        output_type=int,
        output_mode="prompted",
        output_retries=n + 1,
        max_iterations=2 * n + 5,
    )


# ---- one database, in its own process ------------------------------------------------------


class Statements:
    """Counts the SQL statements and commits of every SQLAlchemy engine while it listens."""

    def __init__(self) -> None:
        self.statements = self.commits = 0
        self._lock = threading.Lock()

    def _statement(self, *args: Any) -> None:
        with self._lock:
            self.statements += 1

    def _commit(self, *args: Any) -> None:
        with self._lock:
            self.commits += 1

    @contextmanager
    def listening(self) -> Iterator[None]:
        from sqlalchemy import Engine, event

        event.listen(Engine, "before_cursor_execute", self._statement)
        event.listen(Engine, "commit", self._commit)
        try:
            yield
        finally:
            event.remove(Engine, "before_cursor_execute", self._statement)
            event.remove(Engine, "commit", self._commit)


async def timed(run: Callable[..., Any], prompt: str, **options: Any) -> tuple[float, float]:
    """Milliseconds of one run, wall and CPU (this process, all its threads); checked."""
    started, cpu = time.perf_counter(), time.process_time()
    result = await run(prompt, **options)
    elapsed = (time.perf_counter() - started) * 1000, (time.process_time() - cpu) * 1000
    assert result.output == int(prompt.split()[1]), (prompt, result.output)
    return elapsed


async def count_statements(durable: Any, n: int) -> dict[str, dict[str, int]]:
    """The SQL statements and commits of a durable run of each kind (the least of a few)."""
    counts = {}
    for kind, (_, _, _, prompt) in shapes(n).items():
        seen = []
        for i in range(COUNT_PASSES):
            counter = Statements()
            with counter.listening():
                await durable.run(prompt, run_id=f"{kind}-count-{i}")
            seen.append((counter.statements, counter.commits))
        counts[kind] = {"statements": min(s for s, _ in seen), "commits": min(c for _, c in seen)}
    return counts


async def measure_runs(durable: Any, agent: Agent[Any, int], n: int, runs: int) -> dict[str, Any]:
    """Plain and durable runs of each kind, alternating: the median of each figure."""
    samples: dict[str, dict[str, list[float]]] = {figure: {} for figure in FIGURES}
    for i in range(WARM_UP + runs):
        for kind, (_, _, _, prompt) in shapes(n).items():
            plain = await timed(agent.run, prompt)
            durable_run = await timed(durable.run, prompt, run_id=f"{kind}-{i}")
            if i >= WARM_UP:
                for figure, value in zip(FIGURES, plain + durable_run, strict=True):
                    samples[figure].setdefault(kind, []).append(value)
    medians = {
        figure: {kind: statistics.median(values) for kind, values in by_kind.items()}
        for figure, by_kind in samples.items()
    }
    return {**medians, "counts": await count_statements(durable, n)}


async def worker(database_url: str, n: int, runs: int) -> dict[str, Any]:
    """Everything measured in one process on one new database."""
    started = time.perf_counter()
    import dbos  # noqa: F401  # timed: entering a durable agent imports it

    import_ms = (time.perf_counter() - started) * 1000
    from glassagent.durable import DurableAgent

    agent = make_agent(n)
    durable = DurableAgent(agent, name="bench-durable", database_url=database_url)
    started = time.perf_counter()
    async with durable:
        launch_ms = (time.perf_counter() - started) * 1000
        result = await measure_runs(durable, agent, n, runs)
        started = time.perf_counter()
    stop_ms = (time.perf_counter() - started) * 1000
    return {**result, "import_ms": import_ms, "launch_ms": launch_ms, "stop_ms": stop_ms}


def run_worker(backend: str, database_url: str, args: argparse.Namespace) -> dict[str, Any]:
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", database_url]
    command += ["--size", str(args.size), "--runs", str(args.runs)]
    out = subprocess.run(
        command, capture_output=True, text=True, timeout=WORKER_SECONDS, check=False, cwd=args.tmp
    )
    if out.returncode != 0:
        raise SystemExit(f"the {backend} worker failed:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.splitlines()[-1])
    return result


# ---- the databases and their floors --------------------------------------------------------


def median_ms(call: Callable[[], object], times: int) -> float:
    samples = []
    for _ in range(times):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def sqlite_floors(folder: Path) -> dict[str, float]:
    """One fsync of a small write, and one SQLite commit of a row, in `folder`."""
    with (folder / "fsync.bin").open("wb") as out:

        def write() -> None:
            out.write(b"x" * 100)
            out.flush()
            os.fsync(out.fileno())

        fsync_ms = median_ms(write, 50)
    db = sqlite3.connect(folder / "floor.sqlite")  # rollback journal, synchronous=FULL
    try:
        db.execute("CREATE TABLE t (x TEXT)")
        db.commit()

        def insert() -> None:
            db.execute("INSERT INTO t VALUES ('row')")
            db.commit()

        commit_ms = median_ms(insert, 50)
    finally:
        db.close()
    return {"fsync_ms": fsync_ms, "sqlite_commit_ms": commit_ms}


def postgres_floors(url: str) -> dict[str, Any]:
    """A round trip (``SELECT 1``) and a committed one-row insert on the cluster."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as db:
        db.execute("CREATE TABLE floor (x TEXT)")
        server = str(db.execute("SHOW server_version").fetchone()[0])  # type: ignore[index]
        round_trip_ms = median_ms(lambda: db.execute("SELECT 1").fetchone(), 200)
        commit_ms = median_ms(lambda: db.execute("INSERT INTO floor VALUES ('row')"), 50)
    return {"server": server, "round_trip_ms": round_trip_ms, "pg_commit_ms": commit_ms}


@contextmanager
def postgres(args: argparse.Namespace) -> Iterator[Callable[[str], str] | str]:
    """A database maker on a throwaway cluster, or why there is none."""
    if "postgresql" not in args.backends:
        yield "not asked for (--backends)"
        return
    from tests.support.postgres import cluster, find_bindir

    bindir = find_bindir()
    if bindir is None:
        if args.require_postgres:
            raise SystemExit(f"--require-postgres: PostgreSQL is missing: {NO_POSTGRES}")
        yield NO_POSTGRES
        return
    with cluster(bindir, durable=True) as running:

        def database(name: str) -> str:
            url = running.create_database(name)
            return url.replace("postgresql+asyncpg://", "postgresql://", 1)

        yield database


def filesystem(path: Path) -> str:
    """The type of the file system `path` is on (Linux), or ``?``."""
    try:
        mounts = [line.split() for line in Path("/proc/self/mounts").read_text().splitlines()]
    except OSError:
        return "?"
    best = max((m for m in mounts if str(path.resolve()).startswith(m[1])), key=lambda m: len(m[1]))
    return best[2]


# ---- measuring and reporting ---------------------------------------------------------------


def measure_all(
    args: argparse.Namespace, postgres_db: Callable[[str], str] | None
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, Any]]:
    """The workers' results by database (``--repeat`` each, interleaved), and the floors."""
    floors: dict[str, Any] = {}
    backends = [b for b in args.backends if b == "sqlite" or postgres_db is not None]
    if "sqlite" in backends:
        floors |= sqlite_floors(args.tmp)
    if postgres_db is not None:
        floors |= postgres_floors(postgres_db("floors"))
    samples: dict[str, list[dict[str, Any]]] = {backend: [] for backend in backends}
    for repeat in range(args.repeat):
        for backend in backends:
            if backend == "sqlite":
                url = f"sqlite:///{args.tmp / f'bench-{repeat}.sqlite'}"
            else:
                assert postgres_db is not None
                url = postgres_db(f"bench_{repeat}")
            samples[backend].append(run_worker(backend, url, args))
    return samples, floors


def per_step(added: dict[str, float], n: int) -> dict[str, float]:
    """What one step of each sort adds, from what each kind of run adds (see the docstring)."""
    model = (added["answers"] - added["answer"]) / n
    return {
        "model_step": model,
        "tool_step": (added["rounds"] - added["answers"]) / n,
        "tool_step_at_once": (added["at_once"] - added["answer"] - model) / n,
        "run": added["answer"] - model,
    }


def analyse(samples: dict[str, list[dict[str, Any]]], n: int) -> dict[str, Any]:
    """Per-run rows and per-step figures, from the medians of every worker."""
    every = [s for runs in samples.values() for s in runs]
    plain = {
        figure: {kind: statistics.median(s[figure][kind] for s in every) for kind in KINDS}
        for figure in ("plain_ms", "plain_cpu_ms")
    }
    rows, steps = [], []
    for backend, runs in samples.items():
        durable = {
            figure: {kind: statistics.median(s[figure][kind] for s in runs) for kind in KINDS}
            for figure in ("durable_ms", "durable_cpu_ms")
        }
        added = {
            "ms": {k: durable["durable_ms"][k] - plain["plain_ms"][k] for k in KINDS},
            "cpu_ms": {k: durable["durable_cpu_ms"][k] - plain["plain_cpu_ms"][k] for k in KINDS},
        }
        for kind, (label, model_calls, tool_calls, _) in shapes(n).items():
            figures = {f: by_kind[kind] for f, by_kind in (plain | durable).items()}
            rows.append(
                {"backend": backend, "run": kind, "label": label, "model_calls": model_calls}
                | {"tool_calls": tool_calls, **figures}
                | {"added_ms": added["ms"][kind], "added_cpu_ms": added["cpu_ms"][kind]}
            )
        counted = {
            what: per_step({k: float(min(s["counts"][k][what] for s in runs)) for k in KINDS}, n)
            for what in ("statements", "commits")
        }
        step: dict[str, Any] = {"backend": backend}
        for unit, by_kind in added.items():
            step |= {f"{name}_{unit}": value for name, value in per_step(by_kind, n).items()}
        for what, figures in counted.items():
            step |= {f"{what}_per_{name}": value for name, value in figures.items()}
        for once in ("import", "launch", "stop"):
            step[f"{once}_ms"] = statistics.median(s[f"{once}_ms"] for s in runs)
        steps.append(step)
    return {"runs": rows, "steps": steps}


def run_table(results: dict[str, Any], names: list[str]) -> None:
    print(
        "| run | model calls | tool calls | plain ms |"
        + "".join(f" {b} ms | added ms | of which CPU |" for b in names)
    )
    print("|---|---:|---:|---:|" + "---:|---:|---:|" * len(names))
    for kind in KINDS:
        row = [r for r in results["runs"] if r["run"] == kind]
        cells = "".join(
            f" {r['durable_ms']:.2f} | +{r['added_ms']:.2f} | {r['added_cpu_ms']:.2f} |"
            for r in row
        )
        first = row[0]
        print(
            f"| {first['label']} | {first['model_calls']} | {first['tool_calls']} "
            f"| {first['plain_ms']:.2f} |{cells}"
        )


def step_table(results: dict[str, Any], names: list[str]) -> None:
    n = results["meta"]["size"]
    print("| added by durability |" + "".join(f" {b} ms | of which CPU |" for b in names))
    print("|---|" + "---:|---:|" * len(names))
    for title, key in (
        ("per model call step", "model_step"),
        ("per tool call step, one at a time", "tool_step"),
        (f"per tool call step, {n} at once", "tool_step_at_once"),
        ("per run (workflow start and end)", "run"),
    ):
        cells = "".join(
            f" {s[f'{key}_ms']:.2f} | {s[f'{key}_cpu_ms']:.2f} |" for s in results["steps"]
        )
        print(f"| {title} |{cells}")
    print()
    print("| once, or counted |" + "".join(f" {b} |" for b in names))
    print("|---|" + "---:|" * len(names))
    for title, key in (
        ("SQL statements / commits per model call step", "model_step"),
        ("SQL statements / commits per tool call step", "tool_step"),
        ("SQL statements / commits per run", "run"),
    ):
        cells = "".join(
            f" {s[f'statements_per_{key}']:.1f} / {s[f'commits_per_{key}']:.1f} |"
            for s in results["steps"]
        )
        print(f"| {title} |{cells}")
    for title, key in (
        ("import dbos, ms", "import_ms"),
        ("DBOS launch on a new database (once per process), ms", "launch_ms"),
        ("DBOS stop, ms", "stop_ms"),
    ):
        print(f"| {title} |" + "".join(f" {s[key]:.0f} |" for s in results["steps"]))


def report(results: dict[str, Any]) -> None:
    meta, floors = results["meta"], results["floors"]
    print(
        f"Python {meta['python']}, {meta['cpu_count']} cores ({meta['processor']}), "
        f"dbos {meta['dbos']}, SQLAlchemy {meta['sqlalchemy']}, SQLite {meta['sqlite']}"
        + (f", PostgreSQL {floors['server']}" if "server" in floors else "")
        + f"; SQLite files on {meta['filesystem']}; load average {meta['loadavg']:.1f}; "
        f"medians of {meta['runs']} runs, median of {meta['repeat']} process(es) per database; "
        "the model answers at once, in process; CPU: this process's, all threads"
    )
    print()
    names = [BACKENDS[s["backend"]] for s in results["steps"]]
    run_table(results, names)
    print()
    step_table(results, names)
    print()
    if "fsync_ms" in floors:
        print(
            f"- floors, SQLite: one fsync of a small write {floors['fsync_ms']:.2f} ms, one "
            "committed insert (rollback journal, synchronous=FULL) "
            f"{floors['sqlite_commit_ms']:.2f} ms"
        )
    if "round_trip_ms" in floors:
        print(
            f"- floors, PostgreSQL (127.0.0.1, fsync on): a round trip (SELECT 1) "
            f"{floors['round_trip_ms']:.3f} ms, a committed one-row insert "
            f"{floors['pg_commit_ms']:.2f} ms"
        )
    for backend, reason in results["skipped"].items():
        print(f"- {BACKENDS[backend]}: skipped: {reason}")


def machine(args: argparse.Namespace) -> dict[str, Any]:
    import glassagent

    return {
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "processor": platform.processor() or platform.machine(),
        "platform": platform.platform(),
        "loadavg": os.getloadavg()[0],
        "glassagent": glassagent.__version__,
        "dbos": version("dbos"),
        "sqlalchemy": version("sqlalchemy"),
        "sqlite": sqlite3.sqlite_version,
        "filesystem": filesystem(args.tmp),
        "size": args.size,
        "runs": args.runs,
        "repeat": args.repeat,
        "quick": args.quick,
    }


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--size", type=int, help="N: model calls and tool calls per run (10)")
    parser.add_argument("--runs", type=int, help="timed runs of each kind per process (30)")
    parser.add_argument("--repeat", type=int, help="processes per database, interleaved (3)")
    parser.add_argument("--backends", default="sqlite,postgresql", help="comma-separated")
    parser.add_argument(
        "--require-postgres", action="store_true", help="fail instead of skipping PostgreSQL"
    )
    parser.add_argument("--quick", action="store_true", help="a smoke test: N=4, 5 runs, once")
    parser.add_argument(
        "--sqlite-dir", type=Path, help="where the SQLite files go (a temporary folder in it)"
    )
    parser.add_argument("--output", type=Path, default=HERE / "results" / "durable.json")
    parser.add_argument("--worker", metavar="DATABASE_URL", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    defaults = (4, 5, 1) if args.quick else (10, 30, 3)
    for name, default in zip(("size", "runs", "repeat"), defaults, strict=True):
        if getattr(args, name) is None:
            setattr(args, name, default)
    args.backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = set(args.backends) - set(BACKENDS)
    if unknown or not args.backends:
        parser.error(f"--backends takes {', '.join(BACKENDS)}, not {args.backends}")
    if args.size < 2:
        parser.error("--size must be 2 or more")
    return args


def main() -> None:
    args = parse()
    if args.worker:
        print(json.dumps(asyncio.run(worker(args.worker, args.size, args.runs))))
        return
    with tempfile.TemporaryDirectory(prefix="glassagent-durable-", dir=args.sqlite_dir) as tmp:
        args.tmp = Path(tmp)
        meta = machine(args)
        with postgres(args) as postgres_db:
            database = postgres_db if callable(postgres_db) else None
            samples, floors = measure_all(args, database)
    skipped = {} if callable(postgres_db) else {"postgresql": postgres_db}
    results = {"meta": meta, "floors": floors, "skipped": skipped, **analyse(samples, args.size)}
    results["samples"] = samples
    report(results)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nWritten to {args.output}")


if __name__ == "__main__":
    main()
