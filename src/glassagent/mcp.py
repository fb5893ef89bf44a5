"""Tools from Model Context Protocol (MCP) servers; needs ``pip install "glassagent[mcp]"``.

`MCPServer.stdio` runs a server as a child process, `MCPServer.http` reaches one over
streamable HTTP. ``async with server:`` starts and stops it; ``await server.list_tools()``
gives its tools for an `Agent`. A server that cannot start, list or answer raises
`MCPServerError` (also in `glassagent.errors`); during a run, a failing call is the tool's
error result, which the model sees.
"""

from glassagent._core.errors import MCPServerError
from glassagent._mcp.server import MCPServer
from glassagent._public import publish

__all__ = ["MCPServer", "MCPServerError"]

publish(__name__, globals(), ["MCPServer"])
publish("glassagent.errors", globals(), ["MCPServerError"])  # documented there
