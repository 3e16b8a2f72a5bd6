"""OPSD: a frozen teacher that sees an oracle trajectory for the same task.

Per step (paper appendix):

1. the teacher is the frozen initial model, its system message extended with an oracle
   trajectory of the SAME task: the task's best entry in the experience bank, or a dataset's
   reference solution (``opsd.oracle``);
2. it re-scores every student rollout (same tokens after the prompt);
3. the student minimises the forward KL(teacher || student) over the full vocabulary per
   assistant token (``opsd.distill.full_vocab=false`` for top-k + tail), normalised by the global
   token count.

Rollouts whose task has no oracle get no signal; their share is logged as ``no_oracle_frac``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from harness.distributed import sum_floats
from harness.learners.base import Learner, LearnerContext, StepBatch
from harness.learners.common import Timer, distill_update, frozen_teacher, teacher_prompt
from harness.learners.privileged import OracleSource, grow_bank, load_bank, make_embedder, reference_text
from lopd.config import DistillConfig

DEFAULT_OPSD_FRAMING = ("\n\nReference solution: below is a successful trajectory for this very task. "
                        "Use it to act well.\n{context}")


@dataclass
class OPSDConfig:
    """OPSD's teacher context and loss."""

    distill: DistillConfig = field(default_factory=lambda: DistillConfig(direction="forward", full_vocab=True))
    """Forward KL over the full vocabulary (paper); ``full_vocab: false`` uses top-k + tail."""
    oracle: OracleSource = "bank_then_reference"
    """Where the oracle comes from: the bank's best entry of the task (``bank``), the dataset's
    reference solution (``reference``), or the bank first and the reference when it has none."""
    context_slot: Literal["system", "user"] = "system"
    """Where the oracle goes: appended to the system message (paper) or wrapping the first user message."""
    framing: str = DEFAULT_OPSD_FRAMING
    """Text holding ``{context}`` (the oracle) and, for the user slot, ``{task}``."""


class OPSDLearner(Learner[OPSDConfig]):
    """On-policy self-distillation from an oracle-conditioned frozen copy of the initial model."""

    name = "opsd"
    Config = OPSDConfig

    def __init__(self, ctx: LearnerContext):
        super().__init__(ctx)
        self.teacher = frozen_teacher(ctx, self.cfg.distill)
        self.bank = load_bank(ctx.cfg.bank) if self.cfg.oracle != "reference" else None
        self._env = None
        self._reference: dict[str, str | None] = {}  # reference solutions are fixed: computed once

    def oracle(self, task) -> str | None:
        """The bank's best trajectory of this task, else (per ``opsd.oracle``) its reference solution."""
        if self.bank is not None:
            exp = self.bank.oracle(self.ctx.env_id, task.task_id)
            if exp is not None:
                return exp.text
            if self.cfg.oracle == "bank":
                return None
        if task.task_id not in self._reference:  # reference solutions are fixed: computed once
            if self._env is None:
                self._env = self.ctx.make_env()
            self._reference[task.task_id] = reference_text(self._env, task)
        return self._reference[task.task_id]

    def train_step(self, batch: StepBatch) -> dict[str, float]:
        ctx, timer = self.ctx, Timer()
        kept, prompts = [], []
        with timer("context"):
            for r in batch.rollouts:
                text = self.oracle(r.task)
                if text is None:
                    continue
                kept.append(r)
                prompts.append(teacher_prompt(ctx.tokenizer, r.traj.episode, text, self.cfg.context_slot,
                                              self.cfg.framing, ctx.template_kwargs))
        metrics = distill_update(ctx, kept, prompts, self.teacher, self.cfg.distill, timer)
        missing, total = sum_floats([len(batch.rollouts) - len(kept), len(batch.rollouts)], ctx.dist)
        if self.bank is not None and ctx.cfg.bank.grow:
            grow_bank(self.bank, [r.traj.episode for r in batch.rollouts], ctx.dist, f"step-{batch.step}")
        return {**metrics, "no_oracle_frac": missing / max(total, 1.0), **timer.metrics()}

    def save_files(self, directory: Path) -> None:
        if self.bank is not None:
            self.bank.save(directory / "bank")

    def load_files(self, directory: Path) -> None:
        if self.bank is not None and (directory / "bank").exists():
            from lopd.bank import ExperienceBank

            self.bank = ExperienceBank.load(directory / "bank", embedder=make_embedder(self.ctx.cfg.bank))
