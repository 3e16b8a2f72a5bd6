"""A notes MCP server written against the official SDK's 2.x API (``mcp.server.mcpserver.MCPServer``).

The tests of ``lopd/mcp-v0`` run it; ``notes_v1.py`` is the same server on the 1.x API. Its state is
one file, ``DIR/notes.txt`` (one note a line), so the env's ``{episode_dir}`` gives each episode a
clean one. Besides the notes it has tools that misbehave on purpose (an error, a slow call, a crash,
a garbage stdout line, a grandchild process), each for one of the env's failure paths::

    python notes_v2.py --state DIR               # stdio
    python notes_v2.py --state DIR --http PORT   # streamable HTTP at http://127.0.0.1:PORT/mcp

``NOTES_SERVER_FAIL_START=1`` makes it print ``boom: cannot start`` to stderr and exit 1 before serving.
"""

import argparse
import os
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer

from notes_tools import register  # beside this file, so on sys.path when run as a script


def build(wire_fd: int, state: Path) -> MCPServer:
    server = MCPServer("notes-v2", instructions="A notes file: add and list notes.", log_level="WARNING")
    register(server, wire_fd, state)
    return server


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--state", required=True, type=Path, help="the folder that holds notes.txt")
    ap.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on 127.0.0.1:PORT/mcp")
    args = ap.parse_args()
    if os.environ.get("NOTES_SERVER_FAIL_START") == "1":
        print("boom: cannot start", file=sys.stderr, flush=True)
        sys.exit(1)
    args.state.mkdir(parents=True, exist_ok=True)
    # The real stdout, kept before serving: mcp 2.x's stdio transport points fd 1 at stderr while it
    # serves (so that a stray print cannot corrupt the wire), so `garbage` writes to this duplicate.
    wire_fd = os.dup(1)
    server = build(wire_fd, args.state)
    if args.http is None:
        server.run()
    else:
        server.run("streamable-http", host="127.0.0.1", port=args.http, streamable_http_path="/mcp")


if __name__ == "__main__":
    main()
