"""The local sandbox's process side: a fork server ("zygote") that confines each execution.

Stdlib only, and loaded by file path (not as ``envs.sandbox._jail``) so the zygote imports nothing of
the project. The host (:mod:`envs.sandbox.local`) starts one zygote per LocalSandbox::

    python -I -c <loader> _jail.py '{"listen_fd": 3, "isolation": "auto", ...}'

Process tree of one execution in full isolation (root)::

    zygote   (root; own mount+network namespace, chrooted into a read-only view; preloaded modules)
     └ monitor  (root; forked per connection: new mount, pid, IPC and UTS namespaces, fresh /tmp)
        └ init  (pid 1 of the new pid namespace; root; mounts /proc, makes the work dir, reaps)
           └ worker  (throw-away uid, rlimits, no_new_privs, clean env: runs the program)

The monitor relays stdin, caps stdout/stderr, enforces the wall clock and kills init when time is up;
init exiting makes the kernel kill everything left in the pid namespace, so nothing outlives a run.
Without root (isolation 'none') the same tree runs without namespaces, chroot or uid change; there the
monitor's SIGKILL to init's process group (init leads a new session, the worker stays in it) is what
stops the worker and its children (a program that calls setsid itself escapes it).

Wire format: frames of a 4-byte big-endian length and a payload. Request: a JSON header frame
(program, files, limits, stdin_len) followed by ``stdin_len`` raw bytes. Reply: one JSON frame.
"""

from __future__ import annotations

import base64
import builtins
import ctypes
import json
import os
import resource
import selectors
import shutil
import signal
import socket
import struct
import sys
import tempfile
import time
import traceback

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS = 1, 4, 38
F_SETPIPE_SZ = 1031
CHUNK = 1 << 20
WORKER_SETUP_FAILED = 125
CLEAN_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
}
SYSTEM_RO = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/usr", "/etc")
DEVICES = ("null", "zero", "full", "random", "urandom")

_libc = ctypes.CDLL(None, use_errno=True)


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    _check(_libc.unshare(ctypes.c_int(flags)), "unshare")


def mount(src: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    _check(
        _libc.mount(enc(src), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)), f"mount {target}"
    )


def prctl(option: int, arg: int) -> None:
    _check(
        _libc.prctl(
            ctypes.c_int(option), ctypes.c_ulong(arg), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)
        ),
        "prctl",
    )


# ---- framing -------------------------------------------------------------------------------------
def recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(CHUNK, n - len(buf)))
        if not chunk:
            raise EOFError("connection closed")
        buf += chunk
    return bytes(buf)


def recv_frame(sock: socket.socket, limit: int = 1 << 30) -> bytes:
    (n,) = struct.unpack(">I", recv_exact(sock, 4))
    if n > limit:
        raise ValueError(f"frame of {n} bytes exceeds {limit}")
    return recv_exact(sock, n)


def send_frame(sock: socket.socket, payload: bytes) -> None:
    sock.sendall(struct.pack(">I", len(payload)) + payload)


