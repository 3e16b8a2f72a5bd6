"""Our GRPO step against TRL's GRPOTrainer: same tiny model, batch, prompts and lengths, one run.

TRL is never a project dependency. Install it in a throwaway venv that reuses this project's
packages (torch, transformers, accelerate, datasets) and run this script with that interpreter::

    python3 -m venv /tmp/trl-venv
    echo "$PWD/.venv/lib/python3.11/site-packages" > /tmp/trl-venv/lib/python3.11/site-packages/lopd.pth
    /tmp/trl-venv/bin/pip install --no-deps trl==1.16.0
    /tmp/trl-venv/bin/python benchmarks/bench_trl_grpo.py --steps 4 --out /tmp/bench_trl.json

Both sides: the tiny Qwen3 (same seed), 8 micro-world prompts x 4 generations = 32 completions a
step, exactly ``--completion`` sampled tokens each (EOS ignored / min_new_tokens), temperature 1,
no top-p/top-k, group-normalised advantages, token-level PPO-clip loss (TRL ``loss_type=dapo``,
eps 0.2), no KL, one AdamW step per batch, grad clip 1.0. A step = generation + scoring + update.
Each side runs in its own process (own peak RSS) with the same thread count, one after the other.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.run_meta import run_meta  # noqa: E402


def prompts(env_id: str, n: int) -> list[list[dict]]:
    """The first ``n`` training tasks' opening messages (system with tools + user task)."""
    import gymnasium as gym

    import envs  # noqa: F401

    env = gym.make(env_id).unwrapped
    out = []
    for t in [t for t in env.all_tasks() if t.split == "train"][:n]:
        _, info = env.reset(options={"task_id": t.task_id})
        out.append(info["messages"])
    return out


def reward_fn(completions, **_) -> list[float]:
    """A cheap deterministic reward with spread inside groups: the share of letters in the completion."""
    out = []
    for c in completions:
        text = c[-1]["content"] if isinstance(c, list) else str(c)
        out.append(sum(ch.isalpha() for ch in text) / max(1, len(text)))
    return out


