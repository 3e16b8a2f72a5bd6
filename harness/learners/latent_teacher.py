"""LOPD's latent teacher: its prompt with latent placeholders, and its forward with latents spliced in.

The teacher is the composer's frozen backbone (adapter disabled). Its forward is the hot path of an
LOPD step, so it runs the prompt before the first latent once per distinct prefix, without a graph,
as a KV cache (``lopd_reference.py`` computes the same logits with one plain forward).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import torch

from harness.engines.base import EmbedOverride
from harness.learners.common import (TeacherSide, gather_positions, prompt_messages, score_from, served_side,
                                     served_token_logprobs)
from lopd.checkpointing import is_checkpointed
from lopd.chunked import chunked_head, ids_and_targets, topk_and_targets
from lopd.composer import Composer
from lopd.latent import LatentError, encode_with_latents, frame_user_message, framing_text, inject_batch
from lopd.losses import upcast


def latent_teacher_prompt(tokenizer: Any, episode: Any, n_latents: int, framing: str,
                          template_kwargs: dict[str, Any]) -> tuple[list[int], list[int]] | None:
    """(teacher prompt ids with ``n_latents`` placeholders, their positions); None when the task
    text itself holds the sentinel (then the teacher sees the plain prompt). ``framing``: a name in
    :data:`lopd.latent.FRAMINGS` or a text."""
    msgs, framing = prompt_messages(episode), framing_text(framing)  # a bad framing raises, never drops the latents
    for m in msgs:
        if m.get("role") == "user":
            try:
                m["content"] = frame_user_message(str(m.get("content") or ""), framing=framing)
            except LatentError:
                return None
            break
    text = tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True, **template_kwargs)
    enc = encode_with_latents(tokenizer, text, n_latents)
    return enc.ids, enc.positions


def _new_cache(config: Any) -> Any:
    from transformers import DynamicCache

    try:
        return DynamicCache(config=config)
    except TypeError:  # older transformers
        return DynamicCache()


def _distinct_rows(prefix: torch.Tensor) -> tuple[list[int], list[int]]:
    """(index of the first row of each distinct row of ``prefix`` [B, L], each row's distinct index).

    >>> _distinct_rows(torch.tensor([[1, 2], [3, 4], [1, 2]]))
    ([0, 1], [0, 1, 0])
    """
    seen: dict[tuple[int, ...], int] = {}
    rep, inv = [], []
    for i, row in enumerate(prefix.tolist()):
        j = seen.setdefault(tuple(row), len(rep))
        if j == len(rep):
            rep.append(i)
        inv.append(j)
    return rep, inv


def _cache_kw(decoder: Any) -> str:
    """transformers 5 names the KV-cache argument ``cache``; 4.x ``past_key_values``."""
    import inspect

    return "cache" if "cache" in inspect.signature(decoder.forward).parameters else "past_key_values"


def latent_teacher_logits(composer: Composer, ids: torch.Tensor, attn: torch.Tensor, positions: list[list[int]],
                          latents: list[torch.Tensor | None], at: torch.Tensor,
                          at_mask: torch.Tensor | None = None) -> torch.Tensor:
    """The teacher's logits [B, N, V] (fp32) at ``at``: :func:`latent_teacher_hidden` through its head.
    The learner never makes them whole (:mod:`lopd.chunked`); this is for tests and small vocabularies."""
    return upcast(teacher_head(composer)(latent_teacher_hidden(composer, ids, attn, positions, latents, at, at_mask)))


def teacher_head(composer: Composer) -> torch.nn.Module:
    """The frozen teacher's LM head. It carries no adapter (the LoRA is on the decoder's projections),
    so it is the teacher's head outside ``teacher_mode`` too, where a checkpointed chunk's backward
    recomputes it."""
    head = composer.backbone.get_output_embeddings()
    if any("lora_" in n for n, _ in head.named_parameters()):
        raise ValueError("the composer's LoRA must not target the LM head (the teacher's head is used bare)")
    return head


def latent_teacher_hidden(composer: Composer, ids: torch.Tensor, attn: torch.Tensor, positions: list[list[int]],
                          latents: list[torch.Tensor | None], at: torch.Tensor,
                          at_mask: torch.Tensor | None = None) -> torch.Tensor:
    """The composer's frozen teacher's last hidden states [B, N, d] at ``at`` (``at_mask``: which
    entries are real), latents spliced in (grads reach them); its logits are
    ``teacher_head(composer)`` of them.

    The activations before the first latent do not depend on the composer, so with gradients on
    they are computed without a graph and enter as a KV cache: the same logits and latent
    gradients, with backward work only over the tokens from the first latent on (not with
    ``model.gradient_checkpointing``, whose layers keep only their inputs over the whole sequence).
    Rows that start with the same tokens up to there (an env's system prompt and tools) share one
    run of that prefix, its cache copied to each of them.
    """
    embeds = inject_batch(composer.input_embeddings()(ids), positions, latents)
    real = at[at_mask.to(at.device)] if at_mask is not None else at.reshape(-1)
    split = min([p[0] for p in positions if p] + [int(real.min()) if real.numel() else 0, ids.shape[1] - 1])
    rep, inv = _distinct_rows(ids[:, :split]) if split > 1 and bool(attn[:, :split].all()) else (None, None)
    shared = rep is not None and len(rep) < ids.shape[0]
    with composer.teacher_mode() as lm:
        dec = lm.get_decoder()
        # checkpointed layers would not checkpoint a call that writes a cache: they take the whole sequence
        prefix_cache = not (torch.is_grad_enabled() and is_checkpointed(dec.layers[0]))
        if split > 1 and prefix_cache and (torch.is_grad_enabled() or shared):
            cache = _new_cache(lm.config)
            pre = torch.tensor(rep, device=ids.device) if shared else slice(None)
            with torch.no_grad():
                dec(inputs_embeds=embeds[pre, :split], attention_mask=attn[pre, :split], use_cache=True,
                    **{_cache_kw(dec): cache})
            if shared:
                cache.reorder_cache(torch.tensor(inv, device=ids.device))  # one prefix row per batch row
            pos = torch.arange(split, ids.shape[1], device=ids.device).unsqueeze(0).expand(ids.shape[0], -1)
            h = dec(inputs_embeds=embeds[:, split:], attention_mask=attn, position_ids=pos, use_cache=True,
                    **{_cache_kw(dec): cache}).last_hidden_state
            at = (at - split).clamp_min(0)  # padded entries of `at` (at_mask False) are 0
        else:
            h = dec(inputs_embeds=embeds, attention_mask=attn, use_cache=False).last_hidden_state
        return gather_positions(h, at)


def latent_teacher_topk(composer: Composer, hidden: torch.Tensor, targets: torch.Tensor, top_k: int, chunk: int,
                        full_vocab: bool) -> tuple[TeacherSide, torch.Tensor, torch.Tensor]:
    """From the teacher's final hidden states: what the student's loss reads (detached), and the teacher's
    log-probs at its top-k and at the sampled ``targets``, chunk by chunk of positions (gradients into the
    latents when ``hidden`` has a graph; the backward recomputes each chunk's logits)."""
    head = teacher_head(composer)
    top_ids, t_top, t_tgt = chunked_head(head, hidden, partial(topk_and_targets, k=top_k), targets, chunk=chunk)
    return TeacherSide(top_ids, t_top.detach(), hidden.detach() if full_vocab else None, head), t_top, t_tgt


def latent_teacher_at(composer: Composer, hidden: torch.Tensor, top_ids: torch.Tensor, targets: torch.Tensor,
                      chunk: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The teacher's log-probs at given ``top_ids`` (an earlier pass's top-k) and at ``targets``."""
    return chunked_head(teacher_head(composer), hidden, ids_and_targets, top_ids, targets, chunk=chunk)


def teacher_rows(tokenizer: Any, rollouts: list, exps: dict[str, list[str]], n_latents: int, framing: str,
                 template_kwargs: dict[str, Any]) -> tuple[list[list[int]], list[list[int]], list[list[int]]]:
    """(ids, loss masks, latent positions) of the teacher's row of each rollout: its prompt framed with
    ``n_latents`` placeholders per retrieved experience, then the rollout's tokens. A task without any
    experience, or whose text holds the sentinel, keeps the plain prompt (its ``exps`` entry is emptied)."""
    t_rows, t_masks, t_pos = [], [], []
    for r in rollouts:
        n = len(exps[r.task.task_id]) * n_latents
        prompt = latent_teacher_prompt(tokenizer, r.traj.episode, n, framing, template_kwargs) if n else None
        if prompt is None:
            exps[r.task.task_id] = []
            prompt = (r.traj.token_ids[:r.prompt_len], [])
        t_rows.append(prompt[0] + r.traj.token_ids[r.prompt_len:])
        t_masks.append([0] * len(prompt[0]) + r.traj.loss_mask[r.prompt_len:])
        t_pos.append(prompt[1])
    return t_rows, t_masks, t_pos


def served_latent_teacher(engine: Any, rows: list[list[int]], starts: list[int], positions: list[list[int]],
                          lats: list[torch.Tensor], teacher_pos: Any, top_k: int,
                          device: torch.device) -> tuple[TeacherSide, torch.Tensor]:
    """(top-k side, log-probs of the sampled tokens) of the latent teacher from teacher servers, scoring
    each row from its ``starts`` entry: the latents travel as embedding overrides (SGLang's ``input_embeds``;
    vLLM 0.32 refuses them)."""
    ovs = [EmbedOverride(pos, lat.detach()) if pos else None for pos, lat in zip(positions, lats)]
    scores = engine.score(rows, top_k=top_k, start=score_from(rows, starts), overrides=ovs)
    at = list(range(len(rows)))
    return served_side(scores, at, teacher_pos, device), served_token_logprobs(scores, at, teacher_pos, device)
