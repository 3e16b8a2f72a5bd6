"""Where the tail of the vLLM vs HF log-prob agreement comes from (issue #35).

Eight greedy micro-world episodes (``lopd/micro-v0`` of the pinned base's world, the first 8 training
tasks, env seeds 0-7, 96 tokens a turn, at most 8 turns, fp32), played by the HF engine; the same token
sequences are then scored per generated token by:

* ``hf_gen``: the HF engine's generation log-probs (``HFEngine.generate`` through ``rollout``: one
  lock-step batch, left padding, each row's KV cache kept across turns);
* ``hf_score``: ``HFEngine.score`` of the whole sequences (one forward, no KV cache, the 8 in one
  padded batch); ``hf_score_1``: the same one sequence at a time (no padding);
* ``hf_score_f64``: ``HFEngine.score`` of a float64 copy of the model (the reference);
* ``vllm_gen``: vLLM's generation log-probs (``rollout_in_flight`` on a server with prefix caching,
  vLLM's default: each turn's prompt reuses the cached blocks of the turns before);
* ``vllm_score``: ``VLLMEngine.score`` (prompt_logprobs, one prefill), the prefix cache reset before each
  sequence; ``vllm_score_warm``: the same right after the generation, cache not reset;
* ``nopc_gen`` / ``nopc_score``: the same two on a second server launched with
  ``--no-enable-prefix-caching`` (``EngineConfig(extra_args=[...])``).

Each pair: median, p99 and max |diff| over all generated tokens, the fraction above 1e-3 and 1e-2, and
its largest positions with the token's rank and top-2 margin (fp64), its depth in the context, its turn
and offset in the turn (0: the first token after a prefill on the previous turns' prefix).

    .venv/bin/python benchmarks/probe_logprob_tail.py --json benchmarks/results/logprob_tail.json
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_server import env_kwargs, free_port  # noqa: E402
from harness.engines import HFEngine, SamplingParams  # noqa: E402
from harness.engines.server import (EngineConfig, ServerPool, launch, make_client, wait_healthy,  # noqa: E402
                                    write_sync_checkpoint)
from harness.models.pinned import PINNED_DIR  # noqa: E402
from harness.rollout import RolloutConfig, rollout, rollout_in_flight  # noqa: E402


def gen_positions(traj) -> list[int]:
    return [i for i, m in enumerate(traj.loss_mask) if m]


def annotate(traj) -> dict[int, tuple[int, int]]:
    """position -> (turn, offset in the turn) for every generated token."""
    out, turn, off, prev = {}, -1, 0, 0
    for i, m in enumerate(traj.loss_mask):
        if m and not prev:
            turn, off = turn + 1, 0
        if m:
            out[i] = (turn, off)
            off += 1
        prev = m
    return out


def score_lp(engine, seqs, one_at_a_time=False, reset=None) -> list[list[float]]:
    """Per sequence, log p of token t at index t (index 0: nan)."""
    out = []
    if one_at_a_time:
        for s in seqs:
            if reset:
                reset()
            r = engine.score([s], top_k=2, start=1)[0]
            out.append([float("nan")] + r.token_logprobs.tolist())
    else:
        for r in engine.score(seqs, top_k=2, start=1):
            out.append([float("nan")] + r.token_logprobs.tolist())
    return out


def gen_lp(trajs) -> list[list[float]]:
    return [[lp if m else float("nan") for lp, m in zip(t.logprobs, t.loss_mask)] for t in trajs]


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(PINNED_DIR))
    ap.add_argument("--episodes", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=96)
    ap.add_argument("--max-turns", type=int, default=8)
    ap.add_argument("--top", type=int, default=8, help="largest positions listed per pair")
    ap.add_argument("--json", default="benchmarks/results/logprob_tail.json")
    ap.add_argument("--work", default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    import gymnasium as gym

    import envs  # noqa: F401
    from harness.models import load_model

    tmp = None if args.work else tempfile.TemporaryDirectory(prefix="probe-tail-")
    work = Path(args.work or tmp.name)
    model, tok = load_model(args.model, dtype=torch.float32)
    model.eval()
    base = write_sync_checkpoint(model, model.state_dict(), tok, work / "base")
    hf = HFEngine(model, tok)
    eos = hf.eos_token_ids

    def start(extra, name):  # open_servers, split so both servers start while the HF side runs; launched
        # from this (main) thread: the servers' PR_SET_PDEATHSIG fires when the launching thread exits
        ec = EngineConfig(kind="vllm", launch=1, port=free_port(), extra_args=extra, startup_timeout=900)
        servers = launch(ec, str(base), work / f"logs-{name}", dtype="float32", served_name="student", gpu=False)
        return ServerPool([make_client(ec, s.url, eos, None, "student") for s in servers], servers)

    t0 = time.perf_counter()
    pc, nopc = start([], "pc"), start(["--no-enable-prefix-caching"], "nopc")

    kw = env_kwargs(Path(args.model))
    envs_ = [gym.make("lopd/micro-v0", max_steps=args.max_turns, **kw) for _ in range(args.episodes)]
    tasks = [t.task_id for t in envs_[0].unwrapped.all_tasks() if t.split == "train"][:args.episodes]
    rkw = dict(sampling=SamplingParams(temperature=0.0, max_new_tokens=args.max_new_tokens),
               seeds=list(range(args.episodes)), options=[{"task_id": t} for t in tasks],
               config=RolloutConfig(max_turns=args.max_turns))
    hf_trajs = rollout(envs_, hf, tok, **rkw)
    seqs = [list(t.token_ids) for t in hf_trajs]
    lps = {"hf_gen": gen_lp(hf_trajs), "hf_score": score_lp(hf, seqs),
           "hf_score_1": score_lp(hf, seqs, one_at_a_time=True)}
    m64 = copy.deepcopy(model).double()
    hf64 = HFEngine(m64, tok)
    top2 = [r.topk_logprobs for r in hf64.score(seqs, top_k=2, start=1)]
    top2_ids = [r.topk_ids for r in hf64.score(seqs, top_k=2, start=1)]
    lps["hf_score_f64"] = score_lp(hf64, seqs)
    for pool in (pc, nopc):
        wait_healthy(pool.servers, pool.engines, 900)
    print(f"servers up after {time.perf_counter() - t0:.0f} s", flush=True)
    same = {}
    try:
        for name, pool in (("vllm", pc), ("nopc", nopc)):
            eng = pool.engines[0]
            eng.reset_prefix_cache()
            trajs = rollout_in_flight(envs_, pool, tok, **rkw)
            same[name] = [list(a.token_ids) == list(b.token_ids) for a, b in zip(hf_trajs, trajs)]
            g = gen_lp(trajs)
            lps[f"{name}_gen"] = [x if ok else [float("nan")] * len(s) for x, ok, s in zip(g, same[name], seqs)]
            if name == "vllm":
                lps["vllm_score_warm"] = score_lp(eng, seqs, one_at_a_time=True)
            lps[f"{name}_score"] = score_lp(eng, seqs, one_at_a_time=True, reset=eng.reset_prefix_cache)
    finally:
        pc.close()
        nopc.close()

    ann = [annotate(t) for t in hf_trajs]
    pos = [gen_positions(t) for t in hf_trajs]

    def info(e, p):
        t2, ids = top2[e][p - 1], top2_ids[e][p - 1]
        turn, off = ann[e][p]
        return {"episode": e, "pos": p, "token": seqs[e][p], "turn": turn, "offset_in_turn": off,
                "rank": 1 if int(ids[0]) == seqs[e][p] else (2 if int(ids[1]) == seqs[e][p] else ">2"),
                "top2_margin": round(float(t2[0] - t2[1]), 6), "logp_f64": round(float(lps["hf_score_f64"][e][p]), 6)}

    pairs = [("hf_gen", "hf_score"), ("hf_score", "hf_score_1"), ("hf_score", "hf_score_f64"),
             ("hf_gen", "hf_score_f64"), ("vllm_gen", "hf_score_f64"), ("vllm_score", "hf_score_f64"),
             ("hf_gen", "vllm_gen"), ("hf_score", "vllm_score"), ("vllm_gen", "vllm_score"),
             ("vllm_score", "vllm_score_warm"), ("vllm_gen", "nopc_gen"), ("nopc_gen", "hf_score_f64"),
             ("nopc_score", "vllm_score"), ("hf_gen", "nopc_gen")]
    result = {"args": vars(args), "date": time.strftime("%Y-%m-%d"), "tokens_identical": same,
              "tokens": sum(len(p) for p in pos), "turns": [len(t.episode.steps) for t in hf_trajs],
              "lengths": [len(s) for s in seqs], "pairs": {}}
    print(f"{result['tokens']} generated tokens, lengths {result['lengths']}, same tokens {same}")
    for a, b in pairs:
        d = [(abs(lps[a][e][p] - lps[b][e][p]), e, p) for e in range(len(seqs)) for p in pos[e]
             if lps[a][e][p] == lps[a][e][p] and lps[b][e][p] == lps[b][e][p]]
        if not d:
            continue
        xs = [x for x, _, _ in d]
        d.sort(reverse=True)
        first = [x for x, e, p in d if ann[e][p][1] == 0]
        rest = [x for x, e, p in d if ann[e][p][1] > 0]
        r = {"n": len(xs), "median": statistics.median(xs), "p99": pct(xs, 0.99), "max": max(xs),
             "frac_gt_1e-3": sum(x > 1e-3 for x in xs) / len(xs), "frac_gt_1e-2": sum(x > 1e-2 for x in xs) / len(xs),
             "max_first_of_turn": max(first) if first else None, "max_rest": max(rest) if rest else None,
             "largest": [{"diff": x, a: lps[a][e][p], b: lps[b][e][p], **info(e, p)} for x, e, p in d[:args.top]]}
        result["pairs"][f"{a} vs {b}"] = r
        print(f"{a:>11} vs {b:<14} n {r['n']:5d} median {r['median']:.2e} p99 {r['p99']:.2e} max {r['max']:.2e} "
              f">1e-3 {r['frac_gt_1e-3']:.4f}  max first-of-turn {r['max_first_of_turn']:.2e} "
              f"rest {r['max_rest']:.2e}", flush=True)
        for x in r["largest"][:3]:
            print(f"      {x}")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(result, indent=1, default=str))
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
