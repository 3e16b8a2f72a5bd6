"""Runs one MCP stdio server as its child and takes the server's whole process group down when the env's
process dies, even by SIGKILL (Linux ``PR_SET_PDEATHSIG``; elsewhere the SDK's own shutdown is all there is).

The MCP SDK starts this script in a new session and kills that group when the session closes; this
script covers the case the SDK cannot: the env's process crashing. Standard library only, run by path::

    python guard.py PARENT_PID -- server-command args...
"""

import ctypes
import os
import signal
import subprocess
import sys

PR_SET_PDEATHSIG = 1


def _take_group_down(signum: int, frame: object) -> None:
    try:
        os.killpg(os.getpgrp(), signal.SIGKILL)  # the server, its children and this script
    finally:
        os._exit(128 + signum)


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: guard.py PARENT_PID -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    parent, command = int(argv[0]), argv[2:]
    signal.signal(signal.SIGTERM, _take_group_down)
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # the env's process died before the death signal was armed
        return 1
    try:
        server = subprocess.Popen(command)  # inherits the SDK's stdin/stdout pipes and the stderr log
    except OSError as e:
        print(f"cannot start the MCP server {command[0]!r}: {e}", file=sys.stderr)
        return 127
    code = server.wait()
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
