"""The local sandbox's process side: a fork server ("zygote") that confines each execution.

Stdlib only, and loaded by file path (not as ``envs.sandbox._jail``) so the zygote imports nothing of
the project. The host (:mod:`envs.sandbox.local`) starts one zygote per LocalSandbox::

    python -I -c <loader> _confine.py _relay.py _jail.py '{"listen_fd": 3, "isolation": "auto", ...}'

Process tree of one execution in full isolation (root)::

    zygote   (root; own mount+network namespace, pivoted into a read-only view; preloaded modules)
     └ monitor  (root; per connection: new mount, pid, IPC, UTS and network namespaces, fresh /tmp,
        │        the run's memory cgroup)
        └ init  (pid 1 of the new pid namespace; root; in the cgroup; mounts /proc, reaps)
           └ worker  (rlimits, clean env; a grader: the supervisor uid; any other program: the
                      candidate uid, no capabilities, seccomp; see _confine.py)

The monitor relays stdin, caps stdout/stderr, enforces the wall clock and kills init when time is up
(_relay.py); init exiting makes the kernel kill everything left in the pid namespace, so nothing
outlives a run. Without root (isolation 'none') the same tree runs without namespaces, cgroup or uid
change; there the monitor's SIGKILL to init's process group (init leads a new session, the worker
stays in it) is what stops the worker and its children (a program that calls setsid itself escapes).

Wire format: frames of a 4-byte big-endian length and a payload. Request: a JSON header frame
(program, grader, files, limits, stdin_len) followed by ``stdin_len`` raw bytes. Reply: one JSON frame.
"""

from __future__ import annotations

import base64
import builtins
import ctypes
import hashlib
import hmac  # noqa: F401 (imported once here for every grader's seal: guest.py)
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
import types

# Never imported as a module: the zygote runs _confine.py's, _relay.py's and this source as one module
# (the docker boot program _confine.py's and this one's), which gives it MemoryCgroups, _libc, _ok,
# become_candidate, become_supervisor, prctl, syscall_nr, write_at (_confine) and CHUNK, Relay, read_all,
# fcntl_setpipe (_relay).

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_DUMPABLE = 1, 4
WORKER_SETUP_FAILED = 125
CANDIDATE_DIR = "/tmp/candidate"
"""A grader's candidates work here (the grader's own work dir is not theirs to write)."""
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


def unshare(flags: int) -> None:
    _ok(_libc.unshare(ctypes.c_int(flags)), "unshare")


def mount(src: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    _ok(_libc.mount(enc(src), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)), f"mount {target}")


