"""HF engine: batched KV-cache decoding, prefix reuse, stops, sampling, scoring, weight updates."""
import math

import pytest
import torch

from harness.engines import EmbedOverride, EngineError, HFEngine, SamplingParams
from harness.models import build_tiny_model, save_pretrained

GREEDY = SamplingParams(temperature=0, max_new_tokens=10, ignore_eos=True)


# Batched, cached and chunked paths reorder float64 sums of at most ~1e4 terms of O(10) (logits and
# log-sum-exps of the 1m model): n * U * sum|terms| ~ 1e4 * 2**-53 * 10 ~ 1e-11.
TOL = 1e-10


def close(a, b, tol=TOL):
    return len(a) == len(b) and all(abs(x - y) <= tol for x, y in zip(a, b))


def full_logprobs(model, seq):
    with torch.no_grad():
        return torch.log_softmax(model(torch.tensor([seq])).logits[0], -1)


def test_batched_left_padding_matches_single(tiny, prompts):
    model, tok = tiny
    eng = HFEngine(model, tok, prefix_cache=False)
    batched = eng.generate(prompts, GREEDY)
    for p, out in zip(prompts, batched):
        single = eng.generate([p], GREEDY)[0]
        assert out.token_ids == single.token_ids and close(out.logprobs, single.logprobs)
        assert out.finish_reason == "length" and len(out.token_ids) == 10 and out.prompt_len == len(p)
        # Generation log-probs are the model's own teacher-forced log-probs.
        lp = full_logprobs(model, p + out.token_ids)
        ref = [lp[len(p) + i - 1, t].item() for i, t in enumerate(out.token_ids)]
        assert close(out.logprobs, ref)
        assert out.text == tok.decode(out.token_ids)


def test_greedy_is_argmax(tiny, prompts):
    model, tok = tiny
    out = HFEngine(model, tok).generate([prompts[0]], GREEDY)[0]
    seq = prompts[0] + out.token_ids
    lp = full_logprobs(model, seq)
    assert [int(lp[len(prompts[0]) + i - 1].argmax()) for i in range(10)] == out.token_ids


def test_prefix_reuse_equals_fresh_prefill(tiny, prompts):
    model, tok = tiny
    reuse, fresh = HFEngine(model, tok), HFEngine(model, tok, prefix_cache=False)
    first = reuse.generate(prompts, GREEDY)
    # Next turn: each row grows by its sampled tokens plus observations of different lengths;
    # the third episode ended (dropped) and the order of the rest is kept.
    nxt = [p + o.token_ids + list(range(20, 20 + k)) for k, (p, o) in enumerate(zip(prompts, first), 1)]
    nxt = [nxt[0], nxt[1], nxt[3]]
    a, b = reuse.generate(nxt, GREEDY), fresh.generate(nxt, GREEDY)
    kept = [len(prompts[i]) + 9 for i in (0, 1, 3)]  # prompt + all sampled tokens but the last
    assert [o.cached_prompt_tokens for o in a] == kept
    assert [o.cached_prompt_tokens for o in b] == [0, 0, 0]
    for x, y in zip(a, b):
        assert x.token_ids == y.token_ids and close(x.logprobs, y.logprobs)
    # A third turn on top of the extended cache, rows reordered.
    third = [nxt[2] + a[2].token_ids + [7], nxt[0] + a[0].token_ids + [8, 9]]
    c, d = reuse.generate(third, GREEDY), fresh.generate(third, GREEDY)
    assert all(o.cached_prompt_tokens > 0 for o in c)
    for x, y in zip(c, d):
        assert x.token_ids == y.token_ids and close(x.logprobs, y.logprobs)
    # A prompt that does not extend any kept row falls back to a full prefill.
    e = reuse.generate([prompts[1][:3] + [1, 2, 3]], GREEDY)[0]
    assert e.cached_prompt_tokens == 0


