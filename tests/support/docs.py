"""How `test_docs_examples` reads the pages: their fenced blocks, and the checks of each kind.

- `fenced_blocks` finds every fenced block of a Markdown page, also those indented in
  admonitions and tabs.
- `run_block` executes a runnable block in a page's namespace and returns what it printed.
- `python_problems` checks a Python block without running it: it compiles, its glassagent
  imports name public names, attributes and calls of those names exist and fit.
- `shell_problems` checks the commands of a shell block: the CLI's real parser, installs of
  the project, and consistent use of ``.venv/bin/``.
- `install_problems` checks every mention of ``pip install glassagent`` on a page, in prose
  and comments too.
"""

from __future__ import annotations

import ast
import asyncio
import builtins
import contextlib
import dataclasses
import importlib
import inspect
import io
import pkgutil
import re
import shlex
import types
from collections.abc import Iterator
from contextlib import redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import glassagent
from glassagent.cli._options import UsageError, parse

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
KNOWN_CLASSES = {"runnable", "output"}
SHELLS = {"bash", "console", "sh", "shell"}

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")


@dataclass(frozen=True)
class Block:
    """One fenced block of a Markdown page."""

    path: Path
    line: int  # 1-based line of the block's first code line
    info: str
    code: str
    end: int = 0  # 1-based line of the closing fence

    @property
    def classes(self) -> list[str]:
        """``{.python .runnable}`` and ``python runnable`` both give ``["python", "runnable"]``."""
        if self.info.startswith("{"):
            unquoted = re.sub(r'"[^"]*"', "", self.info)
            return re.findall(r"(?:^|[{\s])\.([\w-]+)", unquoted)
        return [word for word in self.info.split() if re.fullmatch(r"[\w-]+", word)]

    @property
    def language(self) -> str:
        return (self.classes or [""])[0]

    @property
    def runnable(self) -> bool:
        return "runnable" in self.classes

    @property
    def output(self) -> bool:
        return "output" in self.classes

    @property
    def where(self) -> str:
        return f"{page_id(self.path)}:{self.line - 1}"


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
        yield Block(path, i + 2, match["info"].strip(), "\n".join(body) + "\n", j + 1)
        i = j + 1


def page_id(page: Path) -> str:
    """The page's path from the repository's root (a page elsewhere: its name)."""
    return page.relative_to(ROOT).as_posix() if page.is_relative_to(ROOT) else page.name


def chunks(page: Path) -> list[tuple[int, int, str]]:
    """The page as (first line, last line, text) chunks: each block whole, prose by paragraph."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks = {b.line - 1: b.end for b in fenced_blocks(page)}  # fence line -> closing line
    found: list[tuple[int, int, str]] = []
    i = 1
    while i <= len(lines):
        if i in blocks:
            last = min(blocks[i], len(lines))
        elif lines[i - 1].strip():
            last = i
            while last < len(lines) and lines[last].strip() and last + 1 not in blocks:
                last += 1
        else:
            i += 1
            continue
        found.append((i, last, "\n".join(lines[i - 1 : last])))
        i = last + 1
    return found


def nearby(page: Path, line: int) -> str:
    """The chunk holding `line` with the chunks right before and after it."""
    parts = chunks(page)
    for k, (first, last, _) in enumerate(parts):
        if first <= line <= last:
            return "\n".join(text for _, _, text in parts[max(k - 1, 0) : k + 2])
    return ""


# ---- runnable blocks ---------------------------------------------------------------------


def compiled(block: Block, mode: str = "exec") -> types.CodeType:
    """The block's code, padded so tracebacks point at the right line of the page."""
    source = "\n" * (block.line - 1) + block.code
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    return compile(source, str(block.path), mode, flags=flags, dont_inherit=True)


