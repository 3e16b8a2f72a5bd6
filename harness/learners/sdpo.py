"""SDPO: a teacher conditioned on successful sibling rollouts of the same task, same step.

Per step (paper appendix: G = 4, EMA teacher rate 0.05, reverse KL top-k with a tail bucket):

1. the student plays G rollouts per task;
2. for each rollout, the successful siblings in its group (reward >= ``success_threshold``;
   itself excluded unless ``include_self``) are rendered like bank experiences and framed into
   the teacher's first user message;
3. the teacher, an EMA of the student, re-scores the rollout; the student minimises
   KL(student || teacher) over the teacher's top-k + tail buckets per assistant token;
4. after the student's step: teacher <- (1 - rate) teacher + rate student.

A rollout without a successful sibling gets no distillation signal; ``no_signal_frac`` logs
the share of such rollouts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from harness.distributed import sum_floats
from harness.learners.base import Learner, LearnerContext, StepBatch
from harness.learners.common import Timer, TokenScorer, distill_update, frozen_teacher, teacher_prompt
from harness.learners.privileged import episode_text
from lopd.config import DistillConfig

DEFAULT_SDPO_FRAMING = ("{task}\n\nA successful attempt at this same task, for reference:\n{context}\n\n"
                        "Now solve the task.")


@dataclass
class SDPOConfig:
    """SDPO's sibling context, EMA teacher and loss."""

    distill: DistillConfig = field(default_factory=DistillConfig)
    """Reverse KL over the teacher's top-k (20) + a tail bucket."""
    ema_rate: float = 0.05
    """Teacher <- (1 - rate) teacher + rate student after every step; 0 keeps the initial model."""
    success_threshold: float = 1.0
    """A sibling counts as successful at this reward or above."""
    include_self: bool = False
    """Let a successful rollout be its own reference (false: only OTHER successful siblings)."""
    max_siblings: int = 1
    """Successful siblings shown to the teacher (best reward first, then rollout order)."""
    context_slot: Literal["system", "user"] = "user"
    """Where the siblings go: wrapping the first user message, or appended to the system message."""
    framing: str = DEFAULT_SDPO_FRAMING
    """Text holding ``{context}`` (the siblings) and, for the user slot, ``{task}``."""


class SDPOLearner(Learner[SDPOConfig]):
    """Self-distillation from successful siblings with an EMA teacher."""

    name = "sdpo"
    Config = SDPOConfig
    default_group_size = 4  # siblings come from the same group

    def __init__(self, ctx: LearnerContext):
        super().__init__(ctx)
        if not 0.0 <= self.cfg.ema_rate <= 1.0:
            raise ValueError("sdpo.ema_rate must lie in [0, 1]")
        if ctx.teacher_engine is not None and self.cfg.ema_rate:
            raise ValueError("sdpo.ema_rate > 0 makes the teacher an EMA of the student, not the frozen base the "
                             "teacher servers hold: set sdpo.ema_rate=0 or drop engine.teacher_urls/teacher_launch")
        self.teacher = frozen_teacher(ctx, self.cfg.distill)

    def siblings(self, rollouts: list, r: Any) -> list:
        """The successful siblings ``r``'s teacher sees."""
        ok = [s for s in rollouts if s.group == r.group and s.reward >= self.cfg.success_threshold
              and (self.cfg.include_self or s is not r)]
        ok.sort(key=lambda s: (-s.reward, s.index))
        return ok[:self.cfg.max_siblings]

    def train_step(self, batch: StepBatch) -> dict[str, float]:
        ctx, timer = self.ctx, Timer()
        kept, prompts = [], []
        with timer("context"):
            for r in batch.rollouts:
                texts = [t for t in (episode_text(s.traj.episode) for s in self.siblings(batch.rollouts, r)) if t]
                if not texts:
                    continue
                kept.append(r)
                prompts.append(teacher_prompt(ctx.tokenizer, r.traj.episode, "\n\n".join(texts),
                                              self.cfg.context_slot, self.cfg.framing, ctx.template_kwargs))
        metrics = distill_update(ctx, kept, prompts, self.teacher, self.cfg.distill, timer)
        with timer("teacher"):
            self._ema()
        no_signal, total = sum_floats([len(batch.rollouts) - len(kept), len(batch.rollouts)], ctx.dist)
        return {**metrics, "no_signal_frac": no_signal / max(total, 1.0),
                "no_signal_rollouts": no_signal, **timer.metrics()}

    @torch.no_grad()
    def _ema(self) -> None:
        rate = self.cfg.ema_rate
        if rate == 0.0:
            return
        full = self.ctx.full_state()
        for name, p in self.teacher.lm.named_parameters():
            p.lerp_(full[name].to(device=p.device, dtype=p.dtype), rate)

    def state_dict(self) -> dict[str, Any]:
        if not isinstance(self.teacher, TokenScorer):
            return {}  # the frozen base on the teacher servers
        return {"teacher": {k: v.detach().cpu().clone() for k, v in self.teacher.lm.state_dict().items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if "teacher" in state:
            self.teacher.lm.load_state_dict(state["teacher"])
