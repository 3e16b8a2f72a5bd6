"""QFormer and Composer: structure as the paper states it, encoding, teacher bypass, anchor, state."""

import copy
import math

import pytest
import torch

from lopd.composer import Composer, PerceiverAttention, QFormer, encode_text
from lopd.config import ComposerConfig, QFormerConfig
from lopd.latent import inject
from tiny_models import TINY_MODEL_MARKS, CharTokenizer, tiny_qwen3

pytestmark = TINY_MODEL_MARKS

D = 64


def tiny_backbone(seed=0):
    return tiny_qwen3(vocab=300, hidden=D, seed=seed)


def make_composer(n_latents=4, depth=8, **kw):
    cfg = ComposerConfig(qformer=QFormerConfig(n_latents=n_latents, depth=depth), **kw)
    return Composer(tiny_backbone(), CharTokenizer(300), cfg)


# ------------------------------------------------------------------------------------ QFormer


def reference_qformer(q: QFormer, h: torch.Tensor) -> torch.Tensor:
    """The paper's QFormer written out independently (scores scaled once by 1/sqrt(dh))."""
    attn, ff = q.attn[0], q.ff[0]
    x = h @ q.proj_in.weight.T + q.proj_in.bias
    lat = q.queries.expand(h.shape[0], -1, -1)
    H, dh = attn.n_heads, attn.head_dim
    for _ in range(q.depth):
        xn, ln = attn.norm_x(x), attn.norm_lat(lat)
        qq = ln @ attn.to_q.weight.T
        kv = torch.cat([xn, ln], 1) @ attn.to_kv.weight.T
        k, v = kv[..., :D], kv[..., D:]

        def split(t):
            return t.reshape(t.shape[0], t.shape[1], H, dh)

        scores = torch.einsum("bmhd,bnhd->bhmn", split(qq), split(k)) / math.sqrt(dh)
        out = torch.einsum("bhmn,bnhd->bmhd", scores.softmax(-1), split(v)).reshape(lat.shape)
        lat = out @ attn.to_out.weight.T + lat
        lat = ff(lat) + lat
    return torch.nn.functional.layer_norm(
        lat @ q.proj_out.weight.T + q.proj_out.bias, (D,), q.norm_out.weight, q.norm_out.bias
    )


def test_qformer_matches_the_method_description():
    torch.manual_seed(0)
    q = QFormer(D, n_heads=4, n_latents=32, depth=8)
    h = torch.randn(3, 17, D)
    out = q(h)
    assert out.shape == (3, 32, D)
    assert torch.allclose(out, reference_qformer(q, h), atol=1e-4)


def test_qformer_structure_one_shared_block_no_biases_and_query_init():
    torch.manual_seed(0)
    q = QFormer(256, n_heads=8, n_latents=32, depth=8)
    assert len(q.attn) == 1 and len(q.ff) == 1  # ONE block applied 8 times
    n8 = sum(p.numel() for p in q.parameters())
    assert n8 == sum(p.numel() for p in QFormer(256, 8, 32, depth=1).parameters())
    assert sum(p.numel() for p in QFormer(256, 8, 32, depth=8, share_layers=False).parameters()) > n8
    a = q.attn[0]
    assert all(m.bias is None for m in (a.to_q, a.to_kv, a.to_out, q.ff[0][1], q.ff[0][3]))
    assert a.norm_x is not a.norm_lat and a.head_dim == 32
    assert isinstance(q.ff[0][2], torch.nn.GELU) and q.ff[0][1].out_features == 4 * 256
    assert q.proj_in.bias is not None and q.proj_out.bias is not None  # plain Linear(d, d)
    assert isinstance(q.norm_out, torch.nn.LayerNorm)
    assert float(q.queries.detach().std()) == pytest.approx(1 / math.sqrt(256), rel=0.05)


