"""benchmarks/gpu_device_check.py's checks run on the CPU too (the device runs them on CUDA)."""

from __future__ import annotations

import json

import benchmarks.gpu_device_check as gdc


def test_the_engine_check_compares_float32_and_bfloat16_decodes_and_writes_json(tmp_path):
    out = tmp_path / "r.json"
    assert gdc.main(["--device", "cpu", "--only", "engine", "--work", str(tmp_path), "--out", str(out)]) == 0
    res = json.loads(out.read_text())["engine"]
    assert res["float32"]["all_tokens_equal"] and res["float32"]["max_logprob_diff"] == 0.0  # cpu against cpu
    assert len(res["bfloat16"]["common_prefix"]) == 8 and res["pass"]


def test_without_cuda_it_says_so_and_exits_2(tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert gdc.main(["--work", str(tmp_path), "--out", str(tmp_path / "r.json")]) == 2


SMALL = {"hidden_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
         "intermediate_size": 256}


def _small_shape(path, layers, vocab=None, dtype="bfloat16"):
    """save_shape at a small width, so the check's two learner steps take seconds on the CPU."""
    import torch

    from harness.models.shapes import random_qwen3
    from harness.models.tiny import build_tiny_model, save_pretrained

    _, tok = build_tiny_model("1m")
    save_pretrained(random_qwen3(SMALL, tok, layers=layers, vocab=vocab).to(getattr(torch, dtype)), tok, path)


def test_the_memory_check_predicts_each_step_beside_its_measurement(tmp_path, monkeypatch):
    """On the CPU there is no allocator peak to compare, so only the prediction's wiring is checked here
    (its accuracy on the CPU: benchmarks/bench_memory_model.py; on a GPU this check compares them)."""
    monkeypatch.setattr(gdc, "save_shape", _small_shape)
    res = gdc.check_memory(tmp_path, 1, [1024], "cpu", vocab=1024)
    assert res["pass"], res
    for learner in ("grpo", "lopd"):
        case = res[f"{learner}-1024"]
        assert case["predicted_gib"] > 0 and case["peak_above_gib"] is None
        assert case["predicted_over_measured"] is None and case["predicted_phase"]
    assert res["lopd-1024"]["predicted_gib"] > res["grpo-1024"]["predicted_gib"]
