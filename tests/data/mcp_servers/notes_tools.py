"""The notes tools shared by ``notes_v1.py`` and ``notes_v2.py``: the same server on the 1.x and 2.x SDK,
whose ``server.tool()`` decorators take the same functions."""

import os
import subprocess
import time
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field


def register(server: Any, wire_fd: int, state: Path) -> None:
    """Add the notes tools to ``server`` (a 1.x FastMCP or a 2.x MCPServer); ``wire_fd`` is the real stdout
    (``garbage`` writes to it) and ``state`` the folder that holds notes.txt."""
    path = state / "notes.txt"

    def load() -> list[str]:
        return path.read_text().splitlines() if path.exists() else []

    @server.tool()
    def add_note(text: Annotated[str, Field(description="the note's text, one line")]) -> str:
        """Save a note at the end of the notes file."""
        with path.open("a") as f:
            f.write(text.replace("\n", " ") + "\n")
        return f"saved note {len(load())}"

    @server.tool()
    def list_notes() -> str:
        """Every note, oldest first, one a line ("" when there are none)."""
        return "\n".join(load())

    @server.tool()
    def divide(
        a: Annotated[float, Field(description="the dividend")],
        b: Annotated[float, Field(description="the divisor; 0 is an error")],
    ) -> float:
        """Divide a by b (a ValueError, so an error result, when b is 0)."""
        if b == 0:
            raise ValueError("cannot divide by zero")
        return a / b

    @server.tool()
    def sleep(seconds: Annotated[float, Field(description="how long to wait")]) -> str:
        """Wait some seconds, then answer "slept"."""
        time.sleep(seconds)
        return "slept"

    @server.tool()
    def crash() -> str:
        """Kill the server mid-call (exit status 3)."""
        os._exit(3)

    @server.tool()
    def garbage() -> str:
        """Write a line that is not JSON-RPC to the server's stdout, then answer "ok"."""
        os.write(wire_fd, b"this is not json\n")
        return "ok"

    @server.tool()
    def spawn_child() -> str:
        """Start a grandchild process (sleep 600) and answer its pid."""
        child = subprocess.Popen(
            ["sleep", "600"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        return str(child.pid)

