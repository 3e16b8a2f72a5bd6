"""The monitor's side of one local execution: stdin in, capped output out, the wall clock, reaping.

Stdlib only; its source is sent between _confine.py's and _jail.py's into the zygote (never imported).
"""

from __future__ import annotations

import base64
import os
import selectors
import signal
import socket
import time

CHUNK = 1 << 20
F_SETPIPE_SZ = 1031


def fcntl_setpipe(fd: int) -> None:
    import fcntl

    try:
        fcntl.fcntl(fd, F_SETPIPE_SZ, CHUNK)
    except OSError:
        pass  # the default 64 KiB pipe only costs speed


def read_all(fd: int) -> bytes:
    out = bytearray()
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            return bytes(out)
        out += chunk


def kill_group(pid: int) -> None:
    """SIGKILL init's process group: without a pid namespace ('none') nothing else stops the worker."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass  # init never got to setsid, or the group is already empty


class Relay:
    """Feeds the host's stdin bytes to the program, collects stdout and stderr up to the cap, and
    enforces the deadline on init (``pid``), whose exit ends the run."""

    def __init__(
        self, conn: socket.socket, req: dict, pid: int, in_w: int, out_r: int, err_r: int, t0: float
    ):
        limits = req["limits"]
        self.conn, self.pid, self.in_w, self.out_r, self.err_r, self.t0 = conn, pid, in_w, out_r, err_r, t0
        self.deadline = t0 + float(limits["timeout_s"])
        self.cap = int(limits["max_output_bytes"])
        self.stdin_left = int(req.get("stdin_len", 0))
        self.pending = bytearray()
        self.outs = {out_r: bytearray(), err_r: bytearray()}
        self.open_outs = {out_r, err_r}
        self.sel = selectors.DefaultSelector()
        self.in_open = True  # stdin the program no longer reads is discarded
        self.exited = self.timed_out = self.truncated = False
        self.exit_time = 0.0
        self.pidfd = os.pidfd_open(pid) if hasattr(os, "pidfd_open") else None

    def close_in(self) -> None:
        if self.in_open:
            if self.in_w in self.sel.get_map():
                self.sel.unregister(self.in_w)
            os.close(self.in_w)
            self.in_open = False
        self.pending.clear()

    def run(self) -> dict:
        self.conn.setblocking(False)
        os.set_blocking(self.in_w, False)
        if self.stdin_left:
            self.sel.register(self.conn, selectors.EVENT_READ, "conn")
        else:
            self.close_in()
        self.sel.register(self.out_r, selectors.EVENT_READ, "out")
        self.sel.register(self.err_r, selectors.EVENT_READ, "out")
        if self.pidfd is not None:
            self.sel.register(self.pidfd, selectors.EVENT_READ, "pid")
        try:
            self._loop()
        finally:
            self._finish()
        return self._reply()

    def _loop(self) -> None:
        while not self.truncated:
            now = time.monotonic()
            if not self.exited and self.pidfd is None and os.waitpid(self.pid, os.WNOHANG)[0] == self.pid:
                self._init_exited(now)
            if self.exited and (not self.open_outs or now - self.exit_time > 0.5):
                break  # in 'none' isolation an escaped orphan may hold the pipe: do not wait on it
            if now >= self.deadline and not self.exited:
                self.timed_out = True
                break
            wait = self.deadline - now if not self.exited else 0.5
            if self.pidfd is None:
                wait = min(wait, 0.02)
            for key, _ in self.sel.select(max(wait, 0.0)):
                getattr(self, "_on_" + key.data)(key.fd)
            if self.stdin_left == 0 and not self.pending and self.in_open:
                self.close_in()

    def _init_exited(self, now: float) -> None:
        self.exited, self.exit_time = True, now
        kill_group(self.pid)  # leftovers of the worker (init only exits after it)

    def _on_conn(self, fd: int) -> None:
        try:
            data = self.conn.recv(min(CHUNK, self.stdin_left))
        except BlockingIOError:
            return
        if not data:
            raise EOFError("host closed the connection while sending stdin")
        self.stdin_left -= len(data)
        if self.stdin_left == 0:
            self.sel.unregister(self.conn)
        if self.in_open:
            self.pending += data
            if self.in_w not in self.sel.get_map():
                self.sel.register(self.in_w, selectors.EVENT_WRITE, "in")

    def _on_in(self, fd: int) -> None:
        try:
            n = os.write(self.in_w, self.pending[:CHUNK])
        except BlockingIOError:
            return
        except BrokenPipeError:
            self.close_in()
            return
        del self.pending[:n]
        if not self.pending:
            self.sel.unregister(self.in_w)
            if self.stdin_left == 0:
                self.close_in()

    def _on_out(self, fd: int) -> None:
        data = os.read(fd, CHUNK)
        if not data:
            self.sel.unregister(fd)
            self.open_outs.discard(fd)
            return
        self.outs[fd] += data
        if len(self.outs[self.out_r]) + len(self.outs[self.err_r]) > self.cap:
            self.truncated = True

    def _on_pid(self, fd: int) -> None:
        os.waitpid(self.pid, 0)
        self.sel.unregister(self.pidfd)
        self._init_exited(time.monotonic())

    def _finish(self) -> None:
        if not self.exited:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                os.waitpid(self.pid, 0)
            except ChildProcessError:
                pass
        kill_group(self.pid)  # timeout or output cap: the worker and its children (init can fork no more)
        if self.pidfd is not None:
            os.close(self.pidfd)
        self.close_in()
        self.sel.close()

    def _reply(self) -> dict:
        out, err = bytes(self.outs[self.out_r]), bytes(self.outs[self.err_r])
        if self.truncated:
            out, err = out[: self.cap], err[: max(0, self.cap - len(out))]
        return {
            "exit_code": None,
            "signal": None,
            "timed_out": self.timed_out,
            "truncated": self.truncated,
            "stdout": base64.b64encode(out).decode(),
            "stderr": base64.b64encode(err).decode(),
            "duration": time.monotonic() - self.t0,
        }
