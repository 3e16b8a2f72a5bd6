"""Peak memory of one learner step with and without ``model.gradient_checkpointing``, at Qwen3-4B's width.

    .venv/bin/python benchmarks/bench_checkpointing.py --tokens 1024 --out benchmarks/results/checkpointing.json

The model is ``--layers`` layers of Qwen3-4B's shape (hidden 2,560, 32/8 heads, MLP 9,728; random weights
in ``--dtype``: ``gpu_device_check.save_shape``) with a ``--vocab``-row embedding (default 1,024, the tiny
model's; 151,936 is Qwen3's, whose chunked head adds the same few chunks either way, and bf16 is slow on
CPUs), the batch ``--tokens`` supervised tokens of synthetic shop rollouts in one micro-batch (``bench_memory.synthetic_batch``). Each case (learner x
checkpointing) runs in a fresh process: it builds the trainer, takes one warm-up step (the optimizers'
states now exist), resets the kernel's peak-RSS counter (``/proc/self/clear_refs``), takes a second step
and reports the peak RSS above the RSS just before it (``VmHWM - VmRSS``): what the step itself adds.
Also the second step's CPU seconds. On a GPU the same numbers come from ``gpu_device_check.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _status_mib(field: str) -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":")) / 1024


def run_case(work: Path, learner: str, tokens: int, checkpointing: bool, dtype: str) -> dict:
    """One case in this process: peak RSS a second learner step adds (MiB), and its CPU seconds."""
    from benchmarks.bench_memory import synthetic_batch
    from harness.config import load_config
    from harness.training.train_config import TrainConfig
    from harness.training.trainer import Trainer

    rows = max(1, tokens // 1024)
    ov = [f"learner={learner}", f"run_dir={work}/run-{learner}-{tokens}-{checkpointing}", "env.id=lopd/shop-v0",
          f"model.path={work / 'shape'}", f"model.dtype={dtype}", f"model.gradient_checkpointing={checkpointing}",
          f"rollouts_per_step={rows}", f"group_size={min(rows, 4) if learner == 'grpo' else 1}",
          "micro_batch_tokens=100000000", "log.progress=false", "log.traces=false", "eval.at_start=false",
          "eval.at_end=false", "eval.every_generations=0", "checkpoint.every_steps=0", "checkpoint.resume=false",
          f"bank.traces=[{work}/shop.jsonl]", "bank.embedder=hashing", "lopd.allow_self_retrieval=true",
          "lopd.composer_init=random", f"lopd.composer.qformer.dtype={dtype}"]
    tr = Trainer(load_config(TrainConfig, None, ov))
    batch, _ = synthetic_batch(tr, rows, 1024)
    tr.learner.train_step(batch)  # warm-up: AdamW's states are made in the first step
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    held = _status_mib("VmRSS")
    t0 = time.process_time()
    m = tr.learner.train_step(batch)
    cpu = time.process_time() - t0
    return {"peak_above_mib": round(_status_mib("VmHWM") - held, 1), "held_mib": round(held, 1),
            "step_cpu_s": round(cpu, 2), "loss": m["loss"], "tokens": m["tokens"]}


def child(args: argparse.Namespace, learner: str, tokens: int, checkpointing: bool) -> dict:
    cmd = [sys.executable, __file__, "--one", learner, str(tokens), str(int(checkpointing)), "--work", args.work,
           "--layers", str(args.layers), "--dtype", args.dtype]
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "TOKENIZERS_PARALLELISM": "false"}
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    lines = r.stdout.strip().splitlines()
    if r.returncode != 0 or not lines:
        return {"error": f"exit {r.returncode}: {r.stderr.strip()[-400:]}"}
    return json.loads(lines[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, nargs="*", default=[1024])
    ap.add_argument("--learners", nargs="*", default=["grpo", "lopd"])
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=1024, help="embedding rows")
    ap.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--work", default="/tmp/lopd-bench-checkpointing")
    ap.add_argument("--out", default=None)
    ap.add_argument("--one", nargs=3, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    work = Path(args.work)
    if args.one:
        import torch

        torch.set_num_threads(args.threads)
        learner, tokens, ckpt = args.one
        print(json.dumps(run_case(work, learner, int(tokens), ckpt == "1", args.dtype)))
        return 0
    from benchmarks.bench_memory import write_shop_traces
    from benchmarks.gpu_device_check import QWEN3_4B, save_shape

    work.mkdir(parents=True, exist_ok=True)
    for old in work.glob("run-*"):  # a run folder refuses other settings; every case starts fresh
        shutil.rmtree(old)
    save_shape(work / "shape", args.layers, args.vocab, args.dtype)
    write_shop_traces(work / "shop.jsonl")
    rows = []
    print(f"{'learner':8s} {'tokens':>6s} {'off: MiB':>10s} {'on: MiB':>10s} {'on/off':>7s} {'CPU s off/on':>14s}")
    for learner in args.learners:
        for n in args.tokens:
            off, on = (child(args, learner, n, c) for c in (False, True))
            rows.append({"learner": learner, "tokens": n, "off": off, "on": on})
            if "error" in off or "error" in on:
                print(f"{learner:8s} {n:6d} error: {off.get('error') or on.get('error')}", flush=True)
                continue
            print(f"{learner:8s} {n:6d} {off['peak_above_mib']:10.0f} {on['peak_above_mib']:10.0f} "
                  f"{on['peak_above_mib'] / off['peak_above_mib']:7.2f} "
                  f"{off['step_cpu_s']:6.1f}/{on['step_cpu_s']:<6.1f}", flush=True)
    meta = {"command": " ".join([Path(sys.executable).name, *sys.argv]), "date": str(date.today()),
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs", "torch_threads": args.threads,
            "shape": {**QWEN3_4B, "num_hidden_layers": args.layers, "vocab_size": args.vocab},
            "dtype": args.dtype}
    if args.out:
        Path(args.out).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    return 0 if all("error" not in r["off"] and "error" not in r["on"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
