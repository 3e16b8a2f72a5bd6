"""LOPD: a composer turns retrieved experiences into latent tokens for a frozen self-teacher.

Per step (the paper's method; every number is a config field, so ablations need no code change):

1. retrieval: the top-3 bank experiences of each task (own entry excluded by default);
2. the composer (frozen backbone + LoRA encoder + QFormer) encodes each (task, experience) pair
   into 32 latents; 3 x 32 = 96 latent tokens replace the placeholder run of the sentinel framed
   into the teacher's first user message;
3. the frozen teacher (the initial model, adapter disabled) re-scores every student rollout;
4. the student minimises KL(student || teacher) over the teacher's top-20 + tail buckets per
   assistant token, normalised by the global token count;
5. the composer minimises mean_i [kl_i + beta (m - Delta_i) + lambda anchor_i] (the student
   detached; kl_i and Delta_i over the tool-call tokens, ``margin.token_scope``), with beta from
   before this step; then beta <- max(0, beta + eta (m - mean Delta)).

One teacher forward per micro-batch serves both losses: detached for the student, with
gradients (into the latents only) for the composer. A task's rollouts share a micro-batch, where
its latents are encoded, so memory stays bounded by the micro-batch. ``lopd prepare`` (or ``lopd
coldstart``) writes the warmed composer that ``lopd.composer_init`` loads (it is also the anchor
c_phi0). The plain-maths version of one step, without micro-batches or caches: ``lopd_reference.py``.

Cost: a task's rollouts share one retrieval and one encoding; the teacher's prompt before the first
latent runs once per distinct prefix (``latent_teacher.py``); against GRPO: RESULTS.md, "Learners".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from harness.distributed import sum_floats
from harness.learners.base import Learner, LearnerContext, StepBatch
from harness.learners.common import TeacherSide, Timer, distill_tokens, pad_id, pad_rows
from harness.learners.latent_teacher import (latent_teacher_at, latent_teacher_hidden, latent_teacher_topk,
                                             served_latent_teacher)
from harness.learners.lopd_composer import build_composer, compose_latents, composer_backward, composer_step
from harness.learners.lopd_drift import DriftProbe, drift_metrics
from harness.learners.lopd_rows import MicroBatch, StepRows, step_rows
from harness.learners.privileged import grow_bank, load_bank, make_embedder, retrieve_texts
from lopd.config import LOPDConfig
from lopd.losses import masked_sum, reduce_tokens
from lopd.margin import DualVariable, TokenLogProbs
from lopd.supervision import align_supervision, aligned_subset


@dataclass
class LOPDLearnerConfig(LOPDConfig):
    """The method core's settings (retrieval count, composer, distillation, margin, optimiser) plus
    what the learner needs to run them."""

    composer_init: str | None = None
    """The cold-start composer file (``lopd prepare`` or ``lopd coldstart`` writes it; its weights also
    become the anchor c_phi0), or ``random``: the freshly initialised composer (an ablation: its latents
    have norms ~50x the token embeddings'). None is an error that says how to make the file."""
    framing: str = "paper"
    """First-user-message framing of the latent reference: ``paper`` (ours: the paper prints none),
    ``authors`` (their code's), or a text holding ``{latents}`` and ``{task}``."""
    composer_seed: int = 0
    """Seed of the QFormer's and LoRA's initialisation and of the cold start's batch order."""
    drift_probe: int = 0
    """Log ``composer/drift_kl`` (:mod:`~harness.learners.lopd_drift`) on this many training tasks; 0: off."""


_SUMS = ("kl_tok", "c_loss", "c_kl", "delta", "delta_w", "count", "anchor")  # per micro-batch, added over ranks


class LOPDLearner(Learner[LOPDLearnerConfig]):
    """Latent on-policy self-distillation with a jointly trained composer."""

    name = "lopd"
    Config = LOPDLearnerConfig

    def __init__(self, ctx: LearnerContext):
        super().__init__(ctx)
        self.composer = build_composer(ctx, self.cfg)
        if self._served_teacher() and self.cfg.distill.full_vocab:
            raise ValueError("teacher servers return top-k log-probs, not logits: set lopd.distill.full_vocab=false")
        oc = self.cfg.composer_optim
        self.optimizer = torch.optim.AdamW(self.composer.trainable_parameters(), lr=oc.lr, weight_decay=oc.weight_decay)
        self.dual = DualVariable(self.cfg.margin)
        self.bank = load_bank(ctx.cfg.bank)
        self._pieces: dict[int, str] = {}  # token id -> text, for the tool-call scope
        self.drift_probe: DriftProbe | None = None  # built on first use (lopd.drift_probe)
        self._pending: tuple | None = None  # teacher_graph=after_student: a micro-batch's composer work

    def retrieve(self, tasks: list) -> list[list[str]]:
        """Experience texts per task, best first (``n_retrieved`` at most)."""
        return retrieve_texts(self.bank, [t.prompt for t in tasks], [t.task_id for t in tasks], self.ctx.env_id,
                              self.cfg)

    def train_step(self, batch: StepBatch) -> dict[str, float]:
        ctx, timer, rs = self.ctx, Timer(), batch.rollouts
        with timer("retrieval"):
            tasks = {r.task.task_id: r.task for r in rs}
            exps = dict(zip(tasks, self.retrieve(list(tasks.values()))))
        step = step_rows(ctx, self.cfg, self.composer.n_latents, rs, tasks, exps, self._pieces, self.dual.value)
        self.optimizer.zero_grad(set_to_none=True)
        lengths = [max(len(s), len(t)) for s, t in zip(step.s_rows, step.t_rows)]
        sums = ctx.accumulate(lengths, lambda k, idx: self._micro_batch(step, idx, timer), _SUMS,
                              groups=[r.group for r in rs], timer=timer,
                              after_backward=lambda: self._after_backward(timer))
        out = composer_step(self.composer, self.optimizer, self.cfg.composer_optim.grad_clip, ctx.dist, timer) \
            if self.cfg.train_composer else {}
        with timer("student"):
            out.update(ctx.optimizer_step())
        with timer("drift"):
            out.update(drift_metrics(self))
        mean_delta = self._dual_step(sums, step.n_roll)
        if ctx.cfg.bank.grow:
            with timer("retrieval"):
                grow_bank(self.bank, [r.traj.episode for r in rs], ctx.dist, f"step-{batch.step}")
        no_ctx, n_all = sum_floats([sum(1 for p in step.t_pos if not p), len(rs)], ctx.dist)
        n_tok, n_roll = step.n_tok, max(step.n_roll, 1.0)
        return {"loss": sums["loss"], "distill_kl": sums["kl_tok"] / max(n_tok, 1.0), "tokens": n_tok,
                "composer/loss": sums["c_loss"], "composer/kl": sums["c_kl"] / n_roll,
                "composer/delta": mean_delta, "composer/anchor": sums["anchor"] / n_roll,
                "composer/beta": step.beta, "composer/beta_next": self.dual.value,
                "no_latent_frac": no_ctx / max(n_all, 1.0), "bank_size": float(len(self.bank)), **out, **timer.metrics()}

    def _micro_batch(self, step: StepRows, idx: list[int], timer: Timer) -> tuple[torch.Tensor, dict[str, float]]:
        """Compose the micro-batch's latents, score the teacher, return the student's loss, and run the
        composer's backward: here (``teacher_graph=with_student``), or after the student's backward in
        :meth:`_after_backward` (``after_student``, which reruns the teacher with its graph). A task's
        rollouts share a micro-batch, so its encoder graph is freed within it."""
        ctx, cfg, rs = self.ctx, self.cfg, step.rollouts
        ids = list(dict.fromkeys(rs[i].task.task_id for i in idx))
        lat, anchor = compose_latents(self.composer, [step.tasks[t].prompt for t in ids], [step.exps[t] for t in ids],
                                      ids, self.cfg, timer)
        al = align_supervision([step.s_rows[i] for i in idx], [step.s_masks[i] for i in idx],
                               [step.t_rows[i] for i in idx], [step.t_masks[i] for i in idx])
        mb = MicroBatch(idx, [lat[rs[i].task.task_id] for i in idx], [anchor[rs[i].task.task_id] for i in idx], al,
                    al.mask.to(ctx.device), al.targets.to(ctx.device))
        later = cfg.train_composer and not self._served_teacher() and cfg.teacher_graph == "after_student"
        side, t_top, t_tgt = self._teacher(step, mb, timer, graph=cfg.train_composer and not later)
        with timer("student"):
            s_ids, s_attn = pad_rows([step.s_rows[i] for i in idx], pad_id(ctx.tokenizer), ctx.device)
            per_tok, s_logp = distill_tokens(ctx.scorer, s_ids, s_attn, al.student_pos, cfg.distill, side,
                                             extra_ids=mb.targets.unsqueeze(-1))
            loss = reduce_tokens(per_tok, mb.mask, cfg.distill.reduction, count=step.n_tok, n_sequences=step.n_seq)
        kl_tok = float(masked_sum(per_tok.detach(), mb.mask))
        if later:  # the student's backward comes first, then the teacher's graph (_after_backward)
            self._pending = (step, mb, side.ids, s_logp.detach())
            return loss, {"kl_tok": kl_tok}
        return loss, {"kl_tok": kl_tok, **self._composer_backward(step, mb, TokenLogProbs(t_top, t_tgt),
                                                                  s_logp.detach(), timer)}

    def _after_backward(self, timer: Timer) -> dict[str, float]:
        """``teacher_graph=after_student``: the teacher rerun with its graph at the first pass's top-k, and
        the composer's backward (the student's graph is gone by now)."""
        if self._pending is None:
            return {}
        step, mb, top_ids, s_logp = self._pending
        self._pending = None
        with timer("teacher"), torch.enable_grad():
            t_top, t_tgt = latent_teacher_at(self.composer, self._teacher_hidden(step, mb), top_ids, mb.targets,
                                             self.ctx.scorer.logits_chunk)
        return self._composer_backward(step, mb, TokenLogProbs(t_top, t_tgt), s_logp, timer)

    def _teacher_hidden(self, step: StepRows, mb: MicroBatch) -> torch.Tensor:
        t_ids, t_attn = pad_rows([step.t_rows[i] for i in mb.idx], pad_id(self.ctx.tokenizer), self.ctx.device)
        return latent_teacher_hidden(self.composer, t_ids, t_attn, [step.t_pos[i] for i in mb.idx],
                                     [x if x.numel() else None for x in mb.lats], mb.al.teacher_pos, mb.al.mask)

    def _teacher(self, step: StepRows, mb: MicroBatch, timer: Timer,
                 graph: bool) -> tuple[TeacherSide, torch.Tensor, torch.Tensor]:
        """What the student needs of the latent teacher, and its log-probs at its top-k and at the sampled
        tokens (with gradients into the latents when ``graph``)."""
        cfg = self.cfg
        with timer("teacher"):
            if self._served_teacher():
                rows = [step.t_rows[i] for i in mb.idx]
                starts = [len(row) - len(step.rollouts[i].traj.token_ids) + step.rollouts[i].prompt_len
                          for row, i in zip(rows, mb.idx)]
                side, t_tgt = served_latent_teacher(self.ctx.teacher_engine, rows, starts,
                                                    [step.t_pos[i] for i in mb.idx], mb.lats, mb.al.teacher_pos,
                                                    cfg.distill.top_k, self.ctx.device)
                return side, side.logp, t_tgt
            with torch.set_grad_enabled(graph):
                return latent_teacher_topk(self.composer, self._teacher_hidden(step, mb), mb.targets,
                                           cfg.distill.top_k, self.ctx.scorer.logits_chunk, cfg.distill.full_vocab)

    def _composer_backward(self, step: StepRows, mb: MicroBatch, teacher: TokenLogProbs, s_logp: torch.Tensor,
                           timer: Timer) -> dict[str, float]:
        """The composer's loss over the micro-batch's kept rollouts and its backward (through the teacher
        into the latents, the QFormer and the LoRA); its additive metrics."""
        dev, idx = self.ctx.device, mb.idx
        with timer("composer"):
            c_mask = aligned_subset([step.s_masks[i] for i in idx], [step.scope[i] for i in idx]).to(dev)
            kept = torch.tensor([step.keep[i] for i in idx], device=dev)
            return composer_backward(teacher, s_logp, c_mask, kept, step.rewards[idx].to(dev), mb.lats, mb.anchors,
                                     step.beta, step.n_roll, self.cfg.margin, self.cfg.train_composer)

    def _served_teacher(self) -> bool:
        """Score the latent teacher on teacher servers: only with a frozen composer (a trained one needs
        the teacher's logits in-process for its backward)."""
        return self.ctx.teacher_engine is not None and not self.cfg.train_composer

    def _dual_step(self, sums: dict[str, float], n_roll: float) -> float:
        """The dual variable's ascent step on this step's mean Delta (over all ranks), returned."""
        mean_delta = self.dual.mean_delta_of_sums(sums["delta"], n_roll, sums["delta_w"], sums["count"])
        if n_roll:
            self.dual.step(mean_delta)
        return mean_delta

    # ---- checkpoint state ------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {"composer": self.composer.trainable_state_dict(), "optimizer": self.optimizer.state_dict(),
                "dual": self.dual.state_dict(), "anchor_cache": self.composer.anchor_cache_state(),
                "drift_probe": self.drift_probe and self.drift_probe.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.composer.load_trainable_state_dict(state["composer"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.dual.load_state_dict(state["dual"])
        # a cache of checkpoints before the cache moved into the composer (keyed by hash) is dropped:
        # its latents are recomputed
        self.composer.load_anchor_cache_state([x for x in state.get("anchor_cache", []) if len(x) == 3])
        self.drift_probe = DriftProbe(**state["drift_probe"]) if state.get("drift_probe") else None

    def save_files(self, directory: Path) -> None:
        self.bank.save(directory / "bank")

    def load_files(self, directory: Path) -> None:
        from lopd.bank import ExperienceBank

        if (directory / "bank").exists():
            self.bank = ExperienceBank.load(directory / "bank", embedder=make_embedder(self.ctx.cfg.bank))
