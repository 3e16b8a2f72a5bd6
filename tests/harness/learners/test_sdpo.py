"""SDPO's wiring: successful siblings as teacher context, no signal without one, the EMA teacher."""

from __future__ import annotations

import pytest
import torch
from learner_fixtures import make_trainer

from harness.learners.common import prompt_messages, with_context
from harness.learners.privileged import episode_text


@pytest.fixture
def trainer(tmp_path):
    tr = make_trainer(tmp_path, "sdpo")
    yield tr
    tr.close()


def test_lone_success_has_no_sibling_and_is_logged(trainer):
    batch, _ = trainer.collect(1)
    for r, x in zip(batch.rollouts, [1.0, 0.0, 0.0, 0.0]):
        r.traj.episode.reward = x
    lrn = trainer.learner
    sib = [lrn.siblings(batch.rollouts, r) for r in batch.rollouts]
    assert sib[0] == [] and all(s == [batch.rollouts[0]] for s in sib[1:])
    m = lrn.train_step(batch)
    assert m["no_signal_frac"] == pytest.approx(0.25) and m["no_signal_rollouts"] == 1.0
    n = sum(sum(r.traj.loss_mask) for r in batch.rollouts[1:])
    assert m["tokens"] == n and m["skipped_update"] == 0.0


def test_no_success_means_no_update(trainer):
    batch, _ = trainer.collect(1)
    before = {k: v.clone() for k, v in trainer.student.state_dict().items()}
    m = trainer.learner.train_step(batch)  # the untrained model never succeeds on the shop
    assert m["no_signal_frac"] == 1.0 and m["skipped_update"] == 1.0 and m["tokens"] == 0.0
    assert all(torch.equal(before[k], v) for k, v in trainer.student.state_dict().items())


def test_teacher_prompt_holds_the_sibling_and_teacher_tracks_the_student_by_ema(trainer, distill_prompts):
    import harness.learners.sdpo as sdpo

    batch, _ = trainer.collect(1)
    for r, x in zip(batch.rollouts, [1.0, 1.0, 0.0, 0.0]):
        r.traj.episode.reward = x
    msgs = with_context(prompt_messages(batch.rollouts[0].traj.episode), "CTX", "user", trainer.cfg.sdpo.framing)
    assert "CTX" in msgs[1]["content"] and "Buy 2 apples" in msgs[1]["content"]
    seen = distill_prompts(sdpo)
    teacher0 = {k: v.clone() for k, v in trainer.learner.teacher.lm.named_parameters()}
    m = trainer.learner.train_step(batch)
    assert m["no_signal_frac"] == 0.0
    first = trainer.tokenizer.decode(seen["prompts"][0])
    sibling = episode_text(batch.rollouts[1].traj.episode)
    assert "A successful attempt at this same task" in first and sibling.split("\n")[0] in first
    rate = trainer.cfg.sdpo.ema_rate
    student = dict(trainer.student.named_parameters())
    for k, p in trainer.learner.teacher.lm.named_parameters():
        torch.testing.assert_close(p, (1 - rate) * teacher0[k] + rate * student[k].detach())
