"""A reference LOPD step: one process, one batch, no caches, top to bottom.

This file is the documentation of :class:`harness.learners.lopd.LOPDLearner`; the learner is the
fast path. Both compute the same losses and gradients (tests/harness/learners/test_lopd_reference.py
checks it in float64). What the learner adds is only speed and memory, never a different number
beyond rounding:

- micro-batches (a task's rollouts kept together) with the composer's backward per micro-batch,
  each loss scaled by the step's global counts so the micro-batches' gradients add up to these;
- the teacher's prompt before the first latent run without a graph as a KV-cache prefix, once per
  distinct prefix (an env's system prompt and tools), instead of the full forward here;
- the LM head run only at the supervised positions, instead of all logits gathered afterwards;
- anchor latents c_phi0 cached across steps, instead of encoded afresh here;
- sums over ranks (``harness.distributed``), where this file sees the whole step.

One step (the paper's method), with every number from ``cfg`` (a :class:`~harness.learners.lopd.LOPDLearnerConfig`):

1. retrieve each task's top experiences from the bank;
2. build each rollout's teacher row: its prompt with a run of latent placeholders framed into
   the first user message, then the student's tokens after the prompt;
3. encode each task's experiences into latents c_phi (with gradients) and anchors c_phi0;
4. run the frozen teacher (the composer's backbone, adapter off) with the latents spliced in;
5. score the student and take the distillation loss over the step's supervised tokens;
6. take the composer's loss mean_i [kl_i + beta (m - Delta_i) + lambda anchor_i];
7. differentiate both losses and compute the dual variable's next value.

Nothing is updated: the gradients come back as tensors (``p.grad`` stays untouched), no optimiser
steps, the dual variable and the bank are only read. Usage::

    ref = reference_step_of(learner, batch)     # before learner.train_step(batch)
    ref.student_loss, ref.student_grads["model.norm.weight"], ref.beta_next
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from harness.learners.base import Rollout, StepBatch
from harness.learners.common import pad_id, pad_rows
from harness.learners.latent_teacher import latent_teacher_prompt
from harness.learners.lopd import LOPDLearner, LOPDLearnerConfig
from harness.learners.privileged import retrieve_texts
from lopd.composer import Composer
from lopd.latent import inject_batch
from lopd.losses import distill_per_token, reduce_tokens, teacher_topk, upcast
from lopd.margin import ComposerTerms, DualVariable, composer_loss, composer_terms
from lopd.supervision import align_supervision, aligned_subset, tool_call_tokens


@dataclass
class ReferenceStep:
    """One LOPD step's losses, gradients and dual update, nothing applied."""

    student_loss: float
    """The distillation loss: sum of per-token KLs / the step's supervised-token count."""
    composer_loss: float
    """mean_i [kl_i + beta (m - Delta_i) + lambda anchor_i] over the step's rollouts."""
    student_grads: dict[str, Tensor]
    """d student_loss / d p for the student's trainable parameters, by name (zeros if unused)."""
    composer_grads: dict[str, Tensor]
    """d composer_loss / d p for the LoRA and QFormer parameters, by name ({} if frozen)."""
    mean_delta: float
    """The step's mean Delta (per ``cfg.margin.dual_mean``)."""
    beta: float
    """beta used in the loss (from before the step)."""
    beta_next: float
    """max(0, beta + eta (m - mean Delta)): the dual variable after the step."""
    n_tokens: float
    """Supervised tokens of the step."""
    no_latent_frac: float
    """Rollouts whose teacher saw the plain prompt (no experience retrieved)."""


def retrieve(bank: Any, tasks: list, cfg: LOPDLearnerConfig, env_id: str) -> dict[str, list[str]]:
    """Phase 1. Experience texts per task id, best first: the bank's top ``n_retrieved`` for the
    task's prompt within this env, the task's own entries excluded unless ``allow_self_retrieval``."""
    texts = retrieve_texts(bank, [t.prompt for t in tasks], [t.task_id for t in tasks], env_id, cfg)
    return {t.task_id: row for t, row in zip(tasks, texts)}


