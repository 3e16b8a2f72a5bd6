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
   detached), with beta from before this step; then beta <- max(0, beta + eta (m - mean Delta)).

One teacher forward per micro-batch serves both losses: detached for the student, with
gradients (into the latents only) for the composer. A task's rollouts share a micro-batch, where
its latents are encoded, so memory stays bounded by the micro-batch. ``lopd prepare`` (or ``lopd
coldstart``) writes the warmed composer that ``lopd.composer_init`` loads (it is also the anchor
c_phi0). The plain-maths version of one step, without micro-batches or caches: ``lopd_reference.py``.

Cost: a task's G rollouts (``group_size``; LOPD's default is 1, i.e. 32 tasks a step) share one
retrieval, one encoding with gradients and one (cached) anchor encoding; the teacher's prompt
before the first latent runs once per distinct prefix (``latent_teacher.py``). Step cost against
GRPO: benchmarks/RESULTS.md, "Learners".
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import torch

from harness.distributed import sum_floats, sync_gradients
from harness.learners.base import Learner, LearnerContext, StepBatch
from harness.engines.base import EmbedOverride
from harness.learners.common import (TeacherSide, Timer, distill_tokens, pad_id, pad_rows, score_from, seq_count,
                                     served_side, served_token_logprobs)
from harness.learners.latent_teacher import latent_teacher_hidden, latent_teacher_prompt, teacher_head
from harness.learners.privileged import grow_bank, load_bank, make_embedder, retrieve_texts
from lopd.chunked import chunked_head, topk_and_targets
from lopd.coldstart import clip_composer_grads
from lopd.composer import Composer
from lopd.config import LOPDConfig
from lopd.latent import DEFAULT_FRAMING
from lopd.losses import masked_sum, reduce_tokens
from lopd.margin import DualVariable, TokenLogProbs, composer_loss, composer_terms_of
from lopd.supervision import align_supervision


@dataclass
class LOPDLearnerConfig(LOPDConfig):
    """The method core's settings (retrieval count, composer, distillation, margin, optimiser) plus
    what the learner needs to run them."""

    composer_init: str | None = None
    """The cold-start composer file (``lopd prepare`` or ``lopd coldstart`` writes it; its weights also
    become the anchor c_phi0), or ``random``: the freshly initialised composer (an ablation: its latents
    have norms ~50x the token embeddings'). None is an error that says how to make the file."""
    framing: str = DEFAULT_FRAMING
    """First-user-message framing of the latent reference: holds ``{latents}`` and ``{task}``."""
    composer_seed: int = 0
    """Seed of the QFormer's and LoRA's initialisation and of the cold start's batch order."""


RANDOM_COMPOSER = "random"
"""The ``lopd.composer_init`` that starts from the freshly initialised composer."""


def check_composer_init(path: str | None, prepare: str = "lopd prepare CONFIG") -> None:
    """Raise unless ``path`` (``lopd.composer_init``) is ``random`` or an existing file; the message
    names ``prepare``, the command that writes it."""
    fix = (f"run `{prepare}` (builds the bank and the cold-start composer), or set "
           f"lopd.composer_init={RANDOM_COMPOSER} to start from a random composer (an ablation)")
    if path is None:
        raise ValueError(f"lopd.composer_init is not set: {fix}")
    if path != RANDOM_COMPOSER and not Path(path).is_file():
        raise FileNotFoundError(f"no cold-start composer at {path} (lopd.composer_init): {fix}")


_SUMS = ("kl_tok", "c_loss", "c_kl", "delta", "delta_w", "count", "anchor")  # per micro-batch, added over ranks


@dataclass
class _Step:
    """One step's rollouts in training form, and the global counts every micro-batch normalises by."""

    rollouts: list
    tasks: dict[str, Any]
    exps: dict[str, list[str]]
    """Retrieved experience texts per task id (emptied where the teacher keeps the plain prompt)."""
    s_rows: list[list[int]]
    s_masks: list[list[int]]
    t_rows: list[list[int]]
    t_masks: list[list[int]]
    t_pos: list[list[int]]
    """Latent placeholder positions in each teacher row."""
    rewards: torch.Tensor
    n_tok: float
    n_seq: float
    n_roll: float
    beta: float


