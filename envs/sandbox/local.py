"""The ``local`` backend: executions forked from a confined fork server on this machine.

One zygote process per :class:`LocalSandbox` (started on first use) holds the preloaded modules and
the jail; each ``run`` is a fresh process tree in fresh namespaces with a fresh /tmp work dir (see
:mod:`envs.sandbox._jail` for the tree and docs/SANDBOX.md for what each layer stops)::

    from envs.sandbox import SandboxConfig, make_sandbox
    sb = make_sandbox(SandboxConfig(backend="local"))
    print(sb.run("import socket; socket.create_connection(('1.1.1.1', 53), 1)").stderr)  # unreachable
    sb.close()
"""

from __future__ import annotations

import base64
import json
import logging
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from envs.sandbox import seccomp
from envs.sandbox.base import ExecResult, Sandbox, SandboxUnavailable
from envs.sandbox.config import Limits

log = logging.getLogger(__name__)
_HERE = Path(__file__).parent
_JAIL = [str(_HERE / name) for name in ("_confine.py", "_relay.py", "_jail.py")]
_LOADER = (  # one module of the jail's sources, loaded by path: the zygote imports nothing of the project
    "import sys, types\n"
    "mod = types.ModuleType('lopd_jail')\n"
    "sys.modules['lopd_jail'] = mod\n"
    "future = 'from __future__ import annotations'\n"
    "src = '\\n'.join(open(p).read().replace(future, '') for p in sys.argv[1:-1])\n"
    "exec(compile('from __future__ import annotations\\n' + src, 'lopd_jail', 'exec'), mod.__dict__)\n"
    "mod.zygote_main(sys.argv[-1])\n"
)
_START_TIMEOUT_S = 60.0
_warned: set[str] = set()


def _warn_unisolated(reason: str) -> None:
    """Say once per reason that untrusted code runs without isolation."""
    if reason in _warned:
        return
    _warned.add(reason)
    log.warning(
        "local sandbox runs WITHOUT isolation (%s): the network and the filesystem are "
        "NOT isolated; only rlimits, a process group and a clean environment apply. "
        "Run as root or use the docker backend for untrusted code.",
        reason,
    )


def python_ro_paths() -> list[str]:
    """Host paths the sandboxed interpreter needs: its installation and the venv (site-packages)."""
    paths = {os.path.realpath(p) for p in (sys.base_prefix, sys.prefix, sys.exec_prefix)}
    return sorted(paths)


