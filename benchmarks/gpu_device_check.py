"""In-process checks on one GPU, with no inference server and no downloaded model (docs/GPU.md).

    python benchmarks/gpu_device_check.py --out gpu_device_check.json     # a few minutes on one H200

``benchmarks/gpu_smoke.py`` checks a real SGLang or vLLM server with a real Qwen3 checkpoint; this script
checks what runs in the trainer's own process on the device, with what the repository ships:

1. ``engine``: the pinned micro base's greedy decodes of 8 micro-world prompts on CUDA (float32, then
   bfloat16) against the CPU's float32 ones: the tokens (all equal expected in float32) and the largest
   log-prob difference on the common prefix;
2. ``train``: 2 steps of 32 rollouts of GRPO and of LOPD (the pinned base on the micro world; LOPD with a
   random composer over the scripted expert's bank) on CUDA: finite metrics and seconds per step;
3. ``memory``: one GRPO and one LOPD learner step at Qwen3-4B's width (hidden 2,560, 32 query and 8 KV
   heads, MLP 9,728, vocabulary 151,936; ``--layers`` layers of random bf16 weights) on synthetic rollouts of
   1k and 4k supervised tokens in one micro-batch: the peak of ``torch.cuda.max_memory_allocated`` above
   the memory held before the step, and the step's seconds; beside it the memory model's prediction of
   that first step (:func:`harness.training.memory_model.predict_peak`, ``first_step=True``, on ``cuda``),
   which passes within 20% of the measured peak.

Every check is PASS/FAIL with its numbers; the JSON holds them all; the exit code is 1 on any FAIL.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness.models.shapes import QWEN3_4B, save_shape  # noqa: E402


def micro_prompts(tok, n: int) -> list[list[int]]:
    import gymnasium as gym

    import envs  # noqa: F401
    from harness.rollout import render_prompt

    env = gym.make("lopd/micro-v0", seed=0, n_train=600, n_eval=120, prompt="compact")
    out = []
    for t in [t for t in env.unwrapped.tasks if t.split == "eval"][:n]:
        _, info = env.reset(options={"task_id": t.task_id})
        out.append(render_prompt(tok, info["messages"]))
    return out


def _peak_reset(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()


def _allocated(device: str, peak: bool = False) -> float | None:
    """GiB the device's allocator holds now (or at its peak); None on the CPU."""
    import torch

    if not device.startswith("cuda"):
        return None
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() if peak else torch.cuda.memory_allocated()) / 2**30


def check_engine(work: Path, device: str) -> dict:
    import torch

    from harness.engines import HFEngine, SamplingParams
    from harness.models.pinned import PINNED_DIR
    from harness.models.tiny import load_model

    cpu_model, tok = load_model(PINNED_DIR)
    prompts = micro_prompts(tok, 8)
    params = SamplingParams(temperature=0.0, max_new_tokens=96)
    ref = HFEngine(cpu_model, tok).generate(prompts, params)
    out = {}
    for name, dtype in (("float32", torch.float32), ("bfloat16", torch.bfloat16)):
        model, _ = load_model(PINNED_DIR, dtype=dtype, device=device)
        got = HFEngine(model, tok).generate(prompts, params)
        prefix = [next((i for i, (a, b) in enumerate(zip(g.token_ids, r.token_ids)) if a != b),
                       min(len(g.token_ids), len(r.token_ids))) for g, r in zip(got, ref)]
        diff = max((abs(a - b) for g, r, k in zip(got, ref, prefix) for a, b in zip(g.logprobs[:k], r.logprobs[:k])),
                   default=0.0)
        same = all(g.token_ids == r.token_ids for g, r in zip(got, ref))
        out[name] = {"all_tokens_equal": same, "common_prefix": prefix, "max_logprob_diff": diff,
                     "pass": same if name == "float32" else min(prefix) >= 8}
    return {**out, "pass": all(v["pass"] for v in out.values())}


def check_train(work: Path, device: str) -> dict:
    import torch

    from harness.basemodel.build import load_base_dir
    from harness.config import load_config
    from harness.models.pinned import PINNED_DIR
    from harness.prepare.stages import _expert_episodes
    from harness.training.train_config import TrainConfig
    from harness.training.trainer import Trainer, example_config

    traces = work / "expert.jsonl"
    _expert_episodes(load_base_dir(PINNED_DIR)[2]["config_obj"], 64, traces)
    out = {}
    for learner in ("grpo", "lopd"):
        ov = [f"run_dir={work / learner}", f"model.device={device}", "generations=64", "eval.at_start=false",
              "eval.at_end=false", "log.progress=false", "checkpoint.every_steps=0"]
        if learner == "lopd":
            ov += [f"bank.traces=[{traces}]", "bank.path=null", "bank.embedder=hashing", "lopd.composer_init=random"]
        tr = Trainer(load_config(TrainConfig, example_config(learner), ov))
        t0 = time.perf_counter()
        tr.run()
        secs = time.perf_counter() - t0
        recs = [json.loads(x) for x in (work / learner / "metrics.jsonl").read_text().splitlines()]
        steps = [r for r in recs if "train/loss" in r]
        finite = all(math.isfinite(v) for r in steps for v in r.values() if isinstance(v, float))
        out[learner] = {"steps": len(steps), "seconds": round(secs, 2), "finite": finite,
                        "loss": [r["train/loss"] for r in steps], "reward": [r.get("train/reward") for r in steps],
                        "step_seconds": [r.get("time/step") for r in steps],
                        "peak_gib": _allocated(device, peak=True), "pass": finite and len(steps) == 2}
        tr.close()
        _peak_reset(device)
    return {**out, "pass": all(v["pass"] for v in out.values())}


