"""Check every code block of README.md and of the docs, so no snippet drifts from the code.

The convention (also described on the docs' "Writing the docs" page):

- A fenced block opened with ```` ```{.python .runnable} ```` is executed. In README.md, which
  GitHub highlights only by the first word of the fence, the same marker is spelled
  ```` ```python runnable ````. The runnable blocks of one page run in order in one namespace,
  like the cells of a notebook, so a page may build an example up step by step. Top-level
  ``await``, ``async for`` and ``async with`` are allowed, as in Jupyter. Each page runs in
  a fresh temporary working directory, so a block may write files such as ``weather.jsonl``.
- A ```` ```{.text .output} ```` block (README.md: ```` ```text output ````) right after a
  runnable block must equal what that block printed.
- Runnable blocks use the `glassagent.testing` clients: no network, no API keys. The suite's
  guards (``tests/conftest.py``) apply to them as to every other test.
- A plain ```` ```python ```` block is an illustration, for code that needs what the tests do
  not have: a provider's key, a model or MCP server, an exporter, a port to serve on. It is
  not run, but checked: it compiles (top-level ``await`` allowed); its ``from glassagent...
  import`` and ``import glassagent...`` name public modules and names; an attribute of an
  imported glassagent name (``Agent.run_sync``) exists, and a call of one
  (``ModelSettings(temperature=0)``) fits its signature; and a glassagent name it uses is
  imported by it or by a Python block before it on the page. Other names (``client``,
  ``agent``, ``tools``) stand for the reader's own objects.
- In ```` ```bash ````, ```` ```console ```` and ```` ```sh ```` blocks, each command that runs
  the CLI (``glassagent``, ``ai-agent``, ``.venv/bin/glassagent``, ``python -m glassagent``)
  must be accepted by the CLI's own option parser. Commands with a shell variable (``$``) or
  a ``...`` placeholder are not parsed: their arguments are not real. ``#`` comments and
  redirections are ignored; ``&&``, ``;`` and pipes separate commands.
- A page whose commands set up ``.venv`` and use ``.venv/bin/...`` without activating it
  (``. .venv/bin/activate``) must keep doing so: a later bare ``glassagent``, ``pip``,
  ``python``, ``pytest`` or ``mkdocs`` would run another installation, or none.
- ``pip install glassagent...`` by name, anywhere on a page (commands, prose, comments), must
  say, in its block or paragraph or the one before or after, that the package is not
  published yet; installs from the checkout (``pip install -e ".[extra]"``) work as they are.
"""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

from tests.support.docs import (
    DOCS,
    KNOWN_CLASSES,
    README,
    SHELLS,
    Block,
    PageNames,
    ShellState,
    commands,
    fenced_blocks,
    install_problems,
    page_id,
    python_problems,
    run_block,
    shell_problems,
)

PAGES = [README, *sorted(DOCS.rglob("*.md"))]
RUNNABLE_PAGES = [p for p in PAGES if any(b.runnable for b in fenced_blocks(p))]


def python_blocks(page: Path) -> list[Block]:
    return [b for b in fenced_blocks(page) if b.language == "python"]


