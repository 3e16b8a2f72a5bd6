"""Per-execution overhead of the sandbox backends, beside plain process / container starts.

    .venv/bin/python benchmarks/bench_sandbox.py [--runs 30] [--docker-runs 15] [--no-docker]

For each way of running the trivial program ``print(1)`` it reports the median and p90 wall time of
one execution, run one after another:
  * peer ``subprocess``: ``python -I -c`` in a fresh process (no isolation at all);
  * ``local`` (full isolation: namespaces, chroot, throw-away uid) and ``local`` with isolation 'none';
  * ``local`` with the EvalPlus preload (numpy + evalplus imported once in the fork server) running
    ``import numpy, evalplus.eval``, beside the peer ``python -I -c 'import numpy, evalplus.eval'``;
  * peer ``docker run --rm --network none IMAGE python3 -c ...`` (the docker CLI, a cold container);
  * ``docker`` backend with a warm pool (2 started containers) and with no pool (create+start per run).
It also reports the peak summed RSS of this process and its children during the local runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_evalplus import TreeRss  # noqa: E402
from envs.sandbox import SandboxConfig, make_sandbox  # noqa: E402

PROGRAM = "print(1)"
HEAVY = "import numpy, evalplus.eval\nprint(1)"


def timed(fn, runs: int) -> dict:
    fn()  # warm-up (starts the zygote / fills the pool)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    times.sort()
    return {
        "median_ms": round(1000 * statistics.median(times), 1),
        "p90_ms": round(1000 * times[int(0.9 * (len(times) - 1))], 1),
        "runs": runs,
    }


def ok(r) -> None:
    if not r.ok or r.stdout.strip() != b"1":
        raise SystemExit(f"sandbox run failed: {r}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--docker-runs", type=int, default=15)
    ap.add_argument("--no-docker", action="store_true")
    args = ap.parse_args()
    rows: dict[str, dict] = {}
    py = [sys.executable, "-I", "-c"]
    rows["peer: subprocess python -I -c"] = timed(
        lambda: subprocess.run(py + [PROGRAM], check=True, capture_output=True), args.runs
    )
    with TreeRss(os.getpid()) as mem:
        with make_sandbox(SandboxConfig(backend="local")) as sb:
            rows[f"local ({sb.isolation})"] = timed(lambda: ok(sb.run(PROGRAM)), args.runs)
        with make_sandbox(SandboxConfig(backend="local", isolation="none")) as sb:
            rows[f"local ({sb.isolation})"] = timed(lambda: ok(sb.run(PROGRAM)), args.runs)
        rows["peer: subprocess python -I -c 'import numpy, evalplus.eval'"] = timed(
            lambda: subprocess.run(py + [HEAVY], check=True, capture_output=True), args.runs
        )
        with make_sandbox(SandboxConfig(backend="local"), preload=("numpy", "evalplus.eval")) as sb:
            rows[f"local ({sb.isolation}, preloaded) 'import numpy, evalplus.eval'"] = timed(
                lambda: ok(sb.run(HEAVY)), args.runs
            )
    local_peak = mem.peak
    if not args.no_docker:
        from envs.sandbox.docker_backend import docker_unavailable_reason

        reason = docker_unavailable_reason()
        if reason:
            print(f"docker skipped: {reason}", file=sys.stderr)
        else:
            cfg = SandboxConfig(backend="docker")
            rows["peer: docker run --rm --network none"] = timed(
                lambda: subprocess.run(
                    [
                        "docker",
                        "run",
                        "--rm",
                        "--network",
                        "none",
                        cfg.docker_image,
                        "python3",
                        "-I",
                        "-c",
                        PROGRAM,
                    ],
                    check=True,
                    capture_output=True,
                ),
                args.docker_runs,
            )
            for pool in (2, 0):
                with make_sandbox(SandboxConfig(backend="docker", docker_pool_size=pool)) as sb:
                    if pool:
                        time.sleep(3)  # let the pool fill before timing
                    rows[f"docker (pool {pool})"] = timed(lambda: ok(sb.run(PROGRAM)), args.docker_runs)
    width = max(len(k) for k in rows)
    for k, v in rows.items():
        print(
            f"{k:<{width}}  median {v['median_ms']:8.1f} ms   p90 {v['p90_ms']:8.1f} ms   ({v['runs']} runs)"
        )
    print(f"peak RSS of this process + children during the local runs: {local_peak / 2**20:.0f} MiB")
    print(
        json.dumps({"rows": rows, "local_peak_mib": round(local_peak / 2**20), "load_avg": os.getloadavg()})
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