def test_per_sequence_stop_tokens(tiny, prompts):
    model, tok = tiny
    eng = HFEngine(model, tok)
    free = eng.generate(prompts[:2], GREEDY)
    stop_tok = free[0].token_ids[3]
    outs = eng.generate(prompts[:2], SamplingParams(temperature=0, max_new_tokens=10, ignore_eos=True,
                                                    stop_token_ids=[stop_tok]))
    k = free[0].token_ids.index(stop_tok)
    assert outs[0].token_ids == free[0].token_ids[:k + 1]  # the stop token is kept
    assert outs[0].finish_reason == "stop" and outs[0].matched_stop == stop_tok
    if stop_tok in free[1].token_ids:
        j = free[1].token_ids.index(stop_tok)
        assert outs[1].token_ids == free[1].token_ids[:j + 1]
    else:  # the other sequence runs on, unaffected
        assert outs[1].token_ids == free[1].token_ids and outs[1].finish_reason == "length"
    # The engine's eos ids stop generation unless ignore_eos.
    eng2 = HFEngine(model, tok, eos_token_ids=[stop_tok])
    assert eng2.generate([prompts[0]], SamplingParams(temperature=0, max_new_tokens=10))[0].token_ids == \
        free[0].token_ids[:k + 1]


def test_stop_strings(tiny, prompts):
    model, tok = tiny
    eng = HFEngine(model, tok)
    free = eng.generate([prompts[2]], GREEDY)[0]
    stop = tok.decode(free.token_ids[4:6])
    assert stop
    out = eng.generate([prompts[2]], SamplingParams(temperature=0, max_new_tokens=10, ignore_eos=True,
                                                     stop=[stop]))[0]
    assert out.finish_reason == "stop" and out.matched_stop == stop
    assert stop in tok.decode(out.token_ids) and stop not in tok.decode(out.token_ids[:-1])
    assert out.token_ids == free.token_ids[:len(out.token_ids)]
    with pytest.raises(EngineError):
        HFEngine(model).generate([prompts[2]], SamplingParams(stop=["x"]))


def test_seeded_sampling(tiny, prompts):
    model, tok = tiny
    eng = HFEngine(model, tok, prefix_cache=False)
    sp = SamplingParams(temperature=1.0, top_p=0.95, top_k=20, max_new_tokens=8, ignore_eos=True, seed=7)
    a, b = eng.generate(prompts, sp), eng.generate(prompts, sp)
    assert [o.token_ids for o in a] == [o.token_ids for o in b]
    c = eng.generate(prompts, SamplingParams(temperature=1.0, max_new_tokens=8, ignore_eos=True, seed=8))
    assert [o.token_ids for o in a] != [o.token_ids for o in c]
    # top_k=1 and a tiny top_p are greedy.
    g = eng.generate(prompts, GREEDY)
    for sp1 in (SamplingParams(temperature=1.0, top_k=1, max_new_tokens=10, ignore_eos=True, seed=1),
                SamplingParams(temperature=1.0, top_p=1e-6, max_new_tokens=10, ignore_eos=True, seed=1)):
        assert [o.token_ids for o in eng.generate(prompts, sp1)] == [o.token_ids for o in g]


def test_sampling_follows_the_filtered_distribution(tiny):
    model, tok = tiny
    eng = HFEngine(model, tok, prefix_cache=False)
    prompt = [11, 12, 13]
    n, k, temp = 3000, 5, 0.5
    outs = eng.generate([prompt] * n, SamplingParams(temperature=temp, top_k=k, max_new_tokens=1,
                                                     ignore_eos=True, seed=0))
    with torch.no_grad():
        logits = model(torch.tensor([prompt])).logits[0, -1].float()
    top = torch.topk(logits, k)
    probs = torch.softmax(top.values / temp, -1)
    counts = torch.zeros(k)
    for o in outs:
        assert o.token_ids[0] in top.indices.tolist()  # never outside the top-k
        counts[top.indices.tolist().index(o.token_ids[0])] += 1
    # Each frequency within 5 standard errors of its probability.
    se = (probs * (1 - probs) / n).sqrt()
    assert ((counts / n - probs).abs() <= 5 * se + 1e-3).all(), (counts / n, probs)


