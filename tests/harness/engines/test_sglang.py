"""SGLang client: exact request payloads (SGLang's documented /generate API) and response parsing.

Runs against FakeSGLang (tests/harness/engines/conftest.py), a local recorder that answers in SGLang's
documented shapes. This proves what we send and how we read answers, not that a real server
agrees; benchmarks/gpu_smoke.py checks a real one.
"""
import math
import socket

import pytest
import torch

from harness.engines import EmbedOverride, EngineError, SamplingParams, SGLangEngine
from harness.engines.sglang import SGLangFeatureError, SGLangUnavailableError


def lp(pos, tok):
    """The fake server's log-prob of ``tok`` at ``pos`` (see conftest.FakeSGLang)."""
    return -0.01 * pos - 0.001 * tok - 0.1


def posts(fake, path="/generate"):
    return [body for method, p, body in fake.requests if method == "POST" and p == path]


def test_generate_payload_and_parsing(fake):
    eng = SGLangEngine(fake.url, eos_token_ids=[2])
    sp = SamplingParams(temperature=0.7, top_p=0.95, top_k=20, max_new_tokens=4, stop=["</tool_call>"],
                        stop_token_ids=[7], seed=3)
    outs = eng.generate([[1, 2, 3], [4, 5]], sp)
    (body,) = posts(fake)
    assert body == {
        "input_ids": [[1, 2, 3], [4, 5]],
        "sampling_params": {"temperature": 0.7, "top_p": 0.95, "top_k": 20, "max_new_tokens": 4,
                            "skip_special_tokens": False, "no_stop_trim": True, "stop": ["</tool_call>"],
                            "stop_token_ids": [7], "sampling_seed": 3},
        "return_logprob": True, "logprob_start_len": -1, "stream": False,
    }
    gen = [(6 + 7 * k) % 97 + 3 for k in range(4)]
    assert outs[0].token_ids == gen and outs[0].finish_reason == "length"
    assert outs[0].logprobs == pytest.approx([lp(3 + k, t) for k, t in enumerate(gen)])
    assert outs[0].prompt_len == 3 and outs[0].text == " ".join(map(str, gen))
    # Defaults: no top-k (-1), no stop lists, no seed; ignore_eos passes through.
    eng.generate([[1]], SamplingParams(temperature=0, max_new_tokens=2, ignore_eos=True))
    assert posts(fake)[-1]["sampling_params"] == {"temperature": 0.0, "top_p": 1.0, "top_k": -1,
                                                  "max_new_tokens": 2, "skip_special_tokens": False,
                                                  "no_stop_trim": True, "ignore_eos": True}


def test_stop_finish_keeps_the_stop_token(fake):
    eng = SGLangEngine(fake.url)
    fake.finish = {"type": "stop", "matched": 151645}
    out = eng.generate([[1, 2]], SamplingParams(max_new_tokens=2))[0]
    assert out.finish_reason == "stop" and out.matched_stop == 151645
    assert out.token_ids[-1] == 151645 and math.isnan(out.logprobs[-1]) and len(out.token_ids) == 3
    fake.finish = {"type": "stop", "matched": "</tool_call>"}
    out = eng.generate([[1, 2]], SamplingParams(max_new_tokens=2))[0]
    assert out.matched_stop == "</tool_call>" and len(out.token_ids) == 2
    fake.finish = {"type": "abort", "message": "out of memory"}
    with pytest.raises(EngineError, match="out of memory"):
        eng.generate([[1, 2]], SamplingParams(max_new_tokens=2))


def test_score_payload_and_alignment(fake):
    eng = SGLangEngine(fake.url)
    seqs = [[10, 11, 12, 13, 14], [20, 21, 22]]
    out = eng.score(seqs, top_k=3, start=2)
    (body,) = posts(fake)
    assert body == {"input_ids": seqs, "sampling_params": {"max_new_tokens": 0, "temperature": 0.0},
                    "return_logprob": True, "logprob_start_len": 1, "top_logprobs_num": 3, "stream": False}
    s = out[0]
    assert s.start == 2 and len(s) == 3
    assert torch.allclose(s.token_logprobs, torch.tensor([lp(p, seqs[0][p]) for p in (2, 3, 4)]))
    assert s.topk_ids.tolist() == [[0, 1, 2]] * 3
    assert torch.allclose(s.topk_logprobs[1], torch.tensor([lp(3, c) for c in range(3)]))
    # Different starts go out as separate requests; top_k=0 asks for no top log-probs.
    eng.score(seqs, top_k=0, start=[1, 3])
    bodies = posts(fake)[1:]
    assert [(b["input_ids"], b["logprob_start_len"]) for b in bodies] == [([seqs[0]], 0), ([seqs[1]], 2)]
    assert all("top_logprobs_num" not in b for b in bodies)
    fake.misalign = True
    with pytest.raises(EngineError, match="aligned"):
        eng.score(seqs, top_k=0, start=1)


