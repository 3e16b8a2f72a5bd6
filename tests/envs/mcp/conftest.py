"""MCP servers for the tests of ``lopd/mcp-v0``: the notes server on the official SDK's 2.x API (run by
this venv) and on its 1.x API (run by ``.venv-mcp1``), a published server from PyPI (run by
``.venv-mcp-published``), and the 2.x notes server over streamable HTTP.

The two extra venvs sit in the repository root and are built on first use (about 15 s each, PyPI
needed); a test that needs one is skipped, with pip's reason, when it cannot be built. A file lock
next to each venv keeps pytest-xdist workers from building it at once, and a marker file in it (the
requirement it was built for) tells a finished build from one cut off halfway, which is rebuilt.

The stdio fixtures yield commands for ``lopd/mcp-v0`` with the literal ``{episode_dir}`` placeholder
still in them (the env substitutes it; a test that runs one directly fills it in itself).
"""

import contextlib
import fcntl
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SERVERS = ROOT / "tests" / "data" / "mcp_servers"
NOTES_V1 = SERVERS / "notes_v1.py"
NOTES_V2 = SERVERS / "notes_v2.py"

# The last 1.x release (1.x is what most published servers still pin); notes_v1.py uses its FastMCP.
MCP1_REQUIREMENT = "mcp==1.30.0"
# The reference time server (modelcontextprotocol/servers), built on mcp 2.x's MCPServer.
PUBLISHED_REQUIREMENT = "mcp-server-time==2026.10.19"

VENV_BUILD_TIMEOUT_S = 300
HTTP_START_TIMEOUT_S = 20.0


def _pip_tail(text: str, lines: int = 8) -> str:
    kept = [x for x in text.splitlines() if x.strip() and "is ignored: it is neither a file nor" not in x]
    return "\n".join(kept[-lines:]) or "(no output)"


def ensure_venv(name: str, requirement: str) -> Path:
    """The venv ``ROOT/name`` with ``requirement`` installed, built now if missing; skips the test
    (with pip's last stderr lines) when it cannot be built."""
    venv = ROOT / name
    marker = venv / ".lopd-requirement"
    if marker.is_file() and marker.read_text() == requirement:
        return venv
    with open(ROOT / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if marker.is_file() and marker.read_text() == requirement:  # another worker built it
            return venv
        shutil.rmtree(venv, ignore_errors=True)
        steps = [
            [sys.executable, "-m", "venv", str(venv)],
            [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
             requirement],
        ]
        for step in steps:
            try:
                done = subprocess.run(step, capture_output=True, text=True, timeout=VENV_BUILD_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                pytest.skip(f"building {name} ({requirement}) timed out after {VENV_BUILD_TIMEOUT_S} s")
            if done.returncode != 0:
                pytest.skip(
                    f"cannot build {name} ({requirement}): {' '.join(step[1:3])} exited {done.returncode}:\n"
                    + _pip_tail(done.stderr or done.stdout)
                )
        marker.write_text(requirement)
    return venv


@pytest.fixture(scope="session")
def notes_v2_cmd() -> list[str]:
    """The 2.x notes server over stdio, run by this venv's Python."""
    return [sys.executable, str(NOTES_V2), "--state", "{episode_dir}"]


@pytest.fixture(scope="session")
def notes_v1_cmd() -> list[str]:
    """The 1.x notes server over stdio, run by ``.venv-mcp1`` (mcp 1.x)."""
    venv = ensure_venv(".venv-mcp1", MCP1_REQUIREMENT)
    return [str(venv / "bin" / "python"), str(NOTES_V1), "--state", "{episode_dir}"]


@pytest.fixture(scope="session", params=["v1", "v2"])
def notes_server(request: pytest.FixtureRequest) -> list[str]:
    """The notes server's stdio command on each SDK major version in turn."""
    return request.getfixturevalue(f"notes_{request.param}_cmd")


@pytest.fixture(scope="session")
def published_server() -> list[str]:
    """``mcp-server-time`` from PyPI over stdio (tools ``get_current_time``, ``convert_time``), with
    its local timezone fixed to UTC."""
    venv = ensure_venv(".venv-mcp-published", PUBLISHED_REQUIREMENT)
    return [str(venv / "bin" / "mcp-server-time"), "--local-timezone", "UTC"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@pytest.fixture(scope="session")
def http_notes_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The 2.x notes server over streamable HTTP, one process (and one state dir) for the session:
    its URL, ``http://127.0.0.1:PORT/mcp``."""
    base = tmp_path_factory.mktemp("http_notes")
    port = _free_port()
    with open(base / "stderr.txt", "w+b") as err:
        proc = subprocess.Popen(
            [sys.executable, str(NOTES_V2), "--state", str(base / "state"), "--http", str(port)],
            stdin=subprocess.DEVNULL, stdout=err, stderr=err, start_new_session=True,
        )
        try:
            deadline = time.monotonic() + HTTP_START_TIMEOUT_S
            while not _accepts(port):
                if proc.poll() is not None or time.monotonic() > deadline:
                    err.seek(0)
                    why = f"exited {proc.returncode}" if proc.poll() is not None else "is not listening"
                    pytest.fail(f"the HTTP notes server on port {port} {why}:\n{err.read().decode()[-2000:]}")
                time.sleep(0.05)
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            with contextlib.suppress(ProcessLookupError):  # the whole group: the server and its children
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