def test_score_topk_and_microbatching(tiny, prompts):
    model, tok = tiny
    seqs = [p + list(range(30, 30 + i)) for i, p in enumerate(prompts, 2)]
    big = HFEngine(model, tok).score(seqs, top_k=7, start=2)
    small = HFEngine(model, tok, score_token_budget=20, logits_chunk=3).score(seqs, top_k=7, start=2)
    for s, seq, sm in zip(big, seqs, small):
        lp = full_logprobs(model, seq)
        n = len(seq) - 2
        assert len(s) == n and s.start == 2
        ref_tok = torch.stack([lp[t - 1, seq[t]] for t in range(2, len(seq))])
        assert torch.allclose(s.token_logprobs, ref_tok, atol=TOL)
        ref_top = torch.topk(lp[1:len(seq) - 1], 7, dim=-1)
        assert torch.equal(s.topk_ids, ref_top.indices)
        assert torch.allclose(s.topk_logprobs, ref_top.values, atol=TOL)
        assert torch.allclose(sm.token_logprobs, s.token_logprobs, atol=TOL)
        assert torch.equal(sm.topk_ids, s.topk_ids)
    per = HFEngine(model, tok).score(seqs, top_k=0, start=[len(p) for p in prompts])
    assert [len(s) for s in per] == [len(q) - len(p) for q, p in zip(seqs, prompts)]
    assert per[0].topk_ids.shape == (len(per[0]), 0)


def test_update_weights(tmp_path, tiny, prompts):
    model, tok = tiny
    other, _ = build_tiny_model("1m", seed=1, tokenizer=tok)
    mine, _ = build_tiny_model("1m", seed=0, tokenizer=tok)
    eng = HFEngine(mine, tok)
    ref = HFEngine(other, tok).generate(prompts, GREEDY)
    before = eng.generate(prompts, GREEDY)
    assert [o.token_ids for o in before] != [o.token_ids for o in ref]
    eng.update_weights(other)
    assert [o.token_ids for o in eng.generate(prompts, GREEDY)] == [o.token_ids for o in ref]
    eng.update_weights(model.state_dict())
    assert [o.token_ids for o in eng.generate(prompts, GREEDY)] == [o.token_ids for o in before]
    save_pretrained(other, tok, tmp_path / "ckpt")
    eng.update_weights(tmp_path / "ckpt")
    assert [o.token_ids for o in eng.generate(prompts, GREEDY)] == [o.token_ids for o in ref]
    assert eng.weight_version == 3
    with pytest.raises(EngineError):
        eng.update_weights({"nope": torch.zeros(1)})
    with pytest.raises(EngineError):
        eng.update_weights(tmp_path / "empty")


def test_bad_inputs_raise_engine_errors(tiny):
    model, tok = tiny
    eng = HFEngine(model, tok)
    for bad in ([], [[]], [[1, "a"]], [[10**6]], "text", [[-1]]):
        with pytest.raises(EngineError):
            eng.generate(bad, GREEDY)
    for sp in (SamplingParams(temperature=-1), SamplingParams(top_p=0), SamplingParams(max_new_tokens=0),
               SamplingParams(temperature=math.nan), SamplingParams(stop=[""])):
        with pytest.raises(EngineError):
            eng.generate([[1, 2]], sp)
    with pytest.raises(EngineError):
        eng.generate([[1, 2]], GREEDY, overrides=[EmbedOverride([5], torch.zeros(1, model.config.hidden_size))])
    with pytest.raises(EngineError):
        eng.generate([[1, 2]], GREEDY, overrides=[EmbedOverride([0], torch.zeros(1, 3))])
    with pytest.raises(EngineError):
        eng.score([[1, 2, 3]], start=0)
    with pytest.raises(EngineError):
        EmbedOverride([2, 1], torch.zeros(2, 4))


def test_prefix_reuse_with_embedding_overrides(tiny, prompts):
    model, tok = tiny
    lat = torch.randn(3, model.config.hidden_size, generator=torch.Generator().manual_seed(0))
    ovs = [EmbedOverride([1, 2, 3], lat), None]
    reuse, fresh = HFEngine(model, tok), HFEngine(model, tok, prefix_cache=False)
    first = reuse.generate(prompts[1:3], GREEDY, overrides=ovs)
    nxt = [p + o.token_ids + [40, 41] for p, o in zip(prompts[1:3], first)]
    a = reuse.generate(nxt, GREEDY, overrides=ovs)
    b = fresh.generate(nxt, GREEDY, overrides=ovs)
    assert all(o.cached_prompt_tokens > 0 for o in a)
    for x, y in zip(a, b):
        assert x.token_ids == y.token_ids and close(x.logprobs, y.logprobs)
    # Other latents for the same tokens: the kept cache must not be reused.
    c = reuse.generate([p + o.token_ids + [1] for p, o in zip(nxt, a)], GREEDY,
                       overrides=[EmbedOverride([1, 2, 3], lat + 1), None])
    assert [o.cached_prompt_tokens for o in c] == [0, 0]
