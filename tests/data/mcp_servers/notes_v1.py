"""A notes MCP server written against the official SDK's 1.x API (``mcp.server.fastmcp.FastMCP``).

The tests of ``lopd/mcp-v0`` run it with a venv that has mcp 1.x (``.venv-mcp1``, which the tests'
conftest builds); ``notes_v2.py`` is the same server on the 2.x API. Its state is one file,
``DIR/notes.txt`` (one note a line), so the env's ``{episode_dir}`` gives each episode a clean one.
Besides the notes it has tools that misbehave on purpose (an error, a slow call, a crash, a garbage
stdout line, a grandchild process), each for one of the env's failure paths::

    python notes_v1.py --state DIR               # stdio
    python notes_v1.py --state DIR --http PORT   # streamable HTTP at http://127.0.0.1:PORT/mcp

``NOTES_SERVER_FAIL_START=1`` makes it print ``boom: cannot start`` to stderr and exit 1 before serving.
"""

import argparse
import os
import sys
from pathlib import Path

from mcp.server.fastmcp import FastMCP

from notes_tools import register  # beside this file, so on sys.path when run as a script


def build(wire_fd: int, state: Path, port: int = 8000) -> FastMCP:
    # 1.x takes the HTTP transport's settings here, not in run()
    server = FastMCP(
        "notes-v1",
        instructions="A notes file: add and list notes.",
        log_level="WARNING",
        host="127.0.0.1",
        port=port,
        streamable_http_path="/mcp",
    )
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
    if args.http is None:
        build(wire_fd, args.state).run()
    else:
        build(wire_fd, args.state, port=args.http).run("streamable-http")


if __name__ == "__main__":
    main()
