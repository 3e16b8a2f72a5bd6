"""Grade EvalPlus solutions in a sandbox: verdicts identical to evalplus 0.3.1's ``evaluate``.

Two verdict modes:

* ``official``: evalplus's own ``untrusted_check`` runs inside the sandbox, quirks included: an
  object whose ``__eq__`` always returns True passes, and HumanEval/32 (find_zero) always fails
  because 0.3.1's special oracle ``continue``s without marking the input passed.
* ``strict`` (the training default): the model's code never sees the expected outputs; return
  values cross a process boundary as marshalled plain data and are compared outside it with the same
  rules, so faked equality, patched builtins or a tampered comparison cannot pass. Anything that is
  not an exact built-in value (numpy scalars, custom classes) fails; HumanEval/32 still fails.

>>> v = EvalPlusVerifier("humaneval", mode="strict")          # doctest: +SKIP
>>> v.check("HumanEval/0", solution_code).passed              # doctest: +SKIP
True
"""

from __future__ import annotations

import pickle
import threading
from collections import OrderedDict
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envs.evalplus.data import Dataset, expected_outputs, load_problems, output_not_none
from envs.sandbox import ExecResult, Sandbox, SandboxConfig
from envs.sandbox.grading import Mode, SandboxGrader, check_mode, frame, grader_program, verdict_record
from envs.sandbox.guest import open_result

PASS = "pass"
_PROGRAM = grader_program(Path(__file__).with_name("sandbox_program.py"))
PRELOAD = ("numpy", "evalplus.eval", "evalplus.eval.utils", "marshal", "pickle", "multiprocessing")
OFFICIAL_VM_BYTES = {"humaneval": 2_137_088 << 10, "mbpp": 3_141_200 << 10}
"""Address space (VmSize) of ``evalplus.evaluate``'s main process when it forks its pool, per dataset:
evalplus 0.3.1 with its imports (``datasets``/pyarrow alone map ~1.4 GB), the problems and every task's
cached expected outputs, measured with Python 3.11 on the 2-core dev VM (docs/SANDBOX.md). Each check
process inherits it, so evalplus's 4 GiB RLIMIT_AS leaves a solution only the rest (~2.1 GB HumanEval+,
~1.0 GB MBPP+; nothing for Mbpp/255's 1.7M-tuple output). Official mode makes its check processes
inherit as much (see sandbox_program.py)."""


@dataclass
class Verdict:
    """The grade of one solution (fields as in evalplus's eval_results.json)."""

    task_id: str
    passed: bool
    """base AND plus passed: the reward."""
    base_status: str | None
    plus_status: str | None
    base_details: list[bool] = field(default_factory=list)
    plus_details: list[bool] = field(default_factory=list)
    error: str | None = None
    """Set when the sandbox itself failed (the verdict is then a fail)."""
    memory_note: str | None = None
    """Set when ``memory_mb`` capped each process alone, not the run (no memory cgroup here)."""

    @property
    def base_passed(self) -> bool:
        return self.base_status == PASS

    def to_json(self, sample_index: int | None = None) -> dict[str, Any]:
        fields = {"pass": self.passed, "base_status": self.base_status, "plus_status": self.plus_status}
        return verdict_record({"task_id": self.task_id}, sample_index, fields, self.error, self.memory_note)


def phase_budget(ref_time: list[float], min_time_limit: float, factor: float) -> float:
    """Upper bound of one phase's wall time in evalplus: min(60, sum of limits) + 1, joined + 1."""
    return min(60.0, sum(max(min_time_limit, factor * t) for t in ref_time)) + 2.0


