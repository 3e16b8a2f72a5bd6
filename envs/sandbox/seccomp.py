"""The seccomp filter every candidate process runs under, built once on the host with libseccomp.

libseccomp (through its ctypes binding ``pyseccomp``) compiles the rules to classic BPF for this
machine's architecture; the bytes travel to the sandbox (zygote or container), which loads them with
one prctl per candidate, so neither the jail nor the docker image needs libseccomp. Everything not
listed is allowed: the filter removes what a candidate could use against its supervisor, another run
or the machine, on top of the uid, namespaces and rlimits::

    >>> len(candidate_filter()) % 8 == 0
    True
"""

from __future__ import annotations

import errno
import functools
import os
import socket
import tempfile

DENIED = (
    # reach into another process
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_getfd",
    "kcmp",
    # kernel keyrings persist per uid across runs
    "keyctl",
    "add_key",
    "request_key",
    # namespaces, mounts, roots
    "unshare",
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsmount",
    "fsconfig",
    "fspick",
    "mount_setattr",
    # kernel attack surface no grading needs
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "open_by_handle_at",
    "name_to_handle_at",
    "swapon",
    "swapoff",
    "reboot",
    "acct",
    "quotactl",
    "lookup_dcookie",
    "fanotify_init",
    "syslog",
    "vhangup",
)
"""Syscalls that fail with EPERM."""
NAMESPACE_FLAGS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000)
"""CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET: clone() with any of them fails."""
ALLOWED_SOCKET_FAMILY = socket.AF_UNIX
"""socket()/socketpair() of any other family (AF_INET, AF_NETLINK, AF_VSOCK, ...) fails with EAFNOSUPPORT.
A run's AF_UNIX sockets stay inside its own network (abstract names) and /tmp (paths) namespaces."""


@functools.lru_cache(maxsize=1)
def candidate_filter() -> bytes:
    """The compiled filter (classic BPF, 8 bytes an instruction) for this machine's architecture."""
    import pyseccomp as sc

    f = sc.SyscallFilter(defaction=sc.ALLOW)
    for name in dict.fromkeys(DENIED):
        try:
            f.add_rule(sc.ERRNO(errno.EPERM), name)
        except (RuntimeError, ValueError, OSError):
            pass  # a syscall this architecture or libseccomp does not know cannot be called either
    for flag in NAMESPACE_FLAGS:
        f.add_rule(sc.ERRNO(errno.EPERM), "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")  # its flags live in memory BPF cannot read; libc falls back
    for call in ("socket", "socketpair"):
        f.add_rule(sc.ERRNO(errno.EAFNOSUPPORT), call, sc.Arg(0, sc.NE, ALLOWED_SOCKET_FAMILY))
    with tempfile.TemporaryFile() as out:
        f.export_bpf(out)
        out.seek(0)
        return out.read()


def unavailable_reason() -> str | None:
    """Why the filter cannot be built here (None when it can): the sandbox refuses to start then."""
    try:
        candidate_filter()
    except Exception as e:  # ImportError, a missing libseccomp.so.2, ...
        return (
            f"cannot build the sandbox's seccomp filter ({type(e).__name__}: {e}); install "
            "libseccomp2 (Debian: apt-get install libseccomp2) and the pyseccomp package"
        )
    return None


if __name__ == "__main__":  # pragma: no cover - a quick look at the filter
    print(f"{len(candidate_filter()) // 8} BPF instructions for {os.uname().machine}")
