"""Memory knobs change no loss and no gradient. model.gradient_checkpointing: with it on, a GRPO and an LOPD
step give the same loss and the same gradient of every trained parameter (student, LoRA, QFormer) as without
it, in float64. lopd.teacher_graph=after_student (the teacher scored without a graph, rerun with one after
the student's backward) likewise, with one micro-batch per task group or one for all.

Bound: the student's layers recompute the same ops on the same inputs (the same bits). LOPD's teacher runs
its prompt prefix with the rest instead of from a no-grad KV cache: the same sums in another order, float64
rounding of ~30 chained matmuls of width <= 512 (30 x 512 x 1.1e-16 ~ 2e-12 of a value's magnitude), so
1e-10 of (1 + |g|max) holds with room and a wiring error (a missing prefix, a dropped latent) cannot. The
teacher's first pass without a graph runs the prefix with the rest too (the rerun takes it from the KV
cache): the same bound."""

from __future__ import annotations

import copy

import pytest
import torch
from learner_fixtures import make_trainer

from lopd.checkpointing import is_checkpointed

F64 = ("model.dtype=float64", "lopd.composer.qformer.dtype=float64", "group_size=2", "seed=5",
       "lopd.n_retrieved=1", "lopd.composer.qformer.n_latents=2",
       "lopd.margin.token_scope=assistant")  # the tiny model's rollouts have no tool call for the composer's terms


def _grads_at_each_step(*optimizers):
    """A list that gets, at every optimizer step, each trained parameter's gradient."""
    seen = []
    for k, opt in enumerate(optimizers):
        def hook(o, args, kwargs, k=k):
            seen.append({(k, i): p.grad.detach().clone() for i, p in enumerate(p for g in o.param_groups
                                                                              for p in g["params"])
                         if p.grad is not None})
        opt.register_step_pre_hook(hook)
    return seen


def _step(tmp_path, learner, shop_traces, batch, on: bool, *extra: str):
    tr = make_trainer(tmp_path / f"{learner}-{on}-{'-'.join(extra)}", learner, shop_traces, *F64,
                      f"model.gradient_checkpointing={on}", *extra)
    assert is_checkpointed(tr.student.get_decoder().layers[0]) == on
    opts = [tr.optimizer] + ([tr.learner.optimizer] if learner == "lopd" else [])
    if learner == "lopd":
        assert tr.learner.composer.checkpoint_qformer == on
        assert is_checkpointed(tr.learner.composer.backbone.get_decoder().layers[0]) == on
    grads = _grads_at_each_step(*opts)
    metrics = tr.learner.train_step(copy.deepcopy(batch))
    tr.close()
    return metrics, grads


def _batch(tmp_path, learner, shop_traces):
    tr = make_trainer(tmp_path / "collect", learner, shop_traces, *F64)
    batch, _ = tr.collect(1)
    tr.close()
    for r, x in zip(batch.rollouts, [1.0, 0.0, 0.5, 0.0]):  # both groups have an advantage
        r.traj.episode.reward = x
    return batch


@pytest.mark.parametrize("learner", ["grpo", "lopd"])
def test_checkpointing_changes_no_loss_and_no_gradient(tmp_path, shop_traces, learner):
    batch = _batch(tmp_path, learner, shop_traces)
    (m0, g0), (m1, g1) = (_step(tmp_path, learner, shop_traces, batch, on) for on in (False, True))
    assert len(g0) == len(g1) == (2 if learner == "lopd" else 1)  # LOPD: composer and student steps
    _same(m0, g0, m1, g1)


@pytest.mark.parametrize("micro", ["micro_batch_tokens=1", "micro_batch_tokens=100000"])
def test_the_teacher_graph_after_the_student_changes_no_loss_and_no_gradient(tmp_path, shop_traces, micro):
    batch = _batch(tmp_path, "lopd", shop_traces)
    (m0, g0), (m1, g1) = (_step(tmp_path, "lopd", shop_traces, batch, False, micro, f"lopd.teacher_graph={g}")
                          for g in ("with_student", "after_student"))
    assert len(g0) == len(g1) == 2
    _same(m0, g0, m1, g1)
    assert m0["composer/delta"] != 0 and m0["composer/loss"] != 0


def _same(m0, g0, m1, g1):
    for a, b in zip(g0, g1):
        assert a.keys() == b.keys() and a
        scale = 1 + max(v.abs().max().item() for v in a.values())
        worst = max((a[k] - b[k]).abs().max().item() for k in a)
        assert worst <= 1e-10 * scale, worst
        assert any(v.abs().max() > 0 for v in a.values())  # a real gradient, not zeros on both sides
    for k in [k for k in m0 if k.startswith(("loss", "composer/", "distill"))]:
        assert abs(m0[k] - m1[k]) <= 1e-10 * (1 + abs(m0[k])), (k, m0[k], m1[k])