# ---- the jail (full isolation) -------------------------------------------------------------------
def _bind(src: str, dst: str, readonly: bool, nodev: bool = True) -> None:
    if os.path.isdir(src):
        os.makedirs(dst, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        open(dst, "a").close()
    mount(src, dst, None, MS_BIND | MS_REC)
    flags = MS_BIND | MS_REMOUNT | MS_NOSUID | (MS_RDONLY if readonly else 0) | (MS_NODEV if nodev else 0)
    mount(None, dst, None, flags)


def build_jail(ro_paths: list[str], tmp_dir: str) -> str:
    """Enter private mount and network namespaces and chroot into a tmpfs root that holds only
    read-only binds of the system dirs and ``ro_paths``, fresh /dev nodes and empty /proc, /tmp."""
    unshare(CLONE_NEWNS | CLONE_NEWNET)
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    root = tempfile.mkdtemp(prefix="lopd-jail-", dir=tmp_dir)
    mount("tmpfs", root, "tmpfs", MS_NOSUID, "mode=0755,size=8m")
    bound: list[str] = []
    for p in list(SYSTEM_RO) + list(ro_paths):
        if not os.path.lexists(p):
            continue
        if p in SYSTEM_RO and os.path.islink(p):  # merged /usr: /bin -> usr/bin
            os.symlink(os.readlink(p), root + p)
            continue
        real = os.path.realpath(p)
        if any(real == b or real.startswith(b + "/") for b in bound):
            continue
        _bind(real, root + real, readonly=True)
        bound.append(real)
        if real != p and not os.path.lexists(root + p):  # keep the path the interpreter knows
            os.makedirs(os.path.dirname(root + p), exist_ok=True)
            os.symlink(real, root + p)
    for d, mode in (("/proc", 0o555), ("/tmp", 0o1777), ("/dev", 0o755)):
        os.makedirs(root + d, exist_ok=True)
        os.chmod(root + d, mode)
    os.makedirs(root + "/dev/shm", exist_ok=True)
    os.chmod(root + "/dev/shm", 0o1777)
    for dev in DEVICES:
        _bind(f"/dev/{dev}", f"{root}/dev/{dev}", readonly=False, nodev=False)
    for name, target in (
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ):
        os.symlink(target, f"{root}/dev/{name}")
    os.chroot(root)
    os.chdir("/")
    return root


# ---- one execution -------------------------------------------------------------------------------
def _set_rlimits(limits: dict) -> None:
    mb = 1 << 20

    def lim(res: int, soft: int, hard: int | None = None) -> None:
        hard = soft if hard is None else hard
        cur_soft, cur_hard = resource.getrlimit(res)
        if cur_hard != resource.RLIM_INFINITY:  # never try to raise a hard limit
            hard = min(hard, cur_hard)
            soft = min(soft, hard)
        resource.setrlimit(res, (soft, hard))

    if limits.get("memory_mb"):
        lim(resource.RLIMIT_AS, limits["memory_mb"] * mb)
    if limits.get("cpu_s"):
        lim(resource.RLIMIT_CPU, int(limits["cpu_s"]), int(limits["cpu_s"]) + 1)
    if limits.get("nproc"):
        lim(resource.RLIMIT_NPROC, int(limits["nproc"]))
    if limits.get("fsize_mb"):
        lim(resource.RLIMIT_FSIZE, limits["fsize_mb"] * mb)
    if limits.get("nofile"):
        lim(resource.RLIMIT_NOFILE, int(limits["nofile"]))
    lim(resource.RLIMIT_CORE, 0)


def _write_files(workdir: str, files: dict, uid: int | None) -> None:
    for name, b64 in files.items():
        rel = os.path.normpath(name)
        if rel.startswith(("/", "..")) or rel == ".":
            raise ValueError(f"file name {name!r} must be relative and inside the work dir")
        path = os.path.join(workdir, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(b64))
        if uid is not None:
            os.chown(path, uid, uid)


def run_program(program: str, workdir: str) -> int:
    """Run ``program`` as ``__main__`` in this process; return the exit status Python would."""
    sys.stdin = open(0, "r", encoding="utf-8", errors="surrogateescape", closefd=False)
    sys.stdout = open(1, "w", encoding="utf-8", errors="backslashreplace", closefd=False)
    sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False, buffering=1)
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
    sys.argv = [os.path.join(workdir, "__main__.py")]
    sys.path.insert(0, workdir)
    rc = 0
    try:
        code = compile(program, "<sandbox>", "exec")
        exec(code, {"__name__": "__main__", "__builtins__": builtins, "__file__": sys.argv[0]})
    except SystemExit as e:
        if e.code is None:
            rc = 0
        elif isinstance(e.code, int):
            rc = e.code & 0xFF
        else:
            try:
                print(e.code, file=sys.stderr)
            except BaseException:
                pass
            rc = 1
    except BaseException:
        try:
            traceback.print_exc()
        except BaseException:
            pass
        rc = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    return rc


