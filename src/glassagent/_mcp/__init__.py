"""MCP servers as tool sources (public face: `glassagent.mcp`); needs the ``mcp`` extra."""
