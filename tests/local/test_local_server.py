"""`LocalServer`'s process handling, against a stand-in for xllamacpp (no model needed).

The child process imports `tests/local/fake_xllamacpp/xllamacpp.py` instead of the real package;
it serves ``/health`` and a canned chat completion like llama.cpp's server does.
"""

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest
import respx

from glassagent import Agent, Message, ModelSettings
from glassagent.errors import AuthenticationError, UserError
from glassagent.events import LLMResponseEvent
from glassagent.llm import LLMResponse, ToolDefinition
from glassagent.local import (
    DEFAULT_MODEL,
    LocalServer,
    LocalServerClient,
    LocalServerError,
    default_threads,
)

FAKE = Path(__file__).parent / "fake_xllamacpp"


@pytest.fixture(autouse=True)
def fake_xllamacpp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(FAKE))
    path = os.pathsep.join(p for p in (str(FAKE), os.environ.get("PYTHONPATH")) if p)
    monkeypatch.setenv("PYTHONPATH", path)
    logs = tmp_path / "logs"
    logs.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(logs))
    return logs


def gguf(directory: Path, name: str) -> Path:
    path = directory / name
    path.write_bytes(b"GGUF" + b"\0" * 64)
    return path


def port_of(server: LocalServer) -> int:
    return int(server.base_url.rsplit(":", 1)[1].split("/")[0])


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    status = Path(f"/proc/{pid}/status")
    return status.exists() and "\nState:\tZ" in status.read_text()  # a zombie of init's


def logs_left(directory: Path) -> list[Path]:
    return list(directory.iterdir())


def assert_port_free(port: int) -> None:
    with socket.create_server(("127.0.0.1", port)):
        pass


def test_sync_start_serve_and_stop(tmp_path: Path, fake_xllamacpp: Path) -> None:
    with LocalServer(gguf(tmp_path, "tiny-model.gguf"), threads=1) as server:
        assert server.running
        assert server.base_url.startswith("http://127.0.0.1:")
        assert server.base_url.endswith("/v1")
        assert server.model_name == "tiny-model"
        assert f"running at {server.base_url}" in repr(server)
        assert "template=0 chars" in server.log_path.read_text()  # the model's own template
        pid, port = server.pid, port_of(server)
        with pytest.raises(UserError, match="already running"):
            server.start()
    assert not server.running
    assert gone(pid)
    assert_port_free(port)
    assert logs_left(fake_xllamacpp) == []  # the log is removed


async def test_async_server_hands_out_clients_for_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leave-for-a-local-server")
    async with LocalServer(gguf(tmp_path, "tiny-model.gguf")) as server:
        async with server.client() as client:
            assert isinstance(client, LocalServerClient)
            answer = await client.chat([Message(role="user", content="hi")])
            parts = [part async for part in client.stream([Message(role="user", content="hi")])]
        assert answer.text == "tiny-model saw tiny-model"
        assert isinstance(parts[-1], LLMResponse)
        assert parts[-1].text == "tiny-model saw tiny-model"
        async with server.client(model="other", tool_protocol="json") as client:
            answer = await client.chat([Message(role="user", content="hi")])
        assert answer.text == "tiny-model saw other"
        pid = server.pid
    assert gone(pid)
    assert not caplog.records  # fast calls: no hint


async def test_clients_constrain_json_protocol_replies_to_the_protocol_schema(
    tmp_path: Path,
) -> None:
    add = ToolDefinition(
        "add", "Add.", {"type": "object", "properties": {"a": {"type": "integer"}}}
    )
    hi = [Message(role="user", content="hi")]
    async with LocalServer(gguf(tmp_path, "tiny-model.gguf")) as server:
        async with server.client(tool_protocol="json") as client:
            assert client.json_grammar
            constrained = await client.chat(hi, [add])
        async with server.client(tool_protocol="json", json_grammar=False) as client:
            free = await client.chat(hi, [add])
    fmt = constrained.raw_request["response_format"]
    assert fmt["type"] == "json_schema"
    schema = fmt["json_schema"]["schema"]
    assert schema["anyOf"][0]["properties"]["tool_call"]["properties"]["input"] == add.parameters
    assert free.raw_request["response_format"] == {"type": "json_object"}


