"""Shared losses against values computed by hand on tiny tensors."""

import doctest
import math

import pytest
import torch

import lopd.losses as L
from lopd.config import DistillConfig, GRPOLossConfig


def logits_of(probs):
    return torch.tensor(probs, dtype=torch.float64).log().float()


def test_log_probs_are_full_vocab_fp32_not_renormalised():
    logits = torch.randn(2, 3, 7, dtype=torch.bfloat16)
    ids = torch.tensor([[[0, 3], [1, 2], [6, 5]], [[4, 4], [0, 1], [2, 3]]])
    got = L.log_probs_at(logits, ids)
    assert got.dtype == torch.float32
    want = torch.log_softmax(logits.float(), -1).gather(-1, ids)
    assert torch.allclose(got, want, atol=1e-6)
    assert torch.allclose(L.token_log_probs(logits, ids[..., 0]), want[..., 0], atol=1e-6)


def test_teacher_topk_keeps_the_k_most_likely_ids():
    ids, logp = L.teacher_topk(logits_of([[0.1, 0.5, 0.15, 0.25]]), k=2)
    assert ids.tolist() == [[1, 3]]
    assert torch.allclose(logp.exp(), torch.tensor([[0.5, 0.25]]), atol=1e-6)
    with pytest.raises(ValueError):
        L.teacher_topk(torch.zeros(1, 3), k=0)


def test_tail_bucket_by_hand_and_clamped_when_topk_holds_all_mass():
    tail = L.tail_log_prob(torch.tensor([0.5, 0.3]).log())
    assert math.isclose(float(tail), math.log(0.2), rel_tol=1e-5)
    full = L.tail_log_prob(torch.tensor([0.5, 0.5]).log())
    assert torch.isfinite(full) and float(full) < math.log(1e-6)  # log(1 - exp(-1e-7)) ~ -16.1
    assert L.with_tail(torch.tensor([[0.5, 0.3]]).log()).exp().sum().item() == pytest.approx(1.0)


def test_topk_tail_kl_by_hand():
    # Teacher p = [.5, .3, .15, .05], student uniform; k = 2 -> buckets {0}, {1}, tail.
    # Teacher buckets [.5, .3, .2]; student buckets [.25, .25, .5].
    teacher = logits_of([[0.5, 0.3, 0.15, 0.05]])
    student = torch.zeros(1, 4)
    ids, t_logp = L.teacher_topk(teacher, k=2)
    reverse = 0.25 * math.log(0.25 / 0.5) + 0.25 * math.log(0.25 / 0.3) + 0.5 * math.log(0.5 / 0.2)
    forward = 0.5 * math.log(0.5 / 0.25) + 0.3 * math.log(0.3 / 0.25) + 0.2 * math.log(0.2 / 0.5)
    assert reverse == pytest.approx(0.2392783, abs=1e-6) and forward == pytest.approx(0.2180119, abs=1e-6)
    assert float(L.topk_tail_kl(student, ids, t_logp)) == pytest.approx(reverse, abs=1e-6)
    assert float(L.topk_tail_kl(student, ids, t_logp, "forward")) == pytest.approx(forward, abs=1e-6)


def test_full_kl_by_hand():
    s, t = logits_of([[0.5, 0.5]]), logits_of([[0.25, 0.75]])
    assert float(L.full_kl(s, t)) == pytest.approx(0.5 * math.log(2) + 0.5 * math.log(2 / 3), abs=1e-6)
    assert float(L.full_kl(s, t, "forward")) == pytest.approx(
        0.25 * math.log(0.5) + 0.75 * math.log(1.5), abs=1e-6
    )


def test_topk_tail_kl_equals_full_kl_when_k_is_the_vocabulary():
    torch.manual_seed(0)
    V = 11
    student = torch.randn(3, 5, V, requires_grad=True)
    teacher = torch.randn(3, 5, V) * 2
    ids, t_logp = L.teacher_topk(teacher, k=V)
    for direction in ("reverse", "forward"):
        a = L.topk_tail_kl(student, ids, t_logp, direction)
        b = L.full_kl(student, teacher, direction)
        assert torch.allclose(a, b, atol=1e-5), direction
        (ga,) = torch.autograd.grad(a.sum(), student)
        (gb,) = torch.autograd.grad(b.sum(), student)
        assert torch.allclose(ga, gb, atol=1e-5), direction
    # With k < V the buckets are coarser, so the KL can only shrink (data processing inequality).
    ids5, t5 = L.teacher_topk(teacher, k=5)
    assert bool((L.topk_tail_kl(student, ids5, t5) <= L.full_kl(student, teacher) + 1e-6).all())


