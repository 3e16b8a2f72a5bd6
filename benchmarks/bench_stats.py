"""`lopd stats` over 100k episodes: wall time and peak memory.

    .venv/bin/python benchmarks/bench_stats.py --episodes 100000

Target (issue 9): under 10 s on 2 cores, streaming with bounded memory. The peer in the same run
is the naive path that builds full Episode dataclasses with read_traces before counting.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def synth(path: Path, n: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    tools = ["get_user", "list_orders", "cancel_order", "refund", "search", "update_address"]
    with open(path, "w") as f:
        for i in range(n):
            steps = []
            for j in range(rng.randint(1, 8)):
                calls = [{"name": rng.choice(tools), "arguments": {"id": rng.randint(1, 20), "note": "x" * rng.randint(0, 40)},
                          "parse_error": None, "executed": k == 0, "result": "ok " * rng.randint(1, 30),
                          "error": None if rng.random() > 0.1 else "Error: boom"} for k in range(rng.randint(0, 3))]
                steps.append({"index": j, "text": "<tool_call>...</tool_call>" * len(calls),
                              "token_ids": [rng.randint(0, 5000) for _ in range(rng.randint(20, 120))] if j == 0 else None,
                              "logprobs": None, "calls": calls, "parse_error": None, "observation": "ok",
                              "observation_token_ids": None, "reward": 0.0, "terminated": False, "truncated": False,
                              "timings": {}})
            ep = {"env_id": "lopd/envscaler-v0", "task_id": f"t{i % 500}", "split": "train", "seed": i, "messages": [],
                  "tools": [], "prompt_token_ids": None, "steps": steps, "reward": rng.random(), "terminated": True,
                  "truncated": False, "timings": {}, "meta": {"run": "a" if i % 2 else "b"}, "version": 1}
            f.write(json.dumps(ep, separators=(",", ":")) + "\n")


CHILD = """
import resource, sys, time
t = time.perf_counter()
if sys.argv[1] == "ours":
    from harness.stats import collect, table_rows
    rows = table_rows(collect([sys.argv[2]], by="run"))
else:
    from envs.trace import read_traces
    from harness.stats import episode_stats
    import json
    eps = list(read_traces(sys.argv[2]))           # naive: materialise every episode first
    rows = [episode_stats(json.loads(e.to_json())) for e in eps]
print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""


def measure(mode: str, path: Path) -> tuple[float, float]:
    out = subprocess.run([sys.executable, "-c", CHILD, mode, str(path)], capture_output=True, text=True, check=True)
    secs, mib = out.stdout.split()
    return float(secs), float(mib)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "traces.jsonl"
        synth(path, args.episodes)
        size = path.stat().st_size / 2**20
        print(f"{args.episodes} episodes, {size:.0f} MiB of JSONL")
        results = {}
        for mode in ("ours", "naive"):
            runs = [measure(mode, path) for _ in range(args.repeats)]
            results[mode] = (statistics.median(r[0] for r in runs), max(r[1] for r in runs))
            print(f"{mode:6s} median {results[mode][0]:.2f} s  peak RSS {results[mode][1]:.0f} MiB")
        print(f"speed-up over naive: {results['naive'][0] / results['ours'][0]:.2f}x; "
              f"memory ratio: {results['naive'][1] / results['ours'][1]:.2f}x")


if __name__ == "__main__":
    main()