def test_overrides_as_input_embeds(fake):
    table = torch.arange(40 * 4, dtype=torch.float32).view(40, 4)
    eng = SGLangEngine(fake.url, embedding=table)
    lat = torch.full((2, 4), -1.0)
    ov = EmbedOverride([1, 2], lat)
    outs = eng.generate([[5, 9, 9, 6], [7, 8]], SamplingParams(max_new_tokens=2), overrides=[ov, None])
    plain, embeds = posts(fake)
    assert plain["input_ids"] == [[7, 8]]  # rows without overrides keep the id path
    expected = table[[5, 9, 9, 6]].clone()
    expected[1:3] = lat
    assert "input_ids" not in embeds and embeds["input_embeds"] == [expected.tolist()]
    assert len(outs) == 2 and outs[0].prompt_len == 4
    # Scoring an embeds request asks for the real next tokens by id.
    s = eng.score([[5, 9, 9, 6, 3]], top_k=2, start=3, overrides=[ov])[0]
    body = posts(fake)[-1]
    assert body["token_ids_logprob"] == [[3, 6]] and body["logprob_start_len"] == 2
    assert torch.allclose(s.token_logprobs, torch.tensor([lp(3, 6), lp(4, 3)]))
    with pytest.raises(SGLangFeatureError, match="embedding"):
        SGLangEngine(fake.url).generate([[5, 9]], SamplingParams(), overrides=[EmbedOverride([1], lat[:1])])


def test_positional_overrides(fake):
    eng = SGLangEngine(fake.url, override_mode="positional")
    lat = torch.tensor([[0.5, -0.5]])
    eng.generate([[5, 9, 6]], SamplingParams(max_new_tokens=1), overrides=[EmbedOverride([1], lat)])
    body = posts(fake)[-1]
    assert body["input_ids"] == [[5, 9, 6]]
    assert body["positional_embed_overrides"] == [{"embeds": [[0.5, -0.5]], "positions": [1]}]
    fake.accept_positional = False
    for code in (400, 422):
        fake.reject_code = code
        with pytest.raises(SGLangFeatureError, match="positional_embed_overrides"):
            eng.generate([[5, 9, 6]], SamplingParams(max_new_tokens=1), overrides=[EmbedOverride([1], lat)])


def test_update_weights(fake):
    eng = SGLangEngine(fake.url)
    eng.update_weights("/ckpt/step-10")
    assert posts(fake, "/update_weights_from_disk") == [{"model_path": "/ckpt/step-10"}]
    fake.update_ok = False
    with pytest.raises(EngineError, match="bad path"):
        eng.update_weights("/nope")
    with pytest.raises(EngineError):
        eng.update_weights(torch.nn.Linear(2, 2))


def test_health_and_version(fake, fake_factory):
    eng = SGLangEngine(fake.url)
    assert eng.health() and eng.version() == "0.5.4"
    assert eng.model_info()["is_generation"] is True
    newer = fake_factory(info_path="/server_info")
    assert SGLangEngine(newer.url).version() == "0.5.4"
    assert [p for _, p, _ in newer.requests] == ["/get_server_info", "/server_info"]


def test_clear_errors(fake):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    down = SGLangEngine(f"http://127.0.0.1:{port}", timeout=5)
    with pytest.raises(SGLangUnavailableError, match=f"127.0.0.1:{port}"):
        down.health()
    with pytest.raises(SGLangUnavailableError):
        down.generate([[1]], SamplingParams())
    eng = SGLangEngine(fake.url)
    with pytest.raises(SGLangFeatureError, match="/nowhere"):
        eng._request("POST", "/nowhere", {})
    with pytest.raises(EngineError):
        eng.generate([], SamplingParams())
    with pytest.raises(ValueError):
        SGLangEngine(fake.url, override_mode="magic")