def test_bucket_kl_with_zero_probability_buckets_stays_finite():
    p = torch.tensor([0.0, 0.5, 0.5]).log().requires_grad_(True)
    q = torch.tensor([0.2, 0.4, 0.4]).log().requires_grad_(True)
    kl = L.bucket_kl(p, q)
    assert float(kl.detach()) == pytest.approx(math.log(0.5 / 0.4), abs=1e-6)
    kl.backward()
    assert torch.isfinite(p.grad).all() and torch.isfinite(q.grad).all()


def test_kl_gradients_reach_only_the_side_that_requires_them():
    torch.manual_seed(1)
    s = torch.randn(2, 6, requires_grad=True)
    t = torch.randn(2, 6, requires_grad=True)
    ids, t_logp = L.teacher_topk(t.detach(), 3)
    L.topk_tail_kl(s, ids, t_logp).sum().backward()
    assert s.grad is not None and t.grad is None
    s.grad = None
    L.topk_tail_kl(s.detach(), ids, L.log_probs_at(t, ids)).sum().backward()
    assert s.grad is None and t.grad is not None and t.grad.abs().sum() > 0


def test_distill_per_token_dispatch():
    torch.manual_seed(2)
    s, t = torch.randn(2, 3, 9), torch.randn(2, 3, 9)
    ids, lp = L.teacher_topk(t, 4)
    assert torch.equal(
        L.distill_per_token(s, DistillConfig(top_k=4), teacher_ids=ids, teacher_logp=lp),
        L.topk_tail_kl(s, ids, lp),
    )
    assert torch.equal(
        L.distill_per_token(s, DistillConfig(top_k=4), teacher_logits=t), L.topk_tail_kl(s, ids, lp)
    )
    fwd = DistillConfig(direction="forward", full_vocab=True)
    assert torch.equal(L.distill_per_token(s, fwd, teacher_logits=t), L.full_kl(s, t, "forward"))
    with pytest.raises(ValueError):
        L.distill_per_token(s, fwd, teacher_ids=ids, teacher_logp=lp)
    with pytest.raises(ValueError):
        L.distill_per_token(s, DistillConfig())


def test_token_reductions_by_hand():
    v = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    m = torch.tensor([[1, 1, 0], [1, 0, 0]])
    assert float(L.masked_sum(v, m)) == 7.0
    assert float(L.token_mean(v, m)) == pytest.approx(7 / 3)
    assert float(L.token_mean(v, m, count=14)) == pytest.approx(0.5)
    assert L.sequence_mean(v, m).tolist() == [1.5, 4.0]
    assert float(L.reduce_tokens(v, m, "per_sequence")) == pytest.approx((1.5 + 4.0) / 2)
    assert float(L.reduce_tokens(v, m, "per_sequence", n_sequences=5)) == pytest.approx(5.5 / 5)
    empty = torch.zeros(2, 3, dtype=torch.long)
    assert float(L.token_mean(v, empty)) == 0.0 and float(L.reduce_tokens(v, empty, "per_sequence")) == 0.0
    with pytest.raises(ValueError):
        L.token_mean(v, m[:, :2])
    with pytest.raises(ValueError):
        L.reduce_tokens(v, m, "nope")


def test_global_count_makes_micro_batches_add_up_to_the_full_batch_mean():
    torch.manual_seed(3)
    w = torch.randn(4, 5, requires_grad=True)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 0, 0, 0, 0], [1, 1, 1, 1, 1], [0, 0, 0, 0, 0]])
    full = L.token_mean(w**2, mask)
    (g_full,) = torch.autograd.grad(full, w)
    n = mask.sum()
    parts = sum(L.token_mean(w[i : i + 2] ** 2, mask[i : i + 2], count=n) for i in (0, 2))
    (g_parts,) = torch.autograd.grad(parts, w)
    assert torch.allclose(full, parts) and torch.allclose(g_full, g_parts)


