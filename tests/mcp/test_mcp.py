"""MCP servers as tool sources, against a real server made with the MCP SDK (mcp_server.py)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import pytest

pytest.importorskip("mcp")

from glassagent import Agent, LLMResponse, ToolCall
from glassagent.errors import GlassAgentError, MCPServerError, ToolError, UserError
from glassagent.mcp import MCPServer
from glassagent.testing import ScriptedClient
from tests.support.mcp import PYTHON, SERVER, stdio


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def tool_messages(result: Any) -> dict[str, Any]:
    return {m.tool_call_id: m for m in result.new_messages if m.role == "tool"}


async def test_tools_keep_the_servers_schemas_and_calls_return_text(quiet: TextIO) -> None:
    async with stdio(quiet) as server:
        assert server.is_running
        assert server.instructions == "Tools for the glassagent tests."
        tools = {t.name: t for t in await server.list_tools()}
        assert await server.call_tool("add", {"a": 2, "b": 3}) == "5"
        assert await server.call_tool("echo", {"text": "ab", "times": 2}) == "abab"
        picture = await server.call_tool("picture")
        progress: list[str] = []
        slept = await server.call_tool("slow", {"seconds": 0}, progress=progress.append)
        with pytest.raises(ToolError, match="no luck"):
            await server.call_tool("fail", {"message": "no luck"})
    assert not server.is_running
    assert {"add", "echo", "fail", "slow", "pid", "die", "picture"} <= set(tools)
    assert tools["add"].description == "Add two integers."
    assert tools["add"].parameters == {
        "properties": {
            "a": {"title": "A", "type": "integer"},
            "b": {"title": "B", "type": "integer"},
        },
        "required": ["a", "b"],
        "type": "object",
        "title": "addArguments",
    }
    assert picture.splitlines() == ["a red dot", "[image: image/png, 70 bytes; not shown]"]
    assert (slept, progress) == ("slept 0", ["halfway there"])


async def test_an_agent_run_calls_mcp_tools_and_forwards_progress(quiet: TextIO) -> None:
    client = ScriptedClient(
        [
            LLMResponse(
                "",
                [
                    ToolCall("c1", "add", {"a": 17, "b": 25}),
                    ToolCall("c2", "slow", {"seconds": 0}),
                    ToolCall("c3", "fail", {"message": "the disk is full"}),
                    ToolCall("c4", "add", {"a": "seventeen", "b": 25}),
                ],
            ),
            "17 + 25 = 42",
        ]
    )
    async with stdio(quiet) as server:
        agent = Agent(client, await server.list_tools())
        result = await agent.run("What is 17 + 25?")
    assert result.text == "17 + 25 = 42"
    tools = tool_messages(result)
    assert (tools["c1"].content, tools["c1"].is_error) == ("42", False)
    assert tools["c2"].content == "slept 0"
    assert tools["c3"].is_error
    assert tools["c3"].content.startswith("Error: ")
    assert "the disk is full" in tools["c3"].content
    # checked against the server's schema here, before anything was sent
    assert tools["c4"].is_error
    assert tools["c4"].content == (
        "Error: invalid arguments for tool 'add': a: 'seventeen' is not of type 'integer'"
    )
    progress = [e for e in result.events if e.type == "tool_progress"]
    assert [(e.tool, e.call_id, e.message) for e in progress] == [("slow", "c2", "halfway there")]
    # the model saw the server's schemas
    offered = {d.name: d for d in client.requests[0].tools}
    assert offered["add"].parameters["properties"]["a"] == {"title": "A", "type": "integer"}


async def test_a_prefix_keeps_servers_apart_and_calls_the_servers_own_name(
    quiet: TextIO,
) -> None:
    client = ScriptedClient([LLMResponse("", [ToolCall("c1", "calc_add", {"a": 1, "b": 2})]), "3"])
    async with stdio(quiet, tool_prefix="calc") as server:
        tools = await server.list_tools()
        result = await Agent(client, tools).run("1 + 2?")
    assert "calc_add" in {t.name for t in tools}
    assert tool_messages(result)["c1"].content == "3"


async def test_a_command_that_does_not_exist_is_a_start_error() -> None:
    server = MCPServer.stdio("/nonexistent/glassagent-mcp-server", ["--flag"])
    with pytest.raises(MCPServerError, match="could not be started") as caught:
        async with server:
            pytest.fail("started")
    assert isinstance(caught.value, GlassAgentError)
    assert caught.value.server == "glassagent-mcp-server --flag"
    assert not server.is_running


async def test_a_server_that_exits_at_once_is_a_start_error(quiet: TextIO) -> None:
    server = MCPServer.stdio(PYTHON, ["-c", "raise SystemExit(1)"], stderr=quiet)
    started = time.monotonic()
    with pytest.raises(MCPServerError, match="could not be started: it closed the connection"):
        await server.start()
    assert time.monotonic() - started < 20  # not the 30 s start timeout


@pytest.mark.slow
async def test_a_server_that_never_answers_times_out_and_is_stopped(
    quiet: TextIO, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pid"
    script = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(60)"
    server = MCPServer.stdio(PYTHON, ["-c", script, str(pid_file)], stderr=quiet, start_timeout=1.5)
    with pytest.raises(MCPServerError, match=r"did not start within 1\.5 s"):
        async with server:
            pytest.fail("started")
    assert gone(int(pid_file.read_text()))


async def test_a_call_past_its_timeout_is_a_tool_error_and_the_session_goes_on(
    quiet: TextIO,
) -> None:
    client = ScriptedClient(
        [
            LLMResponse("", [ToolCall("c1", "slow", {"seconds": 30})]),
            LLMResponse("", [ToolCall("c2", "add", {"a": 1, "b": 1})]),
            "done",
        ]
    )
    async with stdio(quiet, call_timeout=1) as server:
        result = await Agent(client, await server.list_tools()).run("go")
    tools = tool_messages(result)
    assert tools["c1"].is_error
    assert tools["c1"].content == (
        f"Error: MCP server {server.name!r} did not answer tool 'slow' within 1 s."
    )
    assert tools["c2"].content == "2"


async def test_a_server_killed_mid_run_gives_tool_errors_not_a_hang(quiet: TextIO) -> None:
    client = ScriptedClient(
        [
            LLMResponse("", [ToolCall("c1", "slow", {"seconds": 60})]),
            LLMResponse("", [ToolCall("c2", "add", {"a": 1, "b": 2})]),
            "the server is gone",
        ]
    )
    async with stdio(quiet, call_timeout=120) as server:
        pid = int(await server.call_tool("pid"))
        run = Agent(client, await server.list_tools()).run("go")
        started = time.monotonic()
        async for event in run:
            if event.type == "tool_progress":  # the slow call is running: kill the server
                os.kill(pid, signal.SIGKILL)
        assert time.monotonic() - started < 30  # not the 60 s sleep, nor the 120 s limit
        with pytest.raises(MCPServerError, match="closed the connection"):
            await server.list_tools()
    assert gone(pid)
    result = run.result
    assert result is not None
    assert result.text == "the server is gone"
    tools = tool_messages(result)
    assert tools["c1"].is_error
    assert "closed the connection" in tools["c1"].content
    assert tools["c2"].is_error
    assert "closed the connection" in tools["c2"].content


async def test_cancelling_the_block_stops_the_child_process(quiet: TextIO) -> None:
    pids: list[int] = []
    calling = asyncio.Event()

    async def use() -> None:
        async with stdio(quiet) as server:
            pids.append(int(await server.call_tool("pid")))
            calling.set()
            await server.call_tool("slow", {"seconds": 60})

    task = asyncio.create_task(use())
    await asyncio.wait_for(calling.wait(), 30)
    await asyncio.sleep(0.2)  # the slow call is on its way
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert gone(pids[0])


async def test_aborting_a_run_mid_call_leaves_the_server_usable(quiet: TextIO) -> None:
    client = ScriptedClient([LLMResponse("", [ToolCall("c1", "slow", {"seconds": 60})])])
    async with stdio(quiet) as server:
        run = Agent(client, await server.list_tools()).run("go")
        async for event in run:
            if event.type == "tool_progress":
                run.abort("stop")
        assert run.result is not None
        assert run.result.stop_reason == "aborted"
        assert await server.call_tool("add", {"a": 2, "b": 2}) == "4"


async def test_nested_blocks_share_one_session_and_calls_after_it_are_errors(
    quiet: TextIO,
) -> None:
    server = stdio(quiet)
    with pytest.raises(MCPServerError, match="not running"):
        await server.list_tools()
    async with server:
        first = await server.call_tool("pid")
        async with server:
            assert await server.call_tool("pid") == first
        assert server.is_running
        tools = {t.name: t for t in await server.list_tools()}
    assert not server.is_running
    assert gone(int(first))
    client = ScriptedClient([LLMResponse("", [ToolCall("c1", "add", {"a": 1, "b": 2})]), "ok"])
    result = await Agent(client, [tools["add"]]).run("go")
    message = tool_messages(result)["c1"]
    assert message.is_error
    assert "is not running" in message.content


def test_bad_settings_are_user_errors() -> None:
    with pytest.raises(UserError, match="command"):
        MCPServer.stdio("")
    with pytest.raises(UserError, match="list of strings"):
        MCPServer.stdio(PYTHON, "server.py")
    with pytest.raises(UserError, match="call_timeout"):
        MCPServer.stdio(PYTHON, call_timeout=0)
    with pytest.raises(UserError, match="http"):
        MCPServer.http("ftp://example.org/mcp")


def test_reprs_show_no_environment_or_headers() -> None:
    local = MCPServer.stdio(PYTHON, [SERVER], {"API_TOKEN": "s3cret-env"})
    remote = MCPServer.http("https://user:pw@example.org/mcp?key=s3cret-q", {"X-Key": "s3cret-h"})
    assert "s3cret" not in repr(local) + repr(local._transport)
    assert "s3cret" not in repr(remote) + repr(remote._transport) + remote.name
    assert remote.name == "example.org/mcp"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def http_server(quiet: TextIO) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = _free_port()
    process = subprocess.Popen([PYTHON, SERVER, "--http", str(port)], stdout=quiet, stderr=quiet)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, "the test server exited"
            assert time.monotonic() < deadline, "the test server did not listen"
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp", process
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


async def test_streamable_http_server(http_server: tuple[str, subprocess.Popen[bytes]]) -> None:
    url, _ = http_server
    client = ScriptedClient([LLMResponse("", [ToolCall("c1", "add", {"a": 40, "b": 2})]), "42"])
    server = MCPServer.http(url, {"Authorization": "Bearer s3cret"})
    async with server:
        tools = await server.list_tools()
        result = await Agent(client, tools).run("40 + 2?")
        progress: list[str] = []
        assert await server.call_tool("slow", {"seconds": 0}, progress=progress.append)
    assert tool_messages(result)["c1"].content == "42"
    assert progress == ["halfway there"]
    assert server.name == f"127.0.0.1:{url.split(':')[2]}"


async def test_an_http_server_that_stops_mid_call_is_a_tool_error(
    http_server: tuple[str, subprocess.Popen[bytes]],
) -> None:
    url, process = http_server

    def stop_server(message: str) -> None:
        process.kill()

    async with MCPServer.http(url, call_timeout=120) as server:
        started = time.monotonic()
        with pytest.raises(MCPServerError):
            await server.call_tool("slow", {"seconds": 60}, progress=stop_server)
        assert time.monotonic() - started < 60


async def test_an_http_url_nobody_listens_on_is_a_start_error_without_secrets() -> None:
    url = f"http://127.0.0.1:{_free_port()}/mcp?token=s3cret-q"
    server = MCPServer.http(url, {"Authorization": "Bearer s3cret-h"}, start_timeout=10)
    with pytest.raises(MCPServerError, match="could not be started") as caught:
        await server.start()
    assert not server.is_running
    error = caught.value
    assert (error.__cause__, error.__context__) == (None, None)
    assert "s3cret" not in str(error)


def test_result_content_becomes_text() -> None:
    import base64

    from mcp_types import (
        AudioContent,
        BlobResourceContents,
        EmbeddedResource,
        ResourceLink,
        TextContent,
        TextResourceContents,
    )

    from glassagent._mcp.content import block_text, result_text

    wav = base64.b64encode(b"RIFF" + bytes(96)).decode()
    blocks = [
        TextContent(text="first"),
        AudioContent(data=wav, mime_type="audio/wav"),
        EmbeddedResource(resource=TextResourceContents(uri="file:///a.txt", text="inside")),
        EmbeddedResource(
            resource=BlobResourceContents(uri="file:///b.bin", blob=wav, mime_type=None)
        ),
        ResourceLink(uri="file:///c.md", name="c", description="the notes"),
    ]
    assert result_text(blocks, None).splitlines() == [
        "first",
        "[audio: audio/wav, 100 bytes; not shown]",
        "inside",
        "[resource file:///b.bin: unknown type, 100 bytes; not shown]",
        "[resource link file:///c.md (c): the notes]",
    ]
    assert result_text([], {"rows": [1, "é"]}) == '{"rows": [1, "é"]}'
    assert result_text([], None) == ""

    class Odd:
        type = "hologram"

    assert block_text(Odd()) == "[hologram content; not shown]"
    assert block_text(AudioContent(data="@@not base64@@", mime_type="audio/x")) == (
        "[audio: audio/x, 14 base64 characters; not shown]"
    )


def test_listed_tools_get_safe_names_and_bad_schemas_are_refused() -> None:
    from types import SimpleNamespace

    def remote(name: str, schema: dict[str, Any] | None = None) -> Any:
        return SimpleNamespace(
            name=name, description=None, title="Title", input_schema=schema or {"type": "object"}
        )

    server = MCPServer.stdio(PYTHON, [SERVER], tool_prefix="fs")
    tools = server._tools([remote("read.file"), remote("x" * 80)])
    assert [t.name for t in tools] == ["fs_read_file", "fs_" + "x" * 61]
    assert tools[0].description == "Title"
    with pytest.raises(MCPServerError, match="two tools named 'fs_a_b'"):
        server._tools([remote("a.b"), remote("a/b")])
    with pytest.raises(MCPServerError, match=r"its tool 'bad' cannot be used: .*JSON Schema"):
        server._tools([remote("bad", {"type": "object", "properties": {"a": {"type": 3}}})])
