"""Privilege primitives of one execution: who runs the code, what it may call, how much memory it gets.

Stdlib only: this file's source is sent ahead of _jail.py into the zygote and into docker containers.
An execution has up to two identities (docs/SANDBOX.md, "Who can speak for the verdict"):

* the *supervisor* (a trusted grader program): its own uid, non-dumpable, holding only the
  capabilities to drop a forked child to the candidate uid (SETUID, SETGID) and to kill it (KILL);
* the *candidate* (model-written code, or any untrusted program): another uid, no capabilities,
  no_new_privs and a seccomp filter (envs/sandbox/seccomp.py) that denies ptrace, keyrings, namespaces,
  mounts and every socket family but AF_UNIX.

A supervisor cannot be ptraced, signalled or read through /proc by a candidate, so nothing the
candidate runs can write its result channel.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct
import time

CAP_KILL, CAP_SETGID, CAP_SETUID = 5, 6, 7
SUPERVISOR_CAPS = (CAP_KILL, CAP_SETGID, CAP_SETUID)
PR_SET_DUMPABLE, PR_SET_KEEPCAPS, PR_SET_SECCOMP, PR_SET_NO_NEW_PRIVS = 4, 8, 22, 38
PR_CAPBSET_READ, PR_CAPBSET_DROP = 23, 24
SECCOMP_MODE_FILTER = 2
_CAP_VERSION_3 = 0x20080522
_SYS = {"x86_64": {"capset": 126, "pivot_root": 155}, "aarch64": {"capset": 91, "pivot_root": 41}}

_libc = ctypes.CDLL(None, use_errno=True)


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def write_at(dir_fd: int, path: str, value: str) -> None:
    """Write ``value`` to ``path`` relative to the directory ``dir_fd`` (one that the jail may hide)."""
    fd = os.open(path, os.O_WRONLY, dir_fd=dir_fd)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def _ok(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def prctl(option: int, arg: int = 0, arg2: int = 0) -> int:
    ret = _libc.prctl(
        ctypes.c_int(option), ctypes.c_ulong(arg), ctypes.c_ulong(arg2), ctypes.c_ulong(0), ctypes.c_ulong(0)
    )
    if ret < 0:
        _ok(ret, f"prctl({option})")
    return ret


def syscall_nr(name: str) -> int:
    try:
        return _SYS[platform.machine()][name]
    except KeyError:
        raise OSError(f"no syscall number for {name} on {platform.machine()}") from None


def capset(caps: tuple[int, ...]) -> None:
    """Set this thread's effective and permitted capabilities to ``caps`` (inheritable: none)."""
    mask = sum(1 << c for c in caps)
    header = struct.pack("Ii", _CAP_VERSION_3, 0)
    data = struct.pack("III", mask & 0xFFFFFFFF, mask & 0xFFFFFFFF, 0) + struct.pack(
        "III", mask >> 32, mask >> 32, 0
    )
    hdr, dat = ctypes.create_string_buffer(header), ctypes.create_string_buffer(data)
    _ok(_libc.syscall(ctypes.c_long(syscall_nr("capset")), hdr, dat), "capset")


def drop_bounding_set(keep: tuple[int, ...]) -> None:
    """Remove every other capability from the bounding set (needs CAP_SETPCAP for the ones present)."""
    last = (
        int(_read("/proc/sys/kernel/cap_last_cap"))
        if os.path.exists("/proc/sys/kernel/cap_last_cap")
        else 40
    )
    for cap in range(last + 1):
        if cap not in keep and _libc.prctl(PR_CAPBSET_READ, ctypes.c_ulong(cap), 0, 0, 0) == 1:
            prctl(PR_CAPBSET_DROP, cap)