def pivot_root(new_root: str) -> None:
    """Make ``new_root`` this mount namespace's root and detach the old one, so that neither the host's
    files nor its mount table (/proc/self/mountinfo) are visible any more."""
    os.chdir(new_root)
    os.mkdir(".old", 0o700)
    _ok(_libc.syscall(syscall_nr("pivot_root"), b".", b".old"), "pivot_root")
    os.chdir("/")
    _ok(_libc.umount2(b"/.old", MNT_DETACH), "umount /.old")
    os.rmdir("/.old")


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
    """Enter private mount and network namespaces and pivot into a tmpfs root that holds only
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
    pivot_root(root)
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


def _write_files(workdir: str, files: dict) -> None:
    for name, b64 in files.items():
        rel = os.path.normpath(name)
        if rel.startswith(("/", "..")) or rel == ".":
            raise ValueError(f"file name {name!r} must be relative and inside the work dir")
        path = os.path.join(workdir, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(b64))


def run_program(program: str, workdir: str, grader: bool = False) -> int:
    """Run ``program`` as ``__main__`` in this process; return the exit status Python would.

    An untrusted program finds its work dir first on sys.path, as a script does. A grader gets no
    writable folder there: its candidates could plant modules it imports later."""
    sys.stdin = open(0, "r", encoding="utf-8", errors="surrogateescape", closefd=False)
    sys.stdout = open(1, "w", encoding="utf-8", errors="backslashreplace", closefd=False)
    sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False, buffering=1)
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
    sys.argv = [os.path.join(workdir, "__main__.py")]
    if not grader:
        sys.path.insert(0, workdir)
    rc = 0
    try:
        code = _STATE["compiled"].get(hashlib.sha256(program.encode()).hexdigest())
        code = code or compile(program, "<sandbox>", "exec")
        exec(code, {"__name__": "__main__", "__builtins__": builtins, "__file__": sys.argv[0]})
    except SystemExit as e:
        rc = _exit_status(e)
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


def _exit_status(e: SystemExit) -> int:
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code & 0xFF
    try:
        print(e.code, file=sys.stderr)
    except BaseException:
        pass
    return 1


def offer_candidate_api(uid: int | None, bpf: bytes, workdir: str) -> None:
    """Give a grader ``import lopd_sandbox``: ``enter_candidate()`` turns a freshly forked child into a
    candidate (envs/sandbox/guest.py's guard_runner calls it in every child)."""
    api = types.ModuleType("lopd_sandbox")
    api.enter_candidate = lambda: become_candidate(uid, bpf, workdir)
    sys.modules["lopd_sandbox"] = api


def confine_worker(req: dict, workdir: str, ids: tuple[int | None, int | None], bpf: bytes) -> None:
    """The program's identity: a grader becomes the supervisor (``ids[0]``) and may make candidates
    (``ids[1]``) of its children; any other program is a candidate itself."""
    _set_rlimits(req["limits"])
    os.environ.clear()
    os.environ.update(CLEAN_ENV)
    if req.get("grader"):
        become_supervisor(ids[0])
        os.makedirs(workdir, mode=0o700, exist_ok=True)
        os.chdir(workdir)
        os.environ.update(HOME=workdir, TMPDIR=workdir)
        candidate_dir = CANDIDATE_DIR if ids[1] is not None else os.path.join(workdir, "candidate")
        offer_candidate_api(ids[1], bpf, candidate_dir)
    else:
        become_candidate(ids[1], bpf, workdir)
    _write_files(workdir, req.get("files") or {})  # by the program's own uid: nothing to chown


def _worker_main(req: dict, fds: dict, workdir: str, ids: tuple) -> None:
    try:
        os.dup2(fds["in_r"], 0)
        os.dup2(fds["out_w"], 1)
        os.dup2(fds["err_w"], 2)
        os.closerange(3, 1 << 16)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        confine_worker(req, workdir, ids, _STATE["bpf"])
    except BaseException as e:
        os.write(2, f"sandbox worker setup failed: {type(e).__name__}: {e}\n".encode())
        os._exit(WORKER_SETUP_FAILED)
    os._exit(run_program(req["program"], workdir, bool(req.get("grader"))))


def _init_main(req: dict, fds: dict, workdir: str, ids: tuple) -> None:
    status = b"E"
    try:
        os.setsid()  # a group the monitor can kill whole (the worker stays in it): see _kill_group
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if ids[0] is not None:  # full isolation
            mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
            with open("/proc/self/oom_score_adj", "w") as f:
                f.write("0")  # the monitor's -1000 is not for the run
        w = os.fork()
        if w == 0:
            _worker_main(req, fds, workdir, ids)
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


def _enter_run_namespaces(limits: dict) -> str:
    """Fresh mount, pid, IPC, UTS and network namespaces with a private /tmp and /dev/shm."""
    unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET)
    size = f"size={int(limits.get('tmpfs_mb') or 256)}m"
    mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,{size}")
    mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,{size}")
    return "/tmp/work"


def execute(
    conn: socket.socket, req: dict, mode: str, ids: tuple, tmp_dir: str, cgroup: str | None
) -> dict:
    """Run one request (its stdin still unread on ``conn``) in the memory cgroup this monitor is in
    (None: none); return the reply dict."""
    full = mode == "full"
    ids = ids if full else (None, None)
    if full:
        workdir = _enter_run_namespaces(req["limits"])
    else:
        workdir = tempfile.mkdtemp(prefix="lopd-run-", dir=tmp_dir)
    if cgroup and req["limits"].get("memory_mb"):
        _STATE["cgroups"].limit(cgroup, int(req["limits"]["memory_mb"]))
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
            _init_main(req, fds, workdir, ids)
        for fd in (in_r, out_w, err_w, st_w):
            os.close(fd)
        reply = Relay(conn, req, pid, in_w, out_r, err_r, t0).run()
        status = read_all(st_r)
    finally:  # in_w belongs to the Relay, which closes it
        for fd in (out_r, err_r, st_r):
            try:
                os.close(fd)
            except OSError:
                pass
        if not full:
            shutil.rmtree(workdir, ignore_errors=True)
    limited = bool(cgroup and req["limits"].get("memory_mb"))
    reply.update(isolation=mode, memory_scope=_STATE["cgroups"].kind if limited else "process")
    if limited:
        reply["oom_killed"] = _STATE["cgroups"].oom_killed(cgroup)
    _apply_status(reply, status)
    return reply


