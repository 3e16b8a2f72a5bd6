"""The ``docker`` backend: each execution in its own throw-away container of the project's image.

Containers run with no network, memory and pids limits, a read-only root, a tmpfs /tmp, no
capabilities, no-new-privileges and uid 65534. A pool keeps ``docker_pool_size`` containers started
ahead of use, their boot program (under tini) already waiting on stdin; each serves exactly ONE
execution and is then removed, so nothing a program leaves behind (files, processes) reaches another.
Build the image first::

    make sandbox-image          # debootstrap + docker import (root, a Debian mirror)

    from envs.sandbox import SandboxConfig, make_sandbox
    with make_sandbox(SandboxConfig(backend="docker")) as sb:
        print(sb.run("print('hi')").stdout)
"""

from __future__ import annotations

import base64
import json
import os
import queue
import socket
import struct
import threading
import time
import uuid
import weakref
from pathlib import Path
from typing import Any

from envs.sandbox import seccomp
from envs.sandbox.base import ExecResult, Sandbox, SandboxUnavailable, compose_program
from envs.sandbox.config import Limits, SandboxConfig

IMAGE_VERSION = "1"
"""Must match IMAGE_VERSION in envs/sandbox/image/build.sh."""
_BOOT = compose_program(
    *(Path(__file__).with_name(f).read_text() for f in ("_confine.py", "_jail.py")), call="container_main()"
)
"""The containers' boot program: runs as the container's root, which holds only SETUID, SETGID and KILL,
and gives the program its identity (envs/sandbox/_confine.py): a grader the supervisor's uid, any other
program the candidate's."""
_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
}
_FIX_DAEMON = (
    "start the Docker daemon (`sudo systemctl start docker`, or `sudo dockerd &`); install it with "
    "`sudo apt-get install docker.io`; or use the local backend (sandbox.backend=local)"
)


def docker_client(base_url: str | None = None):
    """A connected docker SDK client, or SandboxUnavailable naming the fix."""
    try:
        import docker
    except ImportError as e:  # pragma: no cover - docker is a project dependency
        raise SandboxUnavailable(f"the docker Python SDK is missing ({e}); pip install docker") from e
    try:
        client = docker.DockerClient(base_url=base_url) if base_url else docker.from_env()
        client.ping()
    except Exception as e:
        raise SandboxUnavailable(
            f"Docker daemon not reachable ({type(e).__name__}: {e}); {_FIX_DAEMON}"
        ) from e
    return client


def check_image(client, image: str) -> None:
    """Raise SandboxUnavailable unless ``image`` exists and was built by this version of build.sh."""
    import docker

    try:
        img = client.images.get(image)
    except docker.errors.ImageNotFound as e:
        raise SandboxUnavailable(
            f"sandbox image {image!r} not found: build it with `make sandbox-image`"
        ) from e
    have = (img.labels or {}).get("lopd.sandbox.version")
    if have != IMAGE_VERSION:
        raise SandboxUnavailable(
            f"sandbox image {image!r} has version {have!r}, need {IMAGE_VERSION!r}: "
            "rebuild it with `FORCE=1 make sandbox-image`"
        )


