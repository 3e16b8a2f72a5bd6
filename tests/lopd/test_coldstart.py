"""Cold start: NLL through the frozen base with latents injected, assistant tokens only."""

import doctest
import math

import pytest
import torch

import lopd.coldstart as CS
from lopd.coldstart import (
    ColdStartExample,
    clip_composer_grads,
    coldstart_loss,
    coldstart_step,
    make_coldstart_optimizer,
    next_token_nll,
)
from lopd.composer import Composer
from lopd.config import ColdStartConfig, ComposerConfig, QFormerConfig
from lopd.latent import expand_sentinel
from tiny_models import TINY_MODEL_MARKS, CharTokenizer
from tiny_models import tiny_qwen3 as tiny_backbone

pytestmark = TINY_MODEL_MARKS

NL = 4
SENTINEL = 1


def make_composer():
    return Composer(
        tiny_backbone(), CharTokenizer(), ComposerConfig(qformer=QFormerConfig(n_latents=NL, depth=2))
    )


def example(task, experiences, prompt, answer):
    """[prompt with one sentinel per experience][answer]; the answer tokens are supervised."""
    raw = list(prompt) + [SENTINEL] * len(experiences)
    lat = expand_sentinel(raw, NL, sentinel_id=SENTINEL)
    ids = lat.ids + list(answer)
    mask = [0] * len(lat.ids) + [1] * len(answer)
    return ColdStartExample(task, list(experiences), ids, lat.positions, mask)


def examples():
    return [
        example("buy apples", ["went to shop", "paid"], [5, 6, 7], [20, 21, 22, 23]),
        example("sell pears", ["listed pears"], [8, 9], [30, 31]),
        example("count", ["one two three", "four", "five"], [10], [40, 41, 42]),
        example("wait", ["idle"], [11, 12, 13, 14], [50]),
    ]


def test_next_token_nll_by_hand():
    logits = torch.zeros(1, 3, 4)
    logits[0, 0, 1] = math.log(3.0)  # p(token 1 | pos 0) = 3 / 6 = 0.5
    ids = torch.tensor([[0, 1, 2]])
    loss, n = next_token_nll(logits, ids, torch.tensor([[0, 1, 1]]))
    assert n == 2 and float(loss) == pytest.approx((math.log(2) + math.log(4)) / 2, abs=1e-6)
    loss, _ = next_token_nll(logits, ids, torch.tensor([[0, 1, 0]]), count=4)
    assert float(loss) == pytest.approx(math.log(2) / 4, abs=1e-6)


def test_example_validation():
    with pytest.raises(ValueError):
        ColdStartExample("t", [], [1, 2], [], [0])
    with pytest.raises(ValueError):
        ColdStartExample("t", [], [1, 2], [], [1, 0])
    with pytest.raises(ValueError):
        ColdStartExample("t", ["e"], [1, 1, 2], [0, 1], [0, 1, 1])
    c = make_composer()
    bad = example("t", ["e"], [5], [6])
    bad.latent_positions = bad.latent_positions[:-1]
    with pytest.raises(ValueError, match="latent slots"):
        coldstart_loss(c, [bad])


def test_coldstart_loss_equals_the_frozen_base_model_loss_with_latents():
    base_copy = tiny_backbone()  # the same initial weights as the composer's backbone
    c = make_composer()
    with torch.no_grad():  # a non-trivial LoRA: it must shape the latents but not the scoring model
        for n, p in c.named_trainable_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.1)
    exs = examples()[:2]
    loss, n = coldstart_loss(c, exs)
    assert n == 4 + 2
    total = 0.0
    with torch.no_grad():
        lats = c.encode([e.task for e in exs], [e.experiences for e in exs])
        for ex, lat in zip(exs, lats):
            ids = torch.tensor(ex.input_ids)
            emb = base_copy.get_input_embeddings()(ids).clone()
            emb[ex.latent_positions] = lat
            labels = ids.masked_fill(torch.tensor(ex.loss_mask) == 0, -100)
            out = base_copy(inputs_embeds=emb[None], labels=labels[None])
            total += float(out.loss) * ex.n_supervised
    assert float(loss.detach()) == pytest.approx(total / n, abs=1e-5)


