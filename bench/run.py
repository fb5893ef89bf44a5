"""glassagent's framework overhead next to raw httpx, measured in one run.

Usage: ``python bench/run.py [--k 10] [--n 20] [--concurrency 100] [--rounds 3] [--repeat 3]
[--only openai,gemini] [--peers]``

Starts the fake LLM server (bench/fake_server.py) on 127.0.0.1, runs every driver
(bench/driver.py) in its own process, pinned to another core than the server when
``taskset`` exists, and prints Markdown tables with ratios against the raw-httpx floor
measured in the same run. With ``--repeat N`` every driver runs N times (interleaved) and
each figure is the median of its N values: prefer it on a shared or noisy machine.
``--only`` keeps the drivers whose name contains one of the given words (the raw-httpx floors
always run). The floor keeps as many connections alive as glassagent's clients (256), and
each row shows the connections the driver opened per run (counted by the fake server) and
how busy the server was during the concurrent runs (well below 100 %: it kept up).
Results are also written to bench/results/latest.json.

With ``--peers``, the same task also runs on peer frameworks (pydantic-ai, openai-agents,
smolagents, agno, strands), each installed into its own virtual environment under
bench/.peers/ on first use (see bench/peer_envs.py); a peer that cannot take part is shown as
skipped, with the reason.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from measure import driver_options

HERE = Path(__file__).resolve().parent
PYTHON = sys.executable
TARGETS = {
    "overhead_ms_per_call": 0.3,
    "throughput_ratio": 0.9,
    "import_ratio": 2.0,
    "rss_extra_mb": 15.0,
    "agent_construction_us": 5.0,
}


def pinned(core: int) -> list[str]:
    if shutil.which("taskset") and (os.cpu_count() or 1) > 1:
        return ["taskset", "-c", str(core)]
    return []


def start_server() -> tuple[subprocess.Popen[str], str]:
    server = subprocess.Popen(
        [*pinned(0), PYTHON, str(HERE / "fake_server.py")],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    line = server.stdout.readline()
    if not line.startswith("PORT "):
        server.kill()
        raise SystemExit(f"the fake server did not start: {line!r}")
    return server, f"http://127.0.0.1:{int(line.split()[1])}"


def available_drivers() -> list[str]:
    import glassagent.llm as llm

    names = ["raw_httpx", "raw_httpx_stream", "raw_httpx_sweeping_pool_stream"]
    kinds = [
        k
        for k, cls in (("openai", "OpenAICompatibleClient"), ("ollama", "OllamaClient"))
        if hasattr(llm, cls)
    ]
    if importlib.util.find_spec("google.genai") is not None:
        kinds.append("gemini")
    for kind in kinds:
        names += [f"glassagent_{kind}", f"glassagent_{kind}_stream"]
        if kind == "openai":
            names.append("glassagent_openai_async_tool_stream")
    return names


def import_ms(
    statement: str, python: str = PYTHON, env: dict[str, str] | None = None, repeat: int = 5
) -> float:
    code = f"import time; t = time.perf_counter(); {statement}; print(time.perf_counter() - t)"
    samples = [
        float(
            subprocess.run(
                [python, "-c", code], capture_output=True, text=True, check=True, env=env
            ).stdout
        )
        for _ in range(repeat)
    ]
    return statistics.median(samples) * 1000


def package_count(requirement: str) -> int | str:
    """Installed distributions needed by `requirement` (itself included), extras honoured."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        from packaging.requirements import Requirement
    except ImportError:  # installed with the dev extra; without it the count is unknown
        return "?"

    seen: set[str] = set()
    pending = [(Requirement(requirement), "")]
    while pending:
        req, extra = pending.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": extra}):
            continue
        name = req.name.lower().replace("_", "-")
        try:
            dist = distribution(name)
        except PackageNotFoundError:
            continue
        extras = set(req.extras)
        if name in seen and not extras:
            continue
        seen.add(name)
        for child in dist.requires or []:
            child_req = Requirement(child)
            if child_req.marker is None:
                pending.append((child_req, ""))
            else:
                pending.extend((child_req, e) for e in (extras or {""}))
    return len(seen)


def connections_so_far(base_url: str) -> int:
    """The connections the fake server has accepted, this question's own included."""
    with urllib.request.urlopen(f"{base_url}/_stats", timeout=10) as reply:
        count: int = json.load(reply)["connections"]
    return count


def count_connections(result: dict[str, Any], before: int, base_url: str, args: Any) -> None:
    """Add the connections a driver opened, in all and per run, to its `result`."""
    opened = connections_so_far(base_url) - before - 1  # the question just asked opened one
    runs = 2 + args.n + args.rounds * args.concurrency  # warm-up, latency and throughput runs
    result["connections"] = opened
    result["connections_per_run"] = opened / runs


