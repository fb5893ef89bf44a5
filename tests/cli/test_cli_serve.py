"""`glassagent serve`: the invoke API from the command line, as a real process, and its checks."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import shutil
import socket
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import glassagent.cli
from glassagent.llm import register_provider
from glassagent.testing import ScriptedClient
from tests.support.cli import ScriptedModel, call, cli_env, say
from tests.support.process import uvicorn_process
from tests.support.profiles import write_profile
from tests.support.server import sse_events

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sample_project"
TOKEN = "a-test-token-that-is-long-enough"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, ScriptedModel, subprocess.Popen[str]]]:
    """``glassagent serve`` with tokens, a workspace, a store and a priced model, on port 0."""
    project = Path(shutil.copytree(SAMPLE, tmp_path / "project"))
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({TOKEN: "alice"}))
    env = cli_env(GLASSAGENT_PROFILE_PATH=str(tmp_path / "profiles"))
    write_profile(tmp_path / "profiles", "m")
    script = (call(("list_files", {})), say("Two files."), say("Hello from the model."))
    with ScriptedModel(*script) as model:
        command = [
            sys.executable, "-m", "glassagent", "serve", *model.args(), "--port", "0",
            "--tokens", str(tokens), "--workspace", str(project),
            "--store", str(tmp_path / "chats"),
        ]  # fmt: skip
        with uvicorn_process(command, cwd=tmp_path, env=env) as (address, process):
            yield address, model, process


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_serve_answers_an_invoke_and_a_stream_and_stops_on_sigterm(
    served: tuple[str, ScriptedModel, subprocess.Popen[str]],
) -> None:
    address, model, process = served
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=address, timeout=60) as client:
        assert client.post("/api/ai/invoke", json={"message": "Hi"}).status_code == 401
        body = {"message": "List the files.", "chat_id": "work", "append_to_history": True}
        answer = client.post("/api/ai/invoke", json=body, headers=auth)
        assert answer.status_code == 200, answer.text
        streamed = {"message": "Hi", "stream": True, "chat_id": "work", "append_to_history": True}
        with client.stream("POST", "/api/ai/invoke", json=streamed, headers=auth) as response:
            assert response.status_code == 200
            text = "".join(response.iter_text())
        chat = client.get("/api/ai/chats/work", headers=auth).json()
    result = answer.json()
    assert (result["text"], result["status"]) == ("Two files.", "completed")
    assert result["iterations"] == 2
    # two calls of 50 input and 7 output tokens at $1 and $4 per million
    assert result["cost"] == {"amount": "0.000156", "currency": "USD"}
    offered = {t["function"]["name"] for t in model.bodies[0]["tools"]}
    assert offered == {"list_files", "read_file", "write_file", "edit_file"}
    assert model.bodies[0]["messages"][0]["role"] == "system"  # the coding agent's
    assert sorted(model.tool_results(1)[0].split()) == ["README.md", "hello.py"]
    events = sse_events(text)
    assert events[-1]["type"] == "complete"
    assert events[-1]["text"] == "Hello from the model."
    assert [e["type"] for e in events].count("complete") == 1
    assert [m["content"] for m in chat["messages"] if m["role"] != "tool"][-2:] == [
        "Hi",
        "Hello from the model.",
    ]
    process.terminate()
    assert process.wait(15) == 0  # a clean stop: requests finished, the client closed
    assert process.stderr is not None
    log = process.stderr.read()
    assert "Finished server process" in log
    assert "Traceback" not in log
    assert TOKEN not in log


# ---- the event loop and the HTTP parser ------------------------------------------------------


def test_serve_runs_on_the_fastest_loop_and_parser_installed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """uvloop's loop and httptools when installed (the server extra), else asyncio's and h11."""
    loops: list[str] = []

    async def served_at_once(app: object, *, host: str, port: int, **_: object) -> None:
        loops.append(type(asyncio.get_running_loop()).__module__)

    monkeypatch.setattr("glassagent.cli._serve.aserve", served_at_once)
    assert glassagent.cli.main(serve()) == 0
    uvloop = importlib.util.find_spec("uvloop") is not None
    assert loops[0].startswith("uvloop") == uvloop
    parser = "httptools" if importlib.util.find_spec("httptools") else "h11"
    assert f"(HTTP: {parser} on {'uvloop' if uvloop else 'asyncio'})" in capsys.readouterr().err


@pytest.mark.parametrize("uvloop", [types.ModuleType("uvloop"), None], ids=["old", "missing"])
def test_serve_runs_on_asyncio_without_a_usable_uvloop(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], uvloop: object
) -> None:
    """A uvloop older than 0.18 has no ``uvloop.run``; without uvloop the import fails.

    Either way the serve command keeps asyncio's loop.
    """
    loops: list[str] = []

    async def served_at_once(app: object, *, host: str, port: int, **_: object) -> None:
        loops.append(type(asyncio.get_running_loop()).__module__)

    monkeypatch.setattr("glassagent.cli._serve.aserve", served_at_once)
    monkeypatch.setitem(sys.modules, "uvloop", uvloop)  # None: `import uvloop` raises
    assert glassagent.cli.main(serve()) == 0
    assert loops[0].startswith("asyncio")
    assert "on asyncio)" in capsys.readouterr().err


# ---- bad input: one line, exit code 2, nothing served ----------------------------------------


def serve(*args: str) -> list[str]:
    return ["serve", "--provider", "openai_compatible", "--base-url", "http://127.0.0.1:9/v1",
            "--model", "m", "--port", "0", *args]  # fmt: skip


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield taken.getsockname()[1]


def bad_inputs(tmp_path: Path, busy_port: int) -> dict[str, tuple[list[str], str]]:
    (tmp_path / "invalid.json").write_text("{not json")
    (tmp_path / "list.json").write_text('["a-token"]')
    (tmp_path / "a-file").write_text("")
    (tmp_path / "tokens.json").write_text('{"a-token-of-alice": "alice"}')
    tokens = ["--tokens", str(tmp_path / "tokens.json")]
    return {
        "public host": (serve("--host", "0.0.0.0"), "Refusing to serve on '0.0.0.0' without"),
        "missing tokens": (serve("--tokens", str(tmp_path / "no.json")), "Cannot read the"),
        "invalid tokens": (serve("--tokens", str(tmp_path / "invalid.json")), "not valid JSON"),
        "tokens not a map": (serve("--tokens", str(tmp_path / "list.json")), "JSON object"),
        "store parent": (serve("--store", str(tmp_path / "no" / "chats")), "does not exist"),
        "store a file": (serve("--store", str(tmp_path / "a-file")), "is not a folder"),
        "workspace": (serve("--workspace", str(tmp_path / "nowhere")), "does not exist"),
        "commands": (serve("--allow-commands"), "--allow-commands needs --workspace"),
        "port in use": (serve("--port", str(busy_port)), f"cannot serve on 127.0.0.1:{busy_port}"),
        "not our address": (serve(*tokens, "--host", "192.0.2.1"), "cannot serve on 192.0.2.1:0"),
        "bad port": (serve("--port", "http"), "argument --port"),
        "unknown provider": (["serve", "--provider", "nosuch", "--port", "0"], "Unknown provider"),
    }


CASES = [
    "public host", "missing tokens", "invalid tokens", "tokens not a map", "store parent",
    "store a file", "workspace", "commands", "port in use", "not our address", "bad port",
    "unknown provider",
]  # fmt: skip


@pytest.mark.parametrize("case", CASES)
def test_bad_input_exits_2_with_one_line(
    case: str, tmp_path: Path, busy_port: int, capsys: pytest.CaptureFixture[str]
) -> None:
    args, expected = bad_inputs(tmp_path, busy_port)[case]
    assert glassagent.cli.main(args) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("glassagent: ")
    assert expected in err
    assert "a-token" not in err  # a token is never shown
    assert not (tmp_path / "chats").exists()


def test_a_cost_budget_on_a_model_without_prices_is_bad_input(
    capsys: pytest.CaptureFixture[str],
) -> None:
    register_provider("unpriced", lambda **options: ScriptedClient([], model="no-prices-here"))
    code = glassagent.cli.main(["serve", "--provider", "unpriced", "--max-cost", "0.05"])
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1, err
    assert "--max-cost needs a model with prices, and 'no-prices-here' has none" in err


def test_serve_options_are_parsed_with_their_defaults() -> None:
    from glassagent.cli._options import ServeOptions, parse

    options = parse(["serve", "--provider", "ollama"], "1.0")
    assert isinstance(options, ServeOptions)
    assert (options.host, options.port, options.tokens, options.store) == (
        "127.0.0.1",
        8000,
        None,
        None,
    )
    assert (options.workspace, options.allow_commands, options.max_iterations) == (None, False, 10)
    budgeted = parse(["serve", "--max-cost", "0.05", "--max-turn-tokens", "9000"], "1.0")
    assert isinstance(budgeted, ServeOptions)
    assert (str(budgeted.max_cost), budgeted.max_turn_tokens) == ("0.05", 9000)