MODEL_TOLERANCE = 0.2
"""The memory model passes when its prediction is within this fraction of the measured peak (issue #35)."""


def check_memory(work: Path, layers: int, tokens: list[int], device: str,
                 vocab: int = QWEN3_4B["vocab_size"]) -> dict:
    import torch

    from benchmarks.bench_checkpointing import predicted
    from benchmarks.bench_memory import synthetic_batch, write_shop_traces
    from harness.config import load_config
    from harness.training.train_config import TrainConfig
    from harness.training.trainer import Trainer

    save_shape(work / "qwen3-4b-shape", layers, vocab)
    write_shop_traces(work / "shop.jsonl")
    out = {}
    for learner in ("grpo", "lopd"):
        for n in tokens:
            rows = max(1, n // 1024)
            ov = [f"learner={learner}", f"run_dir={work}/mem-{learner}-{n}", "env.id=lopd/shop-v0",
                  f"model.path={work / 'qwen3-4b-shape'}", f"model.device={device}", "model.dtype=bfloat16",
                  f"rollouts_per_step={rows}", f"group_size={min(rows, 4) if learner == 'grpo' else 1}",
                  "micro_batch_tokens=100000000", "log.progress=false", "log.traces=false", "eval.at_start=false",
                  "eval.at_end=false", "eval.every_generations=0", "checkpoint.every_steps=0",
                  "checkpoint.resume=false", f"bank.traces=[{work}/shop.jsonl]", "bank.embedder=hashing",
                  "lopd.allow_self_retrieval=true", "lopd.composer_init=random",
                  "lopd.composer.qformer.dtype=bfloat16"]
            key = f"{learner}-{n}"
            try:
                cfg = load_config(TrainConfig, None, ov)
                tr = Trainer(cfg)
                batch, _ = synthetic_batch(tr, rows, 1024)
                model = predicted(tr, cfg, work / "qwen3-4b-shape", batch, "cuda", first_step=True)
                _peak_reset(device)
                before = _allocated(device)
                t0 = time.perf_counter()
                m = tr.learner.train_step(batch)
                peak = _allocated(device, peak=True)
                above = None if peak is None else peak - before
                guess = model["step_mib"] / 1024
                ratio = round(guess / above, 3) if above else None
                fits = ratio is None or abs(ratio - 1) <= MODEL_TOLERANCE  # None: no allocator to read (CPU)
                out[key] = {"peak_above_gib": None if above is None else round(above, 3),
                            "predicted_gib": round(guess, 3), "predicted_over_measured": ratio,
                            "predicted_phase": model["phase"], "held_gib": before,
                            "seconds": round(time.perf_counter() - t0, 3), "tokens": m["tokens"], "loss": m["loss"],
                            "pass": math.isfinite(m["loss"]) and fits}
                tr.close()
                del tr, batch
            except Exception as e:  # noqa: BLE001 - reported, the other cases still run
                out[key] = {"error": f"{type(e).__name__}: {str(e)[:300]}", "pass": False}
            if device.startswith("cuda"):
                torch.cuda.empty_cache()
    return {**out, "layers": layers, "shape": QWEN3_4B, "pass": all(v["pass"] for v in out.values())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="gpu_device_check.json")
    ap.add_argument("--work", default="/tmp/lopd-gpu-check")
    ap.add_argument("--layers", type=int, default=2, help="layers of the Qwen3-4B-width model (memory check)")
    ap.add_argument("--tokens", type=int, nargs="*", default=[1024, 4096])
    ap.add_argument("--vocab", type=int, default=QWEN3_4B["vocab_size"], help="embedding rows (memory check)")
    ap.add_argument("--only", nargs="*", default=["engine", "train", "memory"])
    ap.add_argument("--device", default="cuda", help="cpu runs the same checks here (to test the script)")
    args = ap.parse_args(argv)
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("no CUDA device: this script checks the GPU paths (the CPU ones are the test suite's)")
        return 2
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    res: dict = {"device": torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "cpu",
                 "torch": torch.__version__,
                 "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    checks = {"engine": lambda: check_engine(work, args.device), "train": lambda: check_train(work, args.device),
              "memory": lambda: check_memory(work, args.layers, args.tokens, args.device, args.vocab)}
    for name in args.only:
        t0 = time.perf_counter()
        try:
            res[name] = checks[name]()
        except Exception as e:  # noqa: BLE001 - a failed check is reported, the others still run
            res[name] = {"pass": False, "error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()[-3000:]}
        res[name]["seconds"] = round(time.perf_counter() - t0, 1)
        print(f"{'PASS' if res[name]['pass'] else 'FAIL'} {name} ({res[name]['seconds']} s): "
              f"{json.dumps({k: v for k, v in res[name].items() if k != 'traceback'})[:600]}", flush=True)
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    return 0 if all(res[n]["pass"] for n in args.only) else 1


if __name__ == "__main__":
    sys.exit(main())
