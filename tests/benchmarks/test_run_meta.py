"""benchmarks/run_meta.py: what every benchmark result records about its run."""

from __future__ import annotations

import shlex

import torch  # noqa: F401  (run_meta records the version of an imported torch)

from benchmarks.run_meta import run_meta


def test_it_records_when_where_and_the_command_that_reproduces_the_run():
    meta = run_meta("/any/where/benchmarks/bench_x.py", ["--out", "a b.json"], threads=2)
    assert shlex.split(meta["command"]) == ["python", "benchmarks/bench_x.py", "--out", "a b.json"]
    assert meta["date"].endswith("UTC") and meta["cpus"] >= 1 and len(meta["load_avg"]) == 3
    assert meta["threads"] == 2 and "torch" in meta  # the test session has imported torch
