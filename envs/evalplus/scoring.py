"""Offline scoring of an evalplus samples file (``lopd score evalplus``).

Samples are evalplus's format, one JSON object a line: ``{"task_id": ..., "solution": ...}`` or
``{"task_id": ..., "completion": ...}`` (then prompt + completion is graded), any number per task::

    from envs.evalplus.scoring import score_file
    summary = score_file("humaneval", "samples.jsonl", mode="official", out="verdicts.jsonl")
    summary["pass@1"]["plus"]
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from envs.data import json_lines
from envs.evalplus.data import Dataset
from envs.evalplus.verifier import EvalPlusVerifier, Mode, Verdict
from envs.sandbox.config import SandboxConfig


def read_samples(path: str | Path) -> list[dict[str, Any]]:
    """Every sample of a JSONL file; a malformed line is an error naming it."""
    out = []
    for n, s, error in json_lines(path):
        if error is not None:
            raise ValueError(f"{path}:{n}: not JSON ({error})") from None
        if not isinstance(s, dict) or not isinstance(s.get("task_id"), str):
            raise ValueError(f"{path}:{n}: a sample needs a string 'task_id'")
        if not isinstance(s.get("solution", s.get("completion")), str):
            raise ValueError(f"{path}:{n}: a sample needs a string 'solution' or 'completion'")
        out.append(s)
    return out


def pass_at_k(results: dict[str, list[bool]], ks=(1, 10, 100)) -> dict[str, float]:
    """evalplus's unbiased pass@k over tasks (only k that every task has samples for)."""
    from evalplus.eval import estimate_pass_at_k

    if not results:
        return {}
    total = np.array([len(v) for v in results.values()])
    correct = np.array([sum(v) for v in results.values()])
    return {f"pass@{k}": float(estimate_pass_at_k(total, correct, k).mean()) for k in ks if total.min() >= k}


def score_file(
    dataset: Dataset,
    samples_path: str | Path,
    mode: Mode = "official",
    out: str | Path | None = None,
    sandbox: SandboxConfig | None = None,
    workers: int = 2,
) -> dict[str, Any]:
    """Grade every sample; write verdict lines to ``out`` (input order); return the summary."""
    samples = read_samples(samples_path)
    with EvalPlusVerifier(dataset, mode=mode, sandbox_config=sandbox) as v:
        known = [i for i, s in enumerate(samples) if s["task_id"] in v.problems]
        unknown = sorted({s["task_id"] for s in samples if s["task_id"] not in v.problems})
        if unknown:
            print(
                f"warning: {len(unknown)} task ids not in {dataset} are skipped, e.g. {unknown[:3]}",
                file=sys.stderr,
            )
        verdicts = v.check_many(
            [(samples[i]["task_id"], v.solution_of(samples[i])) for i in known], workers=workers
        )
        missing = len(v.problems) - len({samples[i]["task_id"] for i in known})
    by_index: dict[int, Verdict] = dict(zip(known, verdicts))
    base: dict[str, list[bool]] = defaultdict(list)
    plus: dict[str, list[bool]] = defaultdict(list)
    counters: dict[str, int] = defaultdict(int)
    lines = []
    for i, s in enumerate(samples):
        tid = s["task_id"]
        idx = counters[tid]
        counters[tid] += 1
        vd = by_index.get(i)
        if vd is None:
            lines.append(
                {
                    "task_id": tid,
                    "sample_index": idx,
                    "pass": False,
                    "base_status": None,
                    "plus_status": None,
                    "error": f"unknown task for {dataset}",
                }
            )
            continue
        base[tid].append(vd.base_passed)
        plus[tid].append(vd.passed)
        lines.append(vd.to_json(idx))
    if out:
        with open(out, "w", encoding="utf-8") as f:
            f.writelines(json.dumps(line) + "\n" for line in lines)
    return {
        "dataset": dataset,
        "mode": mode,
        "samples": len(samples),
        "tasks": len(base),
        "tasks_missing": missing,
        "errors": sum(1 for vd in verdicts if vd.error),
        "pass@k": {"base": pass_at_k(base), "plus": pass_at_k(plus)},
    }


def format_summary(summary: dict[str, Any]) -> str:
    """evalplus's printout: base tests, then base + extra tests."""
    d = summary["dataset"]
    rows = [f"{d} (base tests)"] + [f"{k}:\t{v:.3f}" for k, v in summary["pass@k"]["base"].items()]
    rows += [f"{d}+ (base + extra tests)"] + [f"{k}:\t{v:.3f}" for k, v in summary["pass@k"]["plus"].items()]
    note = f"[{summary['samples']} samples over {summary['tasks']} tasks, mode={summary['mode']}"
    if summary["tasks_missing"]:
        note += f"; {summary['tasks_missing']} tasks without samples are not counted"
    if summary["errors"]:
        note += f"; {summary['errors']} sandbox errors (graded as failures)"
    return "\n".join(rows + [note + "]"])
