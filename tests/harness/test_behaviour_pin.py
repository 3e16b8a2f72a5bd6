"""Behaviour pinned across refactors: fixed-seed GRPO and LOPD runs reproduce a recorded metrics file.

The file was written before harness/ was reorganised (issue #30). Every metric but the wall-clock ``time/*``
ones must come back byte for byte: the runs are in float64 on one thread, with MKL's conditional numerical
reproducibility (``MKL_CBWR=COMPATIBLE``) and ATen's generic kernels (``ATEN_CPU_CAPABILITY=default``), so the
CPU's vector width does not pick the summation order and nothing but the code decides them. Re-record (``LOPD_RECORD_PIN=1``) only for a change that is meant to alter behaviour, and say so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "learners"))
from learner_fixtures import SUBPROCESS_ENV, small_overrides, write_shop_expert_traces  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PIN = Path(__file__).parent / "data" / "behaviour_pin.json"
F64 = ["model.dtype=float64", "lopd.composer.qformer.dtype=float64", "seed=11"]
# GRPO from the pinned micro base (it earns some reward, so advantages and gradients are not zero);
# LOPD on the shop with the tiny model and expert traces in its bank
MICRO_GRPO = ["generations=24", "rollouts_per_step=8", "eval.at_end=true", "eval.max_tasks=8", "eval.samples=1",
              "log.progress=false", "checkpoint.every_steps=0", "sampling.max_new_tokens=48", "rollout.max_turns=4"]

pytestmark = pytest.mark.slow


def _run(tmp_path: Path, learner: str, traces: Path) -> list[dict]:
    run = tmp_path / learner
    if learner == "grpo":
        args = [str(ROOT / "harness" / "configs" / "grpo.yaml"), f"run_dir={run}", *MICRO_GRPO, *F64]
    else:
        # the recording predates margin.token_scope, whose default became the paper's tool_call
        args = small_overrides(run, learner, traces, "generations=8", "lopd.margin.token_scope=assistant", *F64)
    env = {**SUBPROCESS_ENV, "MKL_CBWR": "COMPATIBLE", "ATEN_CPU_CAPABILITY": "default"}
    proc = subprocess.run([sys.executable, "-m", "harness", "train", *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    recs = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if not k.startswith("time/")} for r in recs]


def test_fixed_seed_grpo_and_lopd_metrics_match_the_recording(tmp_path):
    traces = write_shop_expert_traces(tmp_path / "expert.jsonl")
    got = {learner: _run(tmp_path, learner, traces) for learner in ("grpo", "lopd")}
    if os.environ.get("LOPD_RECORD_PIN") == "1":
        PIN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    pinned = json.loads(PIN.read_text())
    # every recorded metric, byte for byte (as JSON text); a metric added since is no change of behaviour
    kept = {k: [{m: r[m] for m in rec if m in r} for r, rec in zip(got[k], pinned[k])] for k in pinned}
    assert [len(got[k]) for k in pinned] == [len(pinned[k]) for k in pinned]
    assert json.dumps(kept, indent=1, sort_keys=True) == json.dumps(pinned, indent=1, sort_keys=True), \
        "metrics differ from tests/harness/data/behaviour_pin.json"
