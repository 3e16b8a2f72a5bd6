"""The MCP server ``lopd/mcp-v0`` plays by default: a notes folder, written against the official SDK.

Its state is one file in ``--state DIR``, so the env's ``{episode_dir}`` gives each episode a clean one::

    python envs/mcp/example_server.py --state /tmp/notes     # stdio
"""

import argparse
import json
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError


def build(state: Path) -> MCPServer:
    server = MCPServer("lopd-notes", instructions="A notes folder: add, list, search and delete notes.")
    path = state / "notes.json"

    def load() -> list[str]:
        return json.loads(path.read_text()) if path.exists() else []

    def save(notes: list[str]) -> None:
        path.write_text(json.dumps(notes))

    @server.tool()
    def add_note(text: str) -> str:
        """Save a note."""
        notes = load() + [text]
        save(notes)
        return f"saved note {len(notes)}"

    @server.tool()
    def list_notes() -> list[str]:
        """Every note, oldest first."""
        return load()

    @server.tool()
    def search_notes(query: str) -> list[str]:
        """The notes that contain a word or phrase (case-insensitive)."""
        return [n for n in load() if query.lower() in n.lower()]

    @server.tool()
    def delete_note(number: int) -> str:
        """Delete one note by its number (1 = the oldest)."""
        notes = load()
        if not 1 <= number <= len(notes):
            raise ToolError(f"there is no note {number}; there are {len(notes)}")
        removed = notes.pop(number - 1)
        save(notes)
        return f"deleted note {number}: {removed}"

    return server


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--state", required=True, help="the folder that holds notes.json")
    build(Path(ap.parse_args().state)).run()
