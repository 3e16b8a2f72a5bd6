"""Offline scoring of LiveCodeBench generations (``lopd score livecodebench``).

Samples are lcb_runner's custom-evaluator format: ``{"question_id": ..., "code_list": [code, ...]}``
per problem, as a JSON list or JSON Lines; each code is already extracted. pass@1 is lcb_runner's
unbiased estimator averaged over the problems that have samples::

    from envs.livecodebench.scoring import score_file
    summary = score_file("problems.jsonl", "generations.json", out="verdicts.jsonl")
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from envs.livecodebench.data import PUBLIC_ONLY_NOTE, load_problems
from envs.livecodebench.verifier import LCBVerifier, Mode
from envs.sandbox.config import SandboxConfig


def read_samples(path: str | Path) -> list[dict[str, Any]]:
    """[{question_id, code_list}] from a JSON list or JSONL file; malformed input is an error."""
    text = Path(path).read_text(encoding="utf-8")
    try:
        data = json.loads(text)
        rows = data if isinstance(data, list) else [data]
    except ValueError:
        rows = []
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except ValueError as e:
                    raise ValueError(f"{path}:{n}: not JSON ({e})") from None
    for i, r in enumerate(rows):
        if (
            not isinstance(r, dict)
            or "question_id" not in r
            or not isinstance(r.get("code_list"), list)
            or not all(isinstance(c, str) for c in r["code_list"])
        ):
            raise ValueError(f"{path}: sample {i} needs 'question_id' and a 'code_list' of strings")
    return rows


def pass_at_k(per_problem: dict[str, list[bool]], ks=(1, 5, 10)) -> dict[str, float]:
    def estimator(n: int, c: int, k: int) -> float:
        if n - c < k:
            return 1.0
        return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))

    if not per_problem:
        return {}
    totals = [len(v) for v in per_problem.values()]
    return {
        f"pass@{k}": float(np.mean([estimator(len(v), sum(v), k) for v in per_problem.values()]))
        for k in ks
        if min(totals) >= k
    }


def score_file(
    problems_path: str | Path,
    samples_path: str | Path,
    out: str | Path | None = None,
    mode: Mode = "official",
    sandbox: SandboxConfig | None = None,
    workers: int = 2,
    release: str | None = None,
    start_date: str | None = None,
    end_date: str | None = None,
) -> dict:
    problems = {p.question_id: p for p in load_problems(problems_path, release, start_date, end_date)}
    samples = read_samples(samples_path)
    jobs, slots = [], []
    for r in samples:
        qid = str(r["question_id"])
        for j, code in enumerate(r["code_list"]):
            slots.append((qid, j))
            if qid in problems:
                jobs.append((problems[qid], code))
    unknown = sorted({q for q, _ in slots if q not in problems})
    if unknown:
        print(
            f"warning: {len(unknown)} question ids not among the problems are skipped, e.g. {unknown[:3]}",
            file=sys.stderr,
        )
    with LCBVerifier(mode=mode, sandbox_config=sandbox) as v:
        verdicts = iter(v.check_many(jobs, workers=workers))
    per_problem: dict[str, list[bool]] = {}
    lines = []
    public_only = False
    for qid, j in slots:
        if qid not in problems:
            lines.append(
                {
                    "question_id": qid,
                    "sample_index": j,
                    "pass": False,
                    "results": [],
                    "error": "unknown question_id",
                }
            )
            continue
        vd = next(verdicts)
        public_only = public_only or problems[qid].public_only
        per_problem.setdefault(qid, []).append(vd.passed)
        line = vd.to_json(j)
        if problems[qid].public_only:
            line["note"] = "public tests only"
        lines.append(line)
    if out:
        with open(out, "w", encoding="utf-8") as f:
            f.writelines(json.dumps(x) + "\n" for x in lines)
    return {
        "mode": mode,
        "problems": len(per_problem),
        "samples": sum(len(v) for v in per_problem.values()),
        "pass@k": pass_at_k(per_problem),
        "public_only": public_only,
    }


def format_summary(s: dict) -> str:
    rows = [f"{k}: {v:.4f}" for k, v in s["pass@k"].items()]
    rows.append(f"[{s['samples']} samples over {s['problems']} problems, mode={s['mode']}]")
    if s["public_only"]:
        rows.append(f"WARNING: {PUBLIC_ONLY_NOTE}")
    return "\n".join(rows)
