"""The memory model (``harness/training/memory_model.py``) against measured peaks, and its Qwen3-4B table.

The measurements come from ``bench_checkpointing.py`` (each case in a fresh process: the RSS of the process
before the trainer, the RSS held before the second step, its peak), e.g.::

    .venv/bin/python benchmarks/bench_checkpointing.py --learners grpo --vocab 151936 --threads 2 --out grpo.json
    .venv/bin/python benchmarks/bench_memory_model.py grpo.json lopd.json --out benchmarks/results/memory_model.json

This script predicts every case again with the current model (device ``cpu``, the case's own tokens), writes
predicted vs measured for the static part (held - process), the step's increment (peak - held) and the total
peak (process + prediction vs VmHWM), and prints the markdown table; ``--qwen3-4b`` prints the model's
predictions for the full 36-layer Qwen3-4B in bf16 on CUDA instead.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

MIB = 2 ** 20
_INPUTS = ("tokens", "row_tokens", "supervised", "encoder_tokens", "tasks_per_micro_batch", "teacher_prefix")


def shop_teacher_prefix() -> int:
    """Tokens of LOPD's teacher row before its first latent for the benchmarks' shop task (3 experiences),
    for measurements recorded before bench_checkpointing.py stored it."""
    import gymnasium as gym

    import envs  # noqa: F401
    from envs.trace import Episode
    from harness.learners.latent_teacher import latent_teacher_prompt
    from harness.models.tiny import build_tiny_model

    _, tok = build_tiny_model("1m")
    env = gym.make("lopd/shop-v0")
    env.reset(seed=0, options={"task_id": "apples"})
    ep = Episode(env_id="lopd/shop-v0", task_id="apples", split="train", messages=env.unwrapped.messages,
                 prompt_token_ids=[], reward=0.0)
    return latent_teacher_prompt(tok, ep, 96, "paper", {})[1][0]


def repredict(meta: dict, learner: str, checkpointing: bool, case: dict) -> dict:
    """Predicted vs measured (MiB) for one measured case of ``bench_checkpointing.py``."""
    from benchmarks.bench_checkpointing import case_overrides
    from harness.config import load_config
    from harness.training.memory_model import predict_peak
    from harness.training.train_config import TrainConfig

    cfg = load_config(TrainConfig, None, case_overrides(Path("/tmp/unused"), learner, 1024, checkpointing,
                                                        meta["dtype"]))
    shape = {**meta["shape"], "tie_word_embeddings": True}  # save_shape's model ties its head (the tiny config's)
    kw = {k: case["predicted"][k] for k in _INPUTS if k in case["predicted"]}
    kw.setdefault("row_tokens", kw["tokens"])  # one row a case at 1k tokens
    if learner == "lopd":
        kw.setdefault("teacher_prefix", shop_teacher_prefix())
    est = predict_peak(cfg, shape, device="cpu", **kw)
    static = case["held_mib"] - case["process_mib"]
    out = {"static": (est.static_total / MIB, static), "step": (est.step_total / MIB, case["peak_above_mib"]),
           "peak": (est.total / MIB + case["process_mib"], case["peak_mib"])}
    return {**{k: {"predicted_mib": round(p, 1), "measured_mib": round(m, 1), "ratio": round(p / m, 3)}
               for k, (p, m) in out.items()},
            "phase": est.phase, "inputs": kw, "parts_mib": {k: round(v / MIB, 1) for k, v in
                                                           {**est.static, **est.step}.items()}}


def compare(paths: list[str]) -> list[dict]:
    rows = []
    for path in paths:
        data = json.loads(Path(path).read_text())
        for r in data["rows"]:
            for label, ckpt in (("off", False), ("on", True)):
                case = r[label]
                if "error" in case:
                    continue
                rows.append({"learner": r["learner"], "vocab": data["meta"]["shape"]["vocab_size"],
                             "layers": data["meta"]["shape"]["num_hidden_layers"], "dtype": data["meta"]["dtype"],
                             "checkpointing": ckpt, "measured": case, "meta": data["meta"],
                             **repredict(data["meta"], r["learner"], ckpt, case)})
    return rows


def compare_gpu(path: str, encoder_tokens: int) -> list[dict]:
    """``gpu_device_check.py``'s memory check (the FIRST step's peak above the weights, bf16, 2 layers of
    Qwen3-4B's width, its vocabulary; every row the shop task, 357 prompt + 1,024 supervised tokens)
    against the model's first-step prediction on CUDA. ``encoder_tokens``: the shop bank's experiences
    as the CPU LOPD case measured them (the same traces)."""
    from harness.config import load_config
    from harness.models.shapes import QWEN3_4B
    from harness.training.memory_model import predict_peak
    from harness.training.train_config import TrainConfig

    data = json.loads(Path(path).read_text())
    mem, out = data["memory"], []
    shape = {**QWEN3_4B, "num_hidden_layers": mem["layers"], "tie_word_embeddings": True}
    for key, case in mem.items():
        if not isinstance(case, dict) or "peak_above_gib" not in case:
            continue
        learner, n = key.split("-")[0], int(key.split("-")[1])
        cfg = load_config(TrainConfig, None, [f"learner={learner}", "model.dtype=bfloat16",
                                              "lopd.composer.qformer.dtype=bfloat16"])
        kw = {"encoder_tokens": encoder_tokens, "tasks_per_micro_batch": 1,
              "teacher_prefix": shop_teacher_prefix()} if learner == "lopd" else {}
        est = predict_peak(cfg, shape, (n // 1024) * (357 + 1024), "cuda", supervised=n, row_tokens=357 + 1024,
                           first_step=True, **kw)
        p, m = est.step_total / 2 ** 30, case["peak_above_gib"]
        out.append({"learner": learner, "tokens": n, "predicted_gib": round(p, 3), "measured_gib": m,
                    "ratio": round(p / m, 3), "phase": est.phase, "device": data["device"], "date": data["date"]})
    return out


def markdown(rows: list[dict]) -> str:
    out = ["| learner | vocab | checkpointing | static: predicted / measured | step: predicted / measured | "
           "peak: predicted / measured | peak phase |", "| --- | ---: | --- | ---: | ---: | ---: | --- |"]
    for r in rows:
        cells = [f"{r[k]['predicted_mib']:,.0f} / {r[k]['measured_mib']:,.0f} MiB ({r[k]['ratio']:.2f})"
                 for k in ("static", "step", "peak")]
        out.append(f"| {r['learner'].upper()} | {r['vocab']:,} | {'on' if r['checkpointing'] else 'off'} | "
                   + " | ".join(cells) + f" | {r['phase']} |")
    return "\n".join(out)


def qwen3_4b_table(budget: float = 80e9) -> str:
    """GRPO and LOPD at T = 1k, 4k, 8k, checkpointing off and on, bf16 on CUDA, and the largest
    micro_batch_tokens in ``budget`` bytes. LOPD: one task (1,024 tokens) per 1k tokens, three experiences
    each, cut to 512 tokens (``lopd.composer.max_encoder_tokens=512``)."""
    from harness.config import load_config
    from harness.models.shapes import QWEN3_CONFIGS
    from harness.training.memory_model import fit_micro_batch_tokens, predict_peak
    from harness.training.train_config import TrainConfig

    hf = QWEN3_CONFIGS["Qwen/Qwen3-4B"]
    out = ["| learner | checkpointing | T = 1,024 | T = 4,096 | T = 8,192 | peak phase at 8k | "
           f"largest T in {budget / 1e9:.0f} GB |", "| --- | --- | ---: | ---: | ---: | --- | ---: |"]
    for learner in ("grpo", "lopd"):
        for ckpt in (False, True):
            cfg = load_config(TrainConfig, None, [f"learner={learner}", "model.dtype=bfloat16", "model.device=cuda",
                                                  f"model.gradient_checkpointing={ckpt}",
                                                  "lopd.composer.max_encoder_tokens=512"])
            def kw(t: int) -> dict:
                return {"tasks_per_micro_batch": max(1, t // 1024)} if learner == "lopd" else {}
            ests = [predict_peak(cfg, hf, t, "cuda", **kw(t)) for t in (1024, 4096, 8192)]
            if learner == "lopd":  # the tasks grow with T: the largest multiple of 256 that fits, by a scan
                fits = [t for t in range(256, 65537, 256) if predict_peak(cfg, hf, t, "cuda", **kw(t)).total <= budget]
                fit = f"{max(fits):,}" if fits else "none"
            else:
                fit = f"{fit_micro_batch_tokens(cfg, hf, budget, 'cuda'):,}"
            out.append(f"| {learner.upper()} | {'on' if ckpt else 'off'} | "
                       + " | ".join(f"{e.total / 1e9:.1f} GB" for e in ests) + f" | {ests[-1].phase} | {fit} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="*", help="JSON files of bench_checkpointing.py")
    ap.add_argument("--out", default=None)
    ap.add_argument("--qwen3-4b", action="store_true", help="print the full Qwen3-4B's predictions")
    ap.add_argument("--gpu", default=None, help="gpu_device_check.py's JSON: its memory check against the model")
    args = ap.parse_args(argv)
    if args.qwen3_4b:
        print(qwen3_4b_table())
        return 0
    rows = compare(args.runs)
    print(markdown(rows))
    gpu = []
    if args.gpu:
        enc = next((r["inputs"]["encoder_tokens"] for r in rows if "encoder_tokens" in r["inputs"]), 512)
        gpu = compare_gpu(args.gpu, enc)
        print("\n| learner | tokens | first step: predicted / measured (GiB) | peak phase |\n| --- | ---: | ---: | --- |")
        for g in gpu:
            print(f"| {g['learner'].upper()} | {g['tokens']:,} | {g['predicted_gib']:.2f} / {g['measured_gib']:.2f} "
                  f"({g['ratio']:.2f}) | {g['phase']} |")
    if args.out:
        Path(args.out).write_text(json.dumps({"rows": rows, "gpu_first_step": gpu}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
