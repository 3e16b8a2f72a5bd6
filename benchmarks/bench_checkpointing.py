"""Peak memory of one learner step with and without ``model.gradient_checkpointing``, at Qwen3-4B's width.

    .venv/bin/python benchmarks/bench_checkpointing.py --tokens 1024 --out benchmarks/results/checkpointing.json

The model is ``--layers`` layers of Qwen3-4B's shape (hidden 2,560, 32/8 heads, MLP 9,728; random weights
in ``--dtype``: ``harness.models.shapes.save_shape``) with a ``--vocab``-row embedding (default 1,024, the tiny
model's; 151,936 is Qwen3's, whose chunked head adds the same few chunks either way, and bf16 is slow on
CPUs), the batch ``--tokens`` supervised tokens of synthetic shop rollouts in one micro-batch (``bench_memory.synthetic_batch``). Each case (learner x
checkpointing) runs in a fresh process: it builds the trainer, takes one warm-up step (the optimizers'
states now exist), resets the kernel's peak-RSS counter (``/proc/self/clear_refs``), takes a second step
and reports the peak RSS above the RSS just before it (``VmHWM - VmRSS``): what the step itself adds.
Also the second step's CPU seconds. On a GPU the same numbers come from ``gpu_device_check.py``.

``--set KEY=VALUE ...`` adds train-config overrides to every case: ``lopd.teacher_graph=after_student``
against the default measures that knob (benchmarks/results/teacher_graph.json)::

    .venv/bin/python benchmarks/bench_checkpointing.py --learners lopd --tokens 1024 4096 \
        --set lopd.teacher_graph=after_student

Each case also records the RSS before the trainer is built (the process: torch, the env, the tokenizer),
the RSS held before the step, and :func:`harness.training.memory_model.predict_peak` (device ``cpu``) for
its config: predicted vs measured for the static part (held - process), the step's increment and the
total peak (process + prediction vs ``VmHWM``)::

    .venv/bin/python benchmarks/bench_checkpointing.py --vocab 151936 --out benchmarks/results/memory_model.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.run_meta import run_meta  # noqa: E402


def _status_mib(field: str) -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":")) / 1024


def case_overrides(work: Path, learner: str, tokens: int, checkpointing: bool, dtype: str,
                   extra: list[str] = ()) -> list[str]:
    """The train config of one case: ``tokens // 1024`` synthetic rows in one micro-batch, then ``extra``."""
    rows = max(1, tokens // 1024)
    return [f"learner={learner}", f"run_dir={work}/run-{learner}-{tokens}-{checkpointing}", "env.id=lopd/shop-v0",
          f"model.path={work / 'shape'}", f"model.dtype={dtype}", f"model.gradient_checkpointing={checkpointing}",
          f"rollouts_per_step={rows}", f"group_size={min(rows, 4) if learner == 'grpo' else 1}",
          "micro_batch_tokens=100000000", "log.progress=false", "log.traces=false", "eval.at_start=false",
          "eval.at_end=false", "eval.every_generations=0", "checkpoint.every_steps=0", "checkpoint.resume=false",
          f"bank.traces=[{work}/shop.jsonl]", "bank.embedder=hashing", "lopd.allow_self_retrieval=true",
          "lopd.composer_init=random", f"lopd.composer.qformer.dtype={dtype}", *extra]


def run_case(work: Path, learner: str, tokens: int, checkpointing: bool, dtype: str, extra: list[str] = ()) -> dict:
    """One case in this process: peak RSS a second learner step adds (MiB), and its CPU seconds."""
    from benchmarks.bench_memory import synthetic_batch
    from harness.config import load_config
    from harness.training.train_config import TrainConfig
    from harness.training.trainer import Trainer

    base = _status_mib("VmRSS")  # the process before any model: not the memory model's to predict
    rows = max(1, tokens // 1024)
    cfg = load_config(TrainConfig, None, case_overrides(work, learner, tokens, checkpointing, dtype, extra))
    tr = Trainer(cfg)
    batch, _ = synthetic_batch(tr, rows, 1024)
    tr.learner.train_step(batch)  # warm-up: AdamW's states are made in the first step
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    held, held_file = _status_mib("VmRSS"), _status_mib("RssFile")  # file-backed: mapped weights, libraries
    t0 = time.process_time()
    m = tr.learner.train_step(batch)
    cpu = time.process_time() - t0
    peak = _status_mib("VmHWM")
    return {"peak_above_mib": round(peak - held, 1), "held_mib": round(held, 1), "process_mib": round(base, 1),
            "peak_mib": round(peak, 1), "held_file_mib": round(held_file, 1), "trimmed_mib": _trimmed_mib(), "step_cpu_s": round(cpu, 2), "loss": m["loss"], "tokens": m["tokens"],
            "predicted": predicted(tr, cfg, work / "shape", batch)}


def _trimmed_mib() -> float | None:
    """RSS after glibc's malloc_trim: what freed tensors left cached in malloc's heaps is returned."""
    import ctypes

    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:
        return None
    return round(_status_mib("VmRSS"), 1)


def predicted(tr, cfg, shape_dir: Path, batch, device: str = "cpu", first_step: bool = False) -> dict:
    """The memory model's prediction (MiB) for a step of trainer ``tr`` on ``batch`` (one micro-batch): its
    padded tokens, its supervised ones, and for LOPD the encoder's tokens per retrieved experience (their
    mean) and the teacher's prefix. ``gpu_device_check.py`` calls it with ``device="cuda"``."""
    from harness.training.memory_model import predict_peak

    r = batch.rollouts
    width = max(len(x.traj.token_ids) for x in r)
    kw = {"tokens": width * len(r), "row_tokens": width, "supervised": sum(sum(x.traj.loss_mask) for x in r)}
    if cfg.learner == "lopd":
        lrn = tr.learner
        exps = lrn.retrieve([r[0].task])[0]
        lens = [len(lrn.composer.encoder_ids(r[0].task.prompt, e)) for e in exps] or [0]
        kw.update(encoder_tokens=round(sum(lens) / len(lens)), tasks_per_micro_batch=len({x.task.task_id for x in r}))
        from harness.learners.latent_teacher import latent_teacher_prompt

        tp = latent_teacher_prompt(tr.tokenizer, r[0].traj.episode, len(exps) * lrn.composer.n_latents,
                                   lrn.cfg.framing, tr.ctx.template_kwargs)
        kw["teacher_prefix"] = tp[1][0] if tp and tp[1] else 0  # the teacher's tokens before its first latent
    est = predict_peak(cfg, shape_dir, device=device, first_step=first_step, **kw)
    mib = 2 ** 20
    return {"static_mib": round(est.static_total / mib, 1), "step_mib": round(est.step_total / mib, 1),
            "total_mib": round(est.total / mib, 1), "phase": est.phase, **kw,
            "parts_mib": {k: round(v / mib, 1) for k, v in {**est.static, **est.step}.items()}}


def child(args: argparse.Namespace, learner: str, tokens: int, checkpointing: bool) -> dict:
    cmd = [sys.executable, __file__, "--one", learner, str(tokens), str(int(checkpointing)), "--work", args.work,
           "--layers", str(args.layers), "--dtype", args.dtype, "--vocab", str(args.vocab), "--set", *args.set]
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
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                    help="more train-config overrides for every case (e.g. lopd.teacher_graph=after_student)")
    ap.add_argument("--one", nargs=3, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    work = Path(args.work)
    if args.one:
        import torch

        torch.set_num_threads(args.threads)
        learner, tokens, ckpt = args.one
        print(json.dumps(run_case(work, learner, int(tokens), ckpt == "1", args.dtype, args.set)))
        return 0
    from benchmarks.bench_memory import write_shop_traces
    from harness.models.shapes import QWEN3_4B, save_shape

    work.mkdir(parents=True, exist_ok=True)
    for old in work.glob("run-*"):  # a run folder refuses other settings; every case starts fresh
        shutil.rmtree(old)
    save_shape(work / "shape", args.layers, args.vocab, args.dtype)
    write_shop_traces(work / "shop.jsonl")
    rows = []
    print(f"{'learner':8s} {'tokens':>6s} {'off: MiB':>10s} {'on: MiB':>10s} {'on/off':>7s} {'CPU s off/on':>14s}"
          "   predicted/measured: step off, on; peak off, on")
    for learner in args.learners:
        for n in args.tokens:
            off, on = (child(args, learner, n, c) for c in (False, True))
            rows.append({"learner": learner, "tokens": n, "off": off, "on": on})
            if "error" in off or "error" in on:
                print(f"{learner:8s} {n:6d} error: {off.get('error') or on.get('error')}", flush=True)
                continue
            print(f"{learner:8s} {n:6d} {off['peak_above_mib']:10.0f} {on['peak_above_mib']:10.0f} "
                  f"{on['peak_above_mib'] / off['peak_above_mib']:7.2f} "
                  f"{off['step_cpu_s']:6.1f}/{on['step_cpu_s']:<6.1f}   " + ", ".join(
                      f"{c['predicted'][k + '_mib'] / (c[m] - (c['process_mib'] if k == 'total' else 0)):.2f}"
                      for k, m in (("step", "peak_above_mib"), ("total", "peak_mib")) for c in (off, on)), flush=True)
    meta = run_meta(__file__, argv, torch_threads=args.threads, dtype=args.dtype, overrides=args.set,
                    shape={**QWEN3_4B, "num_hidden_layers": args.layers, "vocab_size": args.vocab})
    if args.out:
        Path(args.out).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    return 0 if all("error" not in r["off"] and "error" not in r["on"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
