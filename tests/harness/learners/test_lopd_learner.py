"""LOPD's wiring: retrieval -> composer latents in the teacher prompt, both updates, the dual step, ablations."""

from __future__ import annotations

import pytest
import torch
from learner_fixtures import make_trainer

from harness.learners.lopd import latent_teacher_prompt
from lopd.latent import LATENT_SENTINEL, placeholder_token_id


def _snap(module, names=None):
    return {k: v.detach().clone() for k, v in module.named_parameters() if names is None or k in names}


def test_latents_fill_the_teacher_prompt_and_all_three_parties_update_as_they_should(tmp_path, shop_traces):
    tr = make_trainer(tmp_path, "lopd", shop_traces, "lopd.n_retrieved=1", "lopd.composer.qformer.n_latents=4",
                      "bank.grow=true")
    lrn = tr.learner
    bank0 = len(lrn.bank)
    batch, _ = tr.collect(1)
    for r, x in zip(batch.rollouts, [1.0, 0.0, 0.5, 0.0]):
        r.traj.episode.reward = x
    assert lrn.retrieve([batch.rollouts[0].task]) != [[]]
    ids, pos = latent_teacher_prompt(tr.tokenizer, batch.rollouts[0].traj.episode, 4, lrn.cfg.framing, {})
    pid = placeholder_token_id(tr.tokenizer)
    assert len(pos) == 4 and [ids[p] for p in pos] == [pid] * 4 and ids.count(pid) == 4
    composer0 = {k: v.detach().clone() for k, v in lrn.composer.named_trainable_parameters()}
    frozen0 = _snap(lrn.composer.backbone, [k for k, _ in lrn.composer.backbone.named_parameters() if "lora_" not in k])
    student0 = _snap(tr.student)
    beta0 = lrn.dual.value
    m = lrn.train_step(batch)
    assert m["no_latent_frac"] == 0.0 and m["composer/beta"] == beta0
    # dual ascent with the step's mean Delta, from the beta the loss used
    cfg = tr.cfg.lopd.margin
    assert m["composer/beta_next"] == pytest.approx(max(0.0, beta0 + cfg.dual_lr * (cfg.margin - m["composer/delta"])))
    assert lrn.dual.value == m["composer/beta_next"]
    assert m["bank_size"] == bank0 + 1 == len(lrn.bank)  # the one full-pass rollout joined the bank
    assert any(not torch.equal(composer0[k], p) for k, p in lrn.composer.named_trainable_parameters())
    assert all(torch.equal(frozen0[k], p) for k, p in lrn.composer.backbone.named_parameters() if k in frozen0)
    assert any(not torch.equal(student0[k], p) for k, p in tr.student.named_parameters())
    assert all(LATENT_SENTINEL not in str(m["content"]) for m in batch.rollouts[0].traj.episode.messages)  # traces untouched
    tr.close()


def test_frozen_composer_ablation_trains_only_the_student(tmp_path, shop_traces):
    tr = make_trainer(tmp_path, "lopd", shop_traces, "lopd.train_composer=false", "lopd.composer.qformer.n_latents=2")
    lrn = tr.learner
    composer0 = {k: v.detach().clone() for k, v in lrn.composer.named_trainable_parameters()}
    batch, _ = tr.collect(1)
    m = lrn.train_step(batch)
    assert "composer/grad_norm" not in m and m["grad_norm"] > 0
    assert all(torch.equal(composer0[k], p) for k, p in lrn.composer.named_trainable_parameters())
    tr.close()


def test_empty_bank_leaves_the_teacher_without_context(tmp_path):
    tr = make_trainer(tmp_path, "lopd", None, "lopd.composer.qformer.n_latents=2")
    batch, _ = tr.collect(1)
    m = tr.learner.train_step(batch)
    # the teacher is then the initial model on the student's own prompt: the same as the student at step 1
    assert m["no_latent_frac"] == 1.0 and m["distill_kl"] == pytest.approx(0.0, abs=1e-6)
    tr.close()
