"""The LM head over chunks of positions: the unchunked values and gradients, in bounded memory.

Everything runs in float64, where chunking moves values only by rounding: the head's matrix
product may block its d = 8 terms differently, and the head's gradient sums over the chunks'
positions in another order (at most 12 terms here). n * U * sum|terms| stays below 1e-13 for
these O(1) quantities, so RTOL = 1e-12 (a wiring error moves values by O(1)).
"""

from __future__ import annotations

from functools import partial

import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from lopd.chunked import chunked_head, full_kl_chunk, topk_and_targets
from lopd.losses import full_kl, log_probs_at, tail_kl, teacher_topk, token_log_probs, topk_tail_kl
from lopd.margin import TokenLogProbs, composer_terms, composer_terms_of

B, N, D, V, K = 2, 6, 8, 50, 5
RTOL = 1e-12
CHUNKS = [1, 4, 5, 12, 100, 0]
"""1 and 4 divide the 12 positions, 5 does not, 12 is one chunk, 100 > N, 0 = unchunked."""


def _close(a: torch.Tensor, b: torch.Tensor) -> None:
    torch.testing.assert_close(a, b, rtol=RTOL, atol=RTOL * float(b.detach().abs().max().clamp(min=1)))


def _setup(seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    head = nn.Linear(D, V, bias=False, dtype=torch.float64)
    t_head = nn.Linear(D, V, bias=False, dtype=torch.float64).requires_grad_(False)
    with torch.no_grad():
        head.weight.copy_(torch.randn(V, D, generator=gen, dtype=torch.float64))
        t_head.weight.copy_(torch.randn(V, D, generator=gen, dtype=torch.float64))
    hidden = torch.randn(B, N, D, generator=gen, dtype=torch.float64, requires_grad=True)
    t_hidden = torch.randn(B, N, D, generator=gen, dtype=torch.float64)
    targets = torch.randint(0, V, (B, N), generator=gen)
    weights = torch.randn(B, N, generator=gen, dtype=torch.float64)  # a loss that weighs every position
    return head, t_head, hidden, t_hidden, targets, weights


def _grads(loss: torch.Tensor, *tensors: torch.Tensor) -> list[torch.Tensor]:
    return list(torch.autograd.grad(loss, tensors))


def _close_with_grads(got: torch.Tensor, want: torch.Tensor, w: torch.Tensor, hidden: torch.Tensor,
                      head: nn.Linear) -> None:
    """``got`` is close to ``want``, and so are the gradients of their ``w``-weighted sums into
    ``hidden`` and ``head``'s weight."""
    _close(got, want)
    tensors = (hidden, head.weight)
    for g, e in zip(_grads((got * w).sum(), *tensors), _grads((want * w).sum(), *tensors)):
        _close(g, e)


@pytest.mark.parametrize("chunk", CHUNKS)
def test_log_probs_equal_the_unchunked_values_and_gradients(chunk):
    head, _, hidden, _, targets, w = _setup()
    want = token_log_probs(head(hidden), targets)
    got = chunked_head(head, hidden, token_log_probs, targets, chunk=chunk)
    assert got.shape == (B, N)
    _close_with_grads(got, want, w, hidden, head)


@pytest.mark.parametrize("direction", ["reverse", "forward"])
@pytest.mark.parametrize("chunk", CHUNKS)
def test_topk_tail_kl_equals_the_unchunked_values_and_gradients(chunk, direction):
    head, t_head, hidden, t_hidden, _, w = _setup(1)
    with torch.no_grad():  # the teacher, reduced to its top-k chunk by chunk
        ids, t_logp = chunked_head(t_head, t_hidden, partial(teacher_topk, k=K), chunk=chunk)
        want_ids, want_logp = teacher_topk(t_head(t_hidden), K)
    assert torch.equal(ids, want_ids) and ids.shape == (B, N, K)
    _close(t_logp, want_logp)
    got = tail_kl(chunked_head(head, hidden, log_probs_at, ids, chunk=chunk), t_logp, direction)
    want = topk_tail_kl(head(hidden), ids, t_logp, direction)
    _close_with_grads(got, want, w, hidden, head)


@pytest.mark.parametrize("direction", ["reverse", "forward"])
@pytest.mark.parametrize("chunk", CHUNKS)
def test_full_kl_equals_the_unchunked_values_and_gradients(chunk, direction):
    head, t_head, hidden, t_hidden, targets, w = _setup(2)
    fn = full_kl_chunk(t_head, direction)  # the teacher's logits are made per chunk as well
    got, logp = chunked_head(head, hidden, fn, t_hidden, targets.unsqueeze(-1), chunk=chunk)
    want = full_kl(head(hidden), t_head(t_hidden), direction)
    _close_with_grads(got, want, w, hidden, head)
    _close(logp[..., 0], token_log_probs(head(hidden), targets))


@pytest.mark.parametrize("chunk", CHUNKS)
def test_lopd_teacher_path_equals_the_unchunked_composer_terms_and_gradients(chunk):
    """The composer's teacher with gradients (into its hidden states, i.e. the latents): top-k ids,
    their log-probs and the sampled tokens' log-probs per chunk give the unchunked composer terms."""
    head, t_head, s_hidden, t_hidden, targets, _ = _setup(3)
    t_hidden.requires_grad_(True)
    mask = torch.ones(B, N, dtype=torch.bool)
    mask[1, 4:] = False
    rewards, lat = torch.tensor([1.0, 0.25]), [torch.zeros(2, D)] * B
    ids, t_top, t_tgt = chunked_head(t_head, t_hidden, partial(topk_and_targets, k=K), targets, chunk=chunk)
    both = torch.cat([ids, targets.unsqueeze(-1)], -1)  # the student at the teacher's top-k and the targets
    s_logp = chunked_head(head, s_hidden, log_probs_at, both, chunk=chunk)
    got = composer_terms_of(TokenLogProbs(t_top, t_tgt), TokenLogProbs(s_logp[..., :K], s_logp[..., K]),
                            mask, rewards, lat, lat)
    want = composer_terms(t_head(t_hidden), head(s_hidden), targets, mask, rewards, lat, lat, top_k=K)
    for name in ("kl", "delta", "anchor"):
        _close(getattr(got, name), getattr(want, name))
    loss_got, loss_want = (got.kl + 0.5 * got.delta).sum(), (want.kl + 0.5 * want.delta).sum()
    _close(_grads(loss_got, t_hidden)[0], _grads(loss_want, t_hidden)[0])
    assert s_hidden.grad is None  # the student enters the composer's terms detached


def test_no_positions_and_no_gradients():
    head, _, hidden, _, targets, _ = _setup()
    empty = chunked_head(head, hidden[:, :0], token_log_probs, targets[:, :0], chunk=4)
    assert empty.shape == (B, 0)
    with torch.no_grad():  # no graph: plain chunks, no checkpoint
        got = chunked_head(head, hidden, token_log_probs, targets, chunk=5)
    assert not got.requires_grad
    _close(got, token_log_probs(head(hidden), targets).detach())


class _LargestTensor(TorchDispatchMode):
    """Records the most elements of any tensor an op creates (forward, recomputation and backward)."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel())
        return out


def _memory_of_step(chunk: int) -> tuple[int, int]:
    """A student's top-k + tail KL step against a teacher, forward and backward: (elements the
    graph keeps for the backward in all, elements of the largest tensor any op creates)."""
    gen = torch.Generator().manual_seed(0)
    vocab, n, d = 4096, 64, 8
    head = nn.Linear(d, vocab, bias=False)
    t_head = nn.Linear(d, vocab, bias=False).requires_grad_(False)
    hidden = torch.randn(2, n, d, generator=gen, requires_grad=True)
    t_hidden = torch.randn(2, n, d, generator=gen)
    saved: list[int] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved.append(t.numel())
        return t

    with _LargestTensor() as mode:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            with torch.no_grad():
                ids, t_logp = chunked_head(t_head, t_hidden, partial(teacher_topk, k=20), chunk=chunk)
            loss = tail_kl(chunked_head(head, hidden, log_probs_at, ids, chunk=chunk), t_logp).sum()
        loss.backward()
    assert head.weight.grad is not None and hidden.grad is not None
    return sum(saved), mode.largest


def test_memory_is_bounded_by_the_chunk_not_by_the_positions():
    vocab, positions, chunk = 4096, 2 * 64, 16
    kept, largest = _memory_of_step(chunk)
    # checkpointed chunks: the graph keeps less than one chunk's logits between forward and backward
    # (per-position top-k log-probs only), and no op ever makes more than one chunk's logits (the
    # head's weight, vocab x 8, is smaller)
    assert kept < chunk * vocab and largest <= chunk * vocab
    kept, largest = _memory_of_step(0)  # unchunked: the graph keeps every position's logits
    assert kept >= largest >= positions * vocab
