"""LOPD's composer side: building it from its cold-start file, its latents and anchors per task, and its
clipped optimiser step. The learner (:mod:`harness.learners.lopd`) calls these once per step or micro-batch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from harness.distributed import DistInfo, sync_gradients
from harness.learners.base import LearnerContext
from harness.learners.common import Timer
from lopd.coldstart import clip_composer_grads
from lopd.composer import Composer
from lopd.margin import ComposerTerms, TokenLogProbs, composer_loss, composer_terms_of
from lopd.supervision import tool_call_tokens

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


def build_composer(ctx: LearnerContext, cfg: Any) -> Composer:
    """The composer of LOPD section ``cfg`` over a frozen copy of the student, from ``cfg.composer_init``.

    The init file is checked first: a random QFormer's latents (row norms ~11 against ~0.2 for the token
    embeddings) would drown the teacher's prompt without a word."""
    check_composer_init(cfg.composer_init)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.composer_seed)
        composer = Composer(ctx.frozen_copy(), ctx.tokenizer, cfg.composer).to(ctx.device)
    if cfg.composer_init != RANDOM_COMPOSER:
        composer.load_trainable_state_dict(torch.load(cfg.composer_init, map_location=ctx.device))
    composer.set_trainable(cfg.train_composer)
    return composer


def compose_latents(composer: Composer, prompts: list[str], exps: list[list[str]], task_ids: list[str], cfg: Any,
                    timer: Timer) -> tuple[dict, dict]:
    """Latents c_phi (with gradients when the composer trains) and anchors c_phi0, per task id."""
    with timer("composer"), torch.set_grad_enabled(cfg.train_composer):
        lat = dict(zip(task_ids, composer.encode(prompts, exps)))
    with timer("composer"):
        if cfg.margin.anchor_weight:
            with torch.no_grad():
                anchor = dict(zip(task_ids, composer.encode(prompts, exps, anchor=True)))
        else:
            anchor = {k: v.detach() for k, v in lat.items()}
    return lat, anchor


def composer_step(composer: Composer, optimizer: torch.optim.Optimizer, grad_clip: float | None, dist: DistInfo,
                  timer: Timer) -> dict[str, float]:
    """Sum the composer's gradients over ranks, clip, step (skipped when a norm is not finite)."""
    with timer("composer"):
        sync_gradients(composer.trainable_parameters(), dist)
        norms = clip_composer_grads(composer, grad_clip)
        finite = all(torch.isfinite(torch.tensor(v)) for v in norms.values())
        if finite:
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    moved = {f"composer/{k}_moved": v for k, v in composer.moved_from_anchor().items()}
    return {f"composer/{k}": v for k, v in norms.items()} | {"composer/skipped_update": float(not finite)} | moved


def scope_tokens(tokenizer: Any, rows: list[list[int]], masks: list[list[int]], scope: str,
                 pieces: dict[int, str]) -> list[list[int]]:
    """Per token of each row, whether the composer's kl_i and Delta_i count it (``margin.token_scope``):
    every supervised token (``assistant``) or those of its tool-call blocks (``tool_call``). ``pieces``
    caches each token id's text across steps."""
    if scope == "assistant":
        return masks
    out = []
    for ids, mask in zip(rows, masks):
        for i in set(ids) - pieces.keys():
            pieces[i] = tokenizer.decode([i])
        out.append(tool_call_tokens([pieces[i] for i in ids], mask))
    return out


def composer_backward(teacher: TokenLogProbs, s_logp: torch.Tensor, c_mask: torch.Tensor, kept: torch.Tensor,
                      rewards: torch.Tensor, lats: list, anchors: list, beta: float, n_roll: float, margin: Any,
                      train: bool) -> dict[str, float]:
    """The composer's loss over a micro-batch's ``kept`` rollouts, as their share of the mean over the step's
    ``n_roll`` kept rollouts, and (``train``) its backward through the teacher into the latents, the QFormer
    and the LoRA. ``s_logp``: the student's detached log-probs at the teacher's top-k, then at the sampled
    token; ``c_mask``: the tokens kl_i and Delta_i count. Returns the additive metrics."""
    with torch.set_grad_enabled(train):
        k = teacher.topk.shape[-1]
        terms = composer_terms_of(teacher, TokenLogProbs(s_logp[..., :k], s_logp[..., k]), c_mask, rewards, lats,
                                  anchors)
        terms = ComposerTerms(terms.kl[kept], terms.delta[kept], terms.anchor[kept])
        c_loss, _ = composer_loss(terms, beta, margin)
        c_loss = c_loss * (int(kept.sum()) / max(n_roll, 1.0))  # mean over ALL kept rollouts of the step
        if train and c_loss.requires_grad:
            c_loss.backward()
    with torch.no_grad():
        counts = c_mask[kept].sum(-1).to(terms.delta.device).float()
        return {"c_loss": float(c_loss), "c_kl": float(terms.kl.sum()), "delta": float(terms.delta.sum()),
                "delta_w": float((terms.delta * counts).sum()), "count": float(counts.sum()),
                "anchor": float(terms.anchor.sum())}