class LocalSandbox(Sandbox):
    """Namespaced subprocesses on this machine (``isolation='full'`` needs root)."""

    name = "local"

    def _setup(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._dir: str | None = None
        self._sock_path: str | None = None
        self._isolation = ""

    # ---- zygote lifecycle ------------------------------------------------------------------
    def _start(self) -> None:
        reason = seccomp.unavailable_reason()
        if reason:  # never run candidates without their filter
            raise SandboxUnavailable(f"local sandbox: {reason}")
        self._dir = tempfile.mkdtemp(prefix="lopd-sandbox-")
        os.chmod(self._dir, 0o711)  # the jail's mount point lives here; nothing else is listable
        self._sock_path = os.path.join(self._dir, "zygote.sock")
        lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        lsock.bind(self._sock_path)
        os.chmod(self._sock_path, 0o600)
        lsock.listen(128)
        cfg = json.dumps(self._zygote_config(lsock.fileno()))
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}  # nothing of ours leaks in
        log_path = os.path.join(self._dir, "zygote.log")
        with open(log_path, "wb") as errlog:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-c", _LOADER, *_JAIL, cfg],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=errlog,
                env=env,
                pass_fds=[lsock.fileno()],
                start_new_session=True,
                cwd="/",
            )
        lsock.close()
        msg = self._zygote_answer()
        if not msg.get("ok"):
            detail = Path(log_path).read_text(errors="replace")[-2000:]
            self.close()
            hint = (
                "run as root for isolation='full', or set sandbox isolation to 'auto'/'none'"
                if self.config.isolation == "full"
                else "see the log above"
            )
            raise SandboxUnavailable(f"local sandbox failed to start: {msg.get('error')}; {hint}\n{detail}")
        self._isolation = msg["isolation"]
        self.memory_scope = msg.get("memory_scope", "process")
        if msg.get("warning"):
            _warn_unisolated(msg["warning"])

    def _zygote_config(self, listen_fd: int) -> dict[str, Any]:
        """What the zygote is started with (its last argument, as JSON)."""
        return {
            "listen_fd": listen_fd,
            "isolation": self.config.isolation,
            "preload": list(self.preload),
            "programs": list(self.programs),
            "ro_paths": python_ro_paths() + list(self.config.extra_ro_paths),
            "uid_base": self.config.uid_base,
            "uid_count": self.config.uid_count,
            "tmp_dir": self._dir,
            "seccomp": base64.b64encode(seccomp.candidate_filter()).decode(),
        }

    def _zygote_answer(self) -> dict[str, Any]:
        """The zygote's first line: ``ok`` and its isolation once it is ready, or the error."""
        ready, _, _ = select.select([self._proc.stdout], [], [], _START_TIMEOUT_S)
        line = self._proc.stdout.readline() if ready else b""
        try:
            return json.loads(line) if line else {"ok": False, "error": "no answer from the sandbox process"}
        except ValueError:
            return {"ok": False, "error": f"unreadable answer {line[:200]!r}"}

    def _ensure(self) -> str:
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                if self._proc is not None:
                    self.close()
                self._start()
            return self._sock_path

    @property
    def isolation(self) -> str:
        self._ensure()
        return self._isolation

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            try:
                proc.stdin.close()  # the zygote exits on EOF
                proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
                proc.wait()
            if proc.stdout:
                proc.stdout.close()
        if self._dir:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    # ---- executions -------------------------------------------------------------------------
    def _execute(self, request: dict[str, Any], stdin: bytes, limits: Limits) -> ExecResult:
        payload = json.dumps(request).encode()
        for attempt in range(2):  # a zygote that died in between is restarted once
            path = self._ensure()
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.settimeout(limits.timeout_s + 30.0)
                try:
                    sock.connect(path)
                except (FileNotFoundError, ConnectionRefusedError):
                    if attempt == 0:
                        self._kill_zygote()
                        continue
                    raise
                sock.sendall(len(payload).to_bytes(4, "big") + payload)
                if stdin:
                    sock.sendall(stdin)
                reply = json.loads(_recv_frame(sock))
                break
            except (OSError, EOFError, ValueError) as e:
                return ExecResult(
                    exit_code=None,
                    backend=self.name,
                    isolation=self._isolation,
                    error=f"sandbox connection failed: {type(e).__name__}: {e}",
                )
            finally:
                sock.close()
        return self._result(reply)

    def _kill_zygote(self) -> None:
        """Kill a zygote that no longer answers, so that the next ``_ensure`` starts another."""
        with self._lock:
            if self._proc is not None and self._proc.poll() is None:
                self._proc.kill()

    def _result(self, reply: dict[str, Any]) -> ExecResult:
        """The ExecResult of the zygote's reply to one run."""
        return ExecResult(
            exit_code=reply.get("exit_code"),
            signal=reply.get("signal"),
            stdout=base64.b64decode(reply.get("stdout", "")),
            stderr=base64.b64decode(reply.get("stderr", "")),
            timed_out=bool(reply.get("timed_out")),
            output_truncated=bool(reply.get("truncated")),
            duration_s=float(reply.get("duration", 0.0)),
            backend=self.name,
            isolation=reply.get("isolation", self._isolation),
            error=reply.get("error"),
            memory_scope=reply.get("memory_scope", "process"),
            oom_killed=bool(reply.get("oom_killed")),
        )


def _recv_frame(sock: socket.socket) -> bytes:
    def exact(n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = sock.recv(min(1 << 20, n - len(buf)))
            if not chunk:
                raise EOFError("sandbox closed the connection")
            buf += chunk
        return bytes(buf)

    return exact(int.from_bytes(exact(4), "big"))
