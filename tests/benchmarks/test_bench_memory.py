"""benchmarks/bench_memory.py at a tiny size: every case runs in its capped child and reports a peak."""

import json

import pytest

from benchmarks import bench_memory


def test_help_parses(capsys):
    with pytest.raises(SystemExit) as e:
        bench_memory.main(["--help"])
    assert e.value.code == 0 and "--cap-gib" in capsys.readouterr().out


@pytest.mark.slow  # two child processes, each building a tiny trainer (LOPD's chunked path: tests/lopd)
def test_cases_report_peaks_before_and_after(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert bench_memory.main(["--learners", "grpo", "--vocab", "1024", "--tokens", "64", "--row-tokens", "32",
                              "--chunks", "0", "16", "--cap-gib", "8", "--work", str(tmp_path / "work"),
                              "--out", str(out)]) == 0
    res = json.loads(out.read_text())["results"]
    assert [(r["learner"], r["chunk"]) for r in res] == [("grpo", 0), ("grpo", 16)]
    for r in res:
        assert "error" not in r, r
        assert r["tokens"] == 64 and r["rows"] == 2 and r["peak_mib"] > 0 and r["step_cpu_s"] > 0
    assert "unchunked" in capsys.readouterr().out
