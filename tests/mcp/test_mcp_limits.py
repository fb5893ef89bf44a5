"""MCP limits: a tool's huge result is cut before the model sees it; a failed start logs nothing.

Against the real test server (tests/mcp/mcp_server.py), started as a child process.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from typing import Any, TextIO

import pytest

pytest.importorskip("mcp")

from glassagent import Agent, LLMResponse, ToolCall
from glassagent.errors import MCPServerError, ToolError, UserError
from glassagent.mcp import MCPServer
from glassagent.testing import ScriptedClient
from tests.support.mcp import PYTHON, SERVER, stdio

DIGITS = "0123456789" * 10_000  # the test server's texts start so
FIVE_MB = 5_000_000


@pytest.mark.slow
async def test_a_5_mb_result_reaches_the_model_cut_to_its_start_with_a_note(
    quiet: TextIO,
) -> None:
    client = ScriptedClient(
        [LLMResponse("", [ToolCall("c1", "big", {"chars": FIVE_MB})]), "that was long"]
    )
    async with stdio(quiet) as server:
        assert server.max_result_chars == 100_000
        result = await Agent(client, await server.list_tools()).run("Get the big text.")
        direct = await server.call_tool("big", {"chars": 300_000})
        small = await server.call_tool("big", {"chars": 100_000})
    (message,) = [m for m in result.new_messages if m.role == "tool"]
    text = message.content
    assert isinstance(text, str)
    assert len(text) < 100_200
    assert text.startswith(DIGITS)
    assert "4,900,000 more characters cut here" in text
    assert "the result has 5,000,000 characters, only the first 100,000" in text
    assert direct.startswith(DIGITS + "\n[... 200,000 more characters cut here")
    assert small == DIGITS  # at the limit: whole, no note
    # what the model was sent on its second call is the cut text, not 5 MB
    assert len(str(client.requests[-1].messages[-1].content)) < 100_200


async def test_the_limit_is_a_setting_and_also_bounds_error_results(quiet: TextIO) -> None:
    async with stdio(quiet, max_result_chars=50) as server:
        cut = await server.call_tool("big", {"chars": 1000})
        with pytest.raises(ToolError) as caught:
            await server.call_tool("big", {"chars": 10_000, "error": True})
        server.max_result_chars = None
        whole = await server.call_tool("big", {"chars": 200_000})
    assert len(whole) == 200_000
    assert cut.startswith(DIGITS[:50] + "\n[... 950 more characters cut here")
    assert len(caught.value.message) < 200
    assert "Error executing tool big: 0123" in caught.value.message  # the server's prefix
    assert "the result has 10,026 characters" in caught.value.message


@pytest.mark.parametrize("bad", [0, -1, 1.5, "100", True])
def test_a_bad_result_limit_is_a_user_error(bad: Any) -> None:
    with pytest.raises(UserError, match="max_result_chars"):
        MCPServer.stdio(PYTHON, [SERVER], max_result_chars=bad)
    with pytest.raises(UserError, match="max_result_chars"):
        MCPServer.http("http://127.0.0.1:1/mcp", max_result_chars=bad)


@pytest.mark.parametrize("bad", ["5", True, [1]])
def test_a_bad_timeout_is_a_user_error_not_a_type_error(bad: Any) -> None:
    with pytest.raises(UserError, match="call_timeout"):
        MCPServer.stdio(PYTHON, [SERVER], call_timeout=bad)
    with pytest.raises(UserError, match="start_timeout"):
        MCPServer.http("http://127.0.0.1:1/mcp", start_timeout=bad)


NEVER_ANSWERS = ["-c", "import sys; sys.stdin.read()"]  # ends when its input is closed
GARBAGE = ["-c", "import sys; print('not json', flush=True); sys.stdin.read()"]


@pytest.mark.parametrize(
    ("args", "how"),
    [(NEVER_ANSWERS, "times out"), (GARBAGE, "times out"), (NEVER_ANSWERS, "is cancelled")],
    ids=["silent", "garbage", "cancelled"],
)
async def test_a_failed_start_leaves_nothing_for_asyncio_to_log(
    args: list[str], how: str, quiet: TextIO, caplog: pytest.LogCaptureFixture
) -> None:
    server = MCPServer.stdio(PYTHON, args, stderr=quiet, start_timeout=0.5)
    with caplog.at_level(logging.DEBUG, logger="asyncio"):
        if how == "is cancelled":
            starting = asyncio.create_task(server.start())
            await asyncio.sleep(0.2)
            starting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await starting
        else:
            with pytest.raises(MCPServerError, match=r"did not start within 0\.5 s"):
                await server.start()
        del server
        gc.collect()
        await asyncio.sleep(0)
        gc.collect()
    stray = [r for r in caplog.records if r.name == "asyncio" and r.levelno >= logging.WARNING]
    assert not stray, [r.getMessage() for r in stray]
