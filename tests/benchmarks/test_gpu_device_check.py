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