def test_ppo_clip_loss_by_hand():
    old = torch.zeros(1, 3)
    logp = torch.tensor([[math.log(1.5), math.log(0.5), 0.0]], requires_grad=True)
    mask = torch.ones(1, 3)
    # A = +1: -min(r, clip(r)) = [-1.2, -0.5, -1.0]
    loss, stats = L.ppo_clip_loss(logp, old, torch.tensor([1.0]), mask)
    assert float(loss.detach()) == pytest.approx(-(1.2 + 0.5 + 1.0) / 3, abs=1e-6)
    assert stats["clip_fraction"] == pytest.approx(1 / 3)
    (g,) = torch.autograd.grad(loss, logp)
    assert float(g[0, 0]) == 0.0 and float(g[0, 1]) != 0.0  # the clipped token passes no gradient
    # A = -1: -min(-r, -clip(r)) = [1.5, 0.8, 1.0]
    loss, _ = L.ppo_clip_loss(logp, old, torch.tensor([-1.0]), mask)
    assert float(loss.detach()) == pytest.approx((1.5 + 0.8 + 1.0) / 3, abs=1e-6)
    # Skill-SD's asymmetric clip 0.2/0.28, per-token advantages, a masked token.
    loss, _ = L.ppo_clip_loss(logp, old, torch.ones(1, 3), torch.tensor([[1, 0, 1]]), clip_high=0.28)
    assert float(loss.detach()) == pytest.approx(-(1.28 + 1.0) / 2, abs=1e-6)


def test_group_advantages_on_a_hand_made_group():
    r = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.3, 0.3, 0.3, 0.3])
    adv = L.group_advantages(r, group_size=4)
    s = math.sqrt(4 * 0.25 / 3)  # Bessel-corrected std of [1, 0, 0, 1]
    a = 0.5 / (s + 1e-6)  # = 0.866 for mean 0.5
    assert adv[:4].tolist() == pytest.approx([a, -a, -a, a], abs=1e-5) and a == pytest.approx(
        0.866025, abs=1e-5
    )
    assert adv[4:].tolist() == [0.0] * 4  # an all-equal group carries no signal
    pop = L.group_advantages(r[:4], group_size=4, unbiased=False)
    assert pop.tolist() == pytest.approx([1.0, -1.0, -1.0, 1.0], abs=1e-5)
    centred = L.group_advantages(torch.tensor([2.0, 0.0, 1.0]), group_size=3, scale_by_std=False)
    assert centred.tolist() == pytest.approx([1.0, -1.0, 0.0])
    by_id = L.group_advantages(
        torch.tensor([1.0, 5.0, 0.0, 5.0]), group_ids=torch.tensor([0, 1, 0, 1]), unbiased=False
    )
    assert by_id.tolist() == pytest.approx([1.0, 0.0, -1.0, 0.0], abs=1e-5)
    assert L.group_advantages(torch.tensor([0.7]), group_size=1).tolist() == [0.0]
    with pytest.raises(ValueError):
        L.group_advantages(torch.ones(6), group_size=4)


def test_k3_kl_and_grpo_loss_with_reference():
    logp = torch.tensor([[math.log(0.5), math.log(0.25)]])
    ref = torch.tensor([[math.log(0.25), math.log(0.25)]])
    k3 = L.k3_kl(logp, ref)
    assert k3[0].tolist() == pytest.approx([0.5 + math.log(2) - 1, 0.0], abs=1e-6)
    cfg = GRPOLossConfig(kl_coef=0.1)
    loss, stats = L.grpo_loss(logp, logp, torch.tensor([2.0]), torch.ones(1, 2), cfg, ref_logp=ref)
    assert float(loss.detach()) == pytest.approx(-2.0 + 0.1 * float(k3.mean()), abs=1e-6)
    assert stats["ref_kl"] == pytest.approx(float(k3.mean()), abs=1e-6)
    with pytest.raises(ValueError):
        L.grpo_loss(logp, logp, torch.tensor([1.0]), torch.ones(1, 2), cfg)


def test_module_doctests():
    for mod in (L,):
        assert doctest.testmod(mod).failed == 0
