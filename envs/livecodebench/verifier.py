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
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envs.livecodebench.data import Problem
from envs.sandbox import ExecResult, Sandbox, SandboxConfig
from envs.sandbox.grading import Mode, SandboxGrader, frame, grader_program, verdict_record
from envs.sandbox.guest import open_result

TIMEOUT_S = 6
_PROGRAM = grader_program(Path(__file__).with_name("sandbox_program.py"))
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
    """The sandbox itself failed (graded as a failure)."""
    memory_note: str | None = None
    """Set when ``memory_mb`` capped each process alone, not the run (no memory cgroup here)."""

    @property
    def passed(self) -> bool:
        """lcb_runner's ``np.all(np.array(results) > 0)``."""
        return bool(self.results) and all(r is True or (type(r) is int and r > 0) for r in self.results)

    def to_json(self, sample_index: int | None = None) -> dict[str, Any]:
        fields = {"pass": self.passed, "results": self.results, "metadata": self.metadata}
        if self.global_timeout:
            fields["global_timeout"] = True
        return verdict_record(
            {"question_id": self.question_id}, sample_index, fields, self.error, self.memory_note
        )


def extract_code(model_output: str) -> str:
    """lcb_runner's extraction: the lines between the last two lines holding ``` ('' if fewer)."""
    lines = model_output.split("\n")
    fences = [i for i, line in enumerate(lines) if "```" in line]
    if len(fences) < 2:
        return ""
    return "\n".join(lines[fences[-2] + 1 : fences[-1]])


class LCBVerifier(SandboxGrader):
    """Grades code for LiveCodeBench problems in one sandbox backend. Thread-safe."""

    program = _PROGRAM
    preload = PRELOAD

    def __init__(
        self,
        mode: Mode = "strict",
        sandbox: Sandbox | None = None,
        sandbox_config: SandboxConfig | None = None,
        timeout: int = TIMEOUT_S,
    ):
        self.timeout = int(timeout)
        super().__init__(mode, sandbox, sandbox_config)

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
            tail = frame(json.dumps(sample["outputs"]).encode())
        stdin = frame(json.dumps(job).encode()) + tail
        budget = (self.timeout + 1) * n + 5
        return self._run_sealed(stdin, budget, lambda r, key: self._parse(problem.question_id, r, key))

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
