"""Grade LiveCodeBench code in a sandbox with lcb_runner's rules (see sandbox_program.py).

``official`` reproduces lcb_runner (its in-process ``==`` included); ``strict`` (training default)
keeps the expected outputs out of the model's process and compares its stdout text / marshalled
return values outside it, so faked equality or a tampered grader cannot pass.

>>> from envs.livecodebench.data import load_problems
>>> v = LCBVerifier(mode="official")                                   # doctest: +SKIP
>>> v.check(load_problems()[0], "print(1)").results                     # doctest: +SKIP
[-2]
"""

from __future__ import annotations

import ast
import json
import secrets
import struct
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from envs.livecodebench.data import Problem
from envs.sandbox import ExecResult, Limits, Sandbox, SandboxConfig, make_sandbox
from envs.sandbox.base import compose_program, memory_note
from envs.sandbox.guest import KEY_BYTES, open_result

Mode = Literal["official", "strict"]
TIMEOUT_S = 6
_HERE = Path(__file__).parent
_PROGRAM = compose_program(
    (_HERE.parent / "sandbox" / "guest.py").read_text(), (_HERE / "sandbox_program.py").read_text()
)
PRELOAD = (
    "unittest.mock",
    "decimal",
    "marshal",
    "ast",
    "json",
    "string",
    "re",
    "datetime",
    "collections",
    "heapq",
    "bisect",
    "copy",
    "math",
    "random",
    "statistics",
    "itertools",
    "functools",
    "operator",
    "io",
    "typing",
)
LIMITS = Limits(memory_mb=16384, nproc=64, max_output_bytes=64 << 20)
"""Limits of every grading run (the time limits are set per problem). They are also the verifier's
sandbox defaults, so the docker backend's warm pool holds containers that fit these runs."""


@dataclass
class LCBVerdict:
    """One sample's grade: lcb_runner's per-test result list and metadata."""

    question_id: str
    results: list[Any]
    """True per passed test, then the failure code: -2 (stdin) / False (call-based) wrong answer, -3 time
    limit, -4 runtime error; [-4] when the code did not compile; [-2] on a global timeout (lcb_runner)."""
    metadata: dict[str, Any] = field(default_factory=dict)
    global_timeout: bool = False
    error: str | None = None
    memory_note: str | None = None
    """Set when ``memory_mb`` capped each process alone, not the run (no memory cgroup here)."""
    """The sandbox itself failed (graded as a failure)."""

    @property
    def passed(self) -> bool:
        """lcb_runner's ``np.all(np.array(results) > 0)``."""
        return bool(self.results) and all(r is True or (type(r) is int and r > 0) for r in self.results)

    def to_json(self, sample_index: int | None = None) -> dict[str, Any]:
        d: dict[str, Any] = {"question_id": self.question_id}
        if sample_index is not None:
            d["sample_index"] = sample_index
        d.update({"pass": self.passed, "results": self.results, "metadata": self.metadata})
        if self.global_timeout:
            d["global_timeout"] = True
        if self.error:
            d["error"] = self.error
        if self.memory_note:
            d["memory"] = self.memory_note
        return d


def _frame(payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + payload


def extract_code(model_output: str) -> str:
    """lcb_runner's extraction: the lines between the last two lines holding ``` ('' if fewer)."""
    lines = model_output.split("\n")
    fences = [i for i, line in enumerate(lines) if "```" in line]
    if len(fences) < 2:
        return ""
    return "\n".join(lines[fences[-2] + 1 : fences[-1]])


class LCBVerifier:
    """Grades code for LiveCodeBench problems in one sandbox backend. Thread-safe."""

    def __init__(
        self,
        mode: Mode = "strict",
        sandbox: Sandbox | None = None,
        sandbox_config: SandboxConfig | None = None,
        timeout: int = TIMEOUT_S,
    ):
        if mode not in ("official", "strict"):
            raise ValueError(f"mode must be 'official' or 'strict', got {mode!r}")
        self.mode, self.timeout = mode, int(timeout)
        self._own_sandbox = sandbox is None
        self.sandbox = sandbox or make_sandbox(
            replace(sandbox_config or SandboxConfig(), limits=LIMITS), preload=PRELOAD, programs=(_PROGRAM,)
        )

    def close(self) -> None:
        if self._own_sandbox:
            self.sandbox.close()

    def __enter__(self) -> LCBVerifier:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def check(self, problem: Problem, code: str) -> LCBVerdict:
        """Grade already-extracted ``code`` on the problem's public + private tests."""
        sample = problem.evaluation_sample()
        n = len(sample["inputs"])
        try:  # code lcb cannot even parse fails at its exec with [-4]: no sandbox needed
            # (stdin code is only parsed: lcb wraps it in a function, so a top-level `return` is fine)
            ast.parse(code) if sample["fn_name"] is None else compile(code, "<solution>", "exec")
        except Exception as e:
            return LCBVerdict(
                problem.question_id, [-4], {"error_code": -4, "error_message": f"Error during testing: {e}"}
            )
        job = {
            "mode": self.mode,
            "code": code,
            "inputs": sample["inputs"],
            "fn_name": sample["fn_name"],
            "timeout": self.timeout,
        }
        tail = b""
        if self.mode == "official":
            job["outputs"] = sample["outputs"]
        else:
            tail = _frame(json.dumps(sample["outputs"]).encode())
        key = secrets.token_bytes(KEY_BYTES)  # seals the runner's result: see envs/sandbox/guest.py
        stdin = _frame(json.dumps(job).encode()) + tail + _frame(key)
        budget = (self.timeout + 1) * n + 5
        limits = replace(LIMITS, timeout_s=budget + 15.0, cpu_s=budget + 30)
        result = self.sandbox.run(_PROGRAM, stdin=stdin, limits=limits, grader=True)
        verdict = self._parse(problem.question_id, result, key)
        verdict.memory_note = memory_note(result)
        return verdict

    def _parse(self, qid: str, r: ExecResult, key: bytes) -> LCBVerdict:
        if r.timed_out:  # beyond the runner's own global limit: lcb_runner's global-timeout record
            return LCBVerdict(
                qid, [-2], {"error_code": -5, "error_message": "TestRunnerError"}, global_timeout=True
            )
        try:
            if r.error or r.output_truncated or r.exit_code != 0:
                raise ValueError(
                    r.error
                    or f"runner exit {r.exit_code} signal {r.signal}: "
                    f"{r.stderr[-500:].decode(errors='replace')}"
                )
            res = open_result(key, r.stdout)
            results = res["results"]
            if not isinstance(results, list) or not all(isinstance(x, (bool, int)) for x in results):
                raise ValueError(f"bad results {results!r}")
            return LCBVerdict(qid, results, res.get("metadata") or {}, bool(res.get("global_timeout")))
        except (ValueError, KeyError, TypeError) as e:
            return LCBVerdict(qid, [-4], {"error_code": -4}, error=f"sandbox run failed: {e}")

    def check_many(self, items: Iterable[tuple[Problem, str]], workers: int = 2) -> list[LCBVerdict]:
        items = list(items)
        if workers <= 1:
            return [self.check(p, c) for p, c in items]
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(lambda it: self.check(*it), items))
