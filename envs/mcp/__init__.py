"""MCP bridges: any MCP server as a Gymnasium env (``lopd/mcp-v0``, :mod:`envs.mcp.env`), and any env's
tools served over MCP (``lopd serve-mcp``, :mod:`envs.mcp.serve`)."""
