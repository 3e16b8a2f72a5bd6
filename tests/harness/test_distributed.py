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


def _run(n: int, batch: Path, out: Path, args: list[str], chunk: int | None = None) -> dict:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(n),
           str(WORKER), str(batch), str(out), *args]
    env = SUBPROCESS_ENV if chunk is None else {**SUBPROCESS_ENV, "LOPD_TEST_LOGITS_CHUNK": str(chunk)}
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    return torch.load(out, weights_only=False)


# Tolerances, from the arithmetic. Both runs take the whole step in float64 (unit roundoff U):
# splitting the batch over two processes only reorders sums, and reordering a sum of n terms moves
# it by at most n * U * sum|terms|. AdamW's first step maps a gradient g to lr * g / (|g| + eps),
# with slope at most lr / eps, so a parameter may move differently by lr * n * U * G / eps, G
# bounding an element's sum of |per-token terms|. In float32 (U = 2**-24) that bound exceeds lr:
# a near-zero gradient's sign is noise (1 element in 49,152 moved 2.8e-5 apart on an AVX-512 Xeon).
U = 2.0**-53
N_MAX = 1_000
"""Tokens in the test's global batch, at most (asserted): the n of the bound."""
G = 1_000.0
"""Per-token gradient terms are O(1) for the student's token-mean losses; the composer's KL, margin
and anchor terms nearly cancel, leaving net gradients near eps from terms ~20 x larger."""
ADAM_EPS = 1e-8
"""torch's AdamW default, which the trainer and the composer's optimiser use."""
SUM_ATOL = N_MAX * U * G
"""How far a reordered sum of the batch's terms may move: the loss, Delta (and so beta)."""


def step_atol(lr: float) -> float:
    """How far a parameter may move differently in one AdamW step."""
    return lr * SUM_ATOL / ADAM_EPS


@pytest.mark.slow
@pytest.mark.parametrize("learner,strategy,chunk", [("lopd", "ddp", None), ("grpo", "fsdp", None),
                                                    ("grpo", "fsdp", 5)])
def test_two_processes_match_one(tmp_path, learner, strategy, chunk):
    """``chunk``: the LM head over chunks of that many positions (checkpointed, lopd.chunked), whose
    backward recomputes the head inside FSDP's root backward."""
    traces = write_shop_expert_traces(tmp_path / "expert.jsonl")
    lr = 1e-3
    extra = ["rollouts_per_step=8", f"distributed.strategy={strategy}", f"optim.lr={lr}", "model.dtype=float64",
             "lopd.composer.qformer.dtype=float64"]
    batch = _batch(tmp_path, learner, traces, extra)
    args = small_overrides(tmp_path / "run", learner, traces, *extra)
    one, two = _run(1, batch, tmp_path / "one.pt", args, chunk), _run(2, batch, tmp_path / "two.pt", args, chunk)
    assert one["world"] == 1 and two["world"] == 2
    assert 0 < one["metrics"]["tokens"] == two["metrics"]["tokens"] <= N_MAX
    assert two["metrics"]["loss"] == pytest.approx(one["metrics"]["loss"], rel=0, abs=SUM_ATOL)
    n_params = sum(v.numel() for v in one["student"].values())
    # |norm(a) - norm(b)| <= norm(a - b) <= sqrt(P) * max|a - b|, each gradient element a reordered sum
    assert two["metrics"]["grad_norm"] == pytest.approx(one["metrics"]["grad_norm"], rel=0,
                                                        abs=n_params**0.5 * SUM_ATOL)
    assert one["metrics"]["grad_norm"] > 0
    moved = 0
    for k, v in one["student"].items():
        assert v.dtype == torch.float64, k
        torch.testing.assert_close(two["student"][k], v, atol=step_atol(lr), rtol=0)
        moved += int((v - make_trainer_initial(k)).abs().max() > 10 * step_atol(lr))
    assert moved > 0
    if learner == "lopd":
        composer_lr = one["composer_lr"]
        for k, v in one["composer"].items():
            torch.testing.assert_close(two["composer"][k], v, atol=step_atol(composer_lr), rtol=0)
        # beta moves by dual_lr (< 1) times the mean of Delta, a reordered sum
        assert two["beta"] == pytest.approx(one["beta"], rel=0, abs=SUM_ATOL)


_INITIAL: dict = {}


def make_trainer_initial(key: str) -> torch.Tensor:
    """The tiny model's initial weights (to check the step moved them)."""
    if not _INITIAL:
        from harness.models import build_tiny_model

        _INITIAL.update(build_tiny_model("1m", seed=0)[0].double().state_dict())
    return _INITIAL[key]