def test_qformer_mask_ignores_padding_and_softmax_runs_in_fp32():
    torch.manual_seed(1)
    q = QFormer(D, 4, n_latents=5, depth=3)
    h = torch.randn(1, 6, D)
    padded = torch.cat([h, 100 * torch.randn(1, 4, D)], 1)
    mask = torch.tensor([[1] * 6 + [0] * 4])
    assert torch.allclose(q(padded, mask), q(h), atol=1e-5)
    qb = copy.deepcopy(q).to(torch.bfloat16)
    out = qb(h)
    assert out.dtype == torch.bfloat16 and torch.isfinite(out.float()).all()
    assert torch.allclose(out.float(), q(h), atol=0.15)
    with pytest.raises(ValueError):
        PerceiverAttention(10, 3)


def test_shared_block_input_keys_values_are_computed_once_with_the_same_result():
    torch.manual_seed(2)
    q = QFormer(D, 4, n_latents=5, depth=3)
    h, mask = torch.randn(2, 7, D), torch.tensor([[1] * 7, [1] * 4 + [0] * 3])
    calls = []
    q.attn[0].to_kv.register_forward_hook(lambda m, a, out: calls.append(a[0].shape[1]))
    q(h, mask)
    assert calls == [7] + [5] * 3  # inputs once, then only the 5 latents per pass
    a, x, lat = q.attn[0], torch.randn(2, 7, D), torch.randn(2, 5, D)
    torch.testing.assert_close(a(x, lat, mask, x_kv=a.input_kv(x)), a(x, lat, mask))
    # independent blocks (share_layers=False): each pass reads its own block's keys/values
    q2 = QFormer(D, 4, n_latents=5, depth=3, share_layers=False)
    x, lat = q2.proj_in(h), q2.queries.expand(2, -1, -1)
    for blk, ff in zip(q2.attn, q2.ff):
        lat = blk(x, lat, mask) + lat
        lat = ff(lat) + lat
    torch.testing.assert_close(q2(h, mask), q2.norm_out(q2.proj_out(lat)))


# ------------------------------------------------------------------------------------ Composer


def test_composer_lora_on_all_projections_and_frozen_backbone():
    c = make_composer()
    lora_a = [n for n, _ in c.named_parameters() if "lora_A" in n]
    assert len(lora_a) == 7 * 2  # q,k,v,o,gate,up,down x 2 layers
    for proj in ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"):
        assert sum(proj in n for n in lora_a) == 2
    layer = c.backbone.model.layers[0].self_attn.q_proj
    assert layer.r["composer"] == 8 and layer.scaling["composer"] == 16 / 8
    trainable = {n for n, p in c.named_parameters() if p.requires_grad}
    assert trainable == {n for n, _ in c.named_trainable_parameters()}
    assert all("lora_" in n or n.startswith("qformer.") for n in trainable)
    assert set(c.parameter_groups()) == {"lora", "qformer"}


def test_encode_reads_task_prefix_plus_experience_and_uses_final_norm_hidden_states():
    c = make_composer()
    tok = CharTokenizer(300)
    ids = c.encoder_ids("buy", "did X")
    assert ids == encode_text(tok, "Task to solve:\nbuy\n\nReference past trajectory:\n") + encode_text(
        tok, "did X"
    )
    with torch.no_grad():
        for n, p in c.named_trainable_parameters():  # make the LoRA non-trivial
            if "lora_B" in n:
                p.normal_(0, 0.1)
        got = c.encode(["buy"], [["did X"]])[0]
        t = torch.tensor([ids])
        hidden = c.peft(input_ids=t, output_hidden_states=True).hidden_states[-1]  # after the final norm
        assert torch.allclose(got, c.qformer(hidden)[0], atol=1e-5)


