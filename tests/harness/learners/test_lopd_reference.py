"""The single-file reference LOPD step and the fast learner take the same step (float64)."""

from __future__ import annotations

import pytest
import torch
from learner_fixtures import make_trainer

from envs.core import Task
from harness.learners.latent_teacher import latent_teacher_prompt
from harness.learners.lopd_reference import reference_step_of

# Tolerances, from the arithmetic. The whole step runs in float64 (unit roundoff U). The learner
# differs from the reference only in the order of its sums: micro-batches add up per-micro-batch
# losses and gradients, the KV-cache prefix and the shared-prefix rows split the teacher's forward
# where the reference runs one, and the LM head runs on gathered rows only (other GEMM blocking).
# Reordering a sum of n terms moves it by at most n * U * sum|terms|. The longest sums are a
# weight's gradient over every position of the padded step, at most N_TERMS (asserted), longer
# than the widths a value is reduced over in between (d = 128, the vocabulary 1024, a row's
# length). sum|terms| <= G * |value| with G = 1000, generous: the student's per-token gradients
# are differences of nearly equal student and teacher probabilities, and the composer's KL, margin
# and anchor terms nearly cancel (net values ~20 x below their terms, tests/harness/test_distributed.py).
# So a tensor may differ by REL * max|tensor| (rtol=0), a scalar by REL * max(1, |value|) (its
# terms are per-token log-probs, O(1)). A wiring error (a lost term, a wrong normaliser, a gradient
# detached or counted twice) moves values by O(their size), ~1e9 x REL.
U = 2.0**-53
N_TERMS = 4096
"""Positions of the step's padded rows (student and teacher), at most: the n of the bound."""
G = 1_000.0
REL = N_TERMS * U * G  # 4.5e-10


def _tol(value: torch.Tensor | float, scalar: bool = False) -> float:
    """Absolute tolerance: REL x a tensor's largest magnitude, or REL x max(1, |value|) for a scalar."""
    scale = float(torch.as_tensor(value).abs().max())
    return REL * (max(1.0, scale) if scalar else scale)


def _apples_only(src, dst):
    """The expert traces of the training task only: the bank then holds the 'apples' experience alone."""
    import json

    with open(src) as f, open(dst, "w") as g:
        g.writelines(line for line in f if json.loads(line).get("task_id") == "apples")
    return dst


