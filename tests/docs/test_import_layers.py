"""The import graph of glassagent: layers kept, and no cycle between files.

The contracts live in pyproject.toml (``[tool.importlinter]``); ``lint-imports`` checks them in
CI. These tests check the same graph (every import: at module level, in functions, for type
checkers) with grimp, so the test command catches a cycle or an upward import too, and show
that each check does find what it looks for.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import grimp
from importlinter.api import read_configuration

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "glassagent"


def contract(contract_id: str) -> Mapping[str, Any]:
    contracts = read_configuration(str(ROOT / "pyproject.toml"))["contracts_options"]
    return next(c for c in contracts if c.get("id") == contract_id)


def ignored(contract_id: str) -> set[tuple[str, str]]:
    """The imports a contract ignores, as (importer, imported) pairs (no wildcards here)."""
    pairs = (line.split("->") for line in contract(contract_id).get("ignore_imports", ()))
    return {(importer.strip(), imported.strip()) for importer, imported in pairs}


def import_graph() -> grimp.ImportGraph:
    return grimp.build_graph(PACKAGE, cache_dir=None)


def cycles(graph: grimp.ImportGraph, ignore: Iterable[tuple[str, str]] = ()) -> list[list[str]]:
    """The groups of modules that import each other in a circle (Tarjan), largest first."""
    skip = set(ignore)
    edges = {
        module: sorted(
            imported
            for imported in graph.find_modules_directly_imported_by(module)
            if imported.startswith(PACKAGE) and (module, imported) not in skip
        )
        for module in graph.modules
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(edges[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            module, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(edges.get(target, ()))))
                elif target in on_stack:
                    low[module] = min(low[module], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[module])
            if low[module] == index[module]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == module:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return sorted(found, key=len, reverse=True)


def layers() -> list[grimp.Layer]:
    """The layers of the "layers" contract, for grimp ("a | b": independent siblings)."""
    found = []
    for layer in contract("layers")["layers"]:
        independent = ":" not in layer
        names = [name.strip() for name in layer.replace(":", "|").split("|")]
        found.append(grimp.Layer(*names, independent=independent))
    return found


def upward(graph: grimp.ImportGraph) -> list[str]:
    illegal = graph.find_illegal_dependencies_for_layers(layers=layers(), containers={PACKAGE})
    return sorted(
        f"{route.heads} -> {route.tails}" for dependency in illegal for route in dependency.routes
    )


def test_no_two_files_import_each_other_even_through_others() -> None:
    found = cycles(import_graph(), ignored("acyclic"))
    assert found == [], f"import cycles between files: {found}"


def test_no_module_imports_from_a_layer_above_its_own() -> None:
    assert upward(import_graph()) == []


def test_the_checks_find_a_cycle_and_an_upward_import() -> None:
    graph = import_graph()
    # a cycle of three files, through the package's own __init__ as in issue 28
    graph.add_import(importer="glassagent._core.events", imported="glassagent")
    found = cycles(graph, ignored("acyclic"))
    assert len(found) == 1
    assert {"glassagent", "glassagent._core.events"} <= set(found[0])
    assert cycles(graph, {("glassagent._core.events", "glassagent")} | ignored("acyclic")) == []

    graph = import_graph()
    graph.add_import(importer="glassagent._core.messages", imported="glassagent._tools.context")
    assert any("glassagent._core.messages" in line for line in upward(graph))
    assert cycles(graph, ignored("acyclic")) != []  # the tool context imports the messages


def test_only_the_ignored_type_checking_import_closes_a_cycle() -> None:
    ignore = ignored("acyclic")
    assert ignore == {("glassagent._core.errors", "glassagent._core.result")}
    assert cycles(import_graph()) != []  # the check needs the exception it documents


def test_lint_imports_keeps_every_contract() -> None:
    command = [
        sys.executable,
        "-c",
        "from importlinter.cli import lint_imports_command; lint_imports_command()",
        "--no-cache",
    ]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 kept, 0 broken" in done.stdout
