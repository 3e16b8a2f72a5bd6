"""The LM head over chunks of positions: per-token quantities without [N, V] logits.

A Qwen3 vocabulary has 151,936 entries, so the logits of 16k supervised positions are 10 GB in
fp32, and the log-softmax and its backward make more copies. :func:`chunked_head` runs the head
on ``chunk`` positions at a time and reduces each chunk's logits at once with a function of them
(log-probs at given ids, the top-k, a KL). With gradients on, each chunk runs under activation
checkpointing, so the backward recomputes that chunk's logits instead of keeping them: the extra
memory is about chunk x V floats, whatever N. The values are the unchunked ones up to float
rounding (the head's matrix product may block its sums differently)::

    logp = chunked_head(lm.get_output_embeddings(), hidden, token_log_probs, targets)   # [B, N]
    ids, logp = chunked_head(head, hidden, partial(teacher_topk, k=20))                 # [B, N, 20]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from lopd.losses import Direction, full_kl, log_probs_at, teacher_topk, token_log_probs, upcast

LOGITS_CHUNK = 1024
"""Default positions per LM-head chunk: 1024 x 151,936 fp32 logits are 0.6 GB. ``0`` runs every
position in one chunk, without checkpointing (the unchunked computation)."""

Outputs = Tensor | tuple[Tensor, ...]


def chunked_head(head: Callable[[Tensor], Tensor], hidden: Tensor, fn: Callable[..., Outputs], *args: Tensor,
                 chunk: int | None = None) -> Outputs:
    """``fn(upcast(head(hidden)), *args)``, computed over chunks of ``chunk`` positions.

    ``hidden`` [..., d] has some leading shape L (e.g. [B, N]); each of ``args`` has leading shape
    L too and is cut with it; ``fn`` maps logits [c, V] and the args' chunks to a tensor or a tuple
    of tensors, each with leading dimension c. The result has the same structure, leading shape L.
    ``chunk``: None = :data:`LOGITS_CHUNK`; 0, or no more positions than one chunk, runs one call.
    """
    chunk = LOGITS_CHUNK if chunk is None else int(chunk)
    lead = hidden.shape[:-1]
    n = lead.numel()
    flat = [hidden.reshape(n, hidden.shape[-1])] + [a.reshape(n, *a.shape[len(lead):]) for a in args]

    def run(h: Tensor, *a: Tensor) -> Outputs:
        return fn(upcast(head(h)), *a)

    if chunk <= 0 or n <= chunk:
        return _unflatten(run(*flat), lead)
    ckpt = torch.is_grad_enabled() and _needs_grad(head, flat)
    parts = []
    for s in range(0, n, chunk):
        piece = [x[s:s + chunk] for x in flat]
        # checkpointed: the graph keeps only the chunk's inputs; the backward recomputes its logits
        parts.append(checkpoint(run, *piece, use_reentrant=False) if ckpt else run(*piece))
    out = torch.cat(parts) if isinstance(parts[0], Tensor) else tuple(torch.cat(p) for p in zip(*parts))
    return _unflatten(out, lead)


def _needs_grad(head: Any, tensors: list[Tensor]) -> bool:
    params = head.parameters() if isinstance(head, nn.Module) else ()
    return any(t.requires_grad for t in tensors) or any(p.requires_grad for p in params)


def _unflatten(out: Outputs, lead: torch.Size) -> Outputs:
    if isinstance(out, Tensor):
        return out.reshape(*lead, *out.shape[1:])
    return tuple(o.reshape(*lead, *o.shape[1:]) for o in out)


# ---- chunk functions (``fn`` of chunked_head) ----------------------------------------------------

def topk_and_targets(logits: Tensor, targets: Tensor, *, k: int) -> tuple[Tensor, Tensor, Tensor]:
    """(top-``k`` ids, their log-probs, the log-probs at ``targets``) of one chunk: what LOPD keeps of
    its teacher (:func:`~lopd.losses.teacher_topk`; gradients reach the logits through both
    log-probs)."""
    ids, logp = teacher_topk(logits, k)
    return ids, logp, token_log_probs(logits, targets)


def ids_and_targets(logits: Tensor, ids: Tensor, targets: Tensor) -> tuple[Tensor, Tensor]:
    """(the log-probs at ``ids`` [c, k], at ``targets``) of one chunk: :func:`topk_and_targets`'s log-probs at
    top-k ids found before (by a pass without a graph), so a rerun with a graph gives the same values."""
    return log_probs_at(logits, ids), token_log_probs(logits, targets)


def full_kl_chunk(teacher_head: Callable[[Tensor], Tensor],
                  direction: Direction) -> Callable[..., tuple[Tensor, Tensor]]:
    """A ``fn`` of :func:`chunked_head` for the full-vocabulary KL, run on the student's head:
    ``fn(student logits, teacher hidden, ids)`` -> (KL per position, the student's log-probs at
    ``ids`` [c, m]). The teacher's logits come from its hidden states per chunk too (recomputed in
    the backward), so neither side's [N, V] logits exist."""

    def fn(s_logits: Tensor, t_hidden: Tensor, ids: Tensor) -> tuple[Tensor, Tensor]:
        return full_kl(s_logits, upcast(teacher_head(t_hidden)), direction), log_probs_at(s_logits, ids)

    return fn