def median_result(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """One result whose every figure is the median of that figure over `samples`."""
    result = dict(samples[0])
    for key, value in samples[0].items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            result[key] = statistics.median(sample[key] for sample in samples)
    result["repeats"] = len(samples)
    return result


def chosen_drivers(only: str | None) -> list[str]:
    """The drivers to run: all available, or those `only` names (the floors always)."""
    names = available_drivers()
    if not only:
        return names
    words = [w.strip() for w in only.split(",") if w.strip()]
    return [n for n in names if n.startswith("raw_") or any(w in n for w in words)]


def run_drivers(names: list[str], base_url: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Each driver's result, the median of `args.repeat` interleaved runs."""
    samples: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for _ in range(args.repeat):
        for name in names:
            samples[name].append(run_driver(name, base_url, args))
    return [median_result(samples[name]) for name in names]


def run_driver(name: str, base_url: str, args: argparse.Namespace) -> dict[str, Any]:
    command = [*pinned(1), PYTHON, str(HERE / "driver.py"), name]
    command += driver_options(base_url, args)
    before = connections_so_far(base_url)
    out = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
    if out.returncode != 0:
        raise SystemExit(f"driver {name} failed:\n{out.stderr}")
    result: dict[str, Any] = json.loads(out.stdout)
    count_connections(result, before, base_url, args)
    return result


def prepare_peers() -> tuple[dict[str, Path], dict[str, str]]:
    """Each peer's interpreter (installed on first use), and the peers skipped, with why."""
    import peer_envs

    pythons: dict[str, Path] = {}
    skipped: dict[str, str] = {}
    for name in peer_envs.PEERS:
        try:
            pythons[name] = peer_envs.venv_python(name)
        except peer_envs.Skipped as exc:
            skipped[name] = str(exc)
    return pythons, skipped


def run_peers(
    pythons: dict[str, Path], skipped: dict[str, str], base_url: str, args: argparse.Namespace
) -> list[dict[str, Any]]:
    """Measure each installed peer (while the server runs); failures join `skipped`."""
    import peer_envs

    results = []
    for name, python in pythons.items():
        try:
            before = connections_so_far(base_url)
            result = peer_envs.run_driver(name, python, base_url, pinned(1), args)
            count_connections(result, before, base_url, args)
            facts = peer_envs.facts(name, python)
        except peer_envs.Skipped as exc:
            skipped[name] = str(exc)
            continue
        result["peer"] = f"{peer_envs.PEERS[name].distribution} {facts['version']}"
        result["packages"] = facts["packages"]
        results.append(result)
    return results


def peer_imports(results: list[dict[str, Any]], pythons: dict[str, Path]) -> dict[str, float]:
    """The import time of each measured peer, in its own venv (the server stopped)."""
    import peer_envs

    return {
        r["driver"]: import_ms(
            peer_envs.PEERS[r["driver"]].imports, str(pythons[r["driver"]]), peer_envs.env()
        )
        for r in results
        if "peer" in r
    }


def micro() -> dict[str, float]:
    out = subprocess.run(
        [PYTHON, str(HERE / "micro.py")], capture_output=True, text=True, check=True
    )
    result: dict[str, float] = json.loads(out.stdout)
    return result


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def analyse(
    results: list[dict[str, Any]], k: int, imports: dict[str, float]
) -> list[dict[str, Any]]:
    floors = {r["driver"]: r for r in results if r["driver"].startswith("raw_")}
    rows = []
    for r in results:
        floor = floors["raw_httpx_stream" if r["driver"].endswith("_stream") else "raw_httpx"]
        rows.append(
            {
                **r,
                "floor": floor["driver"],
                "latency_ratio": r["latency_ms"] / floor["latency_ms"],
                "overhead_ms_per_call": (r["latency_ms"] - floor["latency_ms"]) / (k + 1),
                "cpu_overhead_ms_per_call": (r["cpu_ms_per_run"] - floor["cpu_ms_per_run"])
                / (k + 1),
                "cpu_ratio": r["cpu_ms_per_run"] / floor["cpu_ms_per_run"],
                "throughput_ratio": r["runs_per_s"] / floor["runs_per_s"],
                "rss_extra_mb": r["peak_rss_mb"] - floor["peak_rss_mb"],
                "import_ms": imports[r["driver"]],
                "import_ratio": imports[r["driver"]] / imports["raw_httpx"],
            }
        )
    return rows


def print_tables(
    rows: list[dict[str, Any]],
    micro_results: dict[str, float],
    meta: dict[str, Any],
    skipped: dict[str, str],
) -> None:
    print(
        f"\n## Framework overhead (K={meta['k']} tool calls + 1 answer per run, N={meta['n']}, "
        f"{meta['concurrency']} concurrent runs)\n"
    )
    print(
        f"Python {meta['python']} on {meta['machine']}, load average {meta['loadavg']}, "
        f"pinned: {meta['pinned']}, medians of {meta['repeat']} run(s) per driver\n"
    )
    print(
        "| driver | latency ms | overhead ms/call | CPU ms/run | CPU overhead ms/call "
        "| runs/s @C | connections/run | server busy @C | peak RSS MB | import ms | packages |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        label = f"{r['driver']} (peer: {r['peer']})" if "peer" in r else r["driver"]
        print(
            f"| {label} | {r['latency_ms']:.2f} ({r['latency_ratio']:.2f}x) "
            f"| {r['overhead_ms_per_call']:+.3f} "
            f"| {r['cpu_ms_per_run']:.2f} ({r['cpu_ratio']:.2f}x) "
            f"| {r['cpu_overhead_ms_per_call']:+.3f} "
            f"| {r['runs_per_s']:.0f} ({r['throughput_ratio']:.2f}x) "
            f"| {r['connections_per_run']:.2f} "
            f"| {r.get('server_busy', float('nan')):.0%} "
            f"| {r['peak_rss_mb']:.1f} ({r['rss_extra_mb']:+.1f}) "
            f"| {r['import_ms']:.0f} ({r['import_ratio']:.2f}x) | {r['packages']} |"
        )
    for name, why in skipped.items():
        why = why.replace("|", "\\|")
        print(f"| {name} (peer) | skipped: {why} | | | | | | | | | |")
    print("\n## Micro-benchmarks\n\n| measure | value |\n|---|---|")
    for name, value in micro_results.items():
        print(f"| {name} | {value:.2f} |")
    print("\n## Targets\n\n| target | driver | value | limit | result |\n|---|---|---|---|---|")
    for r in rows:
        if r["driver"].startswith("raw_") or "peer" in r:
            continue
        for key, limit, better_low in (
            ("overhead_ms_per_call", TARGETS["overhead_ms_per_call"], True),
            ("cpu_overhead_ms_per_call", TARGETS["overhead_ms_per_call"], True),
            ("throughput_ratio", TARGETS["throughput_ratio"], False),
            ("import_ratio", TARGETS["import_ratio"], True),
            ("rss_extra_mb", TARGETS["rss_extra_mb"], True),
        ):
            ok = r[key] <= limit if better_low else r[key] >= limit
            print(f"| {key} | {r['driver']} | {r[key]:.3f} | {limit} | {verdict(ok)} |")
    us = micro_results.get("agent_construction_us")
    if us is not None:
        limit = TARGETS["agent_construction_us"]
        print(f"| agent_construction_us | - | {us:.2f} | {limit} | {verdict(us <= limit)} |")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--k", type=int, default=10, help="tool calls per run")
    parser.add_argument("--n", type=int, default=20, help="sequential runs for the latency median")
    parser.add_argument("--concurrency", type=int, default=100, help="runs at once for throughput")
    parser.add_argument("--rounds", type=int, default=3, help="throughput rounds (median)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per driver")
    parser.add_argument("--repeat", type=int, default=1, help="runs per driver (median)")
    parser.add_argument("--only", help="comma-separated words: run only drivers whose name has one")
    parser.add_argument("--output", type=Path, default=HERE / "results" / "latest.json")
    parser.add_argument(
        "--peers", action="store_true", help="also run the peer frameworks (installs them)"
    )
    args = parser.parse_args()

    peer_pythons, skipped = prepare_peers() if args.peers else ({}, {})
    server, base_url = start_server()
    try:
        drivers = chosen_drivers(args.only)
        results = run_drivers(drivers, base_url, args)
        results += run_peers(peer_pythons, skipped, base_url, args)
    finally:
        server.terminate()
        server.wait(timeout=10)
    statements = {"raw_httpx": "import httpx; httpx.AsyncClient()"}
    imports_by_stmt: dict[str, float] = {}
    imports = {}
    for name in drivers:
        stmt = statements.get(name.replace("_stream", ""), "import glassagent, glassagent.llm")
        if name.startswith("glassagent_gemini"):
            stmt = "import glassagent, glassagent.llm, google.genai"
        imports[name] = imports_by_stmt.setdefault(stmt, import_ms(stmt))
    imports.update(peer_imports(results, peer_pythons))
    for r in results:
        if "peer" in r:
            continue
        root = "httpx" if r["driver"].startswith("raw_") else "glassagent"
        r["packages"] = package_count(root + ("[gemini]" if "gemini" in r["driver"] else ""))
    micro_results = micro()
    meta = {
        "k": args.k,
        "n": args.n,
        "concurrency": args.concurrency,
        "rounds": args.rounds,
        "repeat": args.repeat,
        "python": platform.python_version(),
        "machine": f"{platform.machine()} x{os.cpu_count()}",
        "loadavg": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "pinned": bool(pinned(0)),
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    rows = analyse(results, args.k, imports)
    print_tables(rows, micro_results, meta, skipped)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    output: dict[str, Any] = {"meta": meta, "drivers": rows, "micro": micro_results}
    if args.peers:
        output["peers_skipped"] = skipped
    args.output.write_text(json.dumps(output, indent=2))
    print(f"\nResults written to {args.output}")


if __name__ == "__main__":
    main()
