"""Align the supervised positions of student and teacher sequences one to one.

Teacher and student sequences hold the same assistant tokens; they differ only in the context
(the teacher's has privileged text or latent slots). Only assistant tokens are supervised,
including each end-of-turn token. The logits at position p predict token p + 1, so the
supervised token at index j is scored by the logits at j - 1.

:func:`align_supervision` turns per-token supervision masks into a padded ``[B, N]`` layout of
logit positions for both sides; the models are then scored only there (the learners'
``harness.learners.common.TokenScorer`` runs the LM head on the hidden states at those positions)::

    al = align_supervision(student_ids, student_mask, teacher_ids, teacher_mask)
    s_logits = scorer(student_ids, student_attn, positions=al.student_pos)   # [B, N, V]
    t_logits = teacher(teacher_ids, teacher_attn, positions=al.teacher_pos)  # same tokens, same order
    loss = token_mean(topk_tail_kl(s_logits, *teacher_topk(t_logits, 20)), al.mask)

>>> al = align_supervision([[7, 8, 5, 6]], [[0, 0, 1, 1]], [[7, 9, 9, 8, 5, 6]], [[0, 0, 0, 0, 1, 1]])
>>> al.student_pos.tolist(), al.teacher_pos.tolist(), al.targets.tolist()
([[1, 2]], [[3, 4]], [[5, 6]])
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

Rows = Tensor | Sequence[Sequence[int]] | Sequence[Tensor]


class AlignmentError(ValueError):
    """Student and teacher sequences whose supervised tokens do not match one to one."""


@dataclass(frozen=True)
class Alignment:
    """Supervised positions of a batch in a padded layout (padding: position 0, mask false)."""

    student_pos: Tensor
    """[B, N] long: logit index in each student sequence (supervised token index - 1)."""
    teacher_pos: Tensor
    """[B, N] long: logit index in each teacher sequence."""
    targets: Tensor
    """[B, N] long: the supervised token ids (0 at padding)."""
    mask: Tensor
    """[B, N] bool: true at real supervised positions."""

    @property
    def counts(self) -> Tensor:
        """[B] supervised tokens per sequence."""
        return self.mask.sum(-1)


def _rows(x: Rows, name: str) -> list[list[int]]:
    if isinstance(x, Tensor):
        if x.dim() == 1:
            x = x.unsqueeze(0)
        return [[int(v) for v in row] for row in x.tolist()]
    return [[int(v) for v in (row.tolist() if isinstance(row, Tensor) else row)] for row in x]


def supervised_indices(ids: Sequence[int], mask: Sequence[int]) -> list[int]:
    """Token indices where ``mask`` is true; index 0 cannot be supervised (nothing predicts it)."""
    if len(ids) != len(mask):
        raise AlignmentError(f"{len(ids)} token ids but a mask of {len(mask)}")
    idx = [j for j, m in enumerate(mask) if m]
    if idx and idx[0] == 0:
        raise AlignmentError("the first token cannot be supervised: no logits predict it")
    return idx


def align_supervision(
    student_ids: Rows, student_mask: Rows, teacher_ids: Rows, teacher_mask: Rows, *, check_tokens: bool = True
) -> Alignment:
    """Pair the i-th supervised token of each student row with the i-th of its teacher row.

    Rows may have different lengths (lists) or be right-padded tensors with masks false at the
    padding. Each pair of rows must supervise the same number of tokens, and with
    ``check_tokens`` the same token ids in the same order; anything else raises
    :class:`AlignmentError` naming the row.
    """
    s_ids, s_mask = _rows(student_ids, "student_ids"), _rows(student_mask, "student_mask")
    t_ids, t_mask = _rows(teacher_ids, "teacher_ids"), _rows(teacher_mask, "teacher_mask")
    if not len(s_ids) == len(s_mask) == len(t_ids) == len(t_mask):
        raise AlignmentError("student and teacher batches differ in size")
    pairs = []
    for b, (si, sm, ti, tm) in enumerate(zip(s_ids, s_mask, t_ids, t_mask)):
        try:
            s_idx, t_idx = supervised_indices(si, sm), supervised_indices(ti, tm)
        except AlignmentError as e:
            raise AlignmentError(f"row {b}: {e}") from None
        if len(s_idx) != len(t_idx):
            raise AlignmentError(
                f"row {b}: the student supervises {len(s_idx)} tokens, the teacher {len(t_idx)}"
            )
        tokens = [si[j] for j in s_idx]
        if check_tokens and tokens != [ti[j] for j in t_idx]:
            raise AlignmentError(f"row {b}: the supervised tokens of student and teacher differ")
        pairs.append(([j - 1 for j in s_idx], [j - 1 for j in t_idx], tokens))
    n = max((len(p[0]) for p in pairs), default=0)
    out = torch.zeros(4, len(pairs), n, dtype=torch.long)
    for b, (sp, tp, tok) in enumerate(pairs):
        k = len(sp)
        out[0, b, :k] = torch.tensor(sp, dtype=torch.long)
        out[1, b, :k] = torch.tensor(tp, dtype=torch.long)
        out[2, b, :k] = torch.tensor(tok, dtype=torch.long)
        out[3, b, :k] = 1
    return Alignment(out[0], out[1], out[2], out[3].bool())


_TOOL_CALL = re.compile(r"<tool_call>.*?(?:</tool_call>|\Z)", re.DOTALL)


def tool_call_tokens(pieces: Sequence[str], mask: Sequence[int]) -> list[int]:
    """1 at the supervised tokens that lie in a ``<tool_call>...</tool_call>`` block (an unclosed one
    runs to the turn's end), else 0. ``pieces``: each token's text; a block is looked for within each
    run of supervised tokens (one assistant turn), so the tool format shown in a prompt never counts.

    >>> tool_call_tokens(["a", "<tool_call>", "{}", "</tool_call>", "<|im_end|>", "x"], [0, 1, 1, 1, 1, 0])
    [0, 1, 1, 1, 0, 0]
    """
    if len(pieces) != len(mask):
        raise AlignmentError(f"{len(pieces)} token pieces but a mask of {len(mask)}")
    out = [0] * len(mask)
    j = 0
    while j < len(mask):
        if not mask[j]:
            j += 1
            continue
        end = j
        while end < len(mask) and mask[end]:
            end += 1
        starts, text = [], ""
        for k in range(j, end):
            starts.append(len(text))
            text += pieces[k]
        spans = [m.span() for m in _TOOL_CALL.finditer(text)]
        for k, s0 in zip(range(j, end), starts):
            s1 = s0 + len(pieces[k])
            out[k] = int(any(a < max(s1, s0 + 1) and s0 < b for a, b in spans))
        j = end
    return out


def aligned_subset(mask: Rows, subset: Rows) -> Tensor:
    """[B, N] bool in :func:`align_supervision`'s layout of ``mask``: whether each supervised token is
    also in ``subset`` (per-token 0/1 rows, e.g. :func:`tool_call_tokens`).

    >>> aligned_subset([[0, 1, 1, 0, 1]], [[0, 0, 1, 0, 1]]).tolist()
    [[False, True, True]]
    """
    rows = [[s for m, s in zip(mr, sr) if m] for mr, sr in zip(_rows(mask, "mask"), _rows(subset, "subset"))]
    out = torch.zeros(len(rows), max((len(r) for r in rows), default=0), dtype=torch.bool)
    for b, r in enumerate(rows):
        out[b, :len(r)] = torch.tensor(r, dtype=torch.bool)
    return out