def test_micro_batches_with_global_count_match_one_batch():
    exs = examples()
    grads = []
    for mb in (4, 1):
        c = make_composer().double()  # float64: padding and batch shapes only reorder sums
        opt = make_coldstart_optimizer(c, ColdStartConfig(lr=1e-3))
        cfg = ColdStartConfig(micro_batch_size=mb, grad_clip=0)
        # capture gradients just before the step by running the parts coldstart_step runs
        total = sum(e.n_supervised for e in exs)
        opt.zero_grad()
        for i in range(0, len(exs), mb):
            coldstart_loss(c, exs[i : i + mb], count=total)[0].backward()
        grads.append([p.grad.clone() for p in c.trainable_parameters()])
        stats = coldstart_step(c, exs, opt, cfg)
        assert stats["tokens"] == total and stats["skipped"] == 0.0
    # A reordered sum of n terms moves by at most n * U * sum|terms|; n <= 1e4 (tokens x width),
    # gradient terms O(1): 1e4 * 2**-53 ~ 1.1e-12.
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=0, atol=1e4 * 2.0**-53)


def test_coldstart_step_lowers_the_nll_and_touches_only_lora_and_qformer():
    c = make_composer()
    frozen = {n: p.detach().clone() for n, p in c.named_parameters() if not p.requires_grad}
    trainable = {n: p.detach().clone() for n, p in c.named_trainable_parameters()}
    exs = examples()
    opt = make_coldstart_optimizer(c, ColdStartConfig(lr=3e-2, weight_decay=0.0))
    with torch.no_grad():
        before = float(coldstart_loss(c, exs)[0])
    for _ in range(15):
        stats = coldstart_step(c, exs, opt, ColdStartConfig(grad_clip=3.0, micro_batch_size=2))
    with torch.no_grad():
        after = float(coldstart_loss(c, exs)[0])
    assert after < before - 0.3, (before, after)
    assert "grad_norm" in stats and stats["skipped"] == 0.0
    for n, p in c.named_parameters():
        if n in frozen:
            assert torch.equal(p, frozen[n]), n
    changed = [n for n, p in c.named_trainable_parameters() if not torch.equal(p, trainable[n])]
    assert any("lora_" in n for n in changed) and any(n.startswith("qformer.") for n in changed)


def test_grad_clipping_global_or_per_group():
    c = make_composer()
    coldstart_loss(c, examples())[0].mul(1e3).backward()
    groups = c.parameter_groups()
    norms = clip_composer_grads(c, 3.0, qformer_grad_clip=30.0)
    assert set(norms) == {"lora_grad_norm", "qformer_grad_norm"}

    def after(ps):
        return float(torch.nn.utils.get_total_norm([p.grad for p in ps if p.grad is not None]))

    if norms["lora_grad_norm"] > 3.0:
        assert after(groups["lora"]) == pytest.approx(3.0, rel=1e-3)
    assert norms["qformer_grad_norm"] > 30.0 and after(groups["qformer"]) == pytest.approx(30.0, rel=1e-3)
    one = clip_composer_grads(c, 1.0)
    assert set(one) == {"grad_norm"} and after(groups["lora"] + groups["qformer"]) == pytest.approx(
        1.0, rel=1e-3
    )


def test_step_without_supervised_tokens_is_skipped():
    c = make_composer()
    ex = example("t", ["e"], [5, 6], [])
    before = [p.detach().clone() for p in c.trainable_parameters()]
    stats = coldstart_step(c, [ex], make_coldstart_optimizer(c), ColdStartConfig())
    assert stats["skipped"] == 1.0 and stats["tokens"] == 0.0
    assert all(torch.equal(a, b) for a, b in zip(before, c.trainable_parameters()))


def test_module_doctests():
    assert doctest.testmod(CS).failed == 0