def run_block(block: Block, module: types.ModuleType) -> str:
    """Execute one block in `module`'s namespace and return what it printed."""
    code = compiled(block)
    printed = io.StringIO()
    with redirect_stdout(printed):
        if code.co_flags & inspect.CO_COROUTINE:
            asyncio.run(eval(code, module.__dict__))
        else:
            exec(code, module.__dict__)
    return printed.getvalue()


# ---- Python blocks: checked without running them ------------------------------------------


def _public_modules() -> dict[str, types.ModuleType]:
    names = ["glassagent"] + [
        f"glassagent.{m.name}"
        for m in pkgutil.iter_modules(glassagent.__path__)
        if not m.name.startswith("_")
    ]
    return {name: importlib.import_module(name) for name in names}


PUBLIC_MODULES = _public_modules()
PUBLIC_NAMES = {name for module in PUBLIC_MODULES.values() for name in module.__all__}


@dataclass
class PageNames:
    """What the Python blocks of one page, read in order, have bound so far."""

    glassagent: dict[str, Any] = field(default_factory=dict)  # names of glassagent objects
    defined: set[str] = field(default_factory=set)  # every name bound by an earlier block


def _bound(tree: ast.AST) -> set[str]:
    """Every name the code binds, in any scope: assignments, defs, parameters, imports."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name.split(".")[0])
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            names.add(node.name)
    return names


def _imports(tree: ast.AST, names: PageNames, problems: list[str]) -> set[str]:
    """Check the glassagent imports; record what they bind. Returns the names they bind."""
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "glassagent":
            module = node.module or ""
            if module not in PUBLIC_MODULES:
                problems.append(f"line {node.lineno}: `{module}` is not a public module")
                continue
            for alias in node.names:
                public = PUBLIC_MODULES[module].__all__
                if alias.name not in public and f"{module}.{alias.name}" not in PUBLIC_MODULES:
                    problems.append(f"line {node.lineno}: `{module}` exports no `{alias.name}`")
                    continue
                target = alias.asname or alias.name
                names.glassagent[target] = getattr(PUBLIC_MODULES[module], alias.name)
                imported.add(target)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] != "glassagent":
                    continue
                if alias.name not in PUBLIC_MODULES:
                    problems.append(f"line {node.lineno}: `{alias.name}` is not a public module")
                    continue
                target = alias.asname or "glassagent"
                value = PUBLIC_MODULES[alias.name if alias.asname else "glassagent"]
                names.glassagent[target] = value
                imported.add(target)
    return imported


def _has_attribute(obj: Any, name: str) -> bool:
    if isinstance(obj, types.ModuleType):
        return name in getattr(obj, "__all__", ()) or f"{obj.__name__}.{name}" in PUBLIC_MODULES
    if hasattr(obj, name):
        return True
    if inspect.isclass(obj):  # fields without a default: instance attributes
        fields = {f.name for f in dataclasses.fields(obj)} if dataclasses.is_dataclass(obj) else ()
        annotated = {n for c in obj.__mro__ for n in inspect.get_annotations(c)}
        return name in fields or name in annotated or name in getattr(obj, "model_fields", {})
    return False


def _resolve(node: ast.expr, known: dict[str, Any], problems: list[str]) -> Any:
    """The object a chain ``name.attr.attr`` of a glassagent name stands for, else `None`."""
    if isinstance(node, ast.Name):
        return known.get(node.id)
    if not isinstance(node, ast.Attribute):
        return None
    owner = _resolve(node.value, known, problems)
    if owner is None or not (inspect.isclass(owner) or isinstance(owner, types.ModuleType)):
        return None
    shown = ast.unparse(node)
    if node.attr.startswith("_") and not node.attr.startswith("__"):
        problems.append(f"line {node.lineno}: `{shown}` is private")
    elif not _has_attribute(owner, node.attr):
        problems.append(f"line {node.lineno}: `{shown}` does not exist")
    else:
        return getattr(owner, node.attr, None)
    return None


def _check_call(call: ast.Call, known: dict[str, Any], problems: list[str]) -> None:
    """A call of a glassagent class or function must fit its signature."""
    func = _resolve(call.func, known, [])
    if func is None or not callable(func):
        return
    if isinstance(call.func, ast.Attribute):
        owner = _resolve(call.func.value, known, [])
        if inspect.isclass(owner) and inspect.isfunction(
            inspect.getattr_static(owner, call.func.attr, None)
        ):
            return  # a method read from the class: its `self` is not in the call
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):
        return
    spread = any(isinstance(a, ast.Starred) for a in call.args) or any(
        k.arg is None for k in call.keywords
    )
    keywords = {k.arg: None for k in call.keywords if k.arg is not None}
    try:
        if spread:
            if not any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values()):
                for name in keywords:
                    if name not in signature.parameters:
                        raise TypeError(f"got an unexpected keyword argument {name!r}")
        else:
            signature.bind(*call.args, **keywords)
    except TypeError as error:
        problems.append(f"line {call.lineno}: `{ast.unparse(call)}` does not fit: {error}")


def python_problems(block: Block, names: PageNames) -> list[str]:
    """What is wrong with a Python block, read in its page's order; records what it binds.

    It must compile (top-level ``await`` allowed); its glassagent imports must name public
    modules and names; an attribute of an imported glassagent name must exist, and a call of
    one must fit its signature; and a glassagent name it uses must be imported on the page.
    """
    try:
        compiled(block)
    except SyntaxError as error:
        return [f"line {error.lineno}: does not compile: {error.msg}"]
    tree = ast.parse("\n" * (block.line - 1) + block.code)
    problems: list[str] = []
    bound = _bound(tree)
    imported = _imports(tree, names, problems)
    for rebound in bound - imported:
        names.glassagent.pop(rebound, None)
    known = names.glassagent
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            _resolve(node, known, problems)
        elif isinstance(node, ast.Call):
            _check_call(node, known, problems)
        elif (
            isinstance(node, ast.Name)
            and isinstance(node.ctx, ast.Load)
            and node.id in PUBLIC_NAMES
            and node.id not in bound | names.defined | set(dir(builtins))
        ):
            problems.append(
                f"line {node.lineno}: uses `{node.id}`, a glassagent name, but no block of "
                "the page before or this one imports it"
            )
    names.defined |= bound
    return list(dict.fromkeys(problems))


# ---- shell blocks -------------------------------------------------------------------------

CLI_NAMES = {"glassagent", "ai-agent"}
VENV_TOOLS = CLI_NAMES | {"pip", "pip3", "python", "pytest", "mkdocs", "ruff", "mypy"}
_REDIRECTS = re.compile(r"^\d*[<>]+&?\d*$")
NOT_PUBLISHED = re.compile(r"not\s+(yet\s+)?published|until\s+the\s+first\s+release", re.I)


@dataclass(frozen=True)
class Command:
    """One simple command of a shell block: its words, without redirections and comments."""

    words: list[str]

    @property
    def program(self) -> str:
        return self.words[0] if self.words else ""

    @property
    def name(self) -> str:
        return self.program.rsplit("/", 1)[-1]

    @property
    def placeholder(self) -> bool:
        """Arguments that are not real: shell variables, ``$(...)`` or ``...``."""
        return any("$" in w or "..." in w or "`" in w for w in self.words)

    def __str__(self) -> str:
        return shlex.join(self.words)


def _without_comments(code: str) -> str:
    """The code without its ``#`` comments (a ``#`` that starts a word outside quotes)."""
    kept: list[str] = []
    quote, comment, previous = "", False, "\n"
    for char in code:
        if comment:
            comment = char != "\n"
        elif quote:
            quote = "" if char == quote and previous != "\\" else quote
        elif char in "'\"" and previous != "\\":
            quote = char
        elif char == "#" and previous in " \t\n;&|":
            comment = True
        if not comment:
            kept.append(char)
        previous = char
    return "".join(kept)