def _apply_status(reply: dict, status: bytes) -> None:
    """init's report (the worker's wait status, or E and why init failed) into the reply."""
    if status.startswith(b"E"):
        if status[1:]:
            reply["error"] = "sandbox init failed: " + status[1:].decode(errors="replace")
    elif status and not reply["timed_out"]:
        st = int(status)
        if os.WIFEXITED(st):
            reply["exit_code"] = os.WEXITSTATUS(st)
        elif os.WIFSIGNALED(st):
            reply["signal"] = os.WTERMSIG(st)


# ---- the zygote ----------------------------------------------------------------------------------
_STATE: dict = {"bpf": b"", "cgroups": None, "proc_fd": None, "compiled": {}}
"""The zygote's: the candidates' seccomp filter, the per-run memory cgroups (None without them), and
the host's /proc, opened before the jail hid it (None without it)."""


def _write_proc(path: str, value: str) -> None:
    """Write ``value`` to ``path`` under the host's /proc, if the zygote kept it open."""
    if _STATE["proc_fd"] is None:
        return
    try:
        write_at(_STATE["proc_fd"], path, value)
    except OSError:
        pass


def _serve(conn: socket.socket, mode: str, ids: tuple, tmp_dir: str, cgroup: str | None) -> None:
    try:
        req = json.loads(recv_frame(conn, 64 << 20))
        reply = execute(conn, req, mode, ids, tmp_dir, cgroup)
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


def _open_cgroups() -> MemoryCgroups | None:
    """Per-run memory cgroups under our own, after removing those of zygotes that died (root only)."""
    try:
        cgroups = MemoryCgroups(f"lopd-sandbox-{os.getpid()}")
    except OSError:
        return None
    for name in os.listdir(cgroups.parent_fd):
        pid = name.rpartition("-")[2]
        if name.startswith("lopd-sandbox-") and pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            try:
                os.rmdir(name, dir_fd=cgroups.parent_fd)
            except OSError:
                pass  # still holds a run's cgroup or a process: left for the next start
    return cgroups


def _confine_zygote(cfg: dict) -> tuple[str, str | None]:
    """Build the jail when asked and possible; return (isolation mode, warning)."""
    want = cfg.get("isolation", "auto")
    mode, warning = "none", None
    if want in ("auto", "full"):
        if os.geteuid() != 0:
            warning = "not root: namespaces, chroot and uid switching need root"
        else:
            try:
                _STATE["cgroups"] = _open_cgroups()
                _STATE["proc_fd"] = os.open("/proc", os.O_RDONLY | os.O_DIRECTORY)
                build_jail(cfg.get("ro_paths", []), cfg["tmp_dir"])
                mode = "full"
            except OSError as e:
                warning = f"could not build the jail: {e}"
    return mode, warning


def zygote_main(cfg_json: str) -> None:
    cfg = json.loads(cfg_json)
    prctl(PR_SET_DUMPABLE, 0)  # same-uid runs (isolation 'none') cannot reach into us via /proc
    os.environ.update({k: v for k, v in CLEAN_ENV.items() if k.endswith("THREADS")})
    _STATE["bpf"] = base64.b64decode(cfg.get("seccomp") or "")
    lsock = socket.socket(fileno=int(cfg["listen_fd"]))
    for name in cfg.get("preload", []):
        __import__(name)
    _STATE["compiled"] = {  # the graders': run_program then skips compiling them per run
        hashlib.sha256(src.encode()).hexdigest(): compile(src, "<sandbox>", "exec")
        for src in cfg.get("programs", [])
    }
    mode, warning = _confine_zygote(cfg)
    if not _STATE["bpf"] or (cfg.get("isolation") == "full" and mode != "full"):
        error = warning if _STATE["bpf"] else "no seccomp filter for the candidates"
        print(json.dumps({"ok": False, "error": error}), flush=True)
        os._exit(1)
    memory = _STATE["cgroups"].kind if _STATE["cgroups"] else "process"
    print(json.dumps({"ok": True, "isolation": mode, "warning": warning, "memory_scope": memory,
                      "pid": os.getpid()}), flush=True)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # monitors reap themselves
    try:
        _accept_loop(lsock, mode, cfg)
    finally:
        if _STATE["cgroups"] is not None:
            _STATE["cgroups"].close()