def load_seccomp(bpf: bytes) -> None:
    """Install a classic-BPF seccomp filter (8-byte instructions, as libseccomp exports them)."""
    if not bpf:
        raise OSError("no seccomp filter to load")
    buf = ctypes.create_string_buffer(bpf, len(bpf))
    prog = struct.pack("HxxxxxxQ", len(bpf) // 8, ctypes.addressof(buf))
    prog_buf = ctypes.create_string_buffer(prog, len(prog))
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    _ok(_libc.prctl(PR_SET_SECCOMP, ctypes.c_ulong(SECCOMP_MODE_FILTER), prog_buf, 0, 0), "seccomp")


def become(uid: int) -> None:
    """Switch every uid and gid to ``uid`` with no supplementary groups."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)


def become_supervisor(uid: int | None) -> None:
    """The grader's identity: ``uid`` keeping only SUPERVISOR_CAPS (None: stay, only non-dumpable)."""
    if uid is not None:
        drop_bounding_set(SUPERVISOR_CAPS)
        prctl(PR_SET_KEEPCAPS, 1)
        become(uid)
        capset(SUPERVISOR_CAPS)
        prctl(PR_SET_KEEPCAPS, 0)  # a later uid change (the candidate's) then keeps no capability
    prctl(PR_SET_DUMPABLE, 0)
    prctl(PR_SET_NO_NEW_PRIVS, 1)


def become_candidate(uid: int | None, bpf: bytes, workdir: str) -> None:
    """Untrusted code's identity: ``uid`` (None: stay) with no capabilities, no_new_privs, the seccomp
    filter ``bpf``, and ``workdir`` as its cwd, HOME and TMPDIR."""
    if uid is not None:
        become(uid)
        capset(())
    os.makedirs(workdir, mode=0o700, exist_ok=True)
    os.chdir(workdir)
    os.environ.update(HOME=workdir, TMPDIR=workdir)
    load_seccomp(bpf)


# ---- per-run memory: a cgroup of the memory controller (v2 or v1) ------------------------------------
def _memory_cgroup_dir() -> tuple[str, int] | None:
    """(this process's memory cgroup directory, cgroup version), or None when there is none to use."""
    try:
        lines = _read("/proc/self/cgroup").splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(",") and os.path.isdir("/sys/fs/cgroup/memory"):
            return "/sys/fs/cgroup/memory" + path, 1
    for line in lines:
        if line.startswith("0::") and os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
            base = "/sys/fs/cgroup" + line[3:]
            if "memory" in _read("/sys/fs/cgroup/cgroup.controllers").split():
                return base, 2
    return None


class MemoryCgroups:
    """A directory of per-run memory cgroups, opened before the jail hides /sys (root only).

    v1: one child per run under this process's memory cgroup. v2: the same, in a leaf of our own (a
    v2 cgroup with processes cannot enable controllers for its children)."""

    def __init__(self, name: str):
        found = _memory_cgroup_dir()
        if found is None:
            raise OSError("no memory cgroup controller mounted")
        parent, self.version = found
        self.name = name
        self.parent_fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY)
        os.mkdir(name, dir_fd=self.parent_fd)
        self.fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=self.parent_fd)
        if self.version == 2:
            self._write(".", "cgroup.subtree_control", "+memory")

    @property
    def kind(self) -> str:
        return f"cgroup v{self.version}"

    def _write(self, run: str, name: str, value: str) -> None:
        write_at(self.fd, f"{run}/{name}", value)

    def create(self, run: str) -> None:
        os.mkdir(run, dir_fd=self.fd)

    def limit(self, run: str, memory_mb: int) -> None:
        limit = str(int(memory_mb) << 20)
        if self.version == 2:
            self._write(run, "memory.max", limit)
            self._write(run, "memory.swap.max", "0")
        else:
            self._write(run, "memory.limit_in_bytes", limit)
            try:
                self._write(run, "memory.memsw.limit_in_bytes", limit)
            except OSError:
                pass  # no swap accounting: nothing to swap to beyond the limit then

    def enter(self, run: str) -> None:
        """Move the calling process (and so everything it forks later) into ``run``. It costs several
        ms of waiting in the kernel (cgroup v1), so monitors do it before their request comes."""
        self._write(run, "cgroup.procs", "0")

    def leave(self) -> None:
        """Move the calling process back to the cgroup it came from (then its run's can go)."""
        write_at(self.parent_fd, "cgroup.procs", "0")

    def oom_killed(self, run: str) -> bool:
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            fd = os.open(f"{run}/{name}", os.O_RDONLY, dir_fd=self.fd)
            text = os.read(fd, 4096).decode()
            os.close(fd)
        except OSError:
            return False
        counts = dict(line.split() for line in text.splitlines() if len(line.split()) == 2)
        return int(counts.get("oom_kill", "0")) > 0

    def remove(self, run: str) -> None:
        for _ in range(50):  # the last tasks of a dead pid namespace may take a moment to leave
            try:
                os.rmdir(run, dir_fd=self.fd)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.01)

    def close(self) -> None:
        """Remove every run's cgroup and our own (the fds work after the jail hid /sys)."""
        for run in os.listdir(self.fd):
            if run.startswith("r"):
                self.remove(run)
        os.close(self.fd)
        try:
            os.rmdir(self.name, dir_fd=self.parent_fd)
        except OSError:
            pass
        os.close(self.parent_fd)
