"""Composer loss, privileged margin, dual variable, anchor; gradient routing; the collapse toy."""

import copy
import doctest

import pytest
import torch

import lopd.margin as M
from lopd.coldstart import ColdStartExample, coldstart_step, make_coldstart_optimizer
from lopd.composer import Composer
from lopd.config import ColdStartConfig, ComposerConfig, MarginConfig, QFormerConfig
from lopd.latent import inject_batch
from lopd.losses import full_kl, teacher_topk, token_log_probs, token_mean, topk_tail_kl
from lopd.margin import (
    ComposerTerms,
    DualVariable,
    anchor_penalty,
    composer_kl,
    composer_loss,
    composer_terms,
    outcome_advantage,
    privileged_margin,
)
from lopd.supervision import align_supervision
from tiny_models import TINY_MODEL_MARKS, CharTokenizer
from tiny_models import tiny_qwen3 as tiny_backbone

pytestmark = TINY_MODEL_MARKS


# ------------------------------------------------------------------------------ terms by hand


def test_outcome_advantage():
    assert outcome_advantage(torch.tensor([1.0, 0.0, 0.5])).tolist() == [1.0, -1.0, 0.0]
    for bad in ([1.5], [-0.1], [float("nan")]):
        with pytest.raises(ValueError):
            outcome_advantage(torch.tensor(bad))


def test_privileged_margin_by_hand():
    t = torch.tensor([[-1.0, -1.0, -9.0], [-2.0, -1.0, 0.0]], requires_grad=True)
    s = torch.tensor([[-2.0, -1.5, 0.0], [-1.0, -1.0, 0.0]], requires_grad=True)
    mask = torch.tensor([[1, 1, 0], [1, 1, 0]])
    delta = privileged_margin(t, s, mask, torch.tensor([1.0, -1.0]))
    # row 0: A=+1, mean(1, 0.5) = 0.75; row 1: A=-1, mean(-1, 0) = -0.5 -> +0.5
    assert delta.tolist() == pytest.approx([0.75, 0.5])
    delta.sum().backward()
    assert s.grad is None  # stop-gradient on the student
    assert torch.allclose(t.grad, torch.tensor([[0.5, 0.5, 0.0], [-0.5, -0.5, 0.0]]))


def test_anchor_penalty_by_hand():
    c = torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    c0 = torch.tensor([[1.0, 0.0], [3.0, 2.0]], requires_grad=True)
    a = anchor_penalty([c, c[:0]], [c0, c0[:0]])
    assert a.tolist() == pytest.approx([(0 + 4 + 0 + 4) / 4, 0.0])
    a.sum().backward()
    assert c.grad.tolist() == [[0.0, 1.0], [0.0, 1.0]] and c0.grad is None
    with pytest.raises(ValueError):
        anchor_penalty([c], [c0[:1]])


def test_composer_kl_is_student_to_teacher_per_rollout_mean():
    torch.manual_seed(0)
    V = 6
    t = torch.randn(2, 3, V, requires_grad=True)
    s = torch.randn(2, 3, V, requires_grad=True)
    mask = torch.tensor([[1, 1, 1], [1, 0, 0]])
    kl = composer_kl(t, s, mask, top_k=V)  # k = V: the full KL(student || teacher)
    full = full_kl(s.detach(), t.detach())
    assert kl.tolist() == pytest.approx([float(full[0].mean()), float(full[1, 0])], abs=1e-5)
    kl.sum().backward()
    assert s.grad is None and t.grad is not None
    ids, _ = teacher_topk(t.detach(), 2)  # ids given explicitly (those kept at scoring time)
    assert torch.allclose(composer_kl(t, s, mask, topk_ids=ids), composer_kl(t, s, mask, top_k=2))


def test_composer_terms_are_the_kl_the_margin_and_the_anchor_with_the_student_detached():
    torch.manual_seed(4)
    t = torch.randn(2, 3, 8, requires_grad=True)
    s = torch.randn(2, 3, 8, requires_grad=True)
    targets = torch.randint(0, 8, (2, 3))
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    lat = [torch.randn(4, 5, requires_grad=True), torch.randn(4, 5, requires_grad=True)]
    anchor = [x.detach() + 0.1 for x in lat]
    rewards = torch.tensor([1.0, 0.0])
    ids, _ = teacher_topk(t.detach(), 3)  # the ids kept at scoring time, as the LOPD learner passes them
    terms = composer_terms(t, s, targets, mask, rewards, lat, anchor, top_k=3, topk_ids=ids)
    assert torch.equal(terms.kl, composer_kl(t, s, mask, topk_ids=ids))
    delta = privileged_margin(token_log_probs(t, targets), token_log_probs(s, targets), mask,
                              outcome_advantage(rewards))
    assert torch.equal(terms.delta, delta)
    assert torch.equal(terms.anchor, anchor_penalty(lat, anchor))
    (terms.kl + terms.delta + terms.anchor).sum().backward()
    assert s.grad is None and t.grad is not None and all(x.grad is not None for x in lat)


