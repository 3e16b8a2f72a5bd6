"""The composer's loss: distillation KL, privileged margin with a dual variable, and the anchor.

Per rollout i with outcome reward r in [0, 1] and A = 2r - 1:

- kl_i      = mean over supervised tokens of KL(student.detach || teacher_phi), top-k + tail buckets;
- Delta_i   = A * mean over action tokens of (log pi_teacher_phi(a) - stopgrad log pi_student(a));
- anchor_i  = mean((c_phi - c_phi0)^2) over the rollout's latent context;
- loss_i    = kl_i + beta * (m - Delta_i) + lambda * anchor_i; the step's loss is the mean over i.

After the step, :class:`DualVariable` does beta <- max(0, beta + eta * (m - mean Delta)); the loss
used beta from before the update. The student is detached everywhere here, so it gets no margin,
anchor or composer-KL gradient; the composer gets gradients only through the teacher's logits
and (anchor) its own latents.

One composer step, with the teacher forward run WITH gradients on the composer's latents and both
sides' logits taken at the aligned positions (``al.teacher_pos``, ``al.student_pos`` of
:func:`lopd.supervision.align_supervision`)::

    terms = composer_terms(teacher_logits, student_logits, al.targets, al.mask, rewards,
                           latents, anchor_latents, top_k=20)
    loss, stats = composer_loss(terms, beta=dual.value, cfg=margin_cfg)
    loss.backward(); optimiser.step()
    dual.update(terms.delta, al.counts)        # after the step; all-reduce delta first when distributed
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from lopd.config import MarginConfig
from lopd.losses import log_probs_at, sequence_mean, tail_kl, teacher_topk, token_log_probs, upcast


def outcome_advantage(rewards: Tensor) -> Tensor:
    """A = 2r - 1 for outcome rewards in [0, 1] (success +1, failure -1).

    >>> outcome_advantage(torch.tensor([1.0, 0.0, 0.25]))
    tensor([ 1.0000, -1.0000, -0.5000])
    """
    rewards = rewards.float()
    if bool(((rewards < 0) | (rewards > 1) | torch.isnan(rewards)).any()):
        raise ValueError(f"outcome rewards must lie in [0, 1], got {rewards.tolist()}")
    return 2.0 * rewards - 1.0


def composer_kl(
    teacher_logits: Tensor,
    student_logits: Tensor,
    mask: Tensor,
    *,
    top_k: int = 20,
    topk_ids: Tensor | None = None,
) -> Tensor:
    """kl_i: per-rollout mean over tokens of KL(student.detach || teacher_phi) -> [B].

    ``teacher_logits`` and ``student_logits`` [B, N, V] at aligned supervised positions. Buckets:
    the teacher's top-k ids (``topk_ids`` [B, N, k] if given, e.g. those kept at scoring time) +
    tail.
    """
    dev = teacher_logits.device
    if topk_ids is None:
        topk_ids, _ = teacher_topk(teacher_logits.detach(), top_k)
    topk_ids = topk_ids.to(dev)
    s_logp = log_probs_at(student_logits.detach().to(dev), topk_ids)
    return composer_kl_of(log_probs_at(teacher_logits, topk_ids), s_logp, mask)


def composer_kl_of(teacher_logp: Tensor, student_logp: Tensor, mask: Tensor) -> Tensor:
    """:func:`composer_kl` from both sides' log-probs at the teacher's top-k ids, each [B, N, k]."""
    return sequence_mean(tail_kl(student_logp.detach(), teacher_logp), mask)


def privileged_margin(teacher_logp: Tensor, student_logp: Tensor, mask: Tensor, advantages: Tensor) -> Tensor:
    """Delta_i = A_i * mean over masked tokens of (teacher_logp - stopgrad student_logp) -> [B].

    ``teacher_logp``, ``student_logp`` [B, N]: log-probs of the sampled action tokens.
    """
    diff = upcast(teacher_logp) - upcast(student_logp.detach())
    return advantages.float().to(diff.device) * sequence_mean(diff, mask)


def anchor_penalty(latents: Sequence[Tensor] | Tensor, anchor_latents: Sequence[Tensor] | Tensor) -> Tensor:
    """anchor_i = mean((c_phi - c_phi0)^2) per rollout -> [B]; c_phi0 is detached.

    Each entry is one rollout's whole latent context ([n_latents_total, d]); an empty context gives 0.
    """
    if len(latents) != len(anchor_latents):
        raise ValueError(f"{len(latents)} latent contexts but {len(anchor_latents)} anchors")
    out = []
    for c, c0 in zip(latents, anchor_latents):
        if c.shape != c0.shape:
            raise ValueError(f"latent context {tuple(c.shape)} and anchor {tuple(c0.shape)} differ in shape")
        diff = upcast(c) - upcast(c0.detach())
        out.append(diff.pow(2).mean() if diff.numel() else diff.sum())
    return torch.stack(out) if out else torch.zeros(0)


@dataclass
class ComposerTerms:
    """Per-rollout terms of the composer loss, each [B]."""

    kl: Tensor
    """kl_i (gradients into the teacher's logits)."""
    delta: Tensor
    """Delta_i (gradients into the teacher's logits)."""
    anchor: Tensor
    """anchor_i (gradients into the latents)."""


def composer_terms(
    teacher_logits: Tensor,
    student_logits: Tensor,
    targets: Tensor,
    mask: Tensor,
    rewards: Tensor,
    latents: Sequence[Tensor] | Tensor,
    anchor_latents: Sequence[Tensor] | Tensor,
    *,
    top_k: int = 20,
    topk_ids: Tensor | None = None,
) -> ComposerTerms:
    """All three per-rollout terms from aligned [B, N, ...] teacher logits (with gradients).

    ``student_logits`` [B, N, V] enter detached; ``targets`` [B, N] are the sampled tokens;
    ``mask`` [B, N] the supervised positions, over which both kl and Delta average; ``rewards``
    [B] in [0, 1]; ``latents``/``anchor_latents`` one latent context per rollout; ``top_k`` and
    ``topk_ids`` as for :func:`composer_kl`.
    """
    dev = teacher_logits.device
    if topk_ids is None:
        topk_ids, _ = teacher_topk(teacher_logits.detach(), top_k)
    topk_ids, targets, s = topk_ids.to(dev), targets.to(dev), student_logits.detach().to(dev)
    teacher = TokenLogProbs(log_probs_at(teacher_logits, topk_ids), token_log_probs(teacher_logits, targets))
    student = TokenLogProbs(log_probs_at(s, topk_ids), token_log_probs(s, targets))
    return composer_terms_of(teacher, student, mask, rewards, latents, anchor_latents)


@dataclass
class TokenLogProbs:
    """One side's log-probs at the supervised positions: what the composer's terms need of its logits."""

    topk: Tensor
    """[B, N, k] at the teacher's top-k ids."""
    target: Tensor
    """[B, N] at the sampled tokens."""


def composer_terms_of(teacher: TokenLogProbs, student: TokenLogProbs, mask: Tensor, rewards: Tensor,
                      latents: Sequence[Tensor] | Tensor,
                      anchor_latents: Sequence[Tensor] | Tensor) -> ComposerTerms:
    """:func:`composer_terms` from both sides' log-probs (the teacher's with gradients, the student's
    detached here), as a chunked LM head computes them (:mod:`lopd.chunked`)."""
    dev = teacher.target.device
    mask = mask.to(dev)
    kl = composer_kl_of(teacher.topk, student.topk.to(dev), mask)
    adv = outcome_advantage(rewards).to(dev)
    delta = privileged_margin(teacher.target, student.target.to(dev), mask, adv)
    return ComposerTerms(kl=kl, delta=delta, anchor=anchor_penalty(latents, anchor_latents).to(dev))


def composer_loss(
    terms: ComposerTerms, beta: float, cfg: MarginConfig | None = None
) -> tuple[Tensor, dict[str, float]]:
    """mean_i [kl_i + beta * (m - Delta_i) + lambda * anchor_i] and its parts as floats.

    >>> t = ComposerTerms(kl=torch.tensor([0.5, 0.1]), delta=torch.tensor([0.2, -0.1]),
    ...                   anchor=torch.tensor([1.0, 0.0]))
    >>> loss, _ = composer_loss(t, beta=2.0, cfg=MarginConfig(margin=0.05, anchor_weight=0.2))
    >>> round(float(loss), 6)  # (0.5 + 2*(0.05-0.2) + 0.2) / 2 + (0.1 + 2*(0.05+0.1)) / 2
    0.4
    """
    cfg = cfg or MarginConfig()
    per = terms.kl + beta * (cfg.margin - terms.delta) + cfg.anchor_weight * terms.anchor
    loss = per.mean() if per.numel() else per.sum()
    with torch.no_grad():
        stats = {
            "composer_loss": float(loss),
            "kl": float(terms.kl.mean()) if per.numel() else 0.0,
            "delta": float(terms.delta.mean()) if per.numel() else 0.0,
            "anchor": float(terms.anchor.mean()) if per.numel() else 0.0,
            "beta": float(beta),
        }
    return loss, stats


class DualVariable:
    """beta for the privileged margin: dual ascent beta <- max(0, beta + eta * (m - mean Delta)).

    >>> dual = DualVariable(MarginConfig(margin=0.05, dual_lr=0.5))
    >>> round(dual.update(torch.tensor([0.0, -0.1])), 6)   # mean Delta -0.05 < m: violated, beta rises
    0.05
    >>> dual.update(torch.tensor([1.0]))          # satisfied: beta falls, clipped at 0
    0.0
    """

    def __init__(self, cfg: MarginConfig | None = None):
        self.cfg = cfg or MarginConfig()
        self.value = float(self.cfg.beta_init)
        if self.value < 0:
            raise ValueError(f"beta_init must be >= 0, got {self.value}")

    def mean_delta(self, delta: Tensor, token_counts: Tensor | None = None) -> float:
        """Mean Delta over rollouts (paper), or weighted by ``token_counts`` (``token_weighted``)."""
        delta = delta.detach().double()
        if delta.numel() == 0:
            raise ValueError("no Delta to update the dual variable with")
        if self.cfg.dual_mean == "token_weighted":
            if token_counts is None:
                raise ValueError("dual_mean='token_weighted' needs the per-rollout token counts")
            w = token_counts.detach().double().to(delta.device)
            return float((delta * w).sum() / w.sum().clamp(min=1))
        return float(delta.mean())

    def mean_delta_of_sums(self, delta_sum: float, rollouts: float, weighted_sum: float, token_count: float) -> float:
        """:meth:`mean_delta` from sums over the step's rollouts (what ranks add up): sum Delta_i over
        ``rollouts``, or sum Delta_i n_i over ``token_count`` = sum n_i (``token_weighted``)."""
        if self.cfg.dual_mean == "token_weighted":
            return weighted_sum / max(token_count, 1.0)
        return delta_sum / max(rollouts, 1.0)

    def update(self, delta: Tensor, token_counts: Tensor | None = None) -> float:
        """One ascent step from this step's per-rollout Delta [B]; returns the new beta."""
        return self.step(self.mean_delta(delta, token_counts))

    def step(self, mean_delta: float) -> float:
        """beta <- max(0, beta + eta (m - mean Delta)); returns the new beta."""
        self.value = max(0.0, self.value + self.cfg.dual_lr * (self.cfg.margin - mean_delta))
        return self.value

    def state_dict(self) -> dict[str, float]:
        return {"beta": self.value}

    def load_state_dict(self, state: dict[str, float]) -> None:
        beta = float(state["beta"])
        if not beta >= 0:
            raise ValueError(f"a saved beta must be >= 0, got {beta}")
        self.value = beta