async def test_the_server_requires_its_key_and_the_clients_carry_it(tmp_path: Path) -> None:
    path = gguf(tmp_path, "m.gguf")
    with LocalServer(path) as server:
        first_key = server.api_key
    async with LocalServer(path) as server:
        key = server.api_key
        assert key != first_key  # a fresh key at every start
        assert len(key) >= 40
        log = server.log_path.read_text()
        assert "keys=1 key_chars=[43]" in log
        assert key not in log
        async with server.client() as client:
            assert (await client.chat([Message(role="user", content="hi")])).text == "m saw m"
            assert key not in repr(client)
        async with server.client(api_key="wrong-key") as client:
            with pytest.raises(AuthenticationError, match="Invalid API Key") as info:
                await client.chat([Message(role="user", content="hi")])
        assert key not in repr(server)
        assert key not in str(info.value)
        if sys.platform == "linux":  # the key is not on the command line or in the environment
            for name in ("cmdline", "environ"):
                exposed = Path(f"/proc/{server.pid}/{name}").read_bytes()  # noqa: ASYNC240
                assert key.encode() not in exposed
    with pytest.raises(UserError, match="not running"):
        server.api_key  # noqa: B018


def test_the_server_runs_without_web_ui_slots_or_open_cors(tmp_path: Path) -> None:
    with LocalServer(gguf(tmp_path, "m.gguf")) as server:
        log = server.log_path.read_text()
        origin = server.base_url.removesuffix("/v1")
    assert f"ui=False slots=False cors_origins={origin} cors_credentials=False" in log


def test_the_thread_count_goes_to_the_server(tmp_path: Path) -> None:
    with LocalServer(gguf(tmp_path, "m.gguf"), threads=3) as server:
        assert "threads=3/3" in server.log_path.read_text()
    with LocalServer(gguf(tmp_path, "m.gguf")) as server:
        assert server.threads == default_threads()
        assert f"threads={default_threads()}/{default_threads()}" in server.log_path.read_text()


async def test_a_slow_call_logs_a_hint_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    user = [Message(role="user", content="hi")]
    async with LocalServer(gguf(tmp_path, "slow.gguf"), threads=2) as server:
        async with server.client() as client:
            parts = [part async for part in client.stream(user)]
            await client.chat(user)
        async with server.client() as client:
            await client.chat(user)
    assert isinstance(parts[-1], LLMResponse)
    assert parts[-1].timings == {"prompt_ms": 4000.0, "predicted_ms": 9000.0}
    hints = [r for r in caplog.records if r.name == "glassagent.local"]
    assert len(hints) == 1
    assert hints[0].levelname == "WARNING"
    assert "took 13 s with 2 CPU thread(s)" in hints[0].getMessage()
    assert "LocalServer(threads=1)" in hints[0].getMessage()
    caplog.clear()
    async with LocalServer(gguf(tmp_path, "slow.gguf")) as server, server.client() as client:
        await client.chat(user)
    assert len(caplog.records) == 1  # once per server start


def test_the_default_model_gets_the_shipped_chat_template(tmp_path: Path) -> None:
    path = tmp_path / DEFAULT_MODEL.file_name
    with path.open("wb") as handle:
        handle.write(b"GGUF")
        handle.truncate(DEFAULT_MODEL.size)  # sparse: the right size, no real bytes
    with LocalServer(path) as server:
        assert server.model_name == DEFAULT_MODEL.name
        log = server.log_path.read_text()
    assert "template=0 chars" not in log
    assert "template=" in log


def test_an_explicit_chat_template_replaces_the_default(tmp_path: Path) -> None:
    with LocalServer(gguf(tmp_path, "m.gguf"), chat_template="{{ messages }}") as server:
        assert "template=14 chars" in server.log_path.read_text()


