"""LOPD's wiring: retrieval -> composer latents in the teacher prompt, both updates, the dual step, ablations."""

from __future__ import annotations

import pytest
import torch
from learner_fixtures import make_trainer

from harness.learners.latent_teacher import latent_teacher_logits, latent_teacher_prompt
from harness.learners.lopd_rows import step_rows
from lopd.latent import LATENT_SENTINEL, placeholder_token_id


def _snap(module, names=None):
    return {k: v.detach().clone() for k, v in module.named_parameters() if names is None or k in names}


def test_latents_fill_the_teacher_prompt_and_all_three_parties_update_as_they_should(tmp_path, shop_traces):
    tr = make_trainer(tmp_path, "lopd", shop_traces, "lopd.n_retrieved=1", "lopd.composer.qformer.n_latents=4",
                      "bank.grow=true", "group_size=2", "micro_batch_tokens=1")  # one group per micro-batch
    lrn = tr.learner
    bank0 = len(lrn.bank)
    batch, _ = tr.collect(1)
    for r, x in zip(batch.rollouts, [1.0, 0.0, 0.5, 0.0]):
        r.traj.episode.reward = x
    short = batch.rollouts[1].traj  # uneven supervised counts inside a micro-batch (padded query positions)
    short.token_ids, short.loss_mask = short.token_ids[:-3], short.loss_mask[:-3]
    assert tr.ctx.micro_batches([len(r.traj.token_ids) for r in batch.rollouts],
                                groups=[r.group for r in batch.rollouts]) == [[0, 1], [2, 3]]
    assert lrn.retrieve([batch.rollouts[0].task]) != [[]]
    ids, pos = latent_teacher_prompt(tr.tokenizer, batch.rollouts[0].traj.episode, 4, lrn.cfg.framing, {})
    pid = placeholder_token_id(tr.tokenizer)
    assert len(pos) == 4 and [ids[p] for p in pos] == [pid] * 4 and ids.count(pid) == 4
    composer0 = {k: v.detach().clone() for k, v in lrn.composer.named_trainable_parameters()}
    frozen0 = _snap(lrn.composer.backbone, [k for k, _ in lrn.composer.backbone.named_parameters() if "lora_" not in k])
    student0 = _snap(tr.student)
    beta0 = lrn.dual.value
    encoded = []  # (rows, anchor?) of each encoder call: a group's rollouts share one encoding of their task
    real = lrn.composer._encode_ids
    lrn.composer._encode_ids = lambda seqs, anchor: encoded.append((len(seqs), anchor)) or real(seqs, anchor)
    m = lrn.train_step(batch)
    del lrn.composer._encode_ids
    # 2 groups (micro-batches) x 1 experience, not 4 rollouts x 1; shop has one training task, so its
    # anchor is encoded once and the second micro-batch reads it from the cache
    assert sorted(encoded) == [(1, False), (1, False), (1, True)]
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


