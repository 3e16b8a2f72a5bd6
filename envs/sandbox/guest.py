"""Helpers for trusted *runner* programs that execute inside a sandbox (stdlib only).

A runner (e.g. the EvalPlus or LiveCodeBench grader) is sent into the sandbox as source text: this
module's source followed by the runner's, run with ``Sandbox.run(..., grader=True)``. The runner reads
its job from stdin in frames, forks a *worker* that runs the model's code, and prints one sealed
result. What keeps the worker from speaking for the verdict:

* :func:`guard_runner` moves the host channel (stdout) to a private fd, points fds 1 and 2 at
  /dev/null, and makes every forked child close stdin and that fd, then become a *candidate* (the
  sandbox's ``lopd_sandbox.enter_candidate``: another uid than the runner's, no capabilities, a
  seccomp filter), so it can neither ptrace, signal nor open ``/proc/<runner>/{mem,fd}``.
* Data a worker must not see (expected outputs) is read from stdin only *after* the worker is forked,
  so it is neither in the worker's copy of memory nor readable from the worker's stdin.
* The result is sealed with a per-run key, the last frame of stdin, read only after every worker is
  gone (:func:`emit_result`); the host accepts only a result whose seal it can check
  (:func:`open_result`).

>>> r, w = os.pipe(); send_msg(w, "O", b"x"); os.close(w)
>>> MsgReader(r).read(1.0)
('O', b'x')
>>> open_result(b"k" * 32, seal(b"k" * 32, {"pass": True}))
{'pass': True}
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import select
import signal
import struct
import time

_result_fd: int | None = None
KEY_BYTES = 32


def read_exact(fd: int, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = os.read(fd, min(n - len(buf), 1 << 20))
        if not chunk:
            raise EOFError("input ended early")
        buf += chunk
    return bytes(buf)


def read_frame(fd: int = 0) -> bytes:
    """One length-prefixed frame (4-byte big-endian length) from ``fd``."""
    (n,) = struct.unpack(">I", read_exact(fd, 4))
    return read_exact(fd, n)


def guard_runner() -> None:
    """Call first thing in a runner (see the module docstring)."""
    global _result_fd
    import lopd_sandbox  # given to graders by the sandbox (envs/sandbox/_jail.py), never from a file

    enter_candidate = lopd_sandbox.enter_candidate
    _result_fd = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.close(devnull)
    fd = _result_fd

    def become_candidate_in_child() -> None:
        try:
            for f in (0, fd):
                os.close(f)
            enter_candidate()
        except BaseException:
            os._exit(125)  # a child that cannot be confined never runs anything

    os.register_at_fork(after_in_child=become_candidate_in_child)


def seal(key: bytes, obj) -> bytes:
    """The result line: the HMAC-SHA256 of its JSON under ``key``, a space, the JSON."""
    text = json.dumps(obj)
    return (hmac.new(key, text.encode(), hashlib.sha256).hexdigest() + " " + text + "\n").encode()


def open_result(key: bytes, stdout: bytes):
    """The host side of :func:`seal`: the object of the last line of ``stdout`` if its seal is
    ``key``'s; ValueError otherwise (nothing else may speak for a verdict)."""
    lines = stdout.strip().splitlines()
    mac, _, text = (lines[-1] if lines else b"").partition(b" ")
    good = hmac.new(key, text, hashlib.sha256).hexdigest().encode()
    if not hmac.compare_digest(mac, good):
        raise ValueError("the result's seal does not match this run's key")
    return json.loads(text)


def emit_result(obj) -> None:
    """Read the run's key (stdin's last frame: every worker is gone by now) and write the sealed
    result to the host channel."""
    data = seal(read_frame(0), obj)
    fd = _result_fd if _result_fd is not None else 1
    while data:
        n = os.write(fd, data)
        data = data[n:]


def send_msg(fd: int, kind: str, payload: bytes = b"") -> None:
    """Worker -> runner message: 4-byte length, 1-byte kind, payload."""
    data = struct.pack(">IB", len(payload), ord(kind)) + payload
    while data:
        n = os.write(fd, data)
        data = data[n:]


class MsgReader:
    """Runner side of :func:`send_msg`, with deadlines and a size bound."""

    def __init__(self, fd: int, max_payload: int = 1 << 30):
        self.fd, self.max_payload, self.buf, self.eof = fd, max_payload, bytearray(), False

    def read(self, timeout: float):
        """The next (kind, payload); None at EOF; raises TimeoutError after ``timeout`` seconds."""
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            if len(self.buf) >= 5:
                n, kind = struct.unpack(">IB", self.buf[:5])
                if n > self.max_payload:
                    raise ValueError(f"worker message of {n} bytes")
                if len(self.buf) >= 5 + n:
                    payload = bytes(self.buf[5 : 5 + n])
                    del self.buf[: 5 + n]
                    return chr(kind), payload
            if self.eof:
                return None
            # past the deadline, what is already in the pipe still counts: a busy reader is not late
            left = max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self.fd], [], [], left)
            if not ready:
                raise TimeoutError
            chunk = os.read(self.fd, 1 << 20)
            if not chunk:
                self.eof = True
            self.buf += chunk


def fork_worker(target, *args) -> tuple[int, int, int]:
    """Fork a worker that waits for :func:`release` and then runs ``target(msg_fd, *args)``.

    Returns (pid, message read fd, release write fd). The worker exits when ``target`` returns.
    """
    msg_r, msg_w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.setpgid(0, 0)  # its own group: kill_worker ends whatever it forks, too
            os.close(msg_r)
            os.close(go_w)
            if os.read(go_r, 1) == b"1":
                os.close(go_r)
                target(msg_w, *args)
        finally:
            os._exit(0)
    os.close(msg_w)
    os.close(go_r)
    return pid, msg_r, go_w


def release(go_w: int) -> None:
    os.write(go_w, b"1")
    os.close(go_w)


def kill_worker(pid: int) -> None:
    """SIGKILL the worker and its process group (children that did not leave it), then reap it."""
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