@pytest.mark.parametrize("page", RUNNABLE_PAGES, ids=page_id)
def test_runnable_examples_run_and_print_what_the_page_shows(
    page: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    name = "docs_" + re.sub(r"\W", "_", page_id(page).removesuffix(".md"))
    module = types.ModuleType(name)
    monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.chdir(tmp_path)
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
    assert {page_id(p) for p in RUNNABLE_PAGES} >= {
        "README.md",
        "docs/index.md",
        "docs/getting-started.md",
    }
    quickstart = python_blocks(README)[0]
    assert quickstart.runnable, f"{quickstart.where}: the README's Quickstart must run"


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_block_markers_are_spelled_as_the_convention_says(page: Path) -> None:
    for block in fenced_blocks(page):
        language, *classes = block.classes or [""]
        if not classes:
            continue
        assert set(classes) <= KNOWN_CLASSES, f"{block.where}: unknown marker in {block.info!r}"
        if block.runnable:
            assert language == "python", f"{block.where}: only Python blocks can be runnable"
        if page == README:
            assert not block.info.startswith("{"), (
                f"{block.where}: GitHub highlights README.md's blocks by the fence's first word: "
                f"write ```{' '.join(block.classes)}"
            )
        else:
            assert block.info.startswith("{"), (
                f"{block.where}: write ```{{{' '.join('.' + c for c in block.classes)}}}"
            )


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_python_blocks_compile_and_name_what_exists(page: Path) -> None:
    names = PageNames()
    problems = [
        f"{block.where}: {problem}"
        for block in python_blocks(page)
        for problem in python_problems(block, names)
    ]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_shell_blocks_run_commands_that_exist(page: Path) -> None:
    state = ShellState()
    problems = [
        f"{block.where}: {problem}"
        for block in fenced_blocks(page)
        if block.language in SHELLS
        for problem in shell_problems(block, state)
    ]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_installs_of_the_project_work_before_it_is_published(page: Path) -> None:
    problems = install_problems(page)
    assert not problems, "\n".join(problems)


# ---- the checks themselves ----------------------------------------------------------------


def write_page(tmp_path: Path, text: str) -> Path:
    page = tmp_path / "page.md"
    page.write_text(text, encoding="utf-8")
    return page


def test_the_block_reader_finds_indented_and_nested_blocks(tmp_path: Path) -> None:
    page = write_page(
        tmp_path,
        "Intro\n\n"
        "```{.python .runnable}\nx = 1\n```\n\n"
        "!!! note\n    ````markdown\n    ```python\n    y = 2\n    ```\n    ````\n\n"
        '```{.text .output title="a .b"}\nhi\n```\n\n'
        "```python runnable\nz = 3\n```\n",
    )
    blocks = list(fenced_blocks(page))
    assert [(b.line, b.classes, b.code) for b in blocks] == [
        (4, ["python", "runnable"], "x = 1\n"),
        (9, ["markdown"], "```python\ny = 2\n```\n"),
        (15, ["text", "output"], "hi\n"),
        (19, ["python", "runnable"], "z = 3\n"),
    ]


def check_python(tmp_path: Path, *sources: str) -> list[str]:
    page = write_page(tmp_path, "".join(f"```python\n{source}```\n\n" for source in sources))
    names = PageNames()
    return [problem for block in python_blocks(page) for problem in python_problems(block, names)]


def test_a_correct_illustration_passes(tmp_path: Path) -> None:
    assert (
        check_python(
            tmp_path,
            "from glassagent import Agent, ModelSettings\nimport glassagent.testing\n",
            "agent = Agent(client, [add], settings=ModelSettings(temperature=0))\n"
            "result = await agent.run('Hi')\n"
            "async for event in agent.run('Hi'):\n    print(event)\n"
            "print(Agent.run_sync, glassagent.testing.ScriptedClient(['hi']))\n",
        )
        == []
    )


@pytest.mark.parametrize(
    ("source", "problem"),
    [
        ("def f(:\n", "does not compile"),
        ("return 1\n", "does not compile"),
        ("from glassagent import Agnet\n", "`glassagent` exports no `Agnet`"),
        ("from glassagent._testing import ScriptedClient\n", "is not a public module"),
        ("import glassagent.nothing\n", "`glassagent.nothing` is not a public module"),
        ("from glassagent import Agent\nAgent.run_synchronously\n", "does not exist"),
        ("import glassagent\nglassagent.llm.Nope\n", "`glassagent.llm.Nope` does not exist"),
        ("from glassagent import Agent\nAgent._loop\n", "`Agent._loop` is private"),
        ("from glassagent import ModelSettings\nModelSettings(temp=0)\n", "does not fit"),
        ("from glassagent import Agent\nAgent(client, system='a', colour=1)\n", "does not fit"),
        ("from glassagent.testing import ReplayClient\nReplayClient.from_events()\n", "fit"),
        ("replay = ReplayClient.from_events('run.jsonl')\n", "uses `ReplayClient`"),
    ],
)
def test_the_python_checks_find_drift(tmp_path: Path, source: str, problem: str) -> None:
    problems = check_python(tmp_path, source)
    assert any(problem in found for found in problems), problems


def test_a_name_imported_by_an_earlier_block_counts_until_it_is_rebound(tmp_path: Path) -> None:
    assert check_python(tmp_path, "from glassagent import Agent\n", "Agent.run_sync\n") == []
    assert check_python(tmp_path, "from glassagent import Agent\n", "Agent = 1\nAgent.x\n") == []


def check_shell(tmp_path: Path, *sources: str) -> list[str]:
    page = write_page(tmp_path, "".join(f"```bash\n{source}```\n\nText.\n\n" for source in sources))
    state = ShellState()
    return [p for b in fenced_blocks(page) for p in shell_problems(b, state)]


def test_the_shell_reader_splits_commands() -> None:
    found = commands(
        "A=1 glassagent run --json 'a # b' | jq -r . > out.txt  # a comment with ' in it\n"
        "curl -s x \\\n  -d '{\"a\":\n 1}' && .venv/bin/glassagent --help; echo done\n"
    )
    assert [c.words for c in found] == [
        ["glassagent", "run", "--json", "a # b"],
        ["jq", "-r", "."],
        ["curl", "-s", "x", "-d", '{"a":\n 1}'],
        [".venv/bin/glassagent", "--help"],
        ["echo", "done"],
    ]


def test_the_cli_commands_of_the_docs_are_parsed(tmp_path: Path) -> None:
    assert (
        check_shell(
            tmp_path,
            "glassagent --version\nai-agent run --yes 'Hi.'\npython -m glassagent serve --port 0\n"
            "glassagent serve --store $STORE\nglassagent chat --provider ... --colour\n",
        )
        == []
    )
    assert check_shell(tmp_path, "glassagent chat --colour\n") == [
        "`glassagent chat --colour`: unrecognized arguments: --colour (see `glassagent --help`)"
    ]
    (problem,) = check_shell(tmp_path, "python3 -m glassagent run --max-cost free 'Hi'\n")
    assert "--max-cost" in problem


def test_a_bare_command_after_a_venv_set_up_without_activation_fails(tmp_path: Path) -> None:
    setup = "python3 -m venv .venv && .venv/bin/pip install -e '.[cli]'\n"
    (problem,) = check_shell(tmp_path, setup, "glassagent chat\n")
    assert "runs a bare `glassagent`" in problem
    (problem,) = check_shell(tmp_path, setup, "pip install -e '.[local]'\n")
    assert "runs a bare `pip`" in problem
    assert check_shell(tmp_path, setup, ".venv/bin/glassagent chat\n") == []
    assert check_shell(tmp_path, setup, ". .venv/bin/activate\nglassagent chat\n") == []
    assert check_shell(tmp_path, "pip install -e .\nglassagent chat\n") == []


@pytest.mark.parametrize(
    ("text", "fails"),
    [
        ('```bash\npip install "glassagent[gemini]"\n```\n', True),
        ("Run `pip install glassagent` first.\n", True),
        ('```python\nimport x  # pip install "glassagent[otel]"\n```\n', True),
        ('```bash\npip install -e ".[gemini]"\n```\n', False),
        ("```bash\npip install glassagent  # not published yet\n```\n", False),
        ("```bash\npip install glassagent\n```\n\nUntil the first release is published.\n", False),
        ("Not published yet.\n\n```bash\npip install glassagent\n```\n", False),
        ("Not published yet.\n\nA paragraph.\n\n```bash\npip install glassagent\n```\n", True),
    ],
)
def test_installs_by_name_must_say_the_package_is_not_published(
    tmp_path: Path, text: str, fails: bool
) -> None:
    assert bool(install_problems(write_page(tmp_path, text))) is fails