def test_encode_concatenates_in_retrieval_order_and_is_task_conditional():
    c = make_composer(n_latents=4, encode_batch_size=2)
    exps = ["x", "first trajectory", "second one"]  # encoded longest first, returned in retrieval order
    with torch.no_grad():
        both = c.encode(["task A", "task B"], [exps, exps[:1]])
        assert both[0].shape == (12, D) and both[1].shape == (4, D)
        singles = [c.encode(["task A"], [[e]])[0] for e in exps]
        assert torch.allclose(both[0], torch.cat(singles), atol=1e-5)  # batching and padding invisible
        assert not torch.allclose(both[1], singles[0], atol=1e-3)  # same experience, other task
        assert c.encode(["t"], [[]])[0].shape == (0, D)
        plain = make_composer(task_conditional=False)
        assert plain.encoder_ids("anything", "ab") == encode_text(CharTokenizer(300), "ab")
        trunc = make_composer(max_encoder_tokens=5)
        assert len(trunc.encoder_ids("task", "long experience")) == 5
    with pytest.raises(ValueError):
        c.encode(["a", "b"], [exps])
    with pytest.raises(ValueError):
        Composer(tiny_backbone(), None, ComposerConfig()).encode(["a"], [["b"]])


def test_teacher_mode_bypasses_the_lora_and_restores_flags():
    original = tiny_backbone()
    c = make_composer()
    with torch.no_grad():
        for n, p in c.named_trainable_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.5)
    ids = torch.randint(0, 300, (2, 9))
    with torch.no_grad():
        with c.teacher_mode() as teacher:
            assert torch.allclose(teacher(input_ids=ids).logits, original(ids).logits, atol=1e-5)
        with_lora = c.backbone(input_ids=ids).logits
        assert not torch.allclose(with_lora, original(ids).logits, atol=1e-3)
    assert all(p.requires_grad for p in c.trainable_parameters())
    c.set_trainable(False)  # the frozen-composer ablation stays frozen through teacher calls
    with c.teacher_mode() as teacher:
        teacher(input_ids=ids)
    assert not any(p.requires_grad for p in c.parameters())


def test_gradients_reach_the_composer_through_injected_latents_only():
    c = make_composer()
    with torch.no_grad():
        for n, p in c.named_trainable_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.1)
    lat = c.encode(["task"], [["exp"]])[0]
    ids = torch.randint(0, 300, (10,))
    embeds = inject(c.input_embeddings()(ids), [1, 2, 3, 4], lat)
    with c.teacher_mode() as teacher:
        logits = teacher(inputs_embeds=embeds[None]).logits
    logits[0, -1].logsumexp(-1).backward()  # outside: peft's disable_adapter switches LoRA grads off
    for n, p in c.named_parameters():
        if n in dict(c.named_trainable_parameters()):
            assert p.grad is not None, n
        else:
            assert p.grad is None, n  # the frozen backbone/teacher gets nothing
    assert any(float(p.grad.abs().sum()) > 0 for n, p in c.named_trainable_parameters() if "lora_B" in n)


def test_anchor_snapshot_and_checkpoint_round_trip():
    c = make_composer()
    task, exps = ["t"], [["some experience"]]
    with torch.no_grad():
        before = c.encode(task, exps)[0]
        for p in c.trainable_parameters():
            p.add_(0.1 * torch.randn_like(p))
        after = c.encode(task, exps)[0]
        anchor = c.encode(task, exps, anchor=True)[0]
    assert not anchor.requires_grad
    assert torch.allclose(anchor, before, atol=1e-6) and not torch.allclose(after, before, atol=1e-3)
    state = c.trainable_state_dict()
    fresh = make_composer()
    fresh.load_trainable_state_dict(state)
    with torch.no_grad():
        assert torch.allclose(fresh.encode(task, exps)[0], after, atol=1e-6)
        assert torch.allclose(fresh.encode(task, exps, anchor=True)[0], before, atol=1e-6)
    c.set_anchor()
    with torch.no_grad():
        assert torch.allclose(c.encode(task, exps, anchor=True)[0], after, atol=1e-6)
    bad = {"trainable": dict(state["trainable"]), "anchor": state["anchor"]}
    with pytest.raises(ValueError):
        fresh.load_trainable_state_dict({"trainable": state["trainable"]})
    bad["trainable"].pop(next(iter(bad["trainable"])))
    with pytest.raises(ValueError):
        fresh.load_trainable_state_dict(bad)


