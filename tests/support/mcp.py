"""Helpers for the MCP tests: the real test server (tests/mcp/mcp_server.py) as a stdio child.

The `quiet` fixture (where its log lines go) is in conftest.py.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, TextIO

from glassagent.mcp import MCPServer

SERVER = str(Path(__file__).parents[1] / "mcp" / "mcp_server.py")
PYTHON = sys.executable


def stdio(quiet: TextIO, **options: Any) -> MCPServer:
    """The test server over stdio, its log lines into `quiet`."""
    return MCPServer.stdio(PYTHON, [SERVER], stderr=quiet, **options)