def _worker_main(req: dict, fds: dict, workdir: str, uid: int | None) -> None:
    try:
        os.dup2(fds["in_r"], 0)
        os.dup2(fds["out_w"], 1)
        os.dup2(fds["err_w"], 2)
        os.closerange(3, 1 << 16)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        _set_rlimits(req["limits"])
        if uid is not None:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
        prctl(PR_SET_NO_NEW_PRIVS, 1)
        os.chdir(workdir)
        os.environ.clear()
        os.environ.update(
            CLEAN_ENV, HOME=workdir, TMPDIR=os.path.dirname(workdir) if uid is not None else workdir
        )
    except BaseException as e:
        os.write(2, f"sandbox worker setup failed: {type(e).__name__}: {e}\n".encode())
        os._exit(WORKER_SETUP_FAILED)
    os._exit(run_program(req["program"], workdir))


def _init_main(req: dict, fds: dict, workdir: str, uid: int | None, full: bool) -> None:
    status = b"E"
    try:
        os.setsid()  # a group the monitor can kill whole (the worker stays in it): see _kill_group
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if full:
            mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
            os.mkdir(workdir, 0o700)
            os.chown(workdir, uid, uid)
        _write_files(workdir, req.get("files") or {}, uid)
        w = os.fork()
        if w == 0:
            _worker_main(req, fds, workdir, uid)
        for k in ("in_r", "out_w", "err_w"):
            os.close(fds[k])
        while True:  # as pid 1 we also reap orphans; the worker's status is the run's status
            pid, st = os.waitpid(-1, 0)
            if pid == w:
                status = b"%d" % st
                break
    except BaseException as e:
        status = f"E{type(e).__name__}: {e}".encode()
    finally:
        try:
            os.write(fds["st_w"], status)
        finally:
            os._exit(0)  # pid 1 leaving kills every process left in the namespace


def execute(conn: socket.socket, req: dict, mode: str, uid: int | None, tmp_dir: str) -> dict:
    """Run one request (its stdin still unread on ``conn``); return the reply dict."""
    limits = req["limits"]
    full = mode == "full"
    if full:
        unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS)
        size = f"size={int(limits.get('tmpfs_mb') or 256)}m"
        mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,{size}")
        mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,{size}")
        workdir = "/tmp/work"
    else:
        workdir = tempfile.mkdtemp(prefix="lopd-run-", dir=tmp_dir)
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    st_r, st_w = os.pipe()
    try:
        fcntl_setpipe(in_w)
        fds = {"in_r": in_r, "out_w": out_w, "err_w": err_w, "st_w": st_w}
        t0 = time.monotonic()
        pid = os.fork()
        if pid == 0:
            for fd in (in_w, out_r, err_r, st_r):
                os.close(fd)
            conn.close()
            _init_main(req, fds, workdir, uid if full else None, full)
        for fd in (in_r, out_w, err_w, st_w):
            os.close(fd)
        reply = _relay(conn, req, pid, in_w, out_r, err_r, t0)
        status = _read_all(st_r)
    finally:  # in_w belongs to _relay, which closes it
        for fd in (out_r, err_r, st_r):
            try:
                os.close(fd)
            except OSError:
                pass
        if not full:
            shutil.rmtree(workdir, ignore_errors=True)
    reply["isolation"] = mode
    if status.startswith(b"E"):
        if status[1:]:
            reply["error"] = "sandbox init failed: " + status[1:].decode(errors="replace")
    elif status and not reply["timed_out"]:
        st = int(status)
        if os.WIFEXITED(st):
            reply["exit_code"] = os.WEXITSTATUS(st)
        elif os.WIFSIGNALED(st):
            reply["signal"] = os.WTERMSIG(st)
    return reply


def fcntl_setpipe(fd: int) -> None:
    import fcntl

    try:
        fcntl.fcntl(fd, F_SETPIPE_SZ, CHUNK)
    except OSError:
        pass  # the default 64 KiB pipe only costs speed


def _read_all(fd: int) -> bytes:
    out = bytearray()
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            return bytes(out)
        out += chunk