def teacher_rows(rollouts: list[Rollout], exps: dict[str, list[str]], n_latents: int, tokenizer: Any,
                 cfg: LOPDLearnerConfig, template_kwargs: dict[str, Any]) -> tuple[list, list, list]:
    """Phase 2. Per rollout: teacher row, its loss mask and its latent placeholder positions.

    The teacher's prompt is the student's prompt with the framing (``cfg.framing``) and one
    placeholder per latent (``n_latents`` per experience) in the first user message; after it come
    the student's tokens past its own prompt, so the supervised tokens are the same. A rollout
    whose task has no experience, or whose task text holds the sentinel, keeps the student's own
    prompt and gets no latents (positions [])."""
    rows, masks, positions = [], [], []
    for r in rollouts:
        n = len(exps[r.task.task_id]) * n_latents
        prompt = (latent_teacher_prompt(tokenizer, r.traj.episode, n, cfg.framing, template_kwargs)
                  if n else None)
        ids, pos = prompt if prompt is not None else (r.traj.token_ids[:r.prompt_len], [])
        rows.append(list(ids) + r.traj.token_ids[r.prompt_len:])
        masks.append([0] * len(ids) + r.traj.loss_mask[r.prompt_len:])
        positions.append(list(pos))
    return rows, masks, positions


def encode(composer: Composer, task: str, experiences: list[str],
           params: dict[str, Tensor] | None = None) -> Tensor:
    """Phase 3. One task's latent context [len(experiences) * n_latents, d], in retrieval order:
    each experience (after the task prefix, ``composer.encoder_ids``) through the LoRA'd backbone
    and the QFormer, one encoder forward each. ``params``: the composer's trainable parameters
    replaced by these (the anchor c_phi0), without gradients."""
    device = composer.qformer.queries.device
    out = []
    for e in experiences:
        ids = torch.tensor([composer.encoder_ids(task, e)], device=device)
        if params is None:
            out.append(composer(ids)[0])
        else:
            with torch.no_grad():
                out.append(torch.func.functional_call(composer, params, (ids,), strict=False)[0])
    return torch.cat(out) if out else composer.qformer.queries.new_zeros(0, composer.qformer.d)


def teacher_logits_at(composer: Composer, rows: list[list[int]], positions: list[list[int]],
                      latents: list[Tensor], at: Tensor, pad: int) -> Tensor:
    """Phase 4. The frozen teacher's logits [B, N, V] at ``at`` [B, N]: token embeddings with the
    placeholders replaced by the latents (``inject_batch``, so gradients reach them), then ONE plain
    forward over the whole padded batch with the adapter disabled (the teacher is the initial model)."""
    device = composer.qformer.queries.device
    ids, attn = pad_rows(rows, pad, device)
    embeds = inject_batch(composer.input_embeddings()(ids), positions,
                          [lat if lat.numel() else None for lat in latents])
    with composer.teacher_mode() as lm:
        logits = lm(inputs_embeds=embeds, attention_mask=attn, use_cache=False).logits
    return upcast(logits[torch.arange(len(rows), device=device)[:, None], at.to(device)])


def student_logits_at(student: nn.Module, rows: list[list[int]], at: Tensor, pad: int) -> Tensor:
    """Phase 5. The student's logits [B, N, V] at ``at`` [B, N], one plain forward (with gradients)."""
    device = next(student.parameters()).device
    ids, attn = pad_rows(rows, pad, device)
    logits = student(input_ids=ids, attention_mask=attn, use_cache=False).logits
    return upcast(logits[torch.arange(len(rows), device=device)[:, None], at.to(device)])


def gradients(loss: Tensor, named: list[tuple[str, nn.Parameter]]) -> dict[str, Tensor]:
    """Phase 7. d loss / d p by name, WITHOUT touching ``p.grad`` (zeros where p is unused)."""
    if not named:
        return {}
    params = [p for _, p in named]
    grads = (torch.autograd.grad(loss, params, allow_unused=True) if loss.requires_grad
             else [None] * len(params))
    return {n: torch.zeros_like(p) if g is None else g for (n, p), g in zip(named, grads)}