def run_ours(args: argparse.Namespace) -> dict:
    import torch

    from harness.config import load_config
    from harness.engines.base import SamplingParams
    from harness.training.train_config import TrainConfig
    from harness.training.trainer import Trainer

    torch.set_num_threads(args.threads)
    n_tasks = args.batch // args.group
    cfg = load_config(TrainConfig, None, [
        "learner=grpo", f"run_dir={args.work}/ours", f"env.id={args.env}", f"rollouts_per_step={args.batch}",
        f"group_size={args.group}", f"sampling.max_new_tokens={args.completion}", "rollout.max_turns=1",
        f"optim.lr={args.lr}", "optim.grad_clip=1.0", "optim.weight_decay=0.0", "log.progress=false",
        "log.traces=false", "eval.at_start=false", "eval.at_end=false", "eval.every_generations=0",
        "checkpoint.every_steps=0", "checkpoint.resume=false", f"env.max_train_tasks={n_tasks * (args.steps + 1)}"])
    tr = Trainer(cfg)
    tr._sampling = lambda temperature, seed: SamplingParams(temperature=1.0, top_p=1.0, top_k=-1, seed=seed,
                                                            max_new_tokens=args.completion, ignore_eos=True)
    times, cpu, lengths = [], [], []
    for step in range(1, args.steps + 2):
        t0, c0 = time.perf_counter(), time.process_time()
        batch, _ = tr.collect(step)
        rewards = reward_fn([r.traj.episode.steps[0].text for r in batch.rollouts])
        for r, x in zip(batch.rollouts, rewards):
            r.traj.episode.reward = x
        tr.learner.train_step(batch)
        tr._refresh_engine()
        if step > 1:
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        lengths += [sum(r.traj.loss_mask) for r in batch.rollouts]
    tr.close()
    return {"side": "ours", "step_s": times, "median_s": statistics.median(times), "cpu_s": cpu,
            "median_cpu_s": statistics.median(cpu),
            "completion_tokens": statistics.mean(lengths),
            "prompt_tokens": statistics.mean(r.prompt_len for r in batch.rollouts),
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def run_trl(args: argparse.Namespace) -> dict:
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from harness.models import build_tiny_model

    torch.set_num_threads(args.threads)
    n_tasks = args.batch // args.group
    msgs = prompts(args.env, n_tasks * (args.steps + 1))
    model, tok = build_tiny_model("1m", seed=0)
    model.train()

    class Clock(TrainerCallback):
        def __init__(self):
            self.t0, self.c0, self.times, self.cpu = 0.0, 0.0, [], []

        def on_step_begin(self, *a, **k):
            self.t0, self.c0 = time.perf_counter(), time.process_time()

        def on_step_end(self, *a, **k):
            self.times.append(time.perf_counter() - self.t0)
            self.cpu.append(time.process_time() - self.c0)

    clock = Clock()
    gcfg = GRPOConfig(
        output_dir=str(Path(args.work) / "trl"), per_device_train_batch_size=args.batch, num_generations=args.group,
        max_completion_length=args.completion, generation_kwargs={"min_new_tokens": args.completion},
        temperature=1.0, top_p=1.0, top_k=0, learning_rate=args.lr, weight_decay=0.0, max_grad_norm=1.0, beta=0.0,
        loss_type="dapo", epsilon=0.2, num_iterations=1, max_steps=args.steps + 1, logging_steps=1,
        report_to=[], use_cpu=True, save_strategy="no", disable_tqdm=True, shuffle_dataset=False,
        dataloader_num_workers=0, gradient_accumulation_steps=1, seed=0, bf16=False)
    trainer = GRPOTrainer(model=model, reward_funcs=[reward_fn], args=gcfg,
                          train_dataset=Dataset.from_list([{"prompt": m} for m in msgs]), processing_class=tok,
                          callbacks=[clock])
    trainer.train()
    logs = [h for h in trainer.state.log_history if "completions/mean_length" in h]
    times, cpu = clock.times[1:], clock.cpu[1:]
    return {"side": "trl", "step_s": times, "median_s": statistics.median(times), "cpu_s": cpu,
            "median_cpu_s": statistics.median(cpu),
            "completion_tokens": statistics.mean(h["completions/mean_length"] for h in logs) if logs else None,
            "prompt_tokens": None, "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=4, help="timed steps per side (after one warm-up step)")
    ap.add_argument("--batch", type=int, default=32, help="completions per step")
    ap.add_argument("--group", type=int, default=4, help="generations per prompt")
    ap.add_argument("--completion", type=int, default=64, help="sampled tokens per completion")
    ap.add_argument("--env", default="lopd/micro-v0")
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--work", default=tempfile.mkdtemp(prefix="lopd-bench-trl-"))
    ap.add_argument("--out", default=None)
    ap.add_argument("--side", choices=["ours", "trl"], default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.side:
        print(json.dumps(run_ours(args) if args.side == "ours" else run_trl(args)))
        return 0
    try:
        import trl
    except ImportError:
        print("TRL is not importable with this interpreter; see the module docstring for the throwaway venv",
              file=sys.stderr)
        return 2
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "TOKENIZERS_PARALLELISM": "false",
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    res = {}
    for side in ("ours", "trl"):
        cmd = [sys.executable, __file__, "--side", side, "--steps", str(args.steps), "--batch", str(args.batch),
               "--group", str(args.group), "--completion", str(args.completion), "--env", args.env,
               "--lr", str(args.lr), "--threads", str(args.threads), "--work", args.work]
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            print(r.stderr[-4000:], file=sys.stderr)
            return 1
        res[side] = json.loads(r.stdout.strip().splitlines()[-1])
        print(f"{side:4s} median step {res[side]['median_s']:.2f}s wall, {res[side]['median_cpu_s']:.2f}s CPU; "
              f"steps {[round(t, 2) for t in res[side]['step_s']]}  completion tokens {res[side]['completion_tokens']}"
              f"  peak RSS {res[side]['peak_rss_mib']:.0f} MiB", flush=True)
    print(f"ours / TRL median step time: {res['ours']['median_s'] / res['trl']['median_s']:.2f}x wall, "
          f"{res['ours']['median_cpu_s'] / res['trl']['median_cpu_s']:.2f}x CPU")
    meta = run_meta(__file__, None, trl=trl.__version__, args=dict(vars(args)))
    if args.out:
        Path(args.out).write_text(json.dumps({"meta": meta, "results": res}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
