"""Peak memory of one GRPO and one LOPD step at Qwen3's vocabulary (151,936), the LM head chunked or not.

    .venv/bin/python benchmarks/bench_memory.py --tokens 4096 16384 --out /tmp/bench_memory.json

The model is the tiny ``1m`` Qwen3 (hidden 128, 4 layers) with its vocabulary widened to
``--vocab`` (embedding and tied LM head 151,936 x 128, freshly initialised). The tokenizer stays
the project's ~1k-token one, so every token id comes from that small range: what is measured is
the size of the logits, not their values. Each case (learner x supervised tokens x chunk) runs in
a fresh process under an address-space cap (``--cap-gib``): it builds a trainer on the shop env,
makes ``tokens / row_tokens`` synthetic rollouts (the shop task's prompt, then ``--row-tokens``
supervised tokens), all in ONE micro-batch, and takes learner steps. Reported: the peak RSS
(``ru_maxrss``) minus the RSS just before the first step, and the median step's CPU seconds.

Chunk ``0`` is the old code path (the whole [N, V] logits, no checkpoint: ``lopd.chunked``'s
``LOGITS_CHUNK = 0``); a case that needs more than the cap reports ``> cap`` (a MemoryError in
its process, never the machine's OOM killer). What chunking costs a small model's step:
``--vocab 1024 --tokens 4096 --row-tokens 256 --interleave --repeat 6`` times the tiny model's own
vocabulary, the chunk sizes alternating in one process (a shared machine disturbs that far less
than separate runs).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.run_meta import run_meta


QWEN3_VOCAB = 151_936


def write_shop_traces(path: Path) -> None:
    """The scripted expert's episode of the shop's training task: the bank LOPD retrieves from."""
    import gymnasium as gym

    import envs  # noqa: F401
    from envs.protocol import render_tool_call
    from envs.trace import Episode, TraceWriter

    path.unlink(missing_ok=True)  # TraceWriter appends
    env = gym.make("lopd/shop-v0")
    env.reset(seed=0, options={"task_id": "apples"})
    u = env.unwrapped
    plan = "\n".join(render_tool_call("add_to_cart", {"item": i, "qty": q}) for i, q in u.task.data["want"].items())
    for action in (plan, render_tool_call("checkout", {}), "Done."):
        _, _, term, trunc, _ = env.step(action)
        if term or trunc:
            break
    with TraceWriter(path) as w:
        w.write(Episode(env_id="lopd/shop-v0", task_id="apples", split="train", seed=0, messages=u.messages,
                        tools=u.tools.schemas, steps=u.steps, reward=u.final_reward, terminated=term,
                        truncated=trunc))


def save_wide_model(path: Path, vocab: int) -> None:
    """The tiny 1m Qwen3 with a ``vocab``-row embedding (tied head), saved with the small tokenizer."""
    from transformers import Qwen3ForCausalLM

    from harness.models.tiny import build_tiny_model, save_pretrained, tiny_config

    _, tok = build_tiny_model("1m")
    cfg = tiny_config("1m", tok)
    cfg.vocab_size = max(vocab, cfg.vocab_size)
    save_pretrained(Qwen3ForCausalLM(cfg), tok, path)


def synthetic_batch(tr, rows: int, row_tokens: int):
    """``rows`` rollouts of the shop task: its prompt, then ``row_tokens`` supervised ids (random,
    from the tokenizer's range), rewards alternating 1 / 0 (GRPO and LOPD both get a signal)."""
    import gymnasium as gym
    import torch

    from envs.trace import Episode
    from harness.learners.base import Rollout, StepBatch
    from harness.rollout import Trajectory, render_prompt

    env = gym.make("lopd/shop-v0")
    env.reset(seed=0, options={"task_id": "apples"})
    messages = env.unwrapped.messages
    prompt = render_prompt(tr.tokenizer, messages, **tr.ctx.template_kwargs)
    gen = torch.Generator().manual_seed(0)
    out = []
    for i in range(rows):
        body = torch.randint(10, len(tr.tokenizer), (row_tokens,), generator=gen).tolist()
        ep = Episode(env_id="lopd/shop-v0", task_id="apples", split="train", messages=messages,
                     prompt_token_ids=prompt, reward=float(i % 2))
        traj = Trajectory(ep, prompt + body, [0] * len(prompt) + [1] * row_tokens, [0.0] * (len(prompt) + row_tokens))
        out.append(Rollout(traj, tr.ctx.tasks["apples"], i // tr.group, i))
    return StepBatch(1, out, rows), len(prompt)


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


def build(args: argparse.Namespace):
    """The trainer of ``args.one`` on the widened model and its synthetic batch (see synthetic_batch)."""
    import torch

    from harness.config import load_config
    from harness.learners.common import Timer
    from harness.training.train_config import TrainConfig
    from harness.training.trainer import Trainer

    torch.set_num_threads(args.threads)
    Timer.with_cpu = True
    rows = max(1, args.tokens // args.row_tokens)
    learner = args.one
    overrides = [f"learner={learner}", f"run_dir={args.work}/run-{learner}", "env.id=lopd/shop-v0",
                 f"model.path={args.work}/model-{args.vocab}", f"rollouts_per_step={rows}",
                 f"group_size={min(rows, 4) if learner == 'grpo' else 1}", "micro_batch_tokens=100000000",
                 "log.progress=false", "log.traces=false", "eval.at_start=false", "eval.at_end=false",
                 "eval.every_generations=0", "checkpoint.every_steps=0", "checkpoint.resume=false",
                 f"bank.traces=[{args.work}/shop.jsonl]", "bank.embedder=hashing", "lopd.allow_self_retrieval=true",
                 "lopd.composer_init=random"]  # memory does not depend on the composer's weights
    tr = Trainer(load_config(TrainConfig, None, overrides))
    batch, prompt_len = synthetic_batch(tr, rows, args.row_tokens)
    return tr, batch, {"rows": rows, "padded_tokens": rows * (prompt_len + args.row_tokens)}


def cpu_step(tr, batch) -> tuple[float, dict]:
    """One learner step: its CPU seconds (a crowded machine disturbs them far less than wall time), metrics."""
    t0 = time.process_time()
    m = tr.learner.train_step(batch)
    return time.process_time() - t0, m


def run_case(args: argparse.Namespace) -> dict:
    """One case in this process (the ``--one`` child): build, then step; peak RSS above the start."""
    import lopd.chunked

    lopd.chunked.LOGITS_CHUNK = args.chunk
    tr, batch, shape = build(args)
    base = rss_mib()
    try:
        steps = [cpu_step(tr, batch) for _ in range(args.repeat)]
    except (MemoryError, RuntimeError) as e:  # torch's allocator raises RuntimeError("... can't allocate ...")
        return {"error": f"{type(e).__name__}: {str(e)[:120]}"}
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    m = steps[-1][1]
    cpu = statistics.median(t for t, _ in steps[1:] or steps)
    return {"peak_mib": peak - base, "base_mib": base, "step_cpu_s": cpu,
            "tokens": m["tokens"], **shape, "phases_cpu_s": {k[4:]: v for k, v in m.items() if k.startswith("cpu/")}}


def run_interleaved(args: argparse.Namespace) -> dict:
    """``--interleave``: one trainer, steps alternating between the chunk sizes (order flipped every
    round, after a warm-up step), so both see the same process and machine: median CPU s per chunk."""
    import lopd.chunked

    tr, batch, shape = build(args)
    cpu_step(tr, batch)
    times: dict[int, list[float]] = {c: [] for c in args.chunks}
    for i in range(args.repeat):
        for c in args.chunks if i % 2 == 0 else args.chunks[::-1]:
            lopd.chunked.LOGITS_CHUNK = c
            times[c].append(cpu_step(tr, batch)[0])
    return {"step_cpu_s": {str(c): statistics.median(t) for c, t in times.items()}, **shape}


def child(args: argparse.Namespace, learner: str, tokens: int, chunk: int | None) -> dict:
    """``run_case`` (``chunk`` None: ``run_interleaved``) in a fresh process whose address space is
    capped at ``--cap-gib``."""
    cap = int(args.cap_gib * 1024**3)
    cmd = [sys.executable, __file__, "--one", learner, "--tokens-one", str(tokens), "--vocab", str(args.vocab),
           "--row-tokens", str(args.row_tokens), "--repeat", str(args.repeat), "--threads", str(args.threads),
           "--work", args.work]
    cmd += ["--interleave", "--chunks", *map(str, args.chunks)] if chunk is None else ["--chunk", str(chunk)]
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "TOKENIZERS_PARALLELISM": "false"}
    r = subprocess.run(cmd, env=env, capture_output=True, text=True,
                       preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (cap, cap)))
    lines = r.stdout.strip().splitlines()
    if r.returncode != 0 or not lines:
        return {"error": f"exit {r.returncode}: {r.stderr.strip().splitlines()[-1:] or ''}"}
    return json.loads(lines[-1])


def cell(res: dict, cap_gib: float) -> str:
    return f"> {cap_gib:g} GiB cap" if "error" in res else f"{res['peak_mib']:,.0f} MiB, {res['step_cpu_s']:.1f} s"


def run_table(args: argparse.Namespace) -> list[dict]:
    """Every (learner, tokens) row: one capped child per chunk (peak MiB, CPU s), or with
    ``--interleave`` one child alternating the chunks (CPU s each, and the last over the first)."""
    heads = [f"chunk {c}" if c else "unchunked" for c in args.chunks] + (["ratio"] if args.interleave else [])
    print(f"{'learner':8s} {'tokens':>7s}  " + "  ".join(f"{h:>24s}" for h in heads), flush=True)
    results = []
    for learner in args.learners:
        for tokens in args.tokens:
            if args.interleave:
                r = child(args, learner, tokens, None)
                results.append({"learner": learner, "tokens": tokens, **r})
                t = [r["step_cpu_s"][str(c)] for c in args.chunks] if "error" not in r else []
                cells = [f"{x:.2f} s" for x in t] + [f"{t[-1] / t[0]:.3f}x"] if t else ["error"]
            else:
                row = {c: child(args, learner, tokens, c) for c in args.chunks}
                results += [{"learner": learner, "tokens": tokens, "chunk": c, **r} for c, r in row.items()]
                cells = [cell(r, args.cap_gib) for r in row.values()]
            print(f"{learner:8s} {tokens:7d}  " + "  ".join(f"{c:>24s}" for c in cells), flush=True)
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, nargs="*", default=[4096, 16384], help="supervised tokens per micro-batch")
    ap.add_argument("--learners", nargs="*", default=["grpo", "lopd"])
    ap.add_argument("--chunks", type=int, nargs="*", default=[0, 1024],
                    help="positions per LM-head chunk; 0 = unchunked (the code before chunking)")
    ap.add_argument("--vocab", type=int, default=QWEN3_VOCAB)
    ap.add_argument("--row-tokens", type=int, default=1024, help="supervised tokens per rollout")
    ap.add_argument("--repeat", type=int, default=1,
                    help="learner steps per case (time: median after the first); rounds with --interleave")
    ap.add_argument("--interleave", action="store_true",
                    help="time only: one process per row, its steps alternating between the chunks")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per case")
    ap.add_argument("--cap-gib", type=float, default=14.0, help="address-space cap of each case's process")
    ap.add_argument("--work", default="/tmp/lopd-bench-memory", help="scratch directory (model, bank, runs)")
    ap.add_argument("--out", default=None, help="write the JSON results here")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--tokens-one", dest="tokens_one", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--chunk", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        args.tokens = args.tokens_one
        print(json.dumps(run_interleaved(args) if args.interleave else run_case(args)))
        return 0
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    write_shop_traces(work / "shop.jsonl")
    if not (work / f"model-{args.vocab}" / "config.json").exists():
        save_wide_model(work / f"model-{args.vocab}", args.vocab)
    results = run_table(args)
    meta = run_meta(__file__, argv, args={k: v for k, v in vars(args).items() if k not in ("one", "tokens_one", "chunk")})
    if args.out:
        Path(args.out).write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
