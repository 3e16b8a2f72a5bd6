"""The host side of a sandboxed grader, shared by the EvalPlus and LiveCodeBench verifiers.

A grader is a trusted program (envs/sandbox/guest.py, then the benchmark's sandbox_program.py) run
with ``Sandbox.run(..., grader=True)``. Its stdin is length-prefixed frames, the last one a fresh
per-run key; it answers with one result sealed under that key, which the verifier opens with
envs/sandbox/guest.py's ``open_result``: nothing the graded code prints can stand in for it.
"""

from __future__ import annotations

import secrets
import struct
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal, Protocol, Self, TypeVar

from envs.sandbox.base import ExecResult, Sandbox, compose_program, memory_note
from envs.sandbox.config import Limits, SandboxConfig
from envs.sandbox.factory import make_sandbox
from envs.sandbox.guest import KEY_BYTES

Mode = Literal["official", "strict"]
LIMITS = Limits(memory_mb=16384, nproc=64, max_output_bytes=64 << 20)
"""Limits of every grading run (the time limits are set per task). They are also a verifier's sandbox
defaults, so the docker backend's warm pool holds containers that fit these runs."""
_GUEST = Path(__file__).with_name("guest.py")


class _Verdict(Protocol):
    memory_note: str | None


V = TypeVar("V", bound=_Verdict)


def check_mode(mode: str) -> None:
    """ValueError unless ``mode`` is one of :data:`Mode`'s."""
    if mode not in ("official", "strict"):
        raise ValueError(f"mode must be 'official' or 'strict', got {mode!r}")


def grader_program(program: Path) -> str:
    """The runner sent into the sandbox: the guest helpers, then the grader ``program``'s source."""
    return compose_program(_GUEST.read_text(), program.read_text())


def frame(payload: bytes) -> bytes:
    """One stdin frame of a grader (its 4-byte big-endian length, then ``payload``)."""
    return struct.pack(">I", len(payload)) + payload


def verdict_record(
    head: dict[str, Any],
    sample_index: int | None,
    fields: dict[str, Any],
    error: str | None,
    memory: str | None,
) -> dict[str, Any]:
    """A verdict's JSON: ``head`` (the task's id), the sample's index if given, the benchmark's
    ``fields``, then the sandbox's error and memory note when there are any."""
    d = dict(head)
    if sample_index is not None:
        d["sample_index"] = sample_index
    d.update(fields)
    if error:
        d["error"] = error
    if memory:
        d["memory"] = memory
    return d


class SandboxGrader:
    """Runs one grader ``program`` in a sandbox it owns (unless given one) and seals each run.
    Subclasses set ``program`` and ``preload``."""

    program: str
    preload: tuple[str, ...] = ()

    def __init__(self, mode: Mode, sandbox: Sandbox | None, sandbox_config: SandboxConfig | None):
        check_mode(mode)
        self.mode = mode
        self._own_sandbox = sandbox is None
        self.sandbox = sandbox or make_sandbox(
            replace(sandbox_config or SandboxConfig(), limits=LIMITS),
            preload=self.preload,
            programs=(self.program,),
        )

    def close(self) -> None:
        if self._own_sandbox:
            self.sandbox.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _run_sealed(self, stdin: bytes, budget: float, parse: Callable[[ExecResult, bytes], V]) -> V:
        """Run the grader on ``stdin`` and a fresh key (its last frame), with ``budget`` seconds of
        grading plus slack; ``parse(result, key)`` reads the verdict off the run."""
        key = secrets.token_bytes(KEY_BYTES)  # seals the runner's result: see envs/sandbox/guest.py
        limits = replace(LIMITS, timeout_s=budget + 15.0, cpu_s=int(budget) + 30)
        result = self.sandbox.run(self.program, stdin=stdin + frame(key), limits=limits, grader=True)
        verdict = parse(result, key)
        verdict.memory_note = memory_note(result)
        return verdict
