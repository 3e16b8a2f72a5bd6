"""Shared losses: top-k + tail KL, full-vocabulary KL, token reductions, PPO clip, GRPO advantages.

All functions are pure torch. Per-token functions map logits ``[..., V]`` (any leading shape,
usually ``[B, N]`` supervised positions from :mod:`lopd.supervision`) to ``[...]``; reductions
take a mask of the same leading shape. Log-probabilities come from the full-vocabulary
log-softmax in fp32 and are never renormalised over the top-k.

The student's LOPD/SDPO loss, with the teacher scored beforehand under ``torch.no_grad()``::

    ids, t_logp = teacher_topk(teacher_logits, k=20)            # what teacher scoring keeps
    per_token = topk_tail_kl(student_logits, ids, t_logp)        # KL(student || teacher)
    loss = token_mean(per_token, mask, count=global_token_count) # sum / global count

>>> s = torch.tensor([[2.0, 0.0, -1.0]]); t = torch.tensor([[0.0, 1.0, 0.5]])
>>> ids, t_logp = teacher_topk(t, k=3)
>>> bool(torch.allclose(topk_tail_kl(s, ids, t_logp), full_kl(s, t), atol=1e-5))
True
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

from lopd.config import DistillConfig, GRPOLossConfig, Reduction

TAIL_LOGSUMEXP_MAX = -1e-7
"""The top-k mass is clamped below exp(-1e-7) so the tail bucket stays finite."""

Direction = Literal["reverse", "forward"]


# ---------------------------------------------------------------------------- log-probabilities


def upcast(x: Tensor) -> Tensor:
    """``x`` in float32 for the loss maths; float64 stays float64 (a whole step in float64 is how
    the numerics tests make rounding negligible).

    >>> upcast(torch.ones(1, dtype=torch.bfloat16)).dtype, upcast(torch.ones(1, dtype=torch.float64)).dtype
    (torch.float32, torch.float64)
    """
    return x if x.dtype == torch.float64 else x.float()


def log_probs_at(logits: Tensor, ids: Tensor) -> Tensor:
    """Full-vocabulary fp32 log-softmax of ``logits`` [..., V] gathered at ``ids`` [..., k] -> [..., k].

    Computed as logit - logsumexp, which equals ``log_softmax(logits.float()).gather(-1, ids)``
    without a second vocabulary-sized tensor.
    """
    logits = upcast(logits)
    return logits.gather(-1, ids) - torch.logsumexp(logits, dim=-1, keepdim=True)


def token_log_probs(logits: Tensor, ids: Tensor) -> Tensor:
    """Log-prob of one token per position: ``logits`` [..., V], ``ids`` [...] -> [...]."""
    return log_probs_at(logits, ids.unsqueeze(-1)).squeeze(-1)


def teacher_topk(teacher_logits: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """The teacher's top-``k`` token ids and their full-vocabulary log-probs, each [..., k].

    What teacher scoring keeps per supervised position (k = 20 in LOPD). Ids are sorted by
    descending probability.
    """
    if k < 1:
        raise ValueError(f"top_k must be >= 1, got {k}")
    logits = upcast(teacher_logits)
    k = min(k, logits.shape[-1])
    values, ids = logits.topk(k, dim=-1)
    return ids, values - torch.logsumexp(logits, dim=-1, keepdim=True)


def tail_log_prob(topk_logp: Tensor) -> Tensor:
    """log(1 - sum_i exp(l_i)) over the last dim, stably: log(-expm1(min(logsumexp(l), -1e-7)))."""
    mass = torch.logsumexp(topk_logp, dim=-1).clamp(max=TAIL_LOGSUMEXP_MAX)
    return torch.log(-torch.expm1(mass))


def with_tail(topk_logp: Tensor) -> Tensor:
    """Append the tail bucket: [..., k] -> [..., k + 1] log-probs of a proper distribution."""
    return torch.cat([topk_logp, tail_log_prob(topk_logp).unsqueeze(-1)], dim=-1)


def bucket_kl(p_logp: Tensor, q_logp: Tensor) -> Tensor:
    """KL(p || q) = sum_b exp(p_b) (p_b - q_b) over the last dim; buckets with p_b = 0 add 0.

    >>> p = torch.tensor([0.5, 0.5]).log(); q = torch.tensor([0.25, 0.75]).log()
    >>> round(float(bucket_kl(p, q)), 6)  # 0.5 ln 2 + 0.5 ln(2/3)
    0.143841
    """
    zero = torch.isneginf(p_logp)
    if bool(zero.any()):  # 0 * log 0 = 0, keeping gradients finite
        p_logp = torch.where(zero, torch.zeros_like(p_logp), p_logp)
        q_logp = torch.where(zero, torch.zeros_like(q_logp), q_logp)
        return torch.where(zero, torch.zeros_like(p_logp), p_logp.exp() * (p_logp - q_logp)).sum(-1)
    return (p_logp.exp() * (p_logp - q_logp)).sum(-1)


# ------------------------------------------------------------------------------- per-token KLs


def topk_tail_kl(
    student_logits: Tensor, teacher_ids: Tensor, teacher_logp: Tensor, direction: Direction = "reverse"
) -> Tensor:
    """Per-token KL over the teacher's top-k buckets plus one tail bucket -> [...].

    ``student_logits`` [..., V]; ``teacher_ids``, ``teacher_logp`` [..., k] from :func:`teacher_topk`.
    The student's log-probs are gathered at the TEACHER's ids. ``reverse`` = KL(student || teacher)
    (LOPD, SDPO); ``forward`` = KL(teacher || student) (OPSD/SDFT with top-k). Gradients reach
    whichever side requires them (the student for the distillation loss, the teacher for the
    composer loss).
    """
    return tail_kl(log_probs_at(student_logits, teacher_ids), teacher_logp, direction)


def tail_kl(student_logp: Tensor, teacher_logp: Tensor, direction: Direction = "reverse") -> Tensor:
    """:func:`topk_tail_kl` from both sides' log-probs at the teacher's top-k ids, each [..., k]
    (what a chunked LM head keeps of the student, :mod:`lopd.chunked`) -> [...]."""
    s, t = with_tail(upcast(student_logp)), with_tail(upcast(teacher_logp))
    return bucket_kl(s, t) if direction == "reverse" else bucket_kl(t, s)


def full_kl(student_logits: Tensor, teacher_logits: Tensor, direction: Direction = "reverse") -> Tensor:
    """Per-token KL over the full vocabulary (fp32) -> [...]; ``forward`` = KL(teacher || student)."""
    s = torch.log_softmax(upcast(student_logits), dim=-1)
    t = torch.log_softmax(upcast(teacher_logits), dim=-1)
    return bucket_kl(s, t) if direction == "reverse" else bucket_kl(t, s)


def distill_per_token(
    student_logits: Tensor,
    cfg: DistillConfig,
    *,
    teacher_ids: Tensor | None = None,
    teacher_logp: Tensor | None = None,
    teacher_logits: Tensor | None = None,
) -> Tensor:
    """The per-token distillation KL that ``cfg`` names (direction, top-k + tail or full vocabulary).

    Top-k needs ``teacher_ids`` + ``teacher_logp`` (what teacher scoring kept) or ``teacher_logits``;
    the full vocabulary needs ``teacher_logits``.
    """
    if cfg.full_vocab:
        if teacher_logits is None:
            raise ValueError("a full-vocabulary KL needs the teacher's logits")
        return full_kl(student_logits, teacher_logits, cfg.direction)
    if teacher_ids is None or teacher_logp is None:
        if teacher_logits is None:
            raise ValueError("a top-k KL needs teacher_ids and teacher_logp, or teacher_logits")
        teacher_ids, teacher_logp = teacher_topk(teacher_logits, cfg.top_k)
    return topk_tail_kl(student_logits, teacher_ids, teacher_logp, cfg.direction)


# ---------------------------------------------------------------------------------- reductions


def _as_mask(mask: Tensor, like: Tensor) -> Tensor:
    if mask.shape != like.shape:
        raise ValueError(f"mask shape {tuple(mask.shape)} != values shape {tuple(like.shape)}")
    return mask.to(dtype=like.dtype if like.is_floating_point() else torch.float32, device=like.device)


def masked_sum(values: Tensor, mask: Tensor) -> Tensor:
    """Sum of ``values`` where ``mask`` is true (a scalar)."""
    return (values * _as_mask(mask, values)).sum()


def token_mean(values: Tensor, mask: Tensor, count: float | Tensor | None = None) -> Tensor:
    """Masked sum / ``count`` (a scalar).

    ``count`` is the GLOBAL number of supervised tokens of the whole step (all micro-batches and
    ranks, the authors' normalisation); then the gradients of the micro-batch losses add up to
    the gradient of the global mean. None = this batch's own count. A zero count gives 0.

    >>> token_mean(torch.tensor([[1., 2., 9.]]), torch.tensor([[1, 1, 0]]))
    tensor(1.5000)
    >>> token_mean(torch.tensor([[1., 2., 9.]]), torch.tensor([[1, 1, 0]]), count=6)
    tensor(0.5000)
    """
    total = masked_sum(values, mask)
    n = (
        _as_mask(mask, values).sum()
        if count is None
        else torch.as_tensor(count, dtype=total.dtype, device=total.device)
    )
    return total / n.clamp(min=1)  # no tokens: the sum is 0 as well


def sequence_mean(values: Tensor, mask: Tensor) -> Tensor:
    """Per-row masked mean over the last dim: [B, N] -> [B]; rows with no token give 0."""
    m = _as_mask(mask, values)
    return (values * m).sum(-1) / m.sum(-1).clamp(min=1)


def reduce_tokens(
    values: Tensor,
    mask: Tensor,
    reduction: Reduction = "global_tokens",
    count: float | Tensor | None = None,
    n_sequences: float | Tensor | None = None,
) -> Tensor:
    """Reduce per-token ``values`` [B, N] to a scalar loss.

    ``global_tokens``: :func:`token_mean` with ``count``. ``per_sequence``: the sum of per-row means
    divided by ``n_sequences`` (global number of sequences with supervised tokens; None = this
    batch's).
    """
    if reduction == "global_tokens":
        return token_mean(values, mask, count)
    if reduction == "per_sequence":
        per_row = sequence_mean(values, mask)
        has = (_as_mask(mask, values).sum(-1) > 0).to(per_row.dtype)
        n = (
            has.sum()
            if n_sequences is None
            else torch.as_tensor(n_sequences, dtype=per_row.dtype, device=per_row.device)
        )
        return (per_row * has).sum() / n.clamp(min=1)
    raise ValueError(f"unknown reduction {reduction!r}")


# ------------------------------------------------------------------------------------- RL losses


def group_advantages(
    rewards: Tensor,
    group_size: int | None = None,
    group_ids: Tensor | None = None,
    *,
    scale_by_std: bool = True,
    unbiased: bool = True,
    eps: float = 1e-6,
) -> Tensor:
    """GRPO's group-normalised advantages: (r - mean_g) / (std_g + eps), one per rollout.

    Groups are consecutive blocks of ``group_size`` rollouts, or given by ``group_ids`` [N]. A
    group whose std is undefined (one rollout, unbiased) or 0 gets advantage 0.

    >>> group_advantages(torch.tensor([1., 0., 0., 0., .5, .5, .5, .5]), group_size=4)
    tensor([ 1.5000, -0.5000, -0.5000, -0.5000,  0.0000,  0.0000,  0.0000,  0.0000])
    """
    rewards = rewards.float()
    if rewards.dim() != 1:
        raise ValueError(f"rewards must be 1-D, got shape {tuple(rewards.shape)}")
    if group_ids is None:
        if not group_size or group_size < 1 or rewards.numel() % group_size:
            raise ValueError(f"{rewards.numel()} rewards do not split into groups of {group_size}")
        group_ids = torch.arange(rewards.numel(), device=rewards.device) // group_size
    if group_ids.shape != rewards.shape:
        raise ValueError("group_ids must have one entry per reward")
    group_ids = group_ids.to(rewards.device)
    adv = torch.zeros_like(rewards)
    for g in torch.unique(group_ids):
        sel = group_ids == g
        r = rewards[sel]
        centred = r - r.mean()
        if scale_by_std:
            std = r.std(unbiased=unbiased) if (r.numel() > 1 or not unbiased) else r.new_tensor(0.0)
            centred = centred / (std + eps)
        adv[sel] = centred
    return adv


def k3_kl(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """Per-token k3 estimate of KL(policy || reference) at sampled tokens: e^d - d - 1, d = ref - logp."""
    d = upcast(ref_logp) - upcast(logp)
    return torch.exp(d) - d - 1


def ppo_clip_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    *,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    reduction: Reduction = "global_tokens",
    count: float | Tensor | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """PPO clipped surrogate over tokens: mean of -min(rho A, clip(rho, 1-low, 1+high) A).

    ``logp``, ``old_logp`` [B, N] at the sampled tokens; ``advantages`` [B] (per rollout) or
    [B, N] (per token). Returns the loss and ``{"clip_fraction", "ratio_mean"}`` over masked tokens.
    """
    adv = advantages.float().to(logp.device)
    if adv.dim() == logp.dim() - 1:
        adv = adv.unsqueeze(-1).expand_as(logp)
    ratio = torch.exp(upcast(logp) - upcast(old_logp).detach())
    unclipped = ratio * adv
    clipped = ratio.clamp(1.0 - clip_low, 1.0 + clip_high) * adv
    per_token = -torch.minimum(unclipped, clipped)
    loss = reduce_tokens(per_token, mask, reduction, count)
    with torch.no_grad():
        stats = {
            "clip_fraction": float(token_mean((clipped < unclipped).float(), mask)),
            "ratio_mean": float(token_mean(ratio, mask)),
        }
    return loss, stats


def grpo_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    cfg: GRPOLossConfig,
    ref_logp: Tensor | None = None,
    count: float | Tensor | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """PPO clip loss plus ``cfg.kl_coef`` x k3 KL to the reference (when ``ref_logp`` is given).

    >>> lp = torch.zeros(1, 2)
    >>> loss, _ = grpo_loss(lp, lp, torch.tensor([1.0]), torch.ones(1, 2), GRPOLossConfig())
    >>> float(loss)
    -1.0
    """
    loss, stats = ppo_clip_loss(
        logp,
        old_logp,
        advantages,
        mask,
        clip_low=cfg.clip_low,
        clip_high=cfg.clip_high,
        reduction=cfg.reduction,
        count=count,
    )
    if cfg.kl_coef:
        if ref_logp is None:
            raise ValueError("kl_coef > 0 needs the reference log-probs")
        kl = reduce_tokens(k3_kl(logp, ref_logp), mask, cfg.reduction, count)
        loss = loss + cfg.kl_coef * kl
        stats["ref_kl"] = float(kl.detach())
    return loss, stats
