"""Typed configuration of the code sandbox (see docs/SANDBOX.md).

>>> from envs.sandbox.config import SandboxConfig, Limits
>>> SandboxConfig(backend="local", limits=Limits(timeout_s=5.0)).limits.timeout_s
5.0
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

Backend = Literal["local", "docker"]
Isolation = Literal["auto", "full", "none"]


@dataclass(frozen=True)
class Limits:
    """Resource limits of one execution. ``None`` disables a limit."""

    timeout_s: float = 10.0
    """Wall-clock limit; the whole execution (every process it started) is killed after it."""
    cpu_s: int | None = 60
    """CPU seconds per process (RLIMIT_CPU)."""
    memory_mb: int | None = 4096
    """Address space per process (RLIMIT_AS); the docker backend also caps the container's memory."""
    nproc: int | None = 64
    """Processes and threads the execution may hold at once (RLIMIT_NPROC / docker pids limit)."""
    fsize_mb: int | None = 64
    """Largest file the execution may write (RLIMIT_FSIZE)."""
    nofile: int | None = 256
    """Open file descriptors per process (RLIMIT_NOFILE)."""
    max_output_bytes: int = 4 << 20
    """stdout plus stderr beyond this kills the execution (``output_truncated``)."""
    tmpfs_mb: int = 256
    """Size of the fresh, private /tmp that holds the work dir (full isolation and docker)."""

    def with_timeout(self, timeout_s: float) -> Limits:
        return replace(self, timeout_s=float(timeout_s))


@dataclass(frozen=True)
class SandboxConfig:
    """Which sandbox backend runs model-written code, and how."""

    backend: Backend = "local"
    """'local' (namespaced subprocesses on this machine) or 'docker' (containers of `make sandbox-image`)."""
    isolation: Isolation = "auto"
    """local only. 'full': network, pid, mount and IPC namespaces, a read-only chroot and a throw-away uid
    (needs root); 'none': rlimits, a process group and a clean environment only (network and filesystem
    NOT isolated); 'auto': 'full' when possible, otherwise 'none' with a warning."""
    limits: Limits = field(default_factory=Limits)
    """Default limits of each execution; callers may pass their own per call."""
    extra_ro_paths: tuple[str, ...] = ()
    """local/full only: more host paths to expose read-only inside the chroot (e.g. extra site-packages)."""
    uid_base: int = 1_200_000
    """local/full only: first of the throw-away uids (one per concurrent execution); must be unused."""
    uid_count: int = 4096
    """local/full only: how many throw-away uids to cycle through."""
    docker_image: str = "lopd-sandbox:1"
    """docker only: the image `make sandbox-image` builds."""
    docker_pool_size: int = 2
    """docker only: containers kept started ahead of use (each serves one execution, then is removed);
    0 starts a container per execution."""
    docker_base_url: str | None = None
    """docker only: daemon address (default: DOCKER_HOST or the local unix socket)."""
    docker_cpus: float = 1.0
    """docker only: CPU quota of each container."""


def sandbox_config(value: SandboxConfig | dict | None) -> SandboxConfig:
    """A SandboxConfig from itself, a plain mapping (YAML, gym.make kwargs) or None (the default).

    >>> sandbox_config({"backend": "docker", "limits": {"timeout_s": 3}}).limits.timeout_s
    3
    """
    if value is None:
        return SandboxConfig()
    if isinstance(value, SandboxConfig):
        return value
    if not isinstance(value, dict):
        raise TypeError(f"sandbox config must be a SandboxConfig or a mapping, got {type(value).__name__}")
    d = dict(value)
    if isinstance(d.get("limits"), dict):
        d["limits"] = Limits(**d["limits"])
    if "extra_ro_paths" in d:
        d["extra_ro_paths"] = tuple(d["extra_ro_paths"])
    return SandboxConfig(**d)