def test_composer_loss_by_hand_uses_the_given_beta():
    terms = ComposerTerms(
        kl=torch.tensor([0.3, 0.1]), delta=torch.tensor([0.0, 0.2]), anchor=torch.tensor([0.5, 1.5])
    )
    cfg = MarginConfig(margin=0.05, anchor_weight=0.2)
    loss, stats = composer_loss(terms, beta=0.0, cfg=cfg)
    assert float(loss) == pytest.approx((0.3 + 0.1) / 2 + 0.2 * 1.0)
    loss, stats = composer_loss(terms, beta=3.0, cfg=cfg)
    want = ((0.3 + 3 * 0.05 + 0.1) + (0.1 + 3 * (0.05 - 0.2) + 0.3)) / 2
    assert float(loss) == pytest.approx(want)
    assert stats["beta"] == 3.0 and stats["delta"] == pytest.approx(0.1)


def test_dual_variable_rises_on_violation_and_stays_at_zero_otherwise():
    cfg = MarginConfig(margin=0.05, dual_lr=0.5)
    dual = DualVariable(cfg)
    assert dual.value == 0.0
    for _ in range(5):  # satisfied (mean Delta >= m): stays exactly 0
        assert dual.update(torch.tensor([0.3, 0.1])) == 0.0
    assert dual.update(torch.tensor([0.05])) == 0.0  # on the margin
    seen = []
    for _ in range(3):  # violated by 0.25 each step: +0.5 * 0.25
        seen.append(dual.update(torch.tensor([-0.2, -0.2])))
    assert seen == pytest.approx([0.125, 0.25, 0.375])
    assert dual.update(torch.tensor([0.55])) == pytest.approx(0.125)  # satisfied: falls
    assert dual.update(torch.tensor([5.0])) == 0.0  # and is clipped at 0
    # The dual update uses the mean over rollouts (paper) or token-weighted (authors' code).
    paper = DualVariable(cfg)
    paper.update(torch.tensor([0.0, -0.4]), torch.tensor([3, 1]))
    code = DualVariable(MarginConfig(margin=0.05, dual_lr=0.5, dual_mean="token_weighted"))
    code.update(torch.tensor([0.0, -0.4]), torch.tensor([3, 1]))
    assert paper.value == pytest.approx(0.5 * (0.05 + 0.2)) and code.value == pytest.approx(
        0.5 * (0.05 + 0.1)
    )
    with pytest.raises(ValueError):
        code.update(torch.tensor([0.0]))
    with pytest.raises(ValueError):
        dual.update(torch.zeros(0))


def test_dual_variable_state_round_trip():
    dual = DualVariable(MarginConfig(beta_init=0.7))
    dual.update(torch.tensor([-1.0]))
    other = DualVariable()
    other.load_state_dict(dual.state_dict())
    assert other.value == dual.value > 0.7
    with pytest.raises(ValueError):
        other.load_state_dict({"beta": -1.0})
    with pytest.raises(ValueError):
        DualVariable(MarginConfig(beta_init=-0.1))


def test_module_doctests():
    assert doctest.testmod(M).failed == 0


# ------------------------------------------------------------------------ tiny end-to-end setup


