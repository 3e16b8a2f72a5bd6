"""Code every learner shares: batching token rows, scoring supervised positions, teacher sequences.

A trajectory's training row is ``prompt | turn 1 | observation | turn 2 | ...`` with a loss mask
on the sampled tokens (:mod:`harness.rollout`). A teacher row swaps the prompt for one holding
privileged context and keeps everything after it, so the supervised tokens line up one to one
(:func:`lopd.supervision.align_supervision`)::

    t_prompt = render_prompt(tok, with_context(ep.messages, oracle_text, "system", framing))
    t_rows, t_masks = teacher_rows(rollouts, [t_prompt] * len(rollouts))
    al = align_supervision(s_rows, s_masks, t_rows, t_masks)
    s_logits = scorer(*pad_rows(s_rows, pad), positions=al.student_pos)     # [B, N, V]
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from torch import Tensor, nn

from harness.rollout import render_prompt
from lopd.chunked import chunked_head
from lopd.losses import upcast


class TokenScorer(nn.Module):
    """A causal LM scored only at requested positions [B, N] of its rows [B, T].

    Without ``per_chunk`` it returns logits [B, N, V] (fp32). With it, the LM head runs over
    chunks of positions, each chunk's logits reduced at once (:func:`lopd.chunked.chunked_head`):
    ``scorer(ids, attn, positions=pos, per_chunk=token_log_probs, args=(targets,))`` -> [B, N], and
    no [N, V] logits exist (the real vocabulary's memory). Either way [B, T, V] never materialises.
    Wrap this module (not the LM) for FSDP, so its forward, the head included, is the root forward.
    """

    def __init__(self, lm: nn.Module, logits_chunk: int | None = None):
        super().__init__()
        self.lm = lm
        self.logits_chunk = logits_chunk  # positions per head chunk; None: lopd.chunked.LOGITS_CHUNK

    @property
    def head(self) -> nn.Module:
        return self.lm.get_output_embeddings()

    def hidden(self, input_ids: Tensor | None = None, attention_mask: Tensor | None = None,
               inputs_embeds: Tensor | None = None) -> Tensor:
        return self.lm.get_decoder()(input_ids=input_ids, inputs_embeds=inputs_embeds,
                                     attention_mask=attention_mask, use_cache=False).last_hidden_state

    def hidden_at(self, input_ids: Tensor | None = None, attention_mask: Tensor | None = None, *,
                  positions: Tensor, inputs_embeds: Tensor | None = None) -> Tensor:
        """The last hidden states at ``positions`` only: [B, N, d]."""
        return gather_positions(self.hidden(input_ids, attention_mask, inputs_embeds), positions)

    def forward(self, input_ids: Tensor | None = None, attention_mask: Tensor | None = None, *,
                positions: Tensor, inputs_embeds: Tensor | None = None,
                per_chunk: Callable[..., Any] | None = None, args: Sequence[Tensor] = ()) -> Any:
        h = self.hidden_at(input_ids, attention_mask, positions=positions, inputs_embeds=inputs_embeds)
        if per_chunk is None:
            return upcast(self.head(h))
        return chunked_head(self.head, h, per_chunk, *args, chunk=self.logits_chunk)


def gather_positions(hidden: Tensor, positions: Tensor) -> Tensor:
    """``hidden`` [B, T, d] at ``positions`` [B, N] -> [B, N, d]."""
    rows = torch.arange(hidden.shape[0], device=hidden.device).unsqueeze(-1)
    return hidden[rows, positions.to(hidden.device)]


def logits_at(lm: nn.Module, hidden: Tensor, positions: Tensor) -> Tensor:
    """``lm``'s head on ``hidden`` [B, T, d] at ``positions`` [B, N] only -> logits [B, N, V], fp32
    (or float64): the supervised positions, never all T."""
    return upcast(lm.get_output_embeddings()(gather_positions(hidden, positions)))


def clone_model(model: nn.Module, state: dict[str, Tensor]) -> nn.Module:
    """A frozen eval-mode copy of ``model``'s architecture holding ``state``."""
    twin = copy.deepcopy(model)
    twin.load_state_dict(state, strict=False)
    twin.requires_grad_(False)
    return twin.eval()


def pad_rows(rows: Sequence[Sequence[int]], pad_id: int, device: torch.device | str = "cpu") -> tuple[Tensor, Tensor]:
    """Right-padded ids [B, T] and attention mask [B, T]."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros(len(rows), width, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, :len(r)] = torch.as_tensor(list(r), dtype=torch.long)
        mask[i, :len(r)] = 1
    return ids.to(device), mask.to(device)


def micro_batches(lengths: Sequence[int], token_budget: int, groups: Sequence[Any] | None = None) -> list[list[int]]:
    """Split indices 0..n-1, in order, into groups whose padded size (rows x longest) stays
    within ``token_budget`` (a longer single row still gets a group of its own). With ``groups``
    (one key per index, equal keys consecutive), the indices of one key are never split.

    >>> micro_batches([4, 4, 4, 9], 12)
    [[0, 1, 2], [3]]
    >>> micro_batches([4, 4, 4, 9], 8), micro_batches([4, 4, 4, 9], 8, groups=["a", "b", "b", "c"])
    ([[0, 1], [2], [3]], [[0], [1, 2], [3]])
    """
    units: list[list[int]] = []
    for i in range(len(lengths)):
        if groups is not None and units and groups[units[-1][-1]] == groups[i]:
            units[-1].append(i)
        else:
            units.append([i])
    out: list[list[int]] = []
    cur: list[int] = []
    width = 0
    for unit in units:
        w = max([width] + [lengths[i] for i in unit])
        if cur and w * (len(cur) + len(unit)) > token_budget:
            out.append(cur)
            cur, w = [], max(lengths[i] for i in unit)
        cur += unit
        width = w
    if cur:
        out.append(cur)
    return out


def dummy_pass(scorer: nn.Module, device: torch.device) -> Tensor:
    """A zero loss through a 2-token forward (keeps FSDP ranks in step)."""
    ids = torch.zeros(1, 2, dtype=torch.long, device=device)
    return scorer(ids, torch.ones_like(ids), positions=torch.zeros(1, 1, dtype=torch.long)).sum() * 0.0


def pad_id(tokenizer: Any) -> int:
    pid = getattr(tokenizer, "pad_token_id", None)
    return int(pid if pid is not None else tokenizer.eos_token_id)


# ---- privileged context -------------------------------------------------------------------

def with_context(messages: list[dict[str, Any]], context: str, slot: str, framing: str) -> list[dict[str, Any]]:
    """A copy of ``messages`` with ``framing`` (holding ``{context}``, and for the user slot
    ``{task}``) placed in the system message (appended) or the first user message (wrapping it).

    >>> m = [{"role": "system", "content": "S"}, {"role": "user", "content": "T"}]
    >>> with_context(m, "X", "user", "Ref: {context}\\nTask: {task}")[1]["content"]
    'Ref: X\\nTask: T'
    """
    out = copy.deepcopy(messages)
    if slot == "system":
        text = framing.replace("{context}", context)
        for m in out:
            if m.get("role") == "system":
                m["content"] = f"{m.get('content') or ''}{text}"
                return out
        return [{"role": "system", "content": text.lstrip()}] + out
    if slot == "user":
        for m in out:
            if m.get("role") == "user":
                m["content"] = framing.replace("{context}", context).replace("{task}", str(m.get("content") or ""))
                return out
        raise ValueError("the conversation has no user message to put the context in")
    raise ValueError(f"context slot must be 'system' or 'user', not {slot!r}")


def prompt_messages(episode: Any) -> list[dict[str, Any]]:
    """Copies of the messages before the first assistant turn (what the student's prompt rendered)."""
    out = []
    for m in episode.messages:
        if m.get("role") == "assistant":
            break
        out.append(copy.deepcopy(m))
    return out


def teacher_prompt(tokenizer: Any, episode: Any, context: str, slot: str, framing: str,
                   template_kwargs: dict[str, Any]) -> list[int]:
    """Token ids of the episode's prompt with the privileged context framed in."""
    return render_prompt(tokenizer, with_context(prompt_messages(episode), context, slot, framing), **template_kwargs)


def teacher_rows(rollouts: Sequence[Any], prompts: Sequence[Sequence[int]]) -> tuple[list[list[int]], list[list[int]]]:
    """Teacher rows = each teacher prompt + the student's tokens after its own prompt, and masks."""
    rows, masks = [], []
    for r, p in zip(rollouts, prompts):
        n = r.prompt_len
        rows.append(list(p) + list(r.traj.token_ids[n:]))
        masks.append([0] * len(p) + list(r.traj.loss_mask[n:]))
    return rows, masks


# ---- bookkeeping -------------------------------------------------------------------------

class Timer:
    """Accumulates seconds per phase: ``with timer("teacher"): ...``; ``timer.metrics()``.

    Wall-clock seconds as ``time/<phase>``; with ``Timer.with_cpu = True`` (benchmarks) also this
    process's CPU seconds as ``cpu/<phase>``, which a crowded machine disturbs far less.
    """

    with_cpu = False

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.cpu: dict[str, float] = {}

    @contextmanager
    def __call__(self, phase: str) -> Iterator[None]:
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self.seconds[phase] = self.seconds.get(phase, 0.0) + time.perf_counter() - t0
            self.cpu[phase] = self.cpu.get(phase, 0.0) + time.process_time() - c0

    def metrics(self) -> dict[str, float]:
        out = {f"time/{k}": v for k, v in self.seconds.items()}
        if self.with_cpu:
            out.update({f"cpu/{k}": v for k, v in self.cpu.items()})
        return out


def seq_count(masks: Sequence[Sequence[int]]) -> int:
    """Rows with at least one supervised token."""
    return sum(1 for m in masks if any(m))


# ---- the shared distillation update (OPSD, SDPO) ------------------------------------------

def frozen_teacher(ctx: Any, dcfg: Any = None) -> Any:
    """The frozen initial model as a teacher: the run's teacher servers when it has them (they return
    top-k log-probs, so only a top-k + tail KL can use them), else an in-process copy."""
    if ctx.teacher_engine is None:
        return TokenScorer(ctx.frozen_copy(), ctx.scorer.logits_chunk)
    if dcfg is not None and dcfg.full_vocab:
        raise ValueError(f"teacher servers return top-k log-probs, not logits: set {ctx.cfg.learner}.distill."
                         "full_vocab=false (top-k + tail KL), or score in-process without engine.teacher_urls/"
                         "teacher_launch")
    return ctx.teacher_engine


def served_rows(scores: Sequence[Any], idx: Sequence[int], positions: Tensor) -> list[Tensor]:
    """Per row of a micro-batch, the indices into its ScoreOutput of the distributions that logits
    positions ``positions`` [B, N] would give (row ``t - start`` predicts token ``t = position + 1``);
    padded positions are clamped (their mask is 0)."""
    return [(positions[b].cpu() + 1 - scores[i].start).clamp(0, max(len(scores[i]) - 1, 0))
            for b, i in enumerate(idx)]


def served_side(scores: Sequence[Any], idx: Sequence[int], positions: Tensor, device: Any) -> TeacherSide:
    """:class:`TeacherSide` (top-k ids and log-probs) of a micro-batch from a server's scores."""
    k = scores[idx[0]].topk_ids.shape[1]
    ids = torch.zeros(*positions.shape, k, dtype=torch.long)
    logp = torch.zeros(*positions.shape, k, dtype=scores[idx[0]].topk_logprobs.dtype)
    for b, (i, rows) in enumerate(zip(idx, served_rows(scores, idx, positions))):
        if len(scores[i]):
            ids[b], logp[b] = scores[i].topk_ids[rows], scores[i].topk_logprobs[rows]
    return TeacherSide(ids.to(device), logp.to(device))


def served_token_logprobs(scores: Sequence[Any], idx: Sequence[int], positions: Tensor, device: Any) -> Tensor:
    """[B, N] the server's log-probs of the scored tokens at logits positions ``positions``."""
    out = torch.zeros(positions.shape, dtype=scores[idx[0]].token_logprobs.dtype)
    for b, (i, rows) in enumerate(zip(idx, served_rows(scores, idx, positions))):
        if len(scores[i]):
            out[b] = scores[i].token_logprobs[rows]
    return out.to(device)


def score_from(rows: Sequence[Sequence[int]], starts: Sequence[int]) -> list[int]:
    """Valid scoring starts: ``starts`` clamped to each row (a row with nothing after it scores nothing)."""
    return [max(1, min(s, len(r))) for r, s in zip(rows, starts)]


def distill_update(ctx: Any, rollouts: Sequence[Any], prompts: Sequence[Sequence[int]], teacher: Any,
                   dcfg: Any, timer: Timer) -> dict[str, float]:
    """One student step on KL(student, teacher) over the rollouts' assistant tokens.

    ``prompts[i]`` is the teacher's prompt for ``rollouts[i]`` (privileged context inside);
    ``teacher`` a frozen :class:`TokenScorer`, or an Engine of teacher servers (:func:`frozen_teacher`),
    which scores every row in one batch of requests before the update. The per-token KL is ``dcfg``'s (direction, top-k +
    tail or full vocabulary, :func:`lopd.losses.distill_per_token`), reduced over the GLOBAL
    supervised-token count. With no supervised token anywhere, nothing is updated.
    """
    from harness.distributed import sum_floats
    from lopd.losses import masked_sum, reduce_tokens
    from lopd.supervision import align_supervision

    s_rows = [r.traj.token_ids for r in rollouts]
    s_masks = [r.traj.loss_mask for r in rollouts]
    t_rows, t_masks = teacher_rows(rollouts, prompts)
    n_tok, n_seq = sum_floats([sum(map(sum, s_masks)), seq_count(s_masks)], ctx.dist)
    if n_tok == 0:
        return {"loss": 0.0, "distill_kl": 0.0, "tokens": 0.0, "grad_norm": 0.0, "skipped_update": 1.0}
    pid = pad_id(ctx.tokenizer)
    scores = None
    if not isinstance(teacher, nn.Module):
        with timer("teacher"):
            scores = teacher.score(t_rows, top_k=dcfg.top_k, start=score_from(t_rows, [len(p) for p in prompts]))

    def loss_fn(k: int, idx: list[int]) -> tuple[Tensor, dict[str, float]]:
        al = align_supervision([s_rows[i] for i in idx], [s_masks[i] for i in idx],
                               [t_rows[i] for i in idx], [t_masks[i] for i in idx])
        mask = al.mask.to(ctx.device)
        with timer("teacher"), torch.no_grad():
            if scores is not None:
                side = served_side(scores, idx, al.teacher_pos, ctx.device)
            else:
                t_ids, t_attn = pad_rows([t_rows[i] for i in idx], pid, ctx.device)
                side = teacher_side(teacher, t_ids, t_attn, al.teacher_pos, dcfg)
        with timer("student"):
            s_ids, s_attn = pad_rows([s_rows[i] for i in idx], pid, ctx.device)
            per_tok, _ = distill_tokens(ctx.scorer, s_ids, s_attn, al.student_pos, dcfg, side)
            loss = reduce_tokens(per_tok, mask, dcfg.reduction, count=n_tok, n_sequences=n_seq)
        return loss, {"kl": float(masked_sum(per_tok.detach(), mask))}

    lengths = [max(len(s_rows[i]), len(t_rows[i])) for i in range(len(rollouts))]
    sums = ctx.accumulate(lengths, loss_fn, ["kl"], timer=timer)
    with timer("student"):
        out = ctx.optimizer_step()
    return {"loss": sums["loss"], "distill_kl": sums["kl"] / n_tok, "tokens": n_tok, **out}


@dataclass
class TeacherSide:
    """What the student's distillation loss needs of the teacher at the supervised positions [B, N]."""

    ids: Tensor
    """[B, N, k] the teacher's top-k ids (top-k + tail), or [B, N, 0] where none are needed."""
    logp: Tensor | None
    """[B, N, k] their log-probs, detached (top-k + tail); None with the full vocabulary."""
    hidden: Tensor | None = None
    """[B, N, d] the teacher's last hidden states, detached (full vocabulary; else None)."""
    head: nn.Module | None = None
    """The teacher's LM head, applied to ``hidden`` chunk by chunk (full vocabulary)."""


def teacher_side(teacher: TokenScorer, ids: Tensor, attn: Tensor, positions: Tensor, dcfg: Any) -> TeacherSide:
    """Score a frozen teacher (call under ``torch.no_grad()``) for ``dcfg``'s KL: its top-k per
    position, reduced chunk by chunk; or, for the full vocabulary, its hidden states (the student's
    chunks make its logits)."""
    from functools import partial

    from lopd.losses import teacher_topk

    if dcfg.full_vocab:
        h = teacher.hidden_at(ids, attn, positions=positions)
        return TeacherSide(h.new_zeros(*h.shape[:-1], 0, dtype=torch.long), None, h, teacher.head)
    top_ids, logp = teacher(ids, attn, positions=positions, per_chunk=partial(teacher_topk, k=dcfg.top_k))
    return TeacherSide(top_ids, logp)


def distill_tokens(scorer: nn.Module, ids: Tensor, attn: Tensor, positions: Tensor, dcfg: Any,
                   teacher: TeacherSide, extra_ids: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """The student's per-token KL [B, N] (``dcfg``: direction, top-k + tail or full vocabulary; the
    values of :func:`lopd.losses.distill_per_token`), and its log-probs [B, N, k + m] at the
    teacher's k ids followed by ``extra_ids`` [B, N, m] (None: m = 0), both with gradients. The LM
    head runs over chunks of positions (:func:`lopd.chunked.chunked_head`), so neither side's
    [N, V] logits exist."""
    from lopd.chunked import full_kl_chunk
    from lopd.losses import log_probs_at, tail_kl

    k = teacher.ids.shape[-1]
    both = teacher.ids if extra_ids is None else torch.cat([teacher.ids, extra_ids.to(teacher.ids)], dim=-1)
    if dcfg.full_vocab:
        fn = full_kl_chunk(teacher.head, dcfg.direction)
        per_tok, logp = scorer(ids, attn, positions=positions, per_chunk=fn, args=(teacher.hidden, both))
    else:
        logp = scorer(ids, attn, positions=positions, per_chunk=log_probs_at, args=(both,))
        per_tok = tail_kl(logp[..., :k], teacher.logp, dcfg.direction)
    return per_tok, logp


def conversation_tokens(tokenizer: Any, messages: Sequence[dict[str, Any]],
                        template_kwargs: dict[str, Any] | None = None) -> tuple[list[int], list[int]]:
    """(token ids, loss mask) of a chat built the way rollouts build it: the prompt (up to the
    first assistant turn), then per assistant turn its content tokens + end-of-turn (supervised),
    then the template's observation delta (masked). Trailing non-assistant messages are dropped.
    """
    from harness.rollout import render_observation

    kw = dict(template_kwargs or {})
    first = next((i for i, m in enumerate(messages) if m.get("role") == "assistant"), None)
    if first is None:
        raise ValueError("the conversation has no assistant turn to learn from")
    ids = render_prompt(tokenizer, list(messages[:first]), **kw)
    mask = [0] * len(ids)
    eos = tokenizer.eos_token_id
    i = first
    while i < len(messages):
        if messages[i].get("role") == "assistant":
            toks = list(tokenizer.encode(str(messages[i].get("content") or ""), add_special_tokens=False)) + [eos]
            ids += toks
            mask += [1] * len(toks)
            i += 1
            continue
        j = i
        while j < len(messages) and messages[j].get("role") != "assistant":
            j += 1
        if j == len(messages):
            break
        obs = render_observation(tokenizer, list(messages[i:j]), **kw)
        if obs and obs[0] == eos:
            obs = obs[1:]
        ids += obs
        mask += [0] * len(obs)
        i = j
    return ids, mask