def commands(code: str) -> list[Command]:
    """The simple commands of a shell block; a line continued with ``\\`` is one command."""
    source = _without_comments(code.replace("\\\n", " "))
    lexer = shlex.shlex(source, posix=True, punctuation_chars=";&|<>()\n")
    lexer.whitespace = " \t\r"
    lexer.whitespace_split = True
    lexer.commenters = ""
    found: list[Command] = []
    words: list[str] = []
    redirect = False
    for token in lexer:
        if set(token) <= set(";&|\n"):
            if words:
                found.append(Command(words))
            words, redirect = [], False
        elif _REDIRECTS.match(token):
            redirect = True
        elif redirect:
            redirect = False
        elif not words and re.fullmatch(r"\w+=.*", token):
            continue  # an environment assignment before the program
        else:
            words.append(token)
    if words:
        found.append(Command(words))
    return found


def cli_arguments(command: Command) -> list[str] | None:
    """The CLI arguments of a command that runs glassagent, else `None`."""
    words = command.words
    if command.name in CLI_NAMES:
        return words[1:]
    if re.fullmatch(r"python(3(\.\d+)?)?", command.name) and words[1:3] == ["-m", "glassagent"]:
        return words[3:]
    return None


def cli_problem(arguments: list[str]) -> str | None:
    """Why the CLI's own parser refuses the arguments, or `None`."""
    with redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            if arguments[:1] == ["eval"]:  # `glassagent eval` has its own parser
                from glassagent.cli._eval import build_parser as eval_parser

                eval_parser().parse_args(arguments[1:])
            else:
                parse(arguments, glassagent.__version__)
        except UsageError as error:
            return str(error)
        except SystemExit:
            if not {"-h", "--help", "--version"} & set(arguments):
                return "the parser exited"
    return None


