"""GRPO: G rollouts per task, group-normalised advantages, PPO clip, token-level loss.

Per step (paper appendix: G = 4, clip 0.2/0.2; all methods: AdamW 1e-5, clip 1.0):

1. advantages A_i = (r_i - mean_group) / (std_group + eps), one per rollout, broadcast to its tokens;
2. loss = sum over assistant tokens of -min(rho A, clip(rho, 1 - 0.2, 1 + 0.2) A) / (global token
   count), rho = exp(logp - logp_old); optionally + kl_coef x k3 KL to the frozen initial model;
3. one AdamW step per pass over the batch (``ppo_epochs`` passes).

``lopd train harness/configs/grpo.yaml`` runs it; ``grpo.kl_coef=0.04`` adds the reference KL.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from harness.distributed import sum_floats
from harness.learners.base import Learner, LearnerContext, StepBatch
from harness.learners.common import (TokenScorer, Timer, frozen_teacher, pad_id, pad_rows, score_from, seq_count,
                                     served_token_logprobs)
from lopd.config import GRPOLossConfig
from lopd.losses import group_advantages, grpo_loss, token_log_probs
from lopd.supervision import align_supervision


@dataclass
class GRPOConfig(GRPOLossConfig):
    """GRPO's loss (group size, clip, advantage scaling, reference KL) and update schedule."""

    ppo_epochs: int = 1
    """Passes over the step's rollouts, one optimiser step each; above 1 the PPO clip takes effect."""
    old_logprobs: Literal["current", "rollout"] = "current"
    """The ratio's denominator: ``current`` = the student's own log-probs before this step's first
    update (ratio 1 in the first pass, as TRL); ``rollout`` = the engine's sampling log-probs."""


class GRPOLearner(Learner[GRPOConfig]):
    """Group-relative policy optimisation over the student's own rollouts."""

    name = "grpo"
    Config = GRPOConfig
    default_group_size = 4

    def __init__(self, ctx: LearnerContext):
        super().__init__(ctx)
        if self.cfg.ppo_epochs < 1:
            raise ValueError("grpo.ppo_epochs must be >= 1")
        self.ref = frozen_teacher(ctx) if self.cfg.kl_coef else None

    def train_step(self, batch: StepBatch) -> dict[str, float]:
        ctx, cfg, timer = self.ctx, self.cfg, Timer()
        rs = batch.rollouts
        rows = [r.traj.token_ids for r in rs]
        masks = [r.traj.loss_mask for r in rs]
        adv = group_advantages(torch.tensor([r.reward for r in rs]), group_ids=torch.tensor([r.group for r in rs]),
                               scale_by_std=cfg.scale_by_std, unbiased=cfg.std_unbiased, eps=cfg.std_eps) \
            if rs else torch.zeros(0)
        n_tok, n_seq = sum_floats([sum(map(sum, masks)), seq_count(masks)], ctx.dist)
        old: dict[int, torch.Tensor] = {}  # per micro-batch, from the first pass
        ref: dict[int, torch.Tensor] = {}
        served = None  # the reference's scores from teacher servers, one batch of requests
        if self.ref is not None and not isinstance(self.ref, TokenScorer) and rs:
            with timer("teacher"):
                served = self.ref.score(rows, top_k=0, start=score_from(rows, [r.prompt_len for r in rs]))

        def loss_fn(k: int, idx: list[int]) -> tuple[torch.Tensor, dict[str, float]]:
            al = align_supervision([rows[i] for i in idx], [masks[i] for i in idx],
                                   [rows[i] for i in idx], [masks[i] for i in idx], check_tokens=False)
            ids, attn = pad_rows([rows[i] for i in idx], pad_id(ctx.tokenizer), ctx.device)
            mask, targets = al.mask.to(ctx.device), al.targets.to(ctx.device)
            with timer("student"):
                logp = ctx.scorer(ids, attn, positions=al.student_pos, per_chunk=token_log_probs, args=(targets,))
            if k not in old:
                old[k] = logp.detach() if cfg.old_logprobs == "current" else self._rollout_logp(rs, idx, al)
                if served is not None:
                    ref[k] = served_token_logprobs(served, idx, al.student_pos, ctx.device)
                elif self.ref is not None:
                    with timer("teacher"), torch.no_grad():
                        ref[k] = self.ref(ids, attn, positions=al.student_pos, per_chunk=token_log_probs,
                                          args=(targets,))
            with timer("student"):
                count = n_tok if cfg.reduction == "global_tokens" else None
                loss, st = grpo_loss(logp, old[k], adv[idx].to(ctx.device), mask, cfg, ref.get(k), count=count)
                if cfg.reduction == "per_sequence":  # mean over this micro-batch's rows -> share of the global mean
                    loss = loss * seq_count([masks[i] for i in idx]) / max(n_seq, 1.0)
            m_tok = float(mask.sum())
            return loss, {"clip_tokens": st["clip_fraction"] * m_tok, "ref_kl": st.get("ref_kl", 0.0) * m_tok}

        for _ in range(cfg.ppo_epochs):  # the metrics are the last pass's
            sums = ctx.accumulate([len(r) for r in rows], loss_fn, ["clip_tokens", "ref_kl"], timer=timer)
            with timer("student"):
                out = ctx.optimizer_step()
        a_abs, a_n, zero_groups, groups = sum_floats(
            [float(adv.abs().sum()), float(len(rs)), *self._zero_groups(rs, adv)], ctx.dist)
        metrics = {"loss": sums["loss"], "clip_fraction": sums["clip_tokens"] / max(n_tok, 1.0),
                   "adv_abs_mean": a_abs / max(a_n, 1.0), "zero_adv_group_frac": zero_groups / max(groups, 1.0),
                   "tokens": n_tok, **out, **timer.metrics()}
        if self.ref is not None:
            metrics["ref_kl"] = sums["ref_kl"] / max(n_tok, 1.0)
        return metrics

    @staticmethod
    def _zero_groups(rs, adv) -> tuple[float, float]:
        """(groups whose advantages are all 0, groups): such groups carry no learning signal."""
        by: dict[int, list[float]] = {}
        for r, a in zip(rs, adv.tolist()):
            by.setdefault(r.group, []).append(abs(a))
        return float(sum(1 for v in by.values() if max(v) == 0.0)), float(len(by))

    def _rollout_logp(self, rs, idx, al) -> torch.Tensor:
        """The engine's sampling log-probs at the supervised positions, laid out like ``al``."""
        out = torch.zeros(al.mask.shape, dtype=torch.float32)
        for row, i in enumerate(idx):
            lps = [lp for lp, m in zip(rs[i].traj.logprobs, rs[i].traj.loss_mask) if m]
            out[row, :len(lps)] = torch.tensor(lps, dtype=torch.float32)
        return out.to(self.ctx.device)
