"""Speed of the HF engine against plain ``model.generate`` on the same model, batch and lengths.

Cases (all in one run, alternating ours/peer per repeat; medians of tokens per wall second and
per CPU second of the process, and medians of the ratios of back-to-back runs):

* ``single``: one batched generation of N tokens from P-token prompts. Peers: ``model.generate``
  (no log-probs) and ``model.generate`` returning log-probs (``output_logits``).
* ``multiturn``: a batched T-turn rollout; after each turn every sequence grows by its sampled
  tokens plus an observation of random length. Ours keeps the KV cache across turns (prefix
  reuse); the peer re-prefills the whole context each turn with ``model.generate``. Also ours
  without prefix reuse, to show where the gain comes from.
* ``score``: teacher scoring (per-position top-20 and token log-probs) of B sequences of length L.
  Peer: one plain forward + log_softmax + topk.

Peak memory: each case once more in a fresh subprocess; CPU reports the peak resident-set growth
over the process after loading the model (polled from /proc/self/statm), GPU ``torch.cuda.max_memory_allocated``.

    python benchmarks/bench_engine.py                      # tiny 1m model, CPU, defaults below
    python benchmarks/bench_engine.py --preset 5m --batch 32
    python benchmarks/bench_engine.py --model /models/Qwen3-4B --device cuda --dtype bfloat16
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.engines import HFEngine, SamplingParams  # noqa: E402
from harness.models import build_tiny_model, count_parameters, load_model  # noqa: E402


def load(args):
    if args.model:
        dtype = getattr(torch, args.dtype) if args.dtype != "auto" else "auto"
        model, tok = load_model(args.model, dtype=dtype, device=args.device)
    else:
        model, tok = build_tiny_model(args.preset, seed=0)
        model = model.to(args.device)
    return model.eval(), tok


def sync(device):
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def make_prompts(args, vocab):
    g = torch.Generator().manual_seed(0)
    return [torch.randint(10, min(vocab, 900) - 1, (args.prompt_len,), generator=g).tolist()
            for _ in range(args.batch)]


def hf_generate(model, prompts, n_new, pad_id, device, logprobs=False):
    """model.generate on left-padded prompts; returns per-row new tokens (and log-probs)."""
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[pad_id] * (width - len(p)) + p for p in prompts], device=device)
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=device)
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=n_new, min_new_tokens=n_new,
                             do_sample=True, temperature=1.0, top_k=0, top_p=1.0, pad_token_id=pad_id,
                             return_dict_in_generate=True, output_logits=logprobs)
    new = out.sequences[:, width:]
    if logprobs:
        logits = torch.stack(out.logits, dim=1).float()
        lp = torch.log_softmax(logits, -1).gather(-1, new[..., None])[..., 0]
        return new.tolist(), lp.tolist()
    return new.tolist(), None


def run_single(args, model, tok, which):
    prompts = make_prompts(args, model.config.vocab_size)
    n = args.new_tokens
    if which == "ours":
        eng = HFEngine(model, tok, prefix_cache=False)
        outs = eng.generate(prompts, SamplingParams(temperature=1.0, max_new_tokens=n, ignore_eos=True, seed=1))
        return sum(len(o.token_ids) for o in outs)
    new, _ = hf_generate(model, prompts, n, tok.pad_token_id, args.device, logprobs=(which == "hf_logprobs"))
    return sum(len(r) for r in new)


def observation(g, vocab, lo, hi):
    k = int(torch.randint(lo, hi + 1, (1,), generator=g))
    return torch.randint(10, min(vocab, 900) - 1, (k,), generator=g).tolist()


def run_multiturn(args, model, tok, which):
    seqs = make_prompts(args, model.config.vocab_size)
    g = torch.Generator().manual_seed(1)
    vocab = model.config.vocab_size
    eng = HFEngine(model, tok, prefix_cache=(which == "ours"))
    total = 0
    for turn in range(args.turns):
        if which in ("ours", "ours_no_reuse"):
            outs = eng.generate(seqs, SamplingParams(temperature=1.0, max_new_tokens=args.new_tokens,
                                                     ignore_eos=True, seed=turn))
            new = [o.token_ids for o in outs]
        else:
            new, _ = hf_generate(model, seqs, args.new_tokens, tok.pad_token_id, args.device, logprobs=True)
        total += sum(len(r) for r in new)
        seqs = [s + r + observation(g, vocab, args.obs_min, args.obs_max) for s, r in zip(seqs, new)]
    return total


def run_score(args, model, tok, which):
    g = torch.Generator().manual_seed(2)
    seqs = [torch.randint(10, min(model.config.vocab_size, 900) - 1, (args.score_len,), generator=g).tolist()
            for _ in range(args.batch)]
    if which == "ours":
        HFEngine(model, tok, score_token_budget=args.score_budget).score(seqs, top_k=20, start=1)
    else:
        with torch.no_grad():
            logits = model(torch.tensor(seqs, device=args.device)).logits.float()
            lp = torch.log_softmax(logits[:, :-1], -1)
            lp.gather(-1, torch.tensor(seqs, device=args.device)[:, 1:, None])
            torch.topk(lp, 20, dim=-1)
    return args.batch * (args.score_len - 1)


CASES = {
    "single": (run_single, ["ours", "hf", "hf_logprobs"]),
    "multiturn": (run_multiturn, ["ours", "hf", "ours_no_reuse"]),
    "score": (run_score, ["ours", "hf"]),
}


def peak_memory(args, case, which) -> float:
    """MiB: peak growth of RSS (CPU) or peak allocated CUDA memory, one run in a fresh process."""
    cmd = [sys.executable, __file__, "--_memory", f"{case}:{which}"] + args._argv
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def memory_child(args) -> None:
    case, which = args._memory.split(":")
    model, tok = load(args)
    fn = CASES[case][0]
    if str(args.device).startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        fn(args, model, tok, which)
        print((torch.cuda.max_memory_allocated() - base) / 2**20)
        return
    # Poll the resident set while the case runs; report its peak over the RSS before it.
    page = resource.getpagesize()

    def rss() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * page

    base, peak, done = rss(), [0], threading.Event()

    def poll() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], rss())
            done.wait(0.002)

    th = threading.Thread(target=poll, daemon=True)
    th.start()
    fn(args, model, tok, which)
    done.set()
    th.join()
    print((max(peak[0], rss()) - base) / 2**20)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="1m", help="tiny preset when --model is not given")
    ap.add_argument("--model", default=None, help="a model directory (e.g. a Qwen3 checkpoint)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (1 is fastest on a shared VM)")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--turns", type=int, default=6)
    ap.add_argument("--obs-min", type=int, default=8)
    ap.add_argument("--obs-max", type=int, default=40)
    ap.add_argument("--score-len", type=int, default=512)
    ap.add_argument("--score-budget", type=int, default=4096)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--cases", default="single,multiturn,score")
    ap.add_argument("--no-memory", action="store_true")
    ap.add_argument("--json", default=None, help="also write the results here")
    ap.add_argument("--_memory", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    args._argv = [a for a in argv if not a.startswith("--_memory")]
    torch.set_num_threads(args.threads)
    if args._memory:
        memory_child(args)
        return 0
    model, tok = load(args)
    results = {"params": count_parameters(model), "args": {k: v for k, v in vars(args).items()
                                                          if not k.startswith("_")}, "cases": {}}
    for case in args.cases.split(","):
        fn, variants = CASES[case]
        for w in variants:  # warm-up
            fn(args, model, tok, w)
        rates = {w: [] for w in variants}
        cpu = {w: [] for w in variants}
        for _ in range(args.repeats):
            for w in variants:  # alternate so load spikes hit every variant alike
                r_wall, r_cpu = _rate(fn, args, model, tok, w)
                rates[w].append(r_wall)
                cpu[w].append(r_cpu)
        med = {w: statistics.median(r) for w, r in rates.items()}
        med_cpu = {w: statistics.median(r) for w, r in cpu.items()}
        # Ratios of runs made back to back are less exposed to the shared machine's load drift.
        paired = {w: statistics.median(a / b for a, b in zip(rates[w], rates["hf"])) for w in variants if w != "hf"}
        paired_cpu = {w: statistics.median(a / b for a, b in zip(cpu[w], cpu["hf"])) for w in variants if w != "hf"}
        entry = {"tokens_per_s": med, "tokens_per_cpu_s": med_cpu, "all": rates, "all_cpu": cpu,
                 "ratio_vs_hf": {w: med[w] / med["hf"] for w in variants if w != "hf"},
                 "paired_ratio_vs_hf": paired, "paired_cpu_ratio_vs_hf": paired_cpu}
        if not args.no_memory:
            entry["peak_mib"] = {w: peak_memory(args, case, w) for w in variants}
        results["cases"][case] = entry
        print(f"{case}: " + ", ".join(f"{w} {med[w]:.0f} tok/s ({med_cpu[w]:.0f}/cpu-s)" for w in variants)
              + " | paired ratio wall " + ", ".join(f"{w}/hf {x:.2f}" for w, x in paired.items())
              + " cpu " + ", ".join(f"{w}/hf {x:.2f}" for w, x in paired_cpu.items())
              + ("" if args.no_memory else " | peak MiB " +
                 ", ".join(f"{w} {m:.1f}" for w, m in entry["peak_mib"].items())), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


def _rate(fn, args, model, tok, which) -> tuple[float, float]:
    """(tokens per wall second, tokens per CPU second of this process)."""
    sync(args.device)
    t, c = time.perf_counter(), time.process_time()
    n = fn(args, model, tok, which)
    sync(args.device)
    return n / (time.perf_counter() - t), n / max(time.process_time() - c, 1e-9)


if __name__ == "__main__":
    raise SystemExit(main())
