"""Verdicts per second on HumanEval+ canonical solutions: ours vs ``evalplus.evaluate`` in the same run.

    .venv/bin/python benchmarks/bench_evalplus.py [--dataset humaneval] [--mode official] [--workers 2]
        [--backend local] [--repeats 3] [--limit N]

Each repeat runs, on the same samples file (every task's prompt + canonical solution):
  1. ``python -m evalplus.evaluate --dataset D --samples F --parallel W`` (its own expected-output cache
     warm, its result file removed first), timed end to end (process start, data and cache loading);
  2. ours: load the problems, then ``EvalPlusVerifier.check_many`` with W workers, timed end to end in
     this process. Our cache first receives evalplus's own oracle (``import_evalplus_groundtruth``), so
     both sides use the same expected outputs and reference times, i.e. the same time limits.
Peak memory is the largest summed RSS of each side's process tree (sampled every 50 ms). The verdicts
(base_status, plus_status of every sample) must be identical, or the script exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402

from envs.evalplus import data as ep_data  # noqa: E402
from envs.evalplus.verifier import EvalPlusVerifier  # noqa: E402
from envs.sandbox import SandboxConfig  # noqa: E402


class TreeRss:
    """Peak of the summed RSS of a process and all its descendants, sampled in a thread."""

    def __init__(self, pid: int):
        self.root, self.peak, self._stop = psutil.Process(pid), 0, threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            total = 0
            try:
                for p in [self.root] + self.root.children(recursive=True):
                    try:
                        total += p.memory_info().rss
                    except psutil.Error:
                        pass
            except psutil.Error:
                pass
            self.peak = max(self.peak, total)
            self._stop.wait(0.05)

    def __enter__(self) -> TreeRss:
        self._t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._t.join()


def run_evalplus(dataset: str, samples: Path, workers: int, env: dict) -> tuple[float, int, dict]:
    results = samples.with_name(samples.stem + "_eval_results.json")
    results.unlink(missing_ok=True)
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "evalplus.evaluate",
            "--dataset",
            dataset,
            "--samples",
            str(samples),
            "--parallel",
            str(workers),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    with TreeRss(proc.pid) as mem:
        rc = proc.wait()
    dt = time.perf_counter() - t0
    if rc != 0:
        raise SystemExit(f"evalplus.evaluate exited {rc}")
    verdicts = {}
    for task_id, rows in json.loads(results.read_text())["eval"].items():
        for i, r in enumerate(rows):
            verdicts[(task_id, i)] = (r["base_status"], r["plus_status"])
    return dt, mem.peak, verdicts


def run_ours(
    dataset: str, samples: list[dict], workers: int, mode: str, backend: str
) -> tuple[float, int, dict]:
    ep_data._load.cache_clear()
    t0 = time.perf_counter()
    with TreeRss(os.getpid()) as mem:
        with EvalPlusVerifier(dataset, mode=mode, sandbox_config=SandboxConfig(backend=backend)) as v:
            items = [(s["task_id"], v.solution_of(s)) for s in samples]
            res = v.check_many(items, workers=workers)
    dt = time.perf_counter() - t0
    counters: dict[str, int] = {}
    verdicts = {}
    for s, r in zip(samples, res):
        i = counters.get(s["task_id"], 0)
        counters[s["task_id"]] = i + 1
        verdicts[(s["task_id"], i)] = (r.base_status, r.plus_status)
    return dt, mem.peak, verdicts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="humaneval", choices=["humaneval", "mbpp"])
    ap.add_argument("--mode", default="official", choices=["official", "strict"])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--backend", default="local", choices=["local", "docker"])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--own-groundtruth",
        action="store_true",
        help="keep our own expected-output cache instead of copying evalplus's (reference times differ)",
    )
    args = ap.parse_args()

    problems = ep_data.load_problems(args.dataset)
    samples = [{"task_id": t, "solution": p["prompt"] + p["canonical_solution"]} for t, p in problems.items()]
    var = "HUMANEVAL_OVERRIDE_PATH" if args.dataset == "humaneval" else "MBPP_OVERRIDE_PATH"
    env = dict(os.environ, **{var: str(ep_data.data_file(args.dataset))})
    tmp = Path(tempfile.mkdtemp(prefix="bench-evalplus-"))
    path = tmp / "samples.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in samples))
    print("warming evalplus's own expected-output cache (first run, untimed) ...", flush=True)
    run_evalplus(args.dataset, path, args.workers, env)
    if not args.own_groundtruth:  # same oracle and reference times (time limits) on both sides
        print(
            f"our cache <- evalplus's oracle: {ep_data.import_evalplus_groundtruth(args.dataset)} tasks",
            flush=True,
        )
    for t in problems:
        ep_data.expected_outputs(args.dataset, t)

    rows = []
    for rep in range(args.repeats):
        e_dt, e_mem, e_v = run_evalplus(args.dataset, path, args.workers, env)
        o_dt, o_mem, o_v = run_ours(args.dataset, samples, args.workers, args.mode, args.backend)
        same = e_v == o_v
        rows.append((e_dt, o_dt, e_mem, o_mem, same))
        print(
            f"repeat {rep + 1}: evalplus {e_dt:.2f} s ({len(samples) / e_dt:.2f}/s, "
            f"peak {e_mem / 2**20:.0f} MiB)"
            f" | ours {o_dt:.2f} s ({len(samples) / o_dt:.2f}/s, peak {o_mem / 2**20:.0f} MiB)"
            f" | ratio {e_dt / o_dt:.2f}x | identical verdicts: {same}",
            flush=True,
        )
        if not same:
            diff = {k: (e_v.get(k), o_v.get(k)) for k in set(e_v) | set(o_v) if e_v.get(k) != o_v.get(k)}
            print("differences (evalplus, ours):", json.dumps({f"{k[0]}#{k[1]}": v for k, v in diff.items()}))
    e_med = statistics.median(r[0] for r in rows)
    o_med = statistics.median(r[1] for r in rows)
    passed = sum(1 for v in o_v.values() if v == ("pass", "pass"))
    print(
        json.dumps(
            {
                "dataset": args.dataset,
                "mode": args.mode,
                "backend": args.backend,
                "workers": args.workers,
                "samples": len(samples),
                "repeats": args.repeats,
                "machine": f"{platform.node()} {os.cpu_count()} cpu",
                "evalplus_median_s": round(e_med, 2),
                "ours_median_s": round(o_med, 2),
                "evalplus_verdicts_per_s": round(len(samples) / e_med, 2),
                "ours_verdicts_per_s": round(len(samples) / o_med, 2),
                "ratio": round(e_med / o_med, 2),
                "evalplus_peak_mib": round(max(r[2] for r in rows) / 2**20),
                "ours_peak_mib": round(max(r[3] for r in rows) / 2**20),
                "identical": all(r[4] for r in rows),
                "pass_both": passed,
                "load_avg": os.getloadavg(),
            }
        )
    )
    return 0 if all(r[4] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