def test_a_port_can_be_chosen(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with LocalServer(gguf(tmp_path, "m.gguf"), port=port) as server:
        assert port_of(server) == port


def test_a_server_that_fails_to_start_reports_its_log(tmp_path: Path) -> None:
    server = LocalServer(gguf(tmp_path, "crash.gguf"))
    with pytest.raises(LocalServerError, match="exited during start-up") as info:
        server.start()
    assert "Failed to init server" in info.value.log_tail
    assert not server.running


def test_a_server_that_never_gets_healthy_times_out(tmp_path: Path, fake_xllamacpp: Path) -> None:
    server = LocalServer(gguf(tmp_path, "unhealthy.gguf"), startup_timeout=1.0)
    with pytest.raises(LocalServerError, match=r"did not become healthy within 1 s"):
        server.start()
    assert not server.running
    assert logs_left(fake_xllamacpp) == []


async def test_async_start_times_out_too(tmp_path: Path) -> None:
    with pytest.raises(LocalServerError, match="did not become healthy"):
        async with LocalServer(gguf(tmp_path, "unhealthy.gguf"), startup_timeout=1.0):
            pass


async def test_cancelling_the_start_stops_and_reaps_the_process(
    tmp_path: Path, fake_xllamacpp: Path
) -> None:
    server = LocalServer(gguf(tmp_path, "unhealthy.gguf"), startup_timeout=60)
    task = asyncio.create_task(server.astart())
    for _ in range(200):
        if server.running:
            break
        await asyncio.sleep(0.05)
    pid = server.pid
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not server.running
    assert gone(pid)
    assert logs_left(fake_xllamacpp) == []


async def test_an_error_in_the_body_still_stops_the_server(tmp_path: Path) -> None:
    server = LocalServer(gguf(tmp_path, "m.gguf"))
    pids = []

    async def body() -> None:
        async with server:
            pids.append(server.pid)
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        await body()
    assert gone(pids[0])


@pytest.mark.slow
def test_a_server_that_ignores_terminate_is_killed(tmp_path: Path) -> None:
    server = LocalServer(gguf(tmp_path, "m.gguf"))
    server.start()
    pid = server.pid
    os.kill(pid, signal.SIGSTOP)  # SIGTERM stays pending: only the kill after the grace ends it
    server.stop()
    assert gone(pid)


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_the_server_does_not_outlive_its_parent(tmp_path: Path, fake_xllamacpp: Path) -> None:
    code = (
        "import sys, time\n"
        "from glassagent.local import LocalServer\n"
        "server = LocalServer(sys.argv[1]); server.start()\n"
        "print(server.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", code, str(gguf(tmp_path, "m.gguf"))],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(fake_xllamacpp)},
    )
    try:
        assert parent.stdout is not None
        pid = int(parent.stdout.readline())
        assert not gone(pid)
    finally:
        parent.kill()
        parent.communicate()  # reaps it and closes its pipe
    deadline = time.monotonic() + 20
    while not gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gone(pid)
    assert logs_left(fake_xllamacpp) == []  # the orphaned server removed its own log


async def test_a_named_tool_choice_goes_to_llama_cpp_as_that_tool_alone_required(
    tmp_path: Path,
) -> None:
    # llama.cpp's server reads tool_choice as a string (auto/none/required) and quietly
    # takes OpenAI's {"type": "function", ...} form as "auto"; the client sends what it reads.
    schema = {"type": "object", "properties": {}}
    tools = [ToolDefinition("add", "Add.", schema), ToolDefinition("sub", "Subtract.", schema)]
    completion = {
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
        ]
    }
    hi = [Message(role="user", content="hi")]
    model = gguf(tmp_path, "tiny-model.gguf")
    async with (
        LocalServer(model, threads=1) as server,
        server.client() as client,
        respx.mock,
    ):
        route = respx.post(server.base_url + "/chat/completions")
        route.mock(return_value=httpx.Response(200, json=completion))
        await client.chat(hi, tools, settings=ModelSettings(tool_choice="sub"))
        named = json.loads(route.calls[-1].request.content)
        await client.chat(hi, tools, settings=ModelSettings(tool_choice="none"))
        keyword = json.loads(route.calls[-1].request.content)
    assert [t["function"]["name"] for t in named["tools"]] == ["sub"]
    assert named["tool_choice"] == "required"
    assert [t["function"]["name"] for t in keyword["tools"]] == ["add", "sub"]
    assert keyword["tool_choice"] == "none"