def _kill_group(pid: int) -> None:
    """SIGKILL init's process group: without a pid namespace ('none') nothing else stops the worker."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass  # init never got to setsid, or the group is already empty


def _relay(conn: socket.socket, req: dict, pid: int, in_w: int, out_r: int, err_r: int, t0: float) -> dict:
    """Feed stdin from the host, collect capped output, enforce the deadline; reap ``pid``."""
    limits = req["limits"]
    deadline = t0 + float(limits["timeout_s"])
    cap = int(limits["max_output_bytes"])
    stdin_left = int(req.get("stdin_len", 0))
    pending = bytearray()
    outs = {out_r: bytearray(), err_r: bytearray()}
    open_outs = {out_r, err_r}
    sel = selectors.DefaultSelector()
    conn.setblocking(False)
    os.set_blocking(in_w, False)
    in_state = "open"  # open -> closed; stdin the program no longer reads is discarded

    def close_in() -> None:
        nonlocal in_state
        if in_state == "open":
            if in_w in sel.get_map():
                sel.unregister(in_w)
            os.close(in_w)
            in_state = "closed"
        pending.clear()

    if stdin_left:
        sel.register(conn, selectors.EVENT_READ, "conn")
    else:
        close_in()
    sel.register(out_r, selectors.EVENT_READ, "out")
    sel.register(err_r, selectors.EVENT_READ, "out")
    pidfd = os.pidfd_open(pid) if hasattr(os, "pidfd_open") else None
    if pidfd is not None:
        sel.register(pidfd, selectors.EVENT_READ, "pid")
    exited = timed_out = truncated = False
    exit_time = 0.0
    try:
        while not truncated:
            now = time.monotonic()
            if not exited and pidfd is None and os.waitpid(pid, os.WNOHANG)[0] == pid:
                exited, exit_time = True, now
                _kill_group(pid)  # leftovers of the worker (init only exits after it)
            if exited and (not open_outs or now - exit_time > 0.5):
                break  # in 'none' isolation an escaped orphan may hold the pipe: do not wait on it
            if now >= deadline and not exited:
                timed_out = True
                break
            wait = deadline - now if not exited else 0.5
            if pidfd is None:
                wait = min(wait, 0.02)
            for key, _ in sel.select(max(wait, 0.0)):
                tag = key.data
                if tag == "conn":
                    try:
                        data = conn.recv(min(CHUNK, stdin_left))
                    except BlockingIOError:
                        continue
                    if not data:
                        raise EOFError("host closed the connection while sending stdin")
                    stdin_left -= len(data)
                    if stdin_left == 0:
                        sel.unregister(conn)
                    if in_state == "open":
                        pending += data
                        if in_w not in sel.get_map():
                            sel.register(in_w, selectors.EVENT_WRITE, "in")
                elif tag == "in":
                    try:
                        n = os.write(in_w, pending[:CHUNK])
                    except BlockingIOError:
                        continue
                    except BrokenPipeError:
                        close_in()
                        continue
                    del pending[:n]
                    if not pending:
                        sel.unregister(in_w)
                        if stdin_left == 0:
                            close_in()
                elif tag == "out":
                    data = os.read(key.fd, CHUNK)
                    if not data:
                        sel.unregister(key.fd)
                        open_outs.discard(key.fd)
                        continue
                    outs[key.fd] += data
                    if len(outs[out_r]) + len(outs[err_r]) > cap:
                        truncated = True
                elif tag == "pid":
                    os.waitpid(pid, 0)
                    sel.unregister(pidfd)
                    exited, exit_time = True, time.monotonic()
                    _kill_group(pid)
            if stdin_left == 0 and not pending and in_state == "open":
                close_in()
    finally:
        if not exited:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        _kill_group(pid)  # timeout or output cap: the worker and its children (init can fork no more)
        if pidfd is not None:
            os.close(pidfd)
        close_in()
        sel.close()
    duration = time.monotonic() - t0
    out, err = bytes(outs[out_r]), bytes(outs[err_r])
    if truncated:
        out, err = out[:cap], err[: max(0, cap - len(out))]
    return {
        "exit_code": None,
        "signal": None,
        "timed_out": timed_out,
        "truncated": truncated,
        "stdout": base64.b64encode(out).decode(),
        "stderr": base64.b64encode(err).decode(),
        "duration": duration,
    }


# ---- the zygote ----------------------------------------------------------------------------------
def _serve(conn: socket.socket, mode: str, uid: int, tmp_dir: str) -> None:
    try:
        req = json.loads(recv_frame(conn, 64 << 20))
        reply = execute(conn, req, mode, uid, tmp_dir)
    except BaseException as e:
        reply = {
            "error": f"{type(e).__name__}: {e}",
            "exit_code": None,
            "timed_out": False,
            "truncated": False,
            "stdout": "",
            "stderr": "",
            "duration": 0.0,
            "isolation": mode,
        }
    try:
        conn.setblocking(True)
        send_frame(conn, json.dumps(reply).encode())
    except OSError:
        pass


def zygote_main(cfg_json: str) -> None:
    cfg = json.loads(cfg_json)
    os.environ.update({k: v for k, v in CLEAN_ENV.items() if k.endswith("THREADS")})
    lsock = socket.socket(fileno=int(cfg["listen_fd"]))
    want = cfg.get("isolation", "auto")
    mode, warning = "none", None
    for name in cfg.get("preload", []):
        __import__(name)
    if want in ("auto", "full"):
        if os.geteuid() != 0:
            warning = "not root: namespaces, chroot and uid switching need root"
        else:
            try:
                build_jail(cfg.get("ro_paths", []), cfg["tmp_dir"])
                mode = "full"
            except OSError as e:
                warning = f"could not build the jail: {e}"
        if want == "full" and mode != "full":
            print(json.dumps({"ok": False, "error": warning}), flush=True)
            os._exit(1)
    print(json.dumps({"ok": True, "isolation": mode, "warning": warning, "pid": os.getpid()}), flush=True)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # monitors reap themselves
    uid_base, uid_count = int(cfg["uid_base"]), int(cfg["uid_count"])
    n = int.from_bytes(os.urandom(4), "big") % uid_count  # two zygotes rarely hand out the same uid at once
    sel = selectors.DefaultSelector()
    sel.register(lsock, selectors.EVENT_READ, "listen")
    sel.register(0, selectors.EVENT_READ, "host")
    while True:
        for key, _ in sel.select():
            if key.data == "host":  # the host closed our stdin: it is gone or closing us
                if not os.read(0, 4096):
                    os._exit(0)
                continue
            try:
                conn, _ = lsock.accept()
            except OSError:
                continue
            uid = uid_base + n % uid_count
            n += 1
            pid = os.fork()
            if pid == 0:
                try:
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
                    sel.close()
                    lsock.close()
                    os.close(0)
                    _serve(conn, mode, uid, cfg["tmp_dir"])
                finally:
                    os._exit(0)
            conn.close()


# ---- inside a docker container ---------------------------------------------------------------
def _read_exact_fd(fd: int, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            raise EOFError("stdin closed before the request header was complete")
        buf += chunk
    return bytes(buf)


def container_main() -> None:
    """Entry point of ``docker exec``: the container is the jail, so read the request header from
    stdin (the rest of stdin is the program's), make the work dir, set rlimits and run."""
    try:
        (n,) = struct.unpack(">I", _read_exact_fd(0, 4))
        req = json.loads(_read_exact_fd(0, n))
        workdir = "/tmp/work"
        os.makedirs(workdir, mode=0o700)
        _write_files(workdir, req.get("files") or {}, None)
        limits = dict(req["limits"], nproc=None)  # RLIMIT_NPROC counts a uid host-wide; pids cgroup caps it
        _set_rlimits(limits)
        prctl(PR_SET_NO_NEW_PRIVS, 1)
        os.chdir(workdir)
        os.environ.clear()
        os.environ.update(CLEAN_ENV, HOME=workdir, TMPDIR="/tmp")
    except BaseException as e:
        os.write(2, f"sandbox setup failed: {type(e).__name__}: {e}\n".encode())
        os._exit(WORKER_SETUP_FAILED)
    os._exit(run_program(req["program"], workdir))