class LOPDLearner(Learner):
    """Latent on-policy self-distillation with a jointly trained composer."""

    name = "lopd"
    Config = LOPDLearnerConfig

    def __init__(self, ctx: LearnerContext):
        super().__init__(ctx)
        self.cfg: LOPDLearnerConfig = ctx.cfg.learner_config
        # before the composer is built: a random QFormer's latents (row norms ~11 against ~0.2 for the
        # token embeddings) would drown the teacher's prompt without a word
        check_composer_init(self.cfg.composer_init)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.cfg.composer_seed)
            self.composer = Composer(ctx.frozen_copy(), ctx.tokenizer, self.cfg.composer).to(ctx.device)
        if self.cfg.composer_init != RANDOM_COMPOSER:
            self.composer.load_trainable_state_dict(torch.load(self.cfg.composer_init, map_location=ctx.device))
        self.composer.set_trainable(self.cfg.train_composer)
        if self._served_teacher() and self.cfg.distill.full_vocab:
            raise ValueError("teacher servers return top-k log-probs, not logits: set lopd.distill.full_vocab=false")
        oc = self.cfg.composer_optim
        self.optimizer = torch.optim.AdamW(self.composer.trainable_parameters(), lr=oc.lr, weight_decay=oc.weight_decay)
        self.dual = DualVariable(self.cfg.margin)
        self.bank = load_bank(ctx.cfg.bank)

    def retrieve(self, tasks: list) -> list[list[str]]:
        """Experience texts per task, best first (``n_retrieved`` at most)."""
        return retrieve_texts(self.bank, [t.prompt for t in tasks], [t.task_id for t in tasks], self.ctx.env_id,
                              self.cfg)

    def train_step(self, batch: StepBatch) -> dict[str, float]:
        ctx, timer, rs = self.ctx, Timer(), batch.rollouts
        with timer("retrieval"):
            tasks = {r.task.task_id: r.task for r in rs}
            exps = dict(zip(tasks, self.retrieve(list(tasks.values()))))
        step = self._step_rows(rs, tasks, exps)
        self.optimizer.zero_grad(set_to_none=True)
        lengths = [max(len(s), len(t)) for s, t in zip(step.s_rows, step.t_rows)]
        sums = ctx.accumulate(lengths, lambda k, idx: self._micro_batch(step, idx, timer), _SUMS,
                              groups=[r.group for r in rs], timer=timer)
        out = self._composer_step(timer) if self.cfg.train_composer else {}
        with timer("student"):
            out.update(ctx.optimizer_step())
        mean_delta = self._dual_step(sums, step.n_roll)
        if ctx.cfg.bank.grow:
            with timer("retrieval"):
                grow_bank(self.bank, [r.traj.episode for r in rs], ctx.dist, f"step-{batch.step}")
        no_ctx = sum_floats([sum(1 for p in step.t_pos if not p)], ctx.dist)[0]
        n_tok, n_roll = step.n_tok, max(step.n_roll, 1.0)
        return {"loss": sums["loss"], "distill_kl": sums["kl_tok"] / max(n_tok, 1.0), "tokens": n_tok,
                "composer/loss": sums["c_loss"], "composer/kl": sums["c_kl"] / n_roll,
                "composer/delta": mean_delta, "composer/anchor": sums["anchor"] / n_roll,
                "composer/beta": step.beta, "composer/beta_next": self.dual.value,
                "no_latent_frac": no_ctx / n_roll, "bank_size": float(len(self.bank)), **out, **timer.metrics()}

    def _step_rows(self, rs: list, tasks: dict, exps: dict[str, list[str]]) -> _Step:
        """Student rows and teacher rows (latent placeholders where experiences were retrieved; a
        task without any, or whose text holds the sentinel, keeps the plain prompt and no latents)."""
        ctx = self.ctx
        t_rows, t_masks, t_pos = [], [], []
        for r in rs:
            n = len(exps[r.task.task_id]) * self.composer.n_latents
            prompt = latent_teacher_prompt(ctx.tokenizer, r.traj.episode, n, self.cfg.framing,
                                           ctx.template_kwargs) if n else None
            if prompt is None:
                exps[r.task.task_id] = []
                prompt = (r.traj.token_ids[:r.prompt_len], [])
            t_rows.append(prompt[0] + r.traj.token_ids[r.prompt_len:])
            t_masks.append([0] * len(prompt[0]) + r.traj.loss_mask[r.prompt_len:])
            t_pos.append(prompt[1])
        s_rows, s_masks = [r.traj.token_ids for r in rs], [r.traj.loss_mask for r in rs]
        n_tok, n_seq, n_roll = sum_floats([sum(map(sum, s_masks)), seq_count(s_masks), len(rs)], ctx.dist)
        rewards = torch.tensor([min(max(r.reward, 0.0), 1.0) for r in rs])
        # the loss uses beta from before this step's dual update
        return _Step(rs, tasks, exps, s_rows, s_masks, t_rows, t_masks, t_pos, rewards, n_tok, n_seq, n_roll,
                     self.dual.value)

    def _micro_batch(self, step: _Step, idx: list[int], timer: Timer) -> tuple[torch.Tensor, dict[str, float]]:
        """Compose the micro-batch's latents, score the teacher once, return the student's loss and
        run the composer's backward. A task's rollouts share a micro-batch, so its encoder graph is
        freed here (memory bounded by the micro-batch)."""
        ctx, cfg, rs = self.ctx, self.cfg, step.rollouts
        lat, anchor = self._compose([rs[i].task.task_id for i in idx], step, timer)
        lats = [lat[rs[i].task.task_id] for i in idx]
        al = align_supervision([step.s_rows[i] for i in idx], [step.s_masks[i] for i in idx],
                               [step.t_rows[i] for i in idx], [step.t_masks[i] for i in idx])
        mask, targets, pid = al.mask.to(ctx.device), al.targets.to(ctx.device), pad_id(ctx.tokenizer)
        if self._served_teacher():
            with timer("teacher"):
                side, t_tgt = self._score_on_server(step, idx, lats, al)
                top_ids, t_top = side.ids, side.logp
        else:
            with timer("teacher"), torch.set_grad_enabled(cfg.train_composer):
                t_ids, t_attn = pad_rows([step.t_rows[i] for i in idx], pid, ctx.device)
                t_h = latent_teacher_hidden(self.composer, t_ids, t_attn, [step.t_pos[i] for i in idx],
                                            [x if x.numel() else None for x in lats], al.teacher_pos, al.mask)
                # per chunk of positions: top-k ids, their log-probs and the sampled tokens' (gradients
                # into the latents; the backward recomputes each chunk's logits)
                head = teacher_head(self.composer)
                top_ids, t_top, t_tgt = chunked_head(head, t_h, partial(topk_and_targets, k=cfg.distill.top_k),
                                                     targets, chunk=ctx.scorer.logits_chunk)
                side = TeacherSide(top_ids, t_top.detach(), t_h.detach() if cfg.distill.full_vocab else None, head)
        with timer("student"):
            s_ids, s_attn = pad_rows([step.s_rows[i] for i in idx], pid, ctx.device)
            per_tok, s_logp = distill_tokens(ctx.scorer, s_ids, s_attn, al.student_pos, cfg.distill, side,
                                             extra_ids=targets.unsqueeze(-1))
            loss = reduce_tokens(per_tok, mask, cfg.distill.reduction, count=step.n_tok, n_sequences=step.n_seq)
        with timer("composer"), torch.set_grad_enabled(cfg.train_composer):
            k, s_logp = top_ids.shape[-1], s_logp.detach()
            terms = composer_terms_of(TokenLogProbs(t_top, t_tgt), TokenLogProbs(s_logp[..., :k], s_logp[..., k]),
                                      mask, step.rewards[idx].to(ctx.device), lats,
                                      [anchor[rs[i].task.task_id] for i in idx])
            c_loss, _ = composer_loss(terms, step.beta, cfg.margin)
            c_loss = c_loss * (len(idx) / max(step.n_roll, 1.0))  # mean over ALL rollouts of the step
            if cfg.train_composer and c_loss.requires_grad:
                c_loss.backward()  # through the teacher into the latents, the QFormer and the LoRA
        with torch.no_grad():
            counts = al.counts.to(terms.delta.device).float()
            return loss, {"kl_tok": float(masked_sum(per_tok, mask)), "c_loss": float(c_loss),
                          "c_kl": float(terms.kl.sum()), "delta": float(terms.delta.sum()),
                          "delta_w": float((terms.delta * counts).sum()), "count": float(counts.sum()),
                          "anchor": float(terms.anchor.sum())}

    def _served_teacher(self) -> bool:
        """Score the latent teacher on the teacher servers: only with a frozen composer (a trained one
        needs the backward through the teacher's logits, so in-process scoring is not extra work)."""
        return self.ctx.teacher_engine is not None and not self.cfg.train_composer

    def _score_on_server(self, step: _Step, idx: list[int], lats: list, al: Any) -> tuple[TeacherSide, torch.Tensor]:
        """(top-k side, log-probs of the sampled tokens) of the latent teacher from the teacher servers:
        the latents travel as embedding overrides (SGLang's ``input_embeds``; vLLM 0.32 refuses)."""
        rows = [step.t_rows[i] for i in idx]
        ovs = [EmbedOverride(step.t_pos[i], lat.detach()) if step.t_pos[i] else None for i, lat in zip(idx, lats)]
        starts = score_from(rows, [len(r) - len(step.rollouts[i].traj.token_ids) + step.rollouts[i].prompt_len
                                   for r, i in zip(rows, idx)])
        scores = self.ctx.teacher_engine.score(rows, top_k=self.cfg.distill.top_k, start=starts, overrides=ovs)
        at = list(range(len(idx)))
        return (served_side(scores, at, al.teacher_pos, self.ctx.device),
                served_token_logprobs(scores, at, al.teacher_pos, self.ctx.device))

    def _compose(self, task_ids: list[str], step: _Step, timer: Timer) -> tuple[dict, dict]:
        """Latents c_phi (with gradients when the composer trains) and anchors c_phi0 per task."""
        ids = list(dict.fromkeys(task_ids))
        tasks, exps = [step.tasks[t] for t in ids], [step.exps[t] for t in ids]
        with timer("composer"), torch.set_grad_enabled(self.cfg.train_composer):
            lat = dict(zip(ids, self.composer.encode([t.prompt for t in tasks], exps)))
        with timer("composer"):
            if self.cfg.margin.anchor_weight:
                with torch.no_grad():
                    anchor = dict(zip(ids, self.composer.encode([t.prompt for t in tasks], exps, anchor=True)))
            else:
                anchor = {k: v.detach() for k, v in lat.items()}
        return lat, anchor

    def _dual_step(self, sums: dict[str, float], n_roll: float) -> float:
        """The dual variable's ascent step on this step's mean Delta (over all ranks), returned."""
        mean_delta = self.dual.mean_delta_of_sums(sums["delta"], n_roll, sums["delta_w"], sums["count"])
        if n_roll:
            self.dual.step(mean_delta)
        return mean_delta

    def _composer_step(self, timer: Timer) -> dict[str, float]:
        """Sum the composer's gradients over ranks, clip, step."""
        with timer("composer"):
            sync_gradients(self.composer.trainable_parameters(), self.ctx.dist)
            norms = clip_composer_grads(self.composer, self.cfg.composer_optim.grad_clip)
            finite = all(torch.isfinite(torch.tensor(v)) for v in norms.values())
            if finite:
                self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
        return {f"composer/{k}": v for k, v in norms.items()} | {"composer/skipped_update": float(not finite)}

    # ---- checkpoint state ------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {"composer": self.composer.trainable_state_dict(), "optimizer": self.optimizer.state_dict(),
                "dual": self.dual.state_dict(), "anchor_cache": self.composer.anchor_cache_state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.composer.load_trainable_state_dict(state["composer"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.dual.load_state_dict(state["dual"])
        # a cache of checkpoints before the cache moved into the composer (keyed by hash) is dropped:
        # its latents are recomputed
        self.composer.load_anchor_cache_state([x for x in state.get("anchor_cache", []) if len(x) == 3])

    def save_files(self, directory: Path) -> None:
        self.bank.save(directory / "bank")

    def load_files(self, directory: Path) -> None:
        from lopd.bank import ExperienceBank

        if (directory / "bank").exists():
            self.bank = ExperienceBank.load(directory / "bank", embedder=make_embedder(self.ctx.cfg.bank))