@pytest.mark.slow  # ~25 s on a shared CPU: a tiny float64 trainer, 6 rollouts, two steps' work
@pytest.mark.parametrize("chunk", [None, 5], ids=["one-chunk", "chunks-of-5"])
def test_reference_step_equals_the_learner_step(tmp_path, shop_traces, monkeypatch, chunk):
    # the learner's LM heads over chunks of 5 positions (checkpointed, lopd.chunked), or in one
    # chunk (the default 1024 exceeds these rows); the reference always makes the whole logits
    if chunk is not None:
        monkeypatch.setattr("lopd.chunked.LOGITS_CHUNK", chunk)
    tr = make_trainer(tmp_path, "lopd", _apples_only(shop_traces, tmp_path / "apples.jsonl"),
                      "model.dtype=float64", "lopd.composer.qformer.dtype=float64", "rollouts_per_step=6",
                      "group_size=2", "lopd.composer.qformer.n_latents=4", "lopd.n_retrieved=2",
                      "lopd.allow_self_retrieval=false",  # 'apples' retrieves nothing: the plain-prompt path
                      "lopd.margin.beta_init=0.5",  # the margin term enters the composer's loss
                      "optim.grad_clip=0", "lopd.composer_optim.grad_clip=0")  # gradients compared unclipped
    lrn, ctx = tr.learner, tr.ctx
    batch, _ = tr.collect(1)
    rs = batch.rollouts
    for r, x in zip(rs, [1.0, 0.0, 0.25, 1.0, 0.0, 0.75]):  # A = 2r - 1: +1, -1, -0.5, +1, -1, +0.5
        r.traj.episode.reward = x
    lrn.bank.add_episodes([rs[0].traj.episode])  # a second 'apples' experience (the expert's is the first)
    for r in rs[2:4]:  # the second and third groups play other tasks, which retrieve both 'apples' entries
        r.task = ctx.tasks["mix"]
    for r in rs[4:]:
        r.task = Task("pears", "Buy 3 pears, then pay.", data={"want": {"pear": 3}})
    assert [r.group for r in rs] == [0, 0, 1, 1, 2, 2] and len(lrn.bank) == 2
    n_exps = [len(x) for x in lrn.retrieve([r.task for r in rs])]
    assert n_exps == [0, 0, 2, 2, 2, 2]
    # the learner's micro-batches, by the longer of each student and teacher row: two, the first mixing
    # the plain-prompt task with a latent one (two distinct teacher prefixes), the second one task
    lengths = []
    for r, n in zip(rs, n_exps):
        n *= lrn.composer.n_latents
        t_prompt = latent_teacher_prompt(tr.tokenizer, r.traj.episode, n, lrn.cfg.framing, {})[0] if n else []
        lengths.append(max(len(r.traj.token_ids), len(t_prompt) + len(r.traj.token_ids) - r.prompt_len))
    ctx.cfg.micro_batch_tokens = 4 * max(lengths)
    assert ctx.micro_batches(lengths, groups=[r.group for r in rs]) == [[0, 1, 2, 3], [4, 5]]
    assert len(rs) * max(lengths) <= N_TERMS
    assert rs[0].traj.episode.messages[0]["role"] == "system"  # a shared prefix before the first latent
    assert next(tr.student.parameters()).dtype == torch.float64 == lrn.composer.qformer.queries.dtype
    # away from the anchor c_phi0 (LoRA B off zero too), so the anchor term and every LoRA weight get
    # gradients; and the student away from the initial model (the teacher), so the plain-prompt rows do too
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in [*lrn.composer.trainable_parameters(), *tr.student.parameters()]:
            p.add_(1e-2 * torch.randn(p.shape, generator=gen, dtype=p.dtype))

    ref = reference_step_of(lrn, batch)
    assert ref.n_tokens > 0 and ref.no_latent_frac == pytest.approx(1 / 3)

    # the learner's step, its gradients read just before each optimiser steps
    s_names = {id(p): n for n, p in tr.student.named_parameters()}
    c_names = {id(p): n for n, p in lrn.composer.named_trainable_parameters()}
    got: dict[str, dict[str, torch.Tensor]] = {"student": {}, "composer": {}}

    def capture(side, names):
        def hook(opt, args, kwargs):
            for group in opt.param_groups:
                for p in group["params"]:
                    g = p.grad
                    got[side][names[id(p)]] = torch.zeros_like(p) if g is None else g.detach().clone()
        return hook

    prefix_rows = []  # rows of each teacher decoder call that has no graph (the prefix pass)
    dec = lrn.composer.backbone.get_decoder()
    handles = [ctx.optimizer.register_step_pre_hook(capture("student", s_names)),
               lrn.optimizer.register_step_pre_hook(capture("composer", c_names)),
               dec.register_forward_pre_hook(
                   lambda m, a, kw: prefix_rows.append(kw["inputs_embeds"].shape[0])
                   if kw.get("inputs_embeds") is not None and not torch.is_grad_enabled() else None,
                   with_kwargs=True)]
    m = lrn.train_step(batch)
    for h in handles:
        h.remove()
    assert prefix_rows == [2, 1]  # one prefix pass per distinct prefix: 'apples' and 'mix', then 'pears'

    seen = {}  # name -> (max |difference|, the tolerance's scale), for the report below
    for key, want in (("loss", ref.student_loss), ("composer/loss", ref.composer_loss),
                      ("composer/delta", ref.mean_delta), ("composer/beta_next", ref.beta_next)):
        assert m[key] == pytest.approx(want, rel=0, abs=_tol(want, scalar=True)), key
        seen[key] = (abs(m[key] - want), _tol(want, scalar=True) / REL)
    assert m["tokens"] == ref.n_tokens and m["composer/beta"] == ref.beta == 0.5
    assert m["no_latent_frac"] == ref.no_latent_frac

    for side, want in (("student", ref.student_grads), ("composer", ref.composer_grads)):
        assert want and set(got[side]) == set(want)
        for name, g in want.items():
            assert g.dtype == torch.float64 and g.abs().max() > 1e-8, name  # non-zero, far above rounding
            torch.testing.assert_close(got[side][name], g, rtol=0, atol=_tol(g),
                                       msg=lambda s, n=name: f"{side} {n}: {s}")
            seen[f"{side} {name}"] = (float((got[side][name] - g).abs().max()), _tol(g) / REL)
    worst = max(seen, key=lambda k: seen[k][0] / seen[k][1])
    scalars = ", ".join(f"{k} {seen[k][0]:.3g}" for k in list(seen)[:4])
    print(f"\nlargest |difference| / scale {seen[worst][0] / seen[worst][1]:.3g} at {worst} "
          f"(allowed: REL = {REL:.3g}); |differences| of the scalars: {scalars}")
    tr.close()
