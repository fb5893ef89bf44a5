"""A small MCP server for the tests, written with the MCP SDK's server side.

Run ``python tests/mcp/mcp_server.py`` for stdio, or ``python tests/mcp/mcp_server.py --http PORT``
for streamable HTTP on 127.0.0.1:PORT (endpoint ``/mcp``).
"""

from __future__ import annotations

import asyncio
import os
import sys

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from mcp_types import ImageContent, TextContent

app = MCPServer("glassagent-tests", instructions="Tools for the glassagent tests.")

# a 1x1 PNG
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d4944415478da63f8cfc0f01f0005000201ea3a2b8a0000000049454e44ae426082"
)


@app.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@app.tool()
def echo(text: str, times: int | None = None) -> str:
    """Echo the text, `times` times."""
    return text * (times or 1)


@app.tool()
def fail(message: str) -> str:
    """Fail with the message."""
    raise ToolError(message)


@app.tool()
async def slow(seconds: float, ctx: Context) -> str:
    """Report progress, then sleep `seconds`."""
    await ctx.report_progress(1, 2, "halfway there")
    await asyncio.sleep(seconds)
    return f"slept {seconds:g}"


@app.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@app.tool()
def die() -> str:
    """Exit the server at once."""
    os._exit(3)


@app.tool()
def big(chars: int, error: bool = False) -> str:
    """A text of `chars` characters (digits, repeating), or an error with such a message."""
    text = ("0123456789" * (chars // 10 + 1))[:chars]
    if error:
        raise ToolError(text)
    return text


@app.tool()
def picture() -> list[TextContent | ImageContent]:
    """A caption and a tiny image."""
    return [TextContent(text="a red dot"), Image(data=PNG, format="png").to_image_content()]


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        app.run()