async def test_a_local_client_records_the_wire_without_the_servers_key(tmp_path: Path) -> None:
    async with LocalServer(gguf(tmp_path, "m.gguf")) as server:
        async with server.client(record_wire=True) as client:
            result = await Agent(client).run("hi")
        key = server.api_key
    event = next(e for e in result.events if isinstance(e, LLMResponseEvent))
    assert event.wire is not None
    assert event.wire.streamed
    assert event.wire.request["messages"] == [{"role": "user", "content": "hi"}]
    assert event.wire.response  # the streamed chunks
    recorded = json.dumps([e.to_dict() for e in result.events])
    assert key not in recorded
    assert "Authorization" not in recorded


def test_a_servers_clients_know_its_context_window_and_protocol() -> None:
    from glassagent._local.client import SlowCallHint, local_client
    from glassagent.local import DEFAULT_MODEL

    hint = SlowCallHint(1)
    client = local_client("http://127.0.0.1:9/v1", DEFAULT_MODEL.name, "k", hint, {}, 8192)
    profile = client.profile
    assert profile is not None
    assert profile.capabilities.context_length == 8192  # the server's, not the shipped 4,096
    assert profile.pricing is not None
    assert profile.pricing.input_per_1m_tokens == 0
    assert (client.tool_protocol, client.json_grammar) == ("json", True)
    other = local_client("http://127.0.0.1:9/v1", "my-model", "k", hint, {}, 2048)
    assert other.tool_protocol == "native"  # another GGUF keeps llama.cpp's own tool calls
    assert other.profile is None


def test_a_call_to_the_embedded_server_always_has_a_deadline() -> None:
    from glassagent._local.client import LOCAL_CALL_SECONDS, bounded
    from glassagent.llm import ModelSettings

    assert bounded(None).timeout == LOCAL_CALL_SECONDS
    assert bounded(ModelSettings(temperature=0)) == ModelSettings(
        temperature=0, timeout=LOCAL_CALL_SECONDS
    )
    assert bounded(ModelSettings(timeout=5)).timeout == 5  # the caller's own wins


def test_a_module_planted_in_the_working_folder_is_not_run_by_the_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `python -m` would import from the working folder first: a folder the user works in
    # (a cloned repository, an unpacked archive) must not run code in the process that
    # receives the server's key
    planted = tmp_path / "work"
    planted.mkdir()
    marker = tmp_path / "planted-ran"
    (planted / "xllamacpp.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    monkeypatch.chdir(planted)
    with LocalServer(gguf(tmp_path, "tiny-model.gguf"), threads=1) as server:
        assert server.running
    assert not marker.exists()


async def test_requests_to_this_machine_never_go_through_a_proxy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")
    monkeypatch.setenv("ALL_PROXY", "http://proxy.invalid:3128")
    for url in ("http://127.0.0.1:8080/v1", "http://localhost:11434", "http://[::1]:8080"):
        assert await proxies_of(url) == {}, url  # the key goes straight to the server
    for url in ("https://api.openai.com/v1", "http://127.0.0.1.example.com/"):
        assert await proxies_of(url), url  # the environment's proxy, for servers out there


async def proxies_of(url: str) -> dict[object, object]:
    """The proxy transports the HTTP client of a provider at `url` has mounted."""
    from glassagent._providers.transport import HTTPTransport

    transport = HTTPTransport(
        provider="p", base_url=url, headers={}, http_client=None, secret=None, start_hint=""
    )
    try:
        client = await transport._client()
        return dict(client._mounts)
    finally:
        await transport.aclose()
