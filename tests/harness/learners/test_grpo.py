"""GRPO's wiring: group advantages from rewards, the token-level PPO loss, the optional reference KL."""

from __future__ import annotations

import pytest
import torch
from learner_fixtures import make_trainer

from lopd.losses import group_advantages


def _batch(trainer, rewards):
    batch, _ = trainer.collect(1)
    for r, x in zip(batch.rollouts, rewards):
        r.traj.episode.reward = x
    return batch


def test_loss_is_the_token_weighted_negative_advantage_and_weights_move(tmp_path):
    tr = make_trainer(tmp_path, "grpo")
    batch = _batch(tr, [1.0, 0.0, 0.0, 0.0])
    assert [r.group for r in batch.rollouts] == [0, 0, 0, 0] and len({r.task.task_id for r in batch.rollouts}) == 1
    before = {k: v.clone() for k, v in tr.student.state_dict().items()}
    m = tr.learner.train_step(batch)
    adv = group_advantages(torch.tensor([1.0, 0.0, 0.0, 0.0]), group_size=4)  # [1.5, -.5, -.5, -.5]
    n = torch.tensor([float(sum(r.traj.loss_mask)) for r in batch.rollouts])
    # first pass: ratio = 1, so each token's loss is -A of its rollout; sum / global token count
    assert m["loss"] == pytest.approx(float(-(adv * n).sum() / n.sum()), abs=1e-5)
    assert m["tokens"] == float(n.sum()) and m["clip_fraction"] == 0.0 and m["zero_adv_group_frac"] == 0.0
    assert m["grad_norm"] > 0 and m["skipped_update"] == 0.0
    assert any(not torch.equal(before[k], v) for k, v in tr.student.state_dict().items())
    tr.close()


def test_equal_rewards_give_no_signal_and_reference_kl_starts_at_zero(tmp_path):
    tr = make_trainer(tmp_path, "grpo", None, "grpo.kl_coef=0.1")
    assert tr.learner.ref is not None  # the frozen initial model
    m = tr.learner.train_step(_batch(tr, [0.5] * 4))
    assert m["zero_adv_group_frac"] == 1.0 and m["adv_abs_mean"] == 0.0
    assert m["ref_kl"] == pytest.approx(0.0, abs=1e-6)  # the reference IS the student before its first update
    tr.close()


def test_second_ppo_epoch_sees_moved_ratios_and_clips(tmp_path):
    tr = make_trainer(tmp_path, "grpo", None, "grpo.ppo_epochs=2", "optim.lr=0.5", "optim.grad_clip=0")
    m = tr.learner.train_step(_batch(tr, [1.0, 0.0, 1.0, 0.0]))
    assert m["clip_fraction"] > 0.0  # logged from the last pass, after a large first update


def test_group_size_must_divide_rollouts_per_step(tmp_path):
    with pytest.raises(ValueError, match="multiple of the group size"):
        make_trainer(tmp_path, "grpo", None, "rollouts_per_step=6")
