"""Two gloo processes take the same step as one process on the same global batch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent / "learners"))
from learner_fixtures import SUBPROCESS_ENV, make_trainer, small_overrides, write_shop_expert_traces  # noqa: E402

WORKER = Path(__file__).parent / "dist_worker.py"


def _batch(tmp_path: Path, learner: str, traces: Path, extra: list[str]) -> Path:
    """One step's global batch of real rollouts, with rewards that give every learner a signal."""
    torch.set_num_threads(1)
    tr = make_trainer(tmp_path / "collect", learner, traces, "rollouts_per_step=8", *extra)
    batch, _ = tr.collect(1)
    for r in batch.rollouts:
        r.traj.episode.reward = [1.0, 0.0, 0.5, 0.0, 0.0, 1.0, 0.25, 1.0][r.index]
    tr.close()
    path = tmp_path / f"{learner}-batch.pt"
    torch.save(batch.rollouts, path)
    return path


def _run(n: int, batch: Path, out: Path, args: list[str]) -> dict:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(n),
           str(WORKER), str(batch), str(out), *args]
    r = subprocess.run(cmd, env=SUBPROCESS_ENV, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    return torch.load(out, weights_only=False)


@pytest.mark.slow
@pytest.mark.parametrize("learner,strategy", [("lopd", "ddp"), ("grpo", "fsdp")])
def test_two_processes_match_one(tmp_path, learner, strategy):
    traces = write_shop_expert_traces(tmp_path / "expert.jsonl")
    extra = ["rollouts_per_step=8", f"distributed.strategy={strategy}", "optim.lr=1e-3"]
    batch = _batch(tmp_path, learner, traces, extra)
    args = small_overrides(tmp_path / "run", learner, traces, *extra)
    one, two = _run(1, batch, tmp_path / "one.pt", args), _run(2, batch, tmp_path / "two.pt", args)
    assert one["world"] == 1 and two["world"] == 2
    for key in ("loss", "tokens", "grad_norm"):
        assert two["metrics"][key] == pytest.approx(one["metrics"][key], rel=1e-4, abs=1e-6), key
    assert one["metrics"]["grad_norm"] > 0
    moved = 0
    for k, v in one["student"].items():
        torch.testing.assert_close(two["student"][k], v, atol=2e-5, rtol=1e-4)
        moved += int(not torch.equal(v, make_trainer_initial(k)))
    assert moved > 0
    if learner == "lopd":
        for k, v in one["composer"].items():
            torch.testing.assert_close(two["composer"][k], v, atol=2e-5, rtol=1e-4)
        assert two["beta"] == pytest.approx(one["beta"], abs=1e-6)


_INITIAL: dict = {}


def make_trainer_initial(key: str) -> torch.Tensor:
    """The tiny model's initial weights (to check the step moved them)."""
    if not _INITIAL:
        from harness.models import build_tiny_model

        _INITIAL.update(build_tiny_model("1m", seed=0)[0].state_dict())
    return _INITIAL[key]