class Toy:
    """B on-policy rollouts of a fixed student; the teacher is the frozen base with latents.

    Student sequence: NL neutral filler tokens + prompt + response (sampled from the student).
    Teacher sequence: NL latent slots + the same prompt + response. The filler gives the composer
    an exact collapse point (latents equal to the filler's embedding make teacher == student), so
    the test can see whether the loss drives it there. Odd rollouts fail (r = 0), even ones succeed.
    """

    PH, FILLER = 1, 2

    def __init__(self, n_latents=8, B=8, P=5, R=6, depth=2, seed=1):
        # float64, in which the collapse test's margins were checked over toy seeds 1-2 and 1-2 threads
        base = tiny_backbone().double()
        self.student = copy.deepcopy(base)
        self.composer = Composer(
            base, CharTokenizer(), ComposerConfig(qformer=QFormerConfig(n_latents=n_latents, depth=depth, dtype="float64"))
        )
        self.NL, self.B = n_latents, B
        g = torch.Generator().manual_seed(seed)
        seq = torch.cat(
            [torch.full((B, n_latents), self.FILLER), torch.randint(3, 64, (B, P), generator=g)], 1
        )
        with torch.no_grad():  # responses sampled from the student: on-policy
            for _ in range(R):
                probs = torch.softmax(self.student(seq).logits[:, -1].float(), -1)
                seq = torch.cat([seq, torch.multinomial(probs, 1, generator=g)], 1)
        self.s_ids = seq
        self.t_ids = torch.cat([torch.full((B, n_latents), self.PH), seq[:, n_latents:]], 1)
        self.t_mask = torch.zeros_like(seq)
        self.t_mask[:, -R:] = 1
        self.al = align_supervision(self.s_ids, self.t_mask, self.t_ids, self.t_mask)
        self.rewards = torch.tensor([1.0, 0.0] * (B // 2))
        self.task, self.exp = "solve the toy", "an experience text"

    def latents(self, anchor=False):
        return self.composer.encode([self.task], [[self.exp]], anchor=anchor)[0]

    def at(self, logits, pos):
        """[B, T, V] logits at the aligned positions ``pos`` [B, N] -> [B, N, V]."""
        return logits[torch.arange(self.B).unsqueeze(-1), pos]

    def teacher_logits(self, lat):
        emb = inject_batch(
            self.composer.input_embeddings()(self.t_ids), [list(range(self.NL))] * self.B, [lat] * self.B
        )
        with self.composer.teacher_mode() as teacher:
            return self.at(teacher(inputs_embeds=emb).logits, self.al.teacher_pos)

    def student_logits(self):
        return self.at(self.student(self.s_ids).logits, self.al.student_pos)

    def coldstart_examples(self):
        return [
            ColdStartExample(
                self.task, [self.exp], self.t_ids[b].tolist(), list(range(self.NL)), self.t_mask[b].tolist()
            )
            for b in range(self.B)
            if self.rewards[b] == 1
        ]


def test_gradient_routing():
    toy = Toy(n_latents=4)
    c, student = toy.composer, toy.student
    with torch.no_grad():  # a non-trivial LoRA and anchor, so every path carries signal
        for n, p in c.named_trainable_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.05)
        c.set_anchor()
        for p in c.qformer.parameters():
            p.add_(0.01 * torch.randn_like(p))
    lat = toy.latents()
    anchor_lat = toy.latents(anchor=True)
    t_logits = toy.teacher_logits(lat)
    s_logits = toy.student_logits()
    al = toy.al
    ids, t_logp = teacher_topk(t_logits.detach(), 20)
    student_loss = token_mean(topk_tail_kl(s_logits, ids, t_logp), al.mask)
    terms = composer_terms(
        t_logits, s_logits, al.targets, al.mask, toy.rewards, [lat] * toy.B, [anchor_lat] * toy.B
    )
    m = 0.05
    parts = {"kl": terms.kl.mean(), "margin": (m - terms.delta).mean(), "anchor": terms.anchor.mean()}
    s_params = [p for p in student.parameters()]
    c_named = dict(c.named_trainable_parameters())
    c_params = list(c_named.values())
    frozen = [p for n, p in c.named_parameters() if n not in c_named]
    assert frozen and not any(p.requires_grad for p in frozen)  # the teacher cannot receive gradients

    def grads(loss, params):
        return torch.autograd.grad(loss, params, retain_graph=True, allow_unused=True)

    # The student loss reaches the student only.
    assert all(g is not None for g in grads(student_loss, s_params))
    assert all(g is None for g in grads(student_loss, c_params))
    # No composer term (KL, margin, anchor) reaches the student.
    for name, loss in parts.items():
        assert all(g is None for g in grads(loss, s_params)), name
        assert any(g is not None and float(g.abs().sum()) > 0 for g in grads(loss, c_params)), name
    # KL and margin reach the composer only THROUGH the teacher: their gradient on the composer's
    # parameters equals the gradient on the latents pulled back through the encoder (no other path,
    # e.g. no LoRA inside the teacher forward).
    for name in ("kl", "margin"):
        direct = grads(parts[name], c_params)
        (g_lat,) = torch.autograd.grad(parts[name], lat, retain_graph=True)
        chained = torch.autograd.grad(lat, c_params, grad_outputs=g_lat, retain_graph=True, allow_unused=True)
        for n, a, b in zip(c_named, direct, chained):
            if a is None:
                assert b is None or float(b.abs().sum()) == 0, n
            else:
                assert torch.allclose(a, b, atol=1e-6, rtol=1e-4), n
    # One backward of everything: the student's gradient is the student loss's alone.
    want = grads(student_loss, s_params)
    loss, _ = composer_loss(terms, beta=2.0, cfg=MarginConfig(margin=m))
    (student_loss + loss).backward()
    for p, g in zip(s_params, want):
        assert torch.allclose(p.grad, g, atol=1e-7)
    assert all(p.grad is None for p in frozen)


# ----------------------------------------------------------------------------- the collapse toy


def run_composer(toy, state, margin, steps, lr=5e-2):
    """Composer-only RL steps on fixed on-policy rollouts (the student is held fixed).

    lambda = 0 isolates the margin's effect; the dual variable uses the paper's eta = 0.5.
    """
    toy.composer.load_trainable_state_dict(state)
    cfg = MarginConfig(margin=margin, anchor_weight=0.0, dual_lr=0.5)
    dual = DualVariable(cfg)
    opt = torch.optim.Adam(toy.composer.trainable_parameters(), lr=lr)
    with torch.no_grad():
        s_logits = toy.student_logits()
    hist = []
    for _ in range(steps):
        lat = toy.latents()
        terms = composer_terms(
            toy.teacher_logits(lat),
            s_logits,
            toy.al.targets,
            toy.al.mask,
            toy.rewards,
            [lat] * toy.B,
            [lat.detach()] * toy.B,
        )
        loss, stats = composer_loss(terms, dual.value, cfg)
        opt.zero_grad()
        loss.backward()
        opt.step()
        dual.update(terms.delta)
        hist.append(stats)
    return hist


@pytest.mark.slow
def test_margin_prevents_the_collapse_that_m_zero_allows():
    """m = 0: the composer steers the teacher toward the student (KL and Delta fall: the context
    stops carrying privileged signal). m > 0: Delta is held at the margin."""
    toy = Toy(n_latents=8)
    # Cold start on the successful rollouts makes the teacher informative: Delta_0 > 0.
    opt = make_coldstart_optimizer(toy.composer, ColdStartConfig(lr=0.1, weight_decay=0.0))
    first = coldstart_step(toy.composer, toy.coldstart_examples(), opt, ColdStartConfig(grad_clip=0))
    for _ in range(19):
        last = coldstart_step(toy.composer, toy.coldstart_examples(), opt, ColdStartConfig(grad_clip=0))
    assert last["loss"] < first["loss"] - 0.5
    toy.composer.set_anchor()
    state = toy.composer.trainable_state_dict()

    collapse = run_composer(toy, state, margin=0.0, steps=80)
    m = 0.3
    held = run_composer(toy, state, margin=m, steps=80)
    kl0, d0 = collapse[0]["kl"], collapse[0]["delta"]
    assert d0 > m and held[0]["delta"] == pytest.approx(d0)  # the teacher starts above the margin

    def tail(h, key):
        return sum(s[key] for s in h[-10:]) / 10

    # m = 0: beta stays ~0, the teacher is driven onto the student (KL -> ~0) and the
    # privileged advantage vanishes (Delta -> ~0).
    assert all(s["beta"] == 0.0 for s in collapse[:20])
    assert tail(collapse, "kl") < 0.1 * kl0
    assert abs(tail(collapse, "delta")) < 0.1 * d0 and abs(tail(collapse, "delta")) < m / 6
    # m > 0: the dual variable switches on whenever Delta dips under m and holds it around m.
    assert max(s["beta"] for s in held) > 0.1
    assert sum(s["delta"] for s in held[40:]) / 40 > 0.8 * m
    # After the dual variable has responded: before, beta ~ 0 and how far Delta dips depends on
    # rounding (the cold start at lr 0.1 is chaotic: thread counts alone move d0 by 25%).
    assert min(s["delta"] for s in held[40:]) > 0.5 * m
    assert tail(held, "delta") > 5 * abs(tail(collapse, "delta"))
    assert tail(held, "kl") > 2 * tail(collapse, "kl")