def test_teacher_prefix_without_graph_gives_the_same_logits_and_latent_gradients(tmp_path, shop_traces):
    from harness.learners.common import pad_rows
    from lopd.latent import inject_batch

    tr = make_trainer(tmp_path, "lopd", shop_traces, "lopd.composer.qformer.n_latents=4")
    lrn = tr.learner
    batch, _ = tr.collect(1)
    lat = lrn.composer.encode([batch.rollouts[0].task.prompt], lrn.retrieve([batch.rollouts[0].task]))[0].detach()
    rows, pos = [], []
    for r in batch.rollouts:
        ids, p = latent_teacher_prompt(tr.tokenizer, r.traj.episode, lat.shape[0], lrn.cfg.framing, {})
        rows.append(ids + r.traj.token_ids[r.prompt_len:])
        pos.append(p)
    shared_ids, attn = pad_rows(rows, 0)
    assert len(rows) == 4
    other = shared_ids.clone()
    other[1, 3] = (other[1, 3] + 1) % 50  # one row's system prompt differs: 2 distinct prefixes
    distinct = shared_ids.clone()
    distinct[:, 3] = torch.arange(4) + 10  # every row's differs: nothing to share
    prefix_rows = []  # batch size of the no-graph prefix pass (the first decoder call of each forward)
    hook = lrn.composer.backbone.get_decoder().register_forward_pre_hook(
        lambda m, a, kw: prefix_rows.append(kw["inputs_embeds"].shape[0]), with_kwargs=True)
    cases = [(ids, at, n) for ids, n in ((shared_ids, 1), (other, 2), (distinct, 4))
             for at in (torch.tensor([[len(rows[0]) - 5, len(rows[0]) - 2]] * len(rows)),  # split at the first latent
                        torch.tensor([[5, len(rows[0]) - 5, len(rows[0]) - 2]] * len(rows)))]  # split before it
    for ids, at, n_prefix in cases:
        leaf = lat.clone().requires_grad_(True)
        prefix_rows.clear()
        # grads on: the prefix enters as a KV cache
        split = latent_teacher_logits(lrn.composer, ids, attn, pos, [leaf] * len(rows), at)
        assert prefix_rows[0] == n_prefix  # each distinct prefix runs once
        with torch.no_grad():  # without gradients the shared prefix is still run once, with the same logits
            prefix_rows.clear()
            again = latent_teacher_logits(lrn.composer, ids, attn, pos, [leaf] * len(rows), at)
            torch.testing.assert_close(again, split.detach(), atol=1e-5, rtol=1e-5)
            assert prefix_rows == ([n_prefix, len(rows)] if n_prefix < len(rows) else [len(rows)])
        split.sum().backward()
        ref_leaf = lat.clone().requires_grad_(True)
        with lrn.composer.teacher_mode() as lm:  # the plain full forward
            emb = inject_batch(lrn.composer.input_embeddings()(ids), pos, [ref_leaf] * len(rows))
            h = lm.get_decoder()(inputs_embeds=emb, attention_mask=attn, use_cache=False).last_hidden_state
            full = lm.get_output_embeddings()(h[torch.arange(len(rows))[:, None], at]).float()
        full.sum().backward()
        torch.testing.assert_close(split.detach(), full.detach(), atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(leaf.grad, ref_leaf.grad, atol=1e-6, rtol=1e-4)
        assert ref_leaf.grad.abs().max() > 0
    hook.remove()
    # anchor latents are cached between steps (and kept in the checkpoint) and equal a fresh encoding
    tasks, exps = [batch.rollouts[0].task], lrn.retrieve([batch.rollouts[0].task])
    with torch.no_grad():
        first = lrn.composer.encode([tasks[0].prompt], exps, anchor=True)[0]
        cached = lrn.state_dict()["anchor_cache"]
        assert [(t, e) for t, e, _ in cached][-len(exps[0]):] == [(tasks[0].prompt, e) for e in exps[0]]
        lrn.composer.load_anchor_cache_state([])
        torch.testing.assert_close(lrn.composer.encode([tasks[0].prompt], exps, anchor=True)[0], first)
    tr.close()


def test_module_doctests():
    import doctest

    import harness.learners.latent_teacher as mod

    result = doctest.testmod(mod)
    assert result.failed == 0 and result.attempted > 0


def test_frozen_composer_teacher_scored_by_an_engine_equals_in_process(tmp_path, shop_traces):
    """With a frozen composer and teacher servers, the latent teacher is scored by the engine (latents as
    embedding overrides). An in-process HFEngine stands in for the SGLang server (whose request shape
    tests/harness/engines/test_sglang.py checks): the step equals the in-process teacher's, in float64,
    within float64 rounding of two summation orders (~ 25 matmuls x width 384 x 1.1e-16 x |logit| 30 =
    3e-11 per log-prob; bounded here by 1e-9 relative). AdamW's step has slope at most lr/eps = 1e5 in
    the gradient, where |g| ~ eps = 1e-8 and its error is ~1e-24: parameters within 1e-12."""
    from harness.engines import HFEngine

    extra = ("lopd.train_composer=false", "lopd.composer.qformer.n_latents=2", "model.dtype=float64",
             "lopd.composer.qformer.dtype=float64", "seed=3")
    runs = []
    for served in (False, True):
        tr = make_trainer(tmp_path / str(served), "lopd", shop_traces, *extra)
        if served:
            tr.ctx.teacher_engine = HFEngine(tr.ctx.frozen_copy(), tr.tokenizer)
        assert tr.learner._served_teacher() == served
        batch, _ = tr.collect(1)
        lrn = tr.learner
        rows = step_rows(lrn.ctx, lrn.cfg, lrn.composer.n_latents, batch.rollouts,
                         {r.task.task_id: r.task for r in batch.rollouts},
                         {r.task.task_id: ["x"] for r in batch.rollouts}, {}, 0.0)
        assert any(p for p in rows.t_pos)
        m = tr.learner.train_step(batch)
        runs.append((m, {k: v.detach().clone() for k, v in tr.student.named_parameters()}))
        tr.close()
    (a, pa), (b, pb) = runs
    for k in ("loss", "distill_kl", "composer/kl", "composer/delta", "composer/loss", "grad_norm"):
        assert abs(a[k] - b[k]) <= 1e-9 * (1 + abs(a[k])), (k, a[k], b[k])
    assert b["time/teacher"] > 0 and a["no_latent_frac"] == b["no_latent_frac"] < 1
    assert all(torch.allclose(pa[k], pb[k], rtol=0, atol=1e-12) for k in pa)


def test_without_a_composer_init_lopd_stops_and_names_the_fix(tmp_path, shop_traces):
    # a random composer's latents drown the teacher's prompt: it must be asked for, as composer_init=random
    with pytest.raises(ValueError, match=r"run `lopd prepare CONFIG` \(builds the bank and the cold-start composer\), "
                                         r"or set lopd.composer_init=random"):
        make_trainer(tmp_path / "none", "lopd", shop_traces, "lopd.composer_init=null")
    with pytest.raises(FileNotFoundError, match="no cold-start composer at .*missing.pt.*lopd prepare"):
        make_trainer(tmp_path / "gone", "lopd", shop_traces, f"lopd.composer_init={tmp_path / 'missing.pt'}")
    with pytest.raises(FileNotFoundError, match="no experience bank at .*nobank .*lopd prepare"):
        make_trainer(tmp_path / "nobank", "lopd", shop_traces, f"bank.path={tmp_path / 'nobank'}")