class EvalPlusVerifier(SandboxGrader):
    """Grades solutions of one dataset in one sandbox backend. Thread-safe."""

    program = _PROGRAM
    preload = PRELOAD

    def __init__(
        self,
        dataset: Dataset,
        mode: Mode = "strict",
        sandbox: Sandbox | None = None,
        sandbox_config: SandboxConfig | None = None,
        min_time_limit: float | None = None,
        gt_time_limit_factor: float | None = None,
        official_vm_bytes: int | None = None,
    ):
        """``official_vm_bytes`` (official mode): the address space evalplus.evaluate's check processes
        inherit, default :data:`OFFICIAL_VM_BYTES` of the dataset; 0 checks each task as evalplus's
        ``check_correctness`` called alone would (the full 4 GiB for the solution)."""
        from evalplus.config import DEFAULT_GT_TIME_LIMIT_FACTOR, DEFAULT_MIN_TIME_LIMIT

        check_mode(mode)  # before the data is loaded
        self.dataset = dataset
        self.problems = load_problems(dataset)
        super().__init__(mode, sandbox, sandbox_config)
        self.min_time_limit = DEFAULT_MIN_TIME_LIMIT if min_time_limit is None else min_time_limit
        self.factor = DEFAULT_GT_TIME_LIMIT_FACTOR if gt_time_limit_factor is None else gt_time_limit_factor
        self.official_vm_bytes = (
            OFFICIAL_VM_BYTES[dataset] if official_vm_bytes is None else official_vm_bytes
        )
        self._blobs: OrderedDict[str, tuple[bytes, bytes, float]] = OrderedDict()
        self._blob_lock = threading.Lock()

    def solution_of(self, sample: dict[str, Any]) -> str:
        """evalplus's rule: ``solution`` if present, else prompt + ``completion``."""
        if "solution" in sample:
            return str(sample["solution"])
        return self.problems[sample["task_id"]]["prompt"] + str(sample.get("completion", ""))

    def _task_blobs(self, task_id: str) -> tuple[bytes, bytes, float]:
        """(phases frame, expected frame, time budget) of a task, pickled once and kept (LRU)."""
        with self._blob_lock:
            if task_id in self._blobs:
                self._blobs.move_to_end(task_id)
                return self._blobs[task_id]
        p, gt = self.problems[task_id], expected_outputs(self.dataset, task_id)
        phases, expected, budget = [], {}, 0.0
        for name in ("base", "plus"):
            ph = {"name": name, "inputs": p[f"{name}_input"], "ref_time": gt[f"{name}_time"]}
            if self.mode == "official":
                ph["expected"] = gt[name]
            else:
                expected[name] = gt[name]
            phases.append(ph)
            budget += phase_budget(gt[f"{name}_time"], self.min_time_limit, self.factor)
        blobs = (
            frame(pickle.dumps(phases, protocol=4)),
            frame(pickle.dumps(expected, protocol=4)) if self.mode == "strict" else b"",
            budget,
        )
        with self._blob_lock:
            self._blobs[task_id] = blobs
            while len(self._blobs) > 16:
                self._blobs.popitem(last=False)
        return blobs

    def check(self, task_id: str, solution: str) -> Verdict:
        """Grade one full solution (code defining the entry point). Never raises for bad code."""
        if task_id not in self.problems:
            raise KeyError(f"{self.dataset} has no task {task_id!r}")
        p = self.problems[task_id]
        try:  # code that does not compile fails at evalplus's exec(): same verdict, no sandbox needed
            compile(solution, "<solution>", "exec")
        except Exception:
            return Verdict(task_id, False, "fail", "fail")
        job = {
            "mode": self.mode,
            "dataset": self.dataset,
            "entry_point": p["entry_point"],
            "code": solution,
            "atol": p["atol"],
            "min_time_limit": self.min_time_limit,
            "gt_time_limit_factor": self.factor,
            "output_not_none": output_not_none(self.dataset, p["entry_point"]),
        }
        if self.mode == "official":
            job["official_vm_bytes"] = self.official_vm_bytes
        phases, expected, budget = self._task_blobs(task_id)
        stdin = frame(pickle.dumps(job, protocol=4)) + phases + expected
        return self._run_sealed(stdin, budget, lambda r, key: self._parse(task_id, r, key))

    def _parse(self, task_id: str, r: ExecResult, key: bytes) -> Verdict:
        try:
            if r.error or r.timed_out or r.output_truncated or r.exit_code != 0:
                raise ValueError(
                    r.error
                    or f"runner exit {r.exit_code} signal {r.signal} timed_out {r.timed_out}: "
                    f"{r.stderr[-500:].decode(errors='replace')}"
                )
            res = open_result(key, r.stdout)
            base, plus = res["base"], res["plus"]
            bs, ps = str(base[0]), str(plus[0])
            return Verdict(
                task_id,
                bs == PASS and ps == PASS,
                bs,
                ps,
                [bool(x) for x in base[1]],
                [bool(x) for x in plus[1]],
            )
        except (ValueError, KeyError, TypeError, IndexError) as e:
            return Verdict(task_id, False, None, None, error=f"sandbox run failed: {e}")

    def check_many(self, items: Iterable[tuple[str, str]], workers: int = 2) -> list[Verdict]:
        """Grade (task_id, solution) pairs concurrently; results in input order."""
        items = list(items)
        if workers <= 1:
            return [self.check(t, s) for t, s in items]
        # Longest tasks first keeps both workers busy to the end; results go back in input order.
        order = sorted(range(len(items)), key=lambda i: -self._cost(items[i][0]))
        out: list[Verdict | None] = [None] * len(items)
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for i, v in zip(order, pool.map(lambda i: self.check(*items[i]), order)):
                out[i] = v
        return out  # type: ignore[return-value]

    def _cost(self, task_id: str) -> float:
        try:
            gt = expected_outputs(self.dataset, task_id)
        except KeyError:
            return 0.0
        return sum(gt["base_time"]) + sum(gt["plus_time"])
