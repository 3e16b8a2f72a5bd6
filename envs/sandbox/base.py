"""The sandbox interface every backend implements.

A sandbox runs one Python *program* (source text, run as ``__main__``) per call, in a fresh work
directory, with stdin bytes and optional files, under :class:`~envs.sandbox.config.Limits`. It never
raises because of what the program does: crashes, timeouts and floods come back in the
:class:`ExecResult`. Backend problems (no daemon, no image) raise :class:`SandboxUnavailable`::

    from envs.sandbox import make_sandbox
    with make_sandbox() as sb:
        r = sb.run("print(input()[::-1])", stdin=b"abc\\n")
        assert r.ok and r.stdout == b"cba\\n"
"""

from __future__ import annotations

import abc
import base64
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from envs.sandbox.config import Limits, SandboxConfig


class SandboxUnavailable(RuntimeError):
    """The configured backend cannot run code here; the message names the fix."""


@dataclass
class ExecResult:
    """What one execution did."""

    exit_code: int | None
    """The program's exit status; None when it was killed by a signal or never finished."""
    signal: int | None = None
    """The signal that ended the program, if one did (SIGKILL after a timeout is reported as timed_out)."""
    stdout: bytes = b""
    stderr: bytes = b""
    timed_out: bool = False
    """The wall-clock limit ran out and the execution was killed."""
    output_truncated: bool = False
    """stdout+stderr exceeded the limit and the execution was killed."""
    duration_s: float = 0.0
    backend: str = ""
    isolation: str = ""
    """'full', 'none' or 'docker': what actually confined this run."""
    error: str | None = None
    """A failure of the sandbox itself (not of the program)."""
    memory_scope: str = "process"
    """What ``memory_mb`` capped: the whole run ('cgroup v1', 'cgroup v2', or 'docker'), or each process
    alone ('process': RLIMIT_AS per process, with ``nproc`` bounding how many there are)."""
    oom_killed: bool = False
    """The run's memory cgroup ran out and the kernel killed a process of it."""

    @property
    def ok(self) -> bool:
        """The program ran to completion and exited 0."""
        return self.exit_code == 0 and not self.timed_out and not self.output_truncated and self.error is None


class Sandbox(abc.ABC):
    """A backend. Thread-safe: concurrent ``run`` calls are independent executions."""

    name = "abstract"

    def __init__(
        self,
        config: SandboxConfig | None = None,
        preload: tuple[str, ...] = (),
        programs: tuple[str, ...] = (),
    ):
        self.config = config or SandboxConfig()
        self.preload = tuple(preload)
        """Trusted modules a backend may import ahead of the program (only a speed hint)."""
        self.programs = tuple(programs)
        """Trusted programs (graders) a backend may compile once ahead (only a speed hint)."""
        self._setup()

    def _setup(self) -> None:
        """The backend's own set-up, once ``config``, ``preload`` and ``programs`` are set."""

    def run(
        self,
        program: str,
        *,
        stdin: bytes = b"",
        files: Mapping[str, bytes | str] | None = None,
        limits: Limits | None = None,
        grader: bool = False,
    ) -> ExecResult:
        """Run ``program`` once in a fresh sandbox and return what happened.

        ``program`` runs as an untrusted candidate, unless ``grader``: then it is trusted code that
        runs as the run's supervisor (its own uid, no writable folder on sys.path) and forks the
        candidates itself, each dropped to the candidate's identity by envs/sandbox/guest.py's
        ``guard_runner``."""
        limits = limits or self.config.limits
        bad = bad_file_name(files)
        if bad:
            return ExecResult(None, backend=self.name, isolation=self.isolation, error=bad)
        return self._execute(run_request(program, grader, files, limits, stdin), stdin, limits)

    @abc.abstractmethod
    def _execute(self, request: dict[str, Any], stdin: bytes, limits: Limits) -> ExecResult:
        """Carry out one run whose file names are checked: hand the jail ``request`` (see
        :func:`run_request`), then ``stdin``, and report what happened."""

    @property
    def isolation(self) -> str:
        """What confines executions of this backend (see ExecResult.isolation)."""
        return self.name

    def close(self) -> None:
        """Release processes and containers this backend holds."""

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def memory_note(result: ExecResult) -> str | None:
    """What a verdict says when the run's memory was capped per process only (None when per run)."""
    if result.memory_scope != "process":
        return None
    return "memory_mb capped each process, not the run (no memory cgroup): nproc bounds how many"


def run_request(
    program: str, grader: bool, files: Mapping[str, bytes | str] | None, limits: Limits, stdin: bytes
) -> dict[str, Any]:
    """The header of one run, as the jail reads it: the program and its role, the files (base64), the
    limits, and how many bytes of stdin follow it."""
    return {
        "program": program,
        "grader": bool(grader),
        "files": {
            k: base64.b64encode(v.encode() if isinstance(v, str) else v).decode()
            for k, v in (files or {}).items()
        },
        "limits": asdict(limits),
        "stdin_len": len(stdin),
    }


def bad_file_name(files: Mapping[str, bytes | str] | None) -> str | None:
    """Why a file of ``files`` cannot be written into a work dir (None when all can): an absolute name,
    or one that climbs out of it."""
    import posixpath

    for name in files or {}:
        rel = posixpath.normpath(str(name))
        if rel.startswith(("/", "..")) or rel == ".":
            return f"file name {name!r} must be relative and inside the work dir"
    return None


def compose_program(*sources: str, call: str = "main()") -> str:
    """One runner program from module sources (e.g. envs/sandbox/guest.py + a grader), then ``call``.

    ``from __future__`` lines are hoisted (they must open a module); the host-only ``try: from envs...
    except ImportError`` blocks stay harmless because the project is not importable in a sandbox.
    """
    future = "from __future__ import annotations\n"
    body = "\n".join(s.replace(future, "") for s in sources)
    return future + body + f"\n{call}\n"
