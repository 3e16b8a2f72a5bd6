"""Latent injection: sentinel expansion, torch.cat splice with gradients, framing text."""
import doctest

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers

import lopd.latent as LT
from lopd.latent import (
    LATENT_SENTINEL, LatentError, encode_with_latents, expand_sentinel,
    frame_user_message, inject, inject_batch, latent_positions, placeholder_token_id,
)

pytestmark = pytest.mark.usefixtures("one_thread")


def word_tokenizer() -> Tokenizer:
    vocab = {w: i for i, w in enumerate(["[UNK]", "buy", "two", "apples", "now", "<|image_pad|>"])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.add_special_tokens([LATENT_SENTINEL])
    return tok


def test_framing_holds_one_sentinel_and_the_task():
    text = frame_user_message("Buy 2 apples.")
    assert text.count(LATENT_SENTINEL) == 1 and text.endswith("Buy 2 apples.")
    assert "different task" in text and "already been solved" in text
    with pytest.raises(LatentError):
        frame_user_message("x", framing="no slot here")
    with pytest.raises(LatentError):
        frame_user_message(f"sneaky {LATENT_SENTINEL}")


def test_encode_with_latents_runs_and_positions():
    tok = word_tokenizer()
    pid = placeholder_token_id(tok)
    assert pid == tok.token_to_id(LATENT_SENTINEL)
    enc = encode_with_latents(tok, f"buy {LATENT_SENTINEL} two {LATENT_SENTINEL} apples", [2, 3])
    assert enc.ids == [1, pid, pid, 2, pid, pid, pid, 3]
    assert enc.positions == [1, 2, 4, 5, 6] == latent_positions(enc.ids, pid)
    # Text path and token-id path agree when the sentinel is one token.
    whole = tok.encode(f"buy {LATENT_SENTINEL} two {LATENT_SENTINEL} apples").ids
    assert expand_sentinel(whole, [2, 3], sentinel_id=pid) == enc
    with pytest.raises(LatentError):
        encode_with_latents(tok, "buy two", 4)
    with pytest.raises(LatentError):
        encode_with_latents(tok, f"buy {LATENT_SENTINEL}", [1, 2])
    assert encode_with_latents(tok, "buy two", 0).positions == []


def test_placeholder_fallback_and_missing():
    vocab = {"[UNK]": 0, "<|image_pad|>": 1}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    assert placeholder_token_id(tok) == 1
    with pytest.raises(LatentError):
        placeholder_token_id(Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]")))


def test_inject_replaces_rows_and_passes_gradients():
    torch.manual_seed(0)
    emb = torch.nn.Embedding(10, 4)
    ids = torch.tensor([1, 2, 3, 3, 4, 3])
    lat = torch.randn(3, 4, requires_grad=True)
    out = inject(emb(ids), [2, 3, 5], lat)
    assert torch.equal(out[[2, 3, 5]], lat.detach())
    assert torch.equal(out[[0, 1, 4]], emb(ids)[[0, 1, 4]])
    weights = torch.arange(24.0).view(6, 4)
    (out * weights).sum().backward()
    assert torch.equal(lat.grad, weights[[2, 3, 5]])
    assert emb.weight.grad is not None and emb.weight.grad[1].abs().sum() > 0


def test_inject_validates_shapes_and_positions():
    e = torch.zeros(5, 2)
    with pytest.raises(LatentError):
        inject(e, [1, 2], torch.zeros(3, 2))
    with pytest.raises(LatentError):
        inject(e, [3, 1], torch.zeros(2, 2))
    with pytest.raises(LatentError):
        inject(e, [5], torch.zeros(1, 2))
    assert inject(e, [], torch.zeros(0, 2)) is e


def test_inject_batch_rows():
    e = torch.zeros(2, 4, 3)
    lat = torch.ones(2, 3, requires_grad=True)
    out = inject_batch(e, [[1, 2], []], [lat, None])
    assert out[0, 1:3].eq(1).all() and out[0, [0, 3]].eq(0).all() and out[1].eq(0).all()
    out.sum().backward()
    assert lat.grad.eq(1).all()


# ---- the paper's check: token-id path == embedding path when latents are real embeddings ----

@pytest.fixture(scope="module")
def tiny():
    from harness.models import build_tiny_model

    return build_tiny_model("1m", seed=0)


def _latent_prompt(tok, n_latents):
    messages = [{"role": "system", "content": "You are a shop assistant."},
                {"role": "user", "content": frame_user_message("Buy 2 apples, then pay.")}]
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return encode_with_latents(tok, text, n_latents)


def test_token_path_and_embedding_path_agree(tiny):
    from harness.engines import EmbedOverride, HFEngine, SamplingParams

    model, tok = tiny
    enc = _latent_prompt(tok, 8)
    real = tok.encode(" apple pear milk checkout price cart", add_special_tokens=False)[:8]
    assert len(real) == 8
    token_ids = list(enc.ids)
    for p, t in zip(enc.positions, real):
        token_ids[p] = t
    latents = model.get_input_embeddings().weight[real].detach().clone()
    override = EmbedOverride(enc.positions, latents)
    other = tok.encode("<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False)
    eng = HFEngine(model, tok, prefix_cache=False)
    greedy = SamplingParams(temperature=0, max_new_tokens=16, ignore_eos=True)
    # Batched with a shorter plain prompt, so the override positions shift under left padding.
    by_ids = eng.generate([token_ids, other], greedy)
    by_emb = eng.generate([enc.ids, other], greedy, overrides=[override, None])
    assert by_ids[0].token_ids == by_emb[0].token_ids
    assert max(abs(a - b) for a, b in zip(by_ids[0].logprobs, by_emb[0].logprobs)) <= 1e-5
    assert by_ids[1].token_ids == by_emb[1].token_ids
    # Scoring: the teacher's view of the same trajectory through both paths.
    gen = by_ids[0].token_ids
    s_ids = eng.score([token_ids + gen], top_k=20, start=1)[0]
    s_emb = eng.score([enc.ids + gen], top_k=20, start=1, overrides=[override])[0]
    # The "actual token" at a latent slot is the real token on one path and the placeholder on
    # the other; every other position must agree, and the distributions agree everywhere.
    keep = torch.tensor([t not in enc.positions for t in range(1, len(token_ids) + len(gen))])
    assert keep.sum() > len(gen)
    assert torch.allclose(s_ids.token_logprobs[keep], s_emb.token_logprobs[keep], atol=1e-5)
    assert torch.equal(s_ids.topk_ids, s_emb.topk_ids)
    assert torch.allclose(s_ids.topk_logprobs, s_emb.topk_logprobs, atol=1e-5)
    # Control: other latents change the teacher's distribution, so the check can fail.
    noisy = EmbedOverride(enc.positions, latents + torch.randn_like(latents))
    s_noise = eng.score([enc.ids + gen], top_k=20, start=1, overrides=[noisy])[0]
    assert (s_noise.token_logprobs - s_ids.token_logprobs).abs().max() > 1e-3


def test_latents_get_gradients_through_the_model(tiny):
    model, tok = tiny
    enc = _latent_prompt(tok, 4)
    latents = torch.randn(4, model.config.hidden_size, requires_grad=True)
    embeds = inject(model.get_input_embeddings()(torch.tensor(enc.ids)), enc.positions, latents)
    logits = model(inputs_embeds=embeds[None]).logits
    torch.log_softmax(logits[0, -1], -1)[5].backward()
    assert latents.grad is not None and latents.grad.abs().sum() > 0
    model.zero_grad(set_to_none=True)


def test_module_doctests():
    assert doctest.testmod(LT).failed == 0
