"""``lopd serve`` in a child process, for scripts and tests that want a served env and its URL::

    with spawn_server("lopd/shop-v0", "max_steps=4") as url:
        env = gymnasium.make("lopd/remote-v0", url=url)
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 600.0  # the first start may build .venv-openenv (about a minute with PyPI)


class ServeError(RuntimeError):
    """The server exited or did not answer /health in time; the message ends with its log."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def spawn_server(env_id: str, *kwargs: str, max_sessions: int = 16,
                 timeout_s: float = START_TIMEOUT_S) -> Iterator[str]:
    """Run ``lopd serve env_id --port <free> --max-sessions N kwargs...`` until the block ends (the
    whole process group is taken down); yields its base URL once ``/health`` answers."""
    port = free_port()
    cmd = [sys.executable, "-m", "harness.cli", "serve", env_id, "--port", str(port),
           "--max-sessions", str(max_sessions), *kwargs]
    with running(cmd, f"http://127.0.0.1:{port}", timeout_s=timeout_s) as url:
        yield url


@contextlib.contextmanager
def running(cmd: list[str], url: str, *, cwd: Path = ROOT, env: dict[str, str] | None = None,
            timeout_s: float = START_TIMEOUT_S) -> Iterator[str]:
    """Run a server command until the block ends (its whole process group is taken down); yields ``url``
    once ``url/health`` answers 200."""
    import httpx

    with tempfile.TemporaryFile("w+") as log:  # not a pipe: a server that logs much must not block on it
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        try:
            _wait_healthy(proc, url, log, timeout_s, httpx)
            yield url
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def _wait_healthy(proc: subprocess.Popen, url: str, log, timeout_s: float, httpx) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            log.seek(0)
            raise ServeError(f"{shlex.join(proc.args)} exited {proc.returncode}:\n{log.read()[-3000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return
        time.sleep(0.2)
    log.seek(0)
    raise ServeError(f"{shlex.join(proc.args)} did not answer {url}/health within {timeout_s:.0f} s:\n"
                     f"{log.read()[-3000:]}")