class DockerSandbox(Sandbox):
    """One container per execution, started ahead of time by a small pool."""

    name = "docker"

    def _setup(self) -> None:
        reason = seccomp.unavailable_reason()
        if reason:  # never run candidates without their filter
            raise SandboxUnavailable(f"docker sandbox: {reason}")
        self.client = docker_client(self.config.docker_base_url)
        check_image(self.client, self.config.docker_image)
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._pool: queue.Queue = queue.Queue()
        self._labels = {  # reap_stale_containers reads the owner labels
            "lopd.sandbox": "1",
            "lopd.sandbox.owner": self.owner,
            "lopd.sandbox.owner_start": _proc_start(os.getpid()),
            "lopd.sandbox.owner_pidns": _pid_ns(),
        }
        self._stop = threading.Event()
        self._filler: threading.Thread | None = None
        self._wake = threading.Event()
        try:  # housekeeping, never a reason not to run
            reap_stale_containers(self.client)
        except Exception:
            pass
        if self.config.docker_pool_size > 0:  # a weak reference: the filler must not keep self alive
            self._filler = threading.Thread(
                target=_fill,
                args=(weakref.ref(self), self._stop, self._wake),
                name="lopd-docker-pool",
                daemon=True,
            )
        # close(), garbage collection and interpreter exit all end here; the args hold no reference to self
        self._finalizer = weakref.finalize(
            self,
            _cleanup,
            self.client,
            self.owner,
            os.getpid(),
            self._pool,
            self._stop,
            self._wake,
            self._filler,
        )
        if self._filler is not None:
            self._filler.start()

    @property
    def isolation(self) -> str:
        return "docker"

    # ---- containers ---------------------------------------------------------------------------
    def _create(self, limits: Limits) -> _Slot:
        """A started container whose boot program already waits for the request on stdin."""
        api = self.client.api
        mem = f"{limits.memory_mb}m" if limits.memory_mb else None
        host_config = api.create_host_config(
            network_mode="none",
            mem_limit=mem,
            memswap_limit=mem,
            pids_limit=limits.nproc or None,
            read_only=True,
            init=True,
            tmpfs={
                "/tmp": f"rw,nosuid,nodev,size={limits.tmpfs_mb}m,mode=1777",
                "/dev/shm": f"rw,nosuid,nodev,size={limits.tmpfs_mb}m,mode=1777",
            },
            cap_drop=["ALL"],
            cap_add=["SETUID", "SETGID", "KILL"],  # the boot program's, to hand out the two uids
            security_opt=["no-new-privileges"],
            ipc_mode="private",
            nano_cpus=int(self.config.docker_cpus * 1e9) if self.config.docker_cpus else None,
        )
        cid = api.create_container(
            self.config.docker_image,
            command=["/usr/bin/python3", "-I", "-c", _BOOT],
            stdin_open=True,
            user="0:0",
            environment=_ENV,
            working_dir="/tmp",
            host_config=host_config,
            labels=self._labels,
        )["Id"]
        try:  # attach before start so no output is missed; stdin closes when we half-close the socket
            sock = api.attach_socket(cid, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
            api.start(cid)
        except Exception:
            self._discard(cid)
            raise
        return _Slot(cid, sock)

    def _pool_key(self, limits: Limits) -> tuple:
        """What a container fixes when created (cgroup memory, pids, tmpfs size). A warm container
        serves a run whose key equals the pool's (its config's limits); the other limits apply per run."""
        return (limits.memory_mb, limits.nproc, limits.tmpfs_mb)

    def _fill_one(self) -> bool:
        """Add one warm container to the pool, if it needs one; False when the daemon failed."""
        if self._pool.qsize() >= self.config.docker_pool_size:
            return True
        try:
            self._pool.put(self._create(self.config.limits))
        except Exception:
            return False
        return True

    def _acquire(self, limits: Limits) -> _Slot:
        if self._filler is not None and self._pool_key(limits) == self._pool_key(self.config.limits):
            try:
                slot = self._pool.get_nowait()
                self._wake.set()
                return slot
            except queue.Empty:
                pass
        return self._create(limits)

    def _discard(self, cid: str) -> None:
        api = self.client.api

        def remove():
            try:
                api.remove_container(cid, force=True)
            except Exception:
                pass  # gone already; close() and the reaper remove what is left by label

        threading.Thread(target=remove, daemon=True).start()

    def close(self) -> None:
        """Stop the pool and remove this sandbox's containers; idempotent (the finalizer runs once)."""
        self._finalizer()

    # ---- executions -------------------------------------------------------------------------
    def _execute(self, request: dict[str, Any], stdin: bytes, limits: Limits) -> ExecResult:
        request = {**request, "seccomp": base64.b64encode(seccomp.candidate_filter()).decode()}
        header = json.dumps(request).encode()
        t0 = time.monotonic()
        try:
            slot = self._acquire(limits)
        except Exception as e:
            return ExecResult(
                None, backend=self.name, isolation="docker", error=f"container start failed: {e}"
            )
        try:
            return self._talk(slot, header, stdin, limits, t0)
        finally:
            slot.close()
            self._discard(slot.cid)

    def _talk(self, slot: _Slot, header: bytes, stdin: bytes, limits: Limits, t0: float) -> ExecResult:
        raw = slot.raw
        deadline = t0 + limits.timeout_s
        out, err = bytearray(), bytearray()
        try:
            raw.settimeout(max(0.1, deadline - time.monotonic()))
            raw.sendall(struct.pack(">I", len(header)) + header + stdin)
            raw.shutdown(socket.SHUT_WR)
            timed_out, truncated = _read_streams(raw, deadline, limits.max_output_bytes, out, err)
        except OSError as e:
            if not isinstance(e, socket.timeout):
                return ExecResult(
                    None,
                    stdout=bytes(out),
                    stderr=bytes(err),
                    backend=self.name,
                    isolation="docker",
                    error=f"docker stream failed: {e}",
                )
            timed_out, truncated = True, False
        exit_code = sig = None
        if not (timed_out or truncated):
            exit_code, sig, timed_out = self._exit_status(slot.cid, deadline)
        cap = limits.max_output_bytes
        return ExecResult(
            exit_code,
            signal=sig,
            stdout=bytes(out[:cap]),
            stderr=bytes(err[: max(0, cap - len(out))]),
            timed_out=timed_out,
            output_truncated=truncated,
            duration_s=time.monotonic() - t0,
            backend=self.name,
            isolation="docker",
            memory_scope="docker",  # the container's memory cgroup caps the whole run
        )

    def _exit_status(self, cid: str, deadline: float) -> tuple[int | None, int | None, bool]:
        """(exit code, signal, timed out) of a container whose output has ended."""
        try:
            status = self.client.api.wait(cid, timeout=max(1.0, deadline - time.monotonic()))
            exit_code = int(status["StatusCode"])
        except Exception:
            return None, None, True
        if 128 < exit_code <= 128 + 64:  # killed by a signal (tini reports 128+n)
            return None, exit_code - 128, False
        return exit_code, None, False


def _read_streams(raw, deadline: float, max_output: int, out: bytearray, err: bytearray) -> tuple[bool, bool]:
    """Split the container's attached stream into ``out`` and ``err`` until it ends, the deadline
    passes or the output overflows ``max_output``: returns (timed_out, truncated)."""
    buf = bytearray()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return True, False
        raw.settimeout(left)
        try:
            chunk = raw.recv(1 << 20)
        except TimeoutError:
            return True, False
        if not chunk:
            return False, False
        buf += chunk
        while len(buf) >= 8:  # docker's stream multiplexing: 1 byte stream, 3 pad, 4 size
            size = struct.unpack(">I", buf[4:8])[0]
            if len(buf) < 8 + size:
                break
            (out if buf[0] == 1 else err).extend(buf[8 : 8 + size])
            del buf[: 8 + size]
        if len(out) + len(err) > max_output:
            return False, True


def _fill(ref: weakref.ref, stop: threading.Event, wake: threading.Event) -> None:
    """The pool filler's loop. It holds the sandbox only while creating a container, so that a sandbox
    nobody closed is still garbage-collected, and its finalizer removes its containers."""
    while not stop.is_set():
        sb = ref()
        if sb is None:
            return
        full = sb._pool.qsize() >= sb.config.docker_pool_size
        ok = sb._fill_one()
        del sb  # may run the finalizer here, in this thread: _cleanup does not join itself
        if not ok:
            time.sleep(1.0)  # the daemon hiccuped; the next run creates its own container
        elif full:
            wake.wait(0.5)
            wake.clear()


def _cleanup(
    client,
    owner: str,
    pid: int,
    pool: queue.Queue,
    stop: threading.Event,
    wake: threading.Event,
    filler: threading.Thread | None,
) -> None:
    """Stop the pool and remove every container of ``owner``."""
    if os.getpid() != pid:  # a forked child exiting: the containers are its parent's
        return
    stop.set()
    wake.set()
    if filler is not None and filler is not threading.current_thread():
        filler.join(timeout=10)
    while True:
        try:
            pool.get_nowait().close()
        except queue.Empty:
            break
    try:  # containers being auto-removed meanwhile would 404 the listing without ignore_removed
        left = client.containers.list(
            all=True, filters={"label": f"lopd.sandbox.owner={owner}"}, ignore_removed=True
        )
    except Exception:
        left = []
    for c in left:
        try:
            c.remove(force=True)
        except Exception:  # already gone: one missing container must not keep the others alive
            pass


def _proc_stat(pid: int) -> list[str] | None:
    """Fields 3.. of /proc/<pid>/stat (state first), None when unreadable."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _proc_start(pid: int) -> str:
    """The start time of ``pid`` (field 22, ticks since boot), '' if unknown: with the pid, it names one
    process even after the pid is reused."""
    fields = _proc_stat(pid)
    return fields[19] if fields and len(fields) > 19 else ""


def _pid_ns() -> str:
    """This process's pid namespace ('' if unknown): its pids mean nothing in another one."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def _owner_alive(pid: int, start: str) -> bool:
    """Whether process ``pid`` runs and is the one that started at ``start`` ('' = not recorded)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        pass
    fields = _proc_stat(pid)
    if not fields or len(fields) <= 19:
        return True  # cannot tell: keep its containers
    return fields[0] != "Z" and not (start and fields[19] != start)


def reap_stale_containers(client) -> int:
    """Remove the containers (label ``lopd.sandbox=1``) whose owner ran on this host and is gone: it
    crashed or was killed before close(). Owners alive (the pid runs with the recorded start time), on
    another host or in another pid namespace are never touched. Returns how many were removed."""
    host, ns, removed = socket.gethostname(), _pid_ns(), 0
    for c in client.api.containers(all=True, filters={"label": "lopd.sandbox=1"}):
        labels = c.get("Labels") or {}
        try:
            o_host, pid, _ = labels["lopd.sandbox.owner"].rsplit(":", 2)
            if o_host != host or labels.get("lopd.sandbox.owner_pidns", ns) != ns:
                continue
            if _owner_alive(int(pid), labels.get("lopd.sandbox.owner_start", "")):
                continue
            client.api.remove_container(c["Id"], force=True)
        except Exception:  # no or odd owner label, or removed meanwhile
            continue
        removed += 1
    return removed


class _Slot:
    """A started container and the attached socket to its waiting boot program."""

    def __init__(self, cid: str, sock):
        self.cid, self.sock = cid, sock
        self.raw = getattr(sock, "_sock", sock)

    def close(self) -> None:
        for s in (self.raw, self.sock):
            try:
                s.close()
            except OSError:
                pass


def docker_unavailable_reason(config: SandboxConfig | None = None) -> str | None:
    """Why the docker backend cannot run here (None when it can): for skips and diagnostics."""
    config = config or SandboxConfig(backend="docker")
    try:
        check_image(docker_client(config.docker_base_url), config.docker_image)
    except SandboxUnavailable as e:
        return str(e)
    return None
