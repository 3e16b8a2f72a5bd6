"""LOPD's step in training form: the student's and the latent teacher's token rows of a step's rollouts,
with the global counts every micro-batch normalises by (:func:`step_rows`), and one micro-batch's share
(:class:`MicroBatch`). The learner (:mod:`harness.learners.lopd`) builds one per step."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from harness.distributed import sum_floats
from harness.learners.base import LearnerContext
from harness.learners.common import seq_count
from harness.learners.latent_teacher import teacher_rows
from harness.learners.lopd_composer import scope_tokens


@dataclass
class StepRows:
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
    scope: list[list[int]]
    """Per student token: does the composer's kl_i and Delta_i count it (``margin.token_scope``)."""
    keep: list[bool]  # per rollout: supervised? (not when nothing was retrieved and unretrieved=drop)
    rewards: torch.Tensor
    n_tok: float
    n_seq: float
    n_roll: float
    beta: float


@dataclass
class MicroBatch:
    """One micro-batch: its rows of the step, their latents and anchors, and the aligned supervision."""

    idx: list[int]
    lats: list[torch.Tensor]
    anchors: list[Any]
    al: Any
    """:func:`~lopd.supervision.align_supervision` of the rows."""
    mask: torch.Tensor
    targets: torch.Tensor


def step_rows(ctx: LearnerContext, cfg: Any, n_latents: int, rs: list, tasks: dict,
              exps: dict[str, list[str]], pieces: dict[int, str], beta: float) -> StepRows:
    """Student rows and teacher rows (latent placeholders where experiences were retrieved; a task without
    any, or whose text holds the sentinel, keeps the plain prompt, or is dropped: ``cfg.unretrieved``).
    ``pieces``: the learner's token-text cache for the tool-call scope; ``beta``: the dual variable before
    this step's update, which the step's loss uses; ``cfg``: the learner's LOPDLearnerConfig."""
    t_rows, t_masks, t_pos = teacher_rows(ctx.tokenizer, rs, exps, n_latents, cfg.framing, ctx.template_kwargs)
    s_rows, s_masks = [r.traj.token_ids for r in rs], [r.traj.loss_mask for r in rs]
    keep = [bool(p) or cfg.unretrieved == "plain_teacher" for p in t_pos]
    s_masks = [m if k else [0] * len(m) for m, k in zip(s_masks, keep)]
    t_masks = [m if k else [0] * len(m) for m, k in zip(t_masks, keep)]
    scope = scope_tokens(ctx.tokenizer, s_rows, s_masks, cfg.margin.token_scope, pieces)
    n_tok, n_seq, n_roll = sum_floats([sum(map(sum, s_masks)), seq_count(s_masks), sum(keep)], ctx.dist)
    rewards = torch.tensor([min(max(r.reward, 0.0), 1.0) for r in rs])
    return StepRows(rs, tasks, exps, s_rows, s_masks, t_rows, t_masks, t_pos, scope, keep, rewards, n_tok, n_seq,
                    n_roll, beta)
