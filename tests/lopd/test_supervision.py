"""Supervision-mask alignment between student and teacher sequences."""

import doctest

import pytest
import torch

import lopd.supervision as S
from lopd.losses import token_log_probs
from lopd.supervision import AlignmentError, align_supervision
from tiny_models import tiny_qwen3

pytestmark = pytest.mark.usefixtures("one_thread")


def tiny_lm(vocab=50):
    return tiny_qwen3(vocab=vocab, hidden=32, layers=1, heads=2, kv_heads=1, init=0.2)


def at(x, pos):
    """[B, T, ...] outputs at the aligned positions ``pos`` [B, N] -> [B, N, ...]."""
    return x[torch.arange(pos.shape[0]).unsqueeze(-1), pos]


def test_alignment_of_different_contexts_and_padding():
    # Row 0: teacher has 3 more context tokens. Row 1: two assistant turns with a tool reply between.
    s_ids = [[5, 6, 10, 11, 12], [5, 20, 21, 7, 7, 22, 23]]
    s_mask = [[0, 0, 1, 1, 1], [0, 1, 1, 0, 0, 1, 1]]
    t_ids = [[5, 9, 9, 9, 6, 10, 11, 12], [5, 8, 20, 21, 7, 7, 22, 23]]
    t_mask = [[0, 0, 0, 0, 0, 1, 1, 1], [0, 0, 1, 1, 0, 0, 1, 1]]
    al = align_supervision(s_ids, s_mask, t_ids, t_mask)
    assert al.mask.tolist() == [[True, True, True, False], [True, True, True, True]]
    assert al.student_pos.tolist() == [[1, 2, 3, 0], [0, 1, 4, 5]]
    assert al.teacher_pos.tolist() == [[4, 5, 6, 0], [1, 2, 5, 6]]
    assert al.targets.tolist() == [[10, 11, 12, 0], [20, 21, 22, 23]]
    assert al.counts.tolist() == [3, 4]
    # Gathering [B, T, ...] outputs at the teacher positions picks exactly those rows.
    x = torch.arange(2 * 8).view(2, 8, 1).float()
    assert at(x, al.teacher_pos)[..., 0].tolist() == [[4, 5, 6, 0], [9, 10, 13, 14]]


def test_padded_tensors_and_latent_slots():
    s_ids = torch.tensor([[3, 4, 30, 31, 0, 0]])
    s_mask = torch.tensor([[0, 0, 1, 1, 0, 0]])
    ph = 99  # placeholder run of 4 latents in the teacher's first message
    t_ids = torch.tensor([[3, ph, ph, ph, ph, 4, 30, 31]])
    t_mask = torch.tensor([[0, 0, 0, 0, 0, 0, 1, 1]])
    al = align_supervision(s_ids, s_mask, t_ids, t_mask)
    assert al.student_pos.tolist() == [[1, 2]] and al.teacher_pos.tolist() == [[5, 6]]


def test_misalignment_is_an_error_naming_the_row():
    with pytest.raises(AlignmentError, match="row 0.*2 tokens.*1"):
        align_supervision([[1, 2, 3]], [[0, 1, 1]], [[1, 2, 3]], [[0, 0, 1]])
    with pytest.raises(AlignmentError, match="differ"):
        align_supervision([[1, 2, 3]], [[0, 1, 1]], [[1, 2, 4]], [[0, 1, 1]])
    assert align_supervision(
        [[1, 2, 3]], [[0, 1, 1]], [[1, 2, 4]], [[0, 1, 1]], check_tokens=False
    ).mask.all()
    with pytest.raises(AlignmentError, match="first token"):
        align_supervision([[1, 2]], [[1, 1]], [[1, 2]], [[1, 1]])
    with pytest.raises(AlignmentError, match="mask of"):
        align_supervision([[1, 2]], [[0, 1, 1]], [[1, 2]], [[0, 1]])
    with pytest.raises(AlignmentError, match="batches"):
        align_supervision([[1, 2]], [[0, 1]], [], [])


def test_aligned_logits_score_the_supervised_tokens_like_the_hf_loss():
    """The shift is right: NLL from aligned positions equals the model's own label loss."""
    lm = tiny_lm()
    s_ids = torch.tensor([[1, 2, 3, 4, 5, 6]])
    s_mask = torch.tensor([[0, 0, 0, 1, 1, 1]])
    t_ids = torch.tensor([[1, 7, 8, 9, 2, 3, 4, 5, 6]])  # 3 more context tokens, the same suffix
    t_mask = torch.tensor([[0, 0, 0, 0, 0, 0, 1, 1, 1]])
    al = align_supervision(s_ids, s_mask, t_ids, t_mask)
    with torch.no_grad():
        for ids, mask, pos in ((s_ids, s_mask, al.student_pos), (t_ids, t_mask, al.teacher_pos)):
            out = lm(ids, labels=ids.masked_fill(mask == 0, -100))
            nll = -token_log_probs(at(out.logits, pos), al.targets)[al.mask].mean()
            assert torch.allclose(nll, out.loss, atol=1e-5)
        # Same context on both sides -> identical positions.
        same = align_supervision(s_ids, s_mask, s_ids, s_mask)
        assert torch.equal(same.student_pos, same.teacher_pos)


def test_module_doctests():
    assert doctest.testmod(S).failed == 0