def compose(composer: Composer, rs: list, tasks: list, exps: dict[str, list[str]], t_pos: list[list[int]],
            cfg: LOPDLearnerConfig) -> tuple[list[Tensor], list[Tensor]]:
    """Phase 3. Latents c_phi (with gradients when the composer trains) and anchors c_phi0, encoded
    once per task and listed per rollout; a rollout with a plain prompt (no placeholders) gets an
    empty context: no latent, no anchor term."""
    anchor_params = composer.trainable_state_dict()["anchor"]
    lat, anc = {}, {}
    for t in tasks:
        with torch.set_grad_enabled(cfg.train_composer):
            lat[t.task_id] = encode(composer, t.prompt, exps[t.task_id])
        anc[t.task_id] = (encode(composer, t.prompt, exps[t.task_id], anchor_params)
                          if cfg.margin.anchor_weight else lat[t.task_id].detach())
    empty = composer.qformer.queries.new_zeros(0, composer.qformer.d)
    return ([lat[r.task.task_id] if pos else empty for r, pos in zip(rs, t_pos)],
            [anc[r.task.task_id] if pos else empty for r, pos in zip(rs, t_pos)])


def composer_mask(tokenizer: Any, rows: list[list[int]], masks: list[list[int]], cfg: LOPDLearnerConfig) -> Tensor:
    """Phase 6. The supervised positions kl_i and Delta_i average over, in the alignment's layout: all of
    them, or (``margin.token_scope=tool_call``) those inside a tool-call block, each token decoded alone."""
    scope = masks if cfg.margin.token_scope == "assistant" else [
        tool_call_tokens([tokenizer.decode([i]) for i in row], m) for row, m in zip(rows, masks)]
    return aligned_subset(masks, scope)


def dual_step(cfg: LOPDLearnerConfig, beta: float, delta: Tensor, counts: Tensor) -> tuple[float, float]:
    """Phase 7. (mean Delta of the supervised rollouts, the dual variable after its ascent step from
    ``beta``), computed on a fresh variable (the learner's is only read); no rollout: (0, beta)."""
    if not delta.numel():
        return 0.0, beta
    dual = DualVariable(cfg.margin)
    dual.value = beta
    mean_delta = dual.mean_delta(delta, counts)
    return mean_delta, dual.step(mean_delta)


