"""A run killed with SIGKILL and started again ends with the same metrics as an uninterrupted run."""

from __future__ import annotations

import math
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "learners"))
from learner_fixtures import SUBPROCESS_ENV, small_overrides, write_shop_expert_traces  # noqa: E402

from envs.trace import read_traces  # noqa: E402
from harness.metrics import read_metrics  # noqa: E402

STEPS = 6


def _cmd(run: Path, traces: Path) -> list[str]:
    # LOPD carries the most state: student + AdamW, composer + its AdamW, dual variable, bank (grows), RNG, order.
    return [sys.executable, "-m", "harness.training.trainer",
            *small_overrides(run, "lopd", traces, f"generations={4 * STEPS}", "checkpoint.every_steps=1",
                             "eval.every_generations=8", "eval.at_start=true", "bank.grow=true",
                             "lopd.margin.margin=0.5", "seed=7")]


def _comparable(path: Path) -> list[dict]:
    return [{k: v for k, v in r.items() if not k.startswith("time/")} for r in read_metrics(path)]


def _same(a: dict, b: dict) -> bool:
    if a.keys() != b.keys():
        return False
    return all(math.isclose(a[k], b[k], rel_tol=1e-5, abs_tol=1e-7) if isinstance(a[k], float) else a[k] == b[k]
               for k in a)


@pytest.mark.slow
def test_sigkill_mid_run_then_resume_matches_an_uninterrupted_run(tmp_path):
    traces = write_shop_expert_traces(tmp_path / "expert.jsonl")
    ref, killed = tmp_path / "ref", tmp_path / "killed"
    subprocess.run(_cmd(ref, traces), check=True, env=SUBPROCESS_ENV, capture_output=True, timeout=900)

    proc = subprocess.Popen(_cmd(killed, traces), env=SUBPROCESS_ENV, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    latest = killed / "checkpoints" / "latest"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None:
        if latest.is_file() and latest.read_text().strip() >= "step_000002":
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    assert latest.read_text().strip() < f"step_{STEPS:06d}"
    subprocess.run(_cmd(killed, traces), check=True, env=SUBPROCESS_ENV, capture_output=True, timeout=900)

    a, b = _comparable(ref / "metrics.jsonl"), _comparable(killed / "metrics.jsonl")
    assert [r["generations"] for r in a] == [r["generations"] for r in b]
    assert len([r for r in a if "train/loss" in r]) == STEPS
    for x, y in zip(a, b):
        assert _same(x, y), f"step {x['step']}: {x} != {y}"
    gens = sorted(e.meta["generation"] for e in read_traces(killed / "traces.jsonl") if e.meta["phase"] == "train")
    assert gens == list(range(4 * STEPS))  # every training episode exactly once


def test_a_restart_with_no_checkpoint_starts_its_records_afresh(tmp_path):
    """A run killed before its first checkpoint restarts from step 0; what it had logged goes, or its steps
    would be counted twice."""
    from learner_fixtures import make_trainer

    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"step": 1, "train/loss": 9.0}\n')
    (run / "traces.jsonl").write_text('{"env_id": "x"}\n')
    tr = make_trainer(run, "grpo", None)
    assert (run / "metrics.jsonl").read_text() == "" and (run / "traces.jsonl").read_text() == ""
    tr.close()
