"""What a bfloat16 QFormer costs on this CPU (issue #31): one forward and backward of the micro QFormer over a
batch of encoder hidden states, float32 (the paper recipe, the peer) against bfloat16 (the authors' recipe),
in the same run. A CPU without bf16 instructions (no avx512_bf16 or AMX) runs bfloat16 matmuls far slower
than float32, which is why the authors' recipe's composer dominates its step here.

    python benchmarks/bench_qformer_dtype.py                      # micro width 128, one experience of 256 tokens
    python benchmarks/bench_qformer_dtype.py --rows 8 --repeats 7 --json out.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.run_meta import run_meta  # noqa: E402
from lopd.composer import QFormer  # noqa: E402


def cpu_flags() -> list[str]:
    """The bf16-related instruction sets this CPU reports (empty: none)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return []
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    return sorted(f for f in set(flags) if "bf16" in f or f.startswith("amx") or f == "avx512f")


def step_seconds(dtype: torch.dtype, d: int, heads: int, latents: int, depth: int, rows: int, tokens: int,
                 repeats: int) -> list[float]:
    """Wall seconds of each of ``repeats`` forward+backward passes (after one warm-up)."""
    torch.manual_seed(0)
    q = QFormer(d, heads, latents, depth).to(dtype)
    h = torch.randn(rows, tokens, d, dtype=dtype)
    out = []
    for i in range(repeats + 1):
        t0 = time.perf_counter()
        q(h).float().square().mean().backward()
        if i:
            out.append(time.perf_counter() - t0)
        q.zero_grad(set_to_none=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--d", type=int, default=128, help="width (the micro model's hidden size)")
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--latents", type=int, default=32)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--rows", type=int, default=1, help="experiences encoded at once (lopd.composer.encode_batch_size)")
    ap.add_argument("--tokens", type=int, default=256, help="tokens per experience")
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", help="also write the numbers here")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    shape = (args.d, args.heads, args.latents, args.depth, args.rows, args.tokens, args.repeats)
    fp32 = step_seconds(torch.float32, *shape)
    bf16 = step_seconds(torch.bfloat16, *shape)
    res = {"meta": run_meta(__file__, argv, threads=args.threads), "bf16_flags": cpu_flags(),
           "shape": dict(zip(("d", "heads", "latents", "depth", "rows", "tokens", "repeats"), shape)),
           "float32_median_s": statistics.median(fp32), "bfloat16_median_s": statistics.median(bf16)}
    res["bf16_over_fp32"] = res["bfloat16_median_s"] / res["float32_median_s"]
    print(f"QFormer forward+backward, {args.rows} x {args.tokens} tokens, d={args.d}, depth {args.depth}, "
          f"{args.threads} thread(s); bf16 instructions: {res['bf16_flags'] or 'none'}")
    print(f"  float32 {res['float32_median_s'] * 1000:.0f} ms, bfloat16 {res['bfloat16_median_s'] * 1000:.0f} ms "
          f"(median of {args.repeats}): bfloat16 {res['bf16_over_fp32']:.1f}x the time")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