SPARES = 2
"""Monitors kept forked ahead of requests, each already in its run's memory cgroup: joining one costs
the kernel several ms (cgroup v1), which would otherwise delay every run."""


def _spare_monitor(lsock: socket.socket, taken_w: int, mode: str, ids: tuple, tmp_dir: str) -> None:
    """A forked monitor: join a fresh memory cgroup, then take the next connection and serve it."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    os.close(0)
    cgroups, cgroup = _STATE["cgroups"], None
    if cgroups is not None and ids[1] is not None:
        try:
            cgroup = f"r{ids[1]}"
            cgroups.remove(cgroup)  # a leftover of a crashed monitor
            cgroups.create(cgroup)
            cgroups.enter(cgroup)
        except OSError:
            cgroup = None
        else:  # the run's processes go first when it overdraws, never its reporter (init resets it)
            _write_proc(f"{os.getpid()}/oom_score_adj", "-1000")
    while True:
        try:
            conn, _ = lsock.accept()
            break
        except InterruptedError:
            continue
    os.write(taken_w, os.getpid().to_bytes(4, "big"))
    lsock.close()
    _serve(conn, mode, ids, tmp_dir, cgroup)
    if cgroup:  # after the reply: its cost delays nobody
        cgroups.leave()
        cgroups.remove(cgroup)


def _accept_loop(lsock: socket.socket, mode: str, cfg: dict) -> None:
    """Keep SPARES monitors waiting for connections until the host closes our stdin. Each run gets a
    pair of throw-away uids: the supervisor's (its grader) and the candidate's."""
    pairs = int(cfg["uid_count"]) // 2
    n = int.from_bytes(os.urandom(4), "big") % pairs  # two zygotes rarely hand out the same uids at once
    taken_r, taken_w = os.pipe()
    waiting: set[int] = set()

    def spawn() -> None:
        nonlocal n
        supervisor = int(cfg["uid_base"]) + 2 * (n % pairs)
        n += 1
        pid = os.fork()
        if pid == 0:
            try:
                os.close(taken_r)
                _spare_monitor(lsock, taken_w, mode, (supervisor, supervisor + 1), cfg["tmp_dir"])
            finally:
                os._exit(0)
        waiting.add(pid)

    for _ in range(SPARES):
        spawn()
    sel = selectors.DefaultSelector()
    sel.register(taken_r, selectors.EVENT_READ, "taken")
    sel.register(0, selectors.EVENT_READ, "host")
    try:
        while True:
            for key, _ in sel.select():
                if key.data == "host":  # the host closed our stdin: it is gone or closing us
                    if not os.read(0, 4096):
                        return
                    continue
                data = os.read(taken_r, 4 * SPARES)
                for i in range(0, len(data) - 3, 4):
                    waiting.discard(int.from_bytes(data[i : i + 4], "big"))
                    spawn()
    finally:
        for pid in waiting:  # their cgroups can go once they are
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


# ---- inside a docker container ---------------------------------------------------------------
CONTAINER_IDS = (65533, 65534)
"""Supervisor and candidate uids in a container (whose root holds only SETUID, SETGID and KILL)."""


def _read_exact_fd(fd: int, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            raise EOFError("stdin closed before the request header was complete")
        buf += chunk
    return bytes(buf)


def container_main() -> None:
    """The container's boot program: the container is the jail, so read the request header from
    stdin (the rest of stdin is the program's), make the work dir, take the program's identity, run."""
    try:
        (n,) = struct.unpack(">I", _read_exact_fd(0, 4))
        req = json.loads(_read_exact_fd(0, n))
        ids = CONTAINER_IDS if os.geteuid() == 0 else (None, None)
        workdir = "/tmp/work"
        # RLIMIT_NPROC counts a uid host-wide; the pids cgroup caps the container
        req["limits"] = dict(req["limits"], nproc=None)
        confine_worker(req, workdir, ids, base64.b64decode(req.get("seccomp") or ""))
    except BaseException as e:
        os.write(2, f"sandbox setup failed: {type(e).__name__}: {e}\n".encode())
        os._exit(WORKER_SETUP_FAILED)
    os._exit(run_program(req["program"], workdir, bool(req.get("grader"))))
