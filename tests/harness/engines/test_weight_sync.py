"""The in-memory weight sync: its wire format over a real gloo group, and a REAL vLLM server (`make vllm`)
whose log-probs after a sync equal the trainer's."""

from __future__ import annotations

import json
import threading

import pytest
import torch

from harness.engines import HFEngine, SamplingParams
from harness.engines.base import EngineError
from harness.engines.vllm import VLLMEngine
from harness.engines.worker_ext.lopd_vllm_receiver import make_group, unpack
from harness.engines.weight_sync import CollectiveSync, buckets, free_port, pack, untied
from vllm_server import pinned_model


def test_buckets_keep_order_and_bound_their_bytes():
    state = {"a": torch.zeros(10), "b": torch.zeros(20), "c": torch.zeros(100), "d": torch.zeros(5)}
    groups = buckets(state, bucket_bytes=128)  # 48 + 80 B (padded to 16) fit; c (400 B) alone; d after it
    assert [[n for n, _ in g] for g in groups] == [["a", "b"], ["c"], ["d"]]
    assert [n for g in groups for n, _ in g] == list(state)


def test_untied_adds_the_head_once():
    emb = torch.ones(4, 2)
    assert untied({"model.embed_tokens.weight": emb})["lm_head.weight"] is emb
    head = torch.zeros(4, 2)
    assert untied({"model.embed_tokens.weight": emb, "lm_head.weight": head})["lm_head.weight"] is head


def test_wire_format_round_trips_over_gloo_in_every_dtype():
    """The sender's packing and the receiver's unpacking agree byte for byte (two ranks of one real gloo
    group, in threads), with bf16, fp32 and int64 tensors and a bucket of one oversized tensor."""
    g = torch.Generator().manual_seed(0)
    state = {"w": torch.randn(3, 5, generator=g), "h": torch.randn(7, generator=g).to(torch.bfloat16),
             "i": torch.arange(6).reshape(2, 3), "big": torch.randn(64, generator=g)}
    groups = buckets(state, bucket_bytes=128)
    meta = [[[n, str(t.dtype).removeprefix("torch."), list(t.shape)] for n, t in grp] for grp in groups]
    port, got = free_port("127.0.0.1"), {}

    def receiver() -> None:
        _, pg = make_group("127.0.0.1", port, 1, 2, "gloo", 30.0)
        got.update({n: t.clone() for n, t in unpack(pg, json.loads(json.dumps(meta)), torch.device("cpu"))})

    t = threading.Thread(target=receiver)
    t.start()
    _, pg = make_group("127.0.0.1", port, 0, 2, "gloo", 30.0)
    for grp in groups:
        pg.broadcast(pack([x for _, x in grp]), 0).wait()
    t.join(30)
    assert list(got) == list(state)
    for name, want in state.items():
        assert got[name].dtype == want.dtype and torch.equal(got[name], want)


def test_bad_messages_are_refused():
    with pytest.raises(ValueError, match="unknown dtype"):
        list(unpack(None, [[["w", "os.system", [1]]]], torch.device("cpu")))
    with pytest.raises(ValueError, match="gloo or nccl"):
        CollectiveSync(None, backend="mpi")
    with pytest.raises(EngineError, match="not connected"):
        VLLMEngine("http://127.0.0.1:9", retries=0).update_weights({"w": torch.zeros(1)})


@pytest.mark.slow
def test_after_an_in_memory_sync_the_servers_logprobs_equal_the_trainers(vllm_server):
    """Perturbed weights (the tied embedding and head included) broadcast over gloo into the real server:
    its greedy decode and log-probs are then the perturbed model's, and no file was written."""
    from test_vllm import fp32_tolerance, prompts
    from vllm_server import restore_base

    pool, base = vllm_server
    eng = pool.engines[0]
    model, tok = pinned_model()
    with torch.no_grad():
        g = torch.Generator().manual_seed(1)
        for prm in model.parameters():
            prm.add_(0.02 * torch.randn(prm.shape, generator=g))
    p = prompts(tok)[0]
    sp = SamplingParams(temperature=0.0, max_new_tokens=32)
    want = HFEngine(model, tok).generate([p], sp)[0]
    try:
        eng.connect_weight_sync(backend="gloo", timeout_s=120)
        assert eng.weight_sync == "collective" and pool.weight_sync == "collective"
        pool.update_weights(model.state_dict())
        got = eng.generate([p], sp)[0]
        assert got.token_ids == want.token_ids
        assert max(abs(a - b) for a, b in zip(got.logprobs, want.logprobs)) <= fp32_tolerance(model, 30.0)
        seq = p + want.token_ids
        srv = eng.score([seq], top_k=5, start=len(p))[0]
        ref = HFEngine(model, tok).score([seq], top_k=5, start=len(p))[0]
        assert not srv.token_logprobs.isnan().any()
        gap = (srv.token_logprobs - ref.token_logprobs).abs().max().item()
        assert gap <= fp32_tolerance(model, 30.0)
        base_model, _ = pinned_model()
        eng.update_weights(base_model.state_dict())  # a second sync on the same group
        assert eng.generate([p], sp)[0].token_ids == HFEngine(base_model, tok).generate([p], sp)[0].token_ids
    finally:
        eng.disconnect_weight_sync()
        restore_base(pool, base)


@pytest.mark.slow
def test_a_method_the_workers_lack_is_an_http_error_the_sync_names(vllm_server):
    """What a server without the receiver answers (HTTP 500 from /collective_rpc), which workers() turns
    into WeightSyncUnavailable with the way to start the server."""
    from harness.engines.http import HTTPStatusError

    pool, _ = vllm_server
    sync = CollectiveSync(pool.engines[0].http)
    with pytest.raises(HTTPStatusError):
        sync._rpc("lopd_no_such_method", timeout=60.0)
    assert sync.workers() == 1  # the session server was launched with the receiver