def test_anchor_latents_are_cached_per_pair_until_the_anchor_changes(monkeypatch):
    c = make_composer(anchor_cache_entries=2).double()  # float64: a batch of 3 vs 1 reorders sums
    calls = []
    real = c._encode_ids
    monkeypatch.setattr(c, "_encode_ids", lambda seqs, anchor: calls.append(len(seqs)) or real(seqs, anchor))
    with torch.no_grad():
        first = c.encode(["t", "u"], [["a", "b"], ["a"]], anchor=True)
        again = c.encode(["t"], [["b", "a"]], anchor=True)
    # 3 pairs encoded; the cache keeps the 2 most recently used, so (t, b) is a hit and only (t, a)
    # is redone; (u, a), now the least recently used, is evicted.
    assert calls == [3, 1]
    # 8 passes of the QFormer, each a few dot products of <= 512 O(1) terms: far below 1e4 * 2**-53
    torch.testing.assert_close(again[0], torch.cat([first[0][4:], first[0][:4]]), rtol=0, atol=1e4 * 2.0**-53)
    with torch.no_grad():
        assert torch.equal(c.encode(["t"], [["b"]], anchor=True)[0], first[0][4:])  # still cached
        assert calls == [3, 1]
        redone = c.encode(["u"], [["a"]], anchor=True)[0]
        assert calls == [3, 1, 1]
        torch.testing.assert_close(redone, first[1], rtol=0, atol=1e4 * 2.0**-53)
        for p in c.trainable_parameters():
            p.add_(0.1)
        c.set_anchor()  # a new c_phi0 invalidates the cache
        moved = c.encode(["u"], [["a"]], anchor=True)[0]
    assert calls == [3, 1, 1, 1] and not torch.allclose(moved, first[1])


def test_configs_load_with_overrides_and_document_every_field():
    import dataclasses
    import doctest

    import lopd.config as C
    from harness.config import field_docs, load_config

    assert doctest.testmod(C).failed == 0
    cfg = load_config(
        C.LOPDConfig,
        overrides=[
            "margin.margin=0",
            "composer.qformer.n_latents=16",
            "n_retrieved=1",
            "margin.dual_mean=token_weighted",
            "coldstart.qformer_grad_clip=30",
        ],
    )
    assert (cfg.margin.margin, cfg.n_latents_total, cfg.coldstart.qformer_grad_clip) == (0.0, 16, 30.0)
    assert cfg.margin.dual_mean == "token_weighted"
    defaults = C.LOPDConfig()
    assert (
        defaults.margin.margin,
        defaults.margin.anchor_weight,
        defaults.margin.dual_lr,
        defaults.margin.beta_init,
    ) == (0.05, 0.2, 0.5, 0.0)
    assert (defaults.composer.lora.r, defaults.composer.lora.alpha, defaults.composer.lora.dropout) == (
        8,
        16,
        0.0,
    )
    assert (defaults.composer.qformer.depth, defaults.n_latents_total, defaults.distill.top_k) == (8, 96, 20)
    assert (defaults.coldstart.steps, defaults.coldstart.batch_size, defaults.coldstart.grad_clip) == (
        1000,
        8,
        3.0,
    )
    for cls in (
        C.DistillConfig,
        C.GRPOLossConfig,
        C.QFormerConfig,
        C.EncoderLoRAConfig,
        C.ComposerConfig,
        C.MarginConfig,
        C.OptimConfig,
        C.ColdStartConfig,
        C.LOPDConfig,
    ):
        docs = field_docs(cls)
        assert {f.name for f in dataclasses.fields(cls)} == set(docs), cls.__name__
