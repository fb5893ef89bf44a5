"""Run the documentation's runnable examples, so the docs cannot drift from the code.

The convention (also described on the docs' "Writing the docs" page):

- A fenced block opened with ```` ```{.python .runnable} ```` is executed. The runnable blocks
  of one page run in order in one namespace, like the cells of a notebook, so a page may build
  an example up step by step. Top-level ``await``, ``async for`` and ``async with`` are allowed,
  as in Jupyter.
- A ```` ```{.text .output} ```` block right after a runnable block must equal what that block
  printed.
- Plain ```` ```python ```` blocks are illustrations (for instance they need a real provider) and
  are not run.
- Runnable blocks use the `glassagent.testing` clients: no network, no API keys. The suite's
  guards (``tests/conftest.py``) apply to them as to every other test.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import io
import re
import sys
import types
from collections.abc import Iterator
from contextlib import redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
KNOWN_CLASSES = {"runnable", "output"}

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")


@dataclass(frozen=True)
class Block:
    """One fenced block of a Markdown page."""

    path: Path
    line: int  # 1-based line of the block's first code line
    info: str
    code: str

    @property
    def classes(self) -> list[str]:
        """The block's classes: ``{.python .runnable}`` gives ``["python", "runnable"]``."""
        if self.info.startswith("{"):
            unquoted = re.sub(r'"[^"]*"', "", self.info)
            return re.findall(r"(?:^|[{\s])\.([\w-]+)", unquoted)
        return self.info.split()[:1]

    @property
    def runnable(self) -> bool:
        return "runnable" in self.classes

    @property
    def output(self) -> bool:
        return "output" in self.classes

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line - 1}"


def fenced_blocks(path: Path) -> Iterator[Block]:
    """Every fenced block of a page, including those indented in admonitions and tabs."""
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if match is None:
            i += 1
            continue
        indent, fence = match["indent"], match["fence"]
        body: list[str] = []
        j = i + 1
        while j < len(lines):
            stripped = lines[j].strip()
            if stripped.startswith(fence) and set(stripped) == {fence[0]}:
                break
            body.append(lines[j].removeprefix(indent))
            j += 1
        yield Block(path, i + 2, match["info"].strip(), "\n".join(body) + "\n")
        i = j + 1


PAGES = sorted(DOCS.rglob("*.md"))
RUNNABLE_PAGES = [p for p in PAGES if any(b.runnable for b in fenced_blocks(p))]


def run_block(block: Block, module: types.ModuleType) -> str:
    """Execute one block in `module`'s namespace and return what it printed.

    The source is padded so tracebacks point at the right line of the Markdown page.
    """
    source = "\n" * (block.line - 1) + block.code
    code = compile(
        source, str(block.path), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True
    )
    printed = io.StringIO()
    with redirect_stdout(printed):
        if code.co_flags & inspect.CO_COROUTINE:
            asyncio.run(eval(code, module.__dict__))
        else:
            exec(code, module.__dict__)
    return printed.getvalue()


@pytest.mark.parametrize("page", RUNNABLE_PAGES, ids=lambda p: str(p.relative_to(DOCS)))
def test_runnable_examples_run_and_print_what_the_page_shows(
    page: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = "docs_" + re.sub(r"\W", "_", str(page.relative_to(DOCS).with_suffix("")))
    module = types.ModuleType(name)
    monkeypatch.setitem(sys.modules, name, module)
    printed: str | None = None
    for block in fenced_blocks(page):
        if block.runnable:
            printed = run_block(block, module)
        elif block.output:
            assert printed is not None, f"{block.where}: an output block must follow a runnable one"
            assert printed.rstrip("\n") == block.code.rstrip("\n"), f"{block.where}: output differs"
            printed = None
        else:
            printed = None


def test_the_docs_have_runnable_examples() -> None:
    assert {p.relative_to(DOCS).as_posix() for p in RUNNABLE_PAGES} >= {
        "index.md",
        "getting-started.md",
    }


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(DOCS)))
def test_block_markers_are_spelled_as_the_convention_says(page: Path) -> None:
    for block in fenced_blocks(page):
        if not block.info.startswith("{"):
            continue
        language, *classes = block.classes
        assert set(classes) <= KNOWN_CLASSES, f"{block.where}: unknown marker in {block.info!r}"
        if block.runnable:
            assert language == "python", f"{block.where}: only Python blocks can be runnable"


def test_the_block_reader_finds_indented_and_nested_blocks(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "Intro\n\n"
        "```{.python .runnable}\nx = 1\n```\n\n"
        "!!! note\n    ````markdown\n    ```python\n    y = 2\n    ```\n    ````\n\n"
        '```{.text .output title="a .b"}\nhi\n```\n',
        encoding="utf-8",
    )
    blocks = list(fenced_blocks(page))
    assert [(b.line, b.classes, b.code) for b in blocks] == [
        (4, ["python", "runnable"], "x = 1\n"),
        (9, ["markdown"], "```python\ny = 2\n```\n"),
        (15, ["text", "output"], "hi\n"),
    ]