def reference_lopd_step(batch: StepBatch, *, student: nn.Module, composer: Composer, bank: Any,
                        tokenizer: Any, cfg: LOPDLearnerConfig, beta: float, env_id: str,
                        template_kwargs: dict[str, Any] | None = None) -> ReferenceStep:
    """One LOPD step on ``batch`` (the whole step's rollouts), the plain way; see the module docstring.

    ``student``: the causal LM being trained; ``composer``: backbone (= frozen teacher) + LoRA +
    QFormer, its anchor c_phi0 set; ``bank``: the experience bank (``search``); ``beta``: the dual
    variable's value before the step; ``env_id``: the env retrieval is restricted to.
    """
    rs, tkw = batch.rollouts, dict(template_kwargs or {})
    if not rs:
        raise ValueError("an LOPD step needs at least one rollout")
    pad = pad_id(tokenizer)

    # 1. retrieval, once per distinct task (a task's G rollouts share it)
    tasks = list({r.task.task_id: r.task for r in rs}.values())
    exps = retrieve(bank, tasks, cfg, env_id)

    # 2. teacher rows with latent placeholders; supervised tokens aligned one to one with the student's;
    #    with unretrieved=drop a rollout without latents is not supervised
    s_rows, s_masks = [r.traj.token_ids for r in rs], [r.traj.loss_mask for r in rs]
    t_rows, t_masks, t_pos = teacher_rows(rs, exps, composer.n_latents, tokenizer, cfg, tkw)
    keep = [bool(p) or cfg.unretrieved == "plain_teacher" for p in t_pos]
    s_masks, t_masks = ([m if k else [0] * len(m) for m, k in zip(ms, keep)] for ms in (s_masks, t_masks))
    al = align_supervision(s_rows, s_masks, t_rows, t_masks)
    n_tok = float(sum(map(sum, s_masks)))  # the step's supervised tokens: the student's normaliser
    n_seq = float(sum(1 for m in s_masks if any(m)))

    # 3. latents c_phi (with gradients) and anchors c_phi0 per rollout
    train = cfg.train_composer
    lats, ancs = compose(composer, rs, tasks, exps, t_pos, cfg)

    # 4. the teacher, one full forward; its top-k (ids, log-probs) is what the student is distilled on
    with torch.set_grad_enabled(train):
        t_logits = teacher_logits_at(composer, t_rows, t_pos, lats, al.teacher_pos, pad)
    top_ids, top_logp = teacher_topk(t_logits.detach(), cfg.distill.top_k)

    # 5. the student and its loss: KL(student || teacher) per supervised token, summed, / n_tok
    s_logits = student_logits_at(student, s_rows, al.student_pos, pad)
    mask = al.mask.to(s_logits.device)
    per_tok = distill_per_token(s_logits, cfg.distill, teacher_ids=top_ids, teacher_logp=top_logp,
                                teacher_logits=t_logits.detach())
    s_loss = reduce_tokens(per_tok, mask, cfg.distill.reduction, count=n_tok, n_sequences=n_seq)

    # 6. the composer's loss, the student detached; beta from before this step; mean over ALL kept
    #    rollouts; kl_i and Delta_i over the tokens of margin.token_scope
    rewards = torch.tensor([min(max(r.reward, 0.0), 1.0) for r in rs], device=t_logits.device)
    c_mask = composer_mask(tokenizer, s_rows, s_masks, cfg).to(mask.device)
    kept = torch.tensor(keep, device=mask.device)
    with torch.set_grad_enabled(train):
        terms = composer_terms(t_logits, s_logits.detach(), al.targets, c_mask, rewards, lats, ancs,
                               top_k=cfg.distill.top_k, topk_ids=top_ids)
        terms = ComposerTerms(terms.kl[kept], terms.delta[kept], terms.anchor[kept])
        c_loss, _ = composer_loss(terms, beta, cfg.margin)

    # 7. both backwards (into separate graphs: the student's and the teacher's latents'), and the
    #    dual variable's ascent step beta <- max(0, beta + eta (m - mean Delta)), computed, not applied
    s_named = [(n, p) for n, p in student.named_parameters() if p.requires_grad]
    c_named = list(composer.named_trainable_parameters()) if train else []
    s_grads, c_grads = gradients(s_loss, s_named), gradients(c_loss, c_named)
    mean_delta, beta_next = dual_step(cfg, beta, terms.delta, c_mask[kept].sum(-1))
    return ReferenceStep(student_loss=float(s_loss.detach()), composer_loss=float(c_loss.detach()),
                         student_grads=s_grads, composer_grads=c_grads, mean_delta=mean_delta, beta=beta,
                         beta_next=beta_next, n_tokens=n_tok, no_latent_frac=sum(1 for p in t_pos if not p) / len(rs))


def reference_step_of(learner: LOPDLearner, batch: StepBatch) -> ReferenceStep:
    """:func:`reference_lopd_step` on an :class:`~harness.learners.lopd.LOPDLearner`'s parts (its
    student, composer, bank, tokenizer, config and current beta), read only: none of the learner's
    methods or caches is used and nothing of it changes."""
    ctx = learner.ctx
    return reference_lopd_step(batch, student=ctx.student, composer=learner.composer, bank=learner.bank,
                               tokenizer=ctx.tokenizer, cfg=learner.cfg, beta=learner.dual.value,
                               env_id=ctx.env_id, template_kwargs=ctx.template_kwargs)