@dataclass
class ShellState:
    """What the shell blocks of one page did so far."""

    venv_without_activation: str | None = None  # the command that set up .venv/bin/
    activated: bool = False


def shell_problems(block: Block, state: ShellState) -> list[str]:
    """What is wrong with the commands of a shell block, read in its page's order."""
    problems: list[str] = []
    for command in commands(block.code):
        words = command.words
        if command.name in {".", "source"} and words[1:2] == [".venv/bin/activate"]:
            state.activated, state.venv_without_activation = True, None
        elif command.program.startswith(".venv/bin/") or words[1:4] == ["-m", "venv", ".venv"]:
            if not state.activated and state.venv_without_activation is None:
                state.venv_without_activation = str(command)
        elif command.program in VENV_TOOLS and state.venv_without_activation:
            problems.append(
                f"`{command}` runs a bare `{command.program}`, but the page set up "
                f"`{state.venv_without_activation}` without activating it: write "
                f"`.venv/bin/{command.program}` or activate it first (`. .venv/bin/activate`)"
            )
        arguments = cli_arguments(command)
        if arguments is not None and not command.placeholder:
            problem = cli_problem(arguments)
            if problem:
                problems.append(f"`{command}`: {problem}")
    return problems


# ---- installs of the project --------------------------------------------------------------

_BY_NAME = re.compile(r"""pip3?\s+install\s+(?:-\S+\s+)*["']?glassagent\b(?!\.)""")


def install_problems(page: Path) -> list[str]:
    """Each ``pip install glassagent...`` must say the package is not published yet.

    Installing from the checkout (``pip install -e ".[extra]"``) works today; installing
    by name only once the package is published, so the mention itself, or the text right
    before or after it, has to say so.
    """
    problems: list[str] = []
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        for match in _BY_NAME.finditer(line):
            if not NOT_PUBLISHED.search(nearby(page, number)):
                problems.append(
                    f"{page_id(page)}:{number}: `{match.group()}...` installs a package that "
                    'is not published yet: install from the checkout (`pip install -e ".[...]"`) '
                    "or say so next to it"
                )
    return problems
