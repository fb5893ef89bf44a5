"""The API reference covers every public module and every top-level name."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest

import glassagent

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "reference"
SRC = ROOT / "src"
PUBLIC_MODULES = sorted(
    m.name for m in pkgutil.iter_modules(glassagent.__path__) if not m.name.startswith("_")
)


def test_the_public_modules_are_found() -> None:
    assert {"agent", "errors", "events", "llm", "testing", "tools"} <= set(PUBLIC_MODULES)


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_every_public_module_has_a_reference_page(name: str) -> None:
    page = REFERENCE / f"{name}.md"
    directive = f"::: glassagent.{name}"
    assert page.is_file(), (
        f"glassagent.{name} has no API reference page: add docs/reference/{name}.md containing "
        f"'{directive}' and one line under 'API reference' in mkdocs.yml's nav."
    )
    assert directive in page.read_text(encoding="utf-8")


def test_the_top_level_reference_links_every_exported_name() -> None:
    text = (REFERENCE / "glassagent.md").read_text(encoding="utf-8")
    linked = re.findall(r"\[`(\w+)`\]\[glassagent\.[\w.]+\]", text)
    assert sorted(linked) == sorted(set(glassagent.__all__) - {"__version__"}), (
        "docs/reference/glassagent.md must link each name of glassagent.__all__ once, "
        "as [`Name`][glassagent.module.Name]."
    )


def _definitions(module: str) -> dict[str, tuple[ast.stmt, ast.stmt | None]]:
    """Top-level definitions of `module`'s source: name -> (statement, the statement after)."""
    path = SRC.joinpath(*module.split(".")).with_suffix(".py")
    if not path.exists():
        path = path.with_suffix("") / "__init__.py"
    body = ast.parse(path.read_text(encoding="utf-8")).body
    found: dict[str, tuple[ast.stmt, ast.stmt | None]] = {}
    for stmt, after in zip(body, [*body[1:], None], strict=True):
        if isinstance(stmt, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            found[stmt.name] = (stmt, after)  # the last definition wins over @overloads
        elif isinstance(stmt, ast.Assign | ast.AnnAssign):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    found[target.id] = (stmt, after)
    return found


def _is_docstring(stmt: ast.stmt | None) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
        and bool(stmt.value.value.strip())
    )


def _undocumented(name: str, stmt: ast.stmt, after: ast.stmt | None) -> list[str]:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return [] if ast.get_docstring(stmt) else [name]
    if not isinstance(stmt, ast.ClassDef):
        return [] if _is_docstring(after) else [name]
    missing = [] if ast.get_docstring(stmt) else [name]
    body = stmt.body
    for field, after_field in zip(body, [*body[1:], None], strict=True):
        if (
            isinstance(field, ast.AnnAssign)
            and isinstance(field.target, ast.Name)
            and not field.target.id.startswith("_")
            and not _is_docstring(after_field)
        ):
            missing.append(f"{name}.{field.target.id}")
    return missing


@pytest.mark.parametrize("name", ["", *PUBLIC_MODULES])
def test_every_public_name_and_field_has_a_docstring(name: str) -> None:
    """What ruff's D rules cannot see: type aliases, constants and dataclass fields."""
    public = f"glassagent.{name}".rstrip(".")
    module = importlib.import_module(public)
    imported = {
        alias.asname or alias.name: node.module
        for node in ast.walk(ast.parse(inspect.getsource(module)))
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
    }
    missing = []
    for attr in module.__all__:
        if attr.startswith("__"):
            continue
        # the private module the face imports it from (``__module__`` names the public face)
        home = imported.get(attr, public)
        stmt, after = _definitions(home)[attr]
        missing += _undocumented(attr, stmt, after)
    assert missing == [], f"{public}: add a docstring to {missing}"
