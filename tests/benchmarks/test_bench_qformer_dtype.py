"""benchmarks/bench_qformer_dtype.py: both dtypes timed in one run, the ratio written with the CPU's flags."""

from __future__ import annotations

import json

from benchmarks.bench_qformer_dtype import main


def test_it_times_both_dtypes_and_writes_their_ratio(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["--d", "16", "--heads", "2", "--latents", "2", "--depth", "1", "--tokens", "8", "--repeats", "3",
                 "--json", str(out)]) == 0
    r = json.loads(out.read_text())
    assert r["bf16_over_fp32"] == r["bfloat16_median_s"] / r["float32_median_s"] > 0
    assert isinstance(r["bf16_flags"], list) and r["shape"]["repeats"] == 3
    assert "bfloat16" in capsys.readouterr().out
