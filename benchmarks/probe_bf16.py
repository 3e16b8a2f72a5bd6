"""Measure the authors' bf16 QFormer claim (issue #31): the fraction of QFormer parameters whose first AdamW
step rounds to no change when the weights are stored in bfloat16 and stepped directly (no float32 master copy).

    python benchmarks/probe_bf16.py                       # micro width 128 and Qwen3-4B's 2,560
    python benchmarks/probe_bf16.py --widths 128 --lrs 1e-5 2e-4 --json out.json

AdamW's first step moves every weight by lr * (sign of its gradient, bias-corrected m / sqrt(v)) plus the
decay lr * wd * w, whatever the gradient's size; so a random gradient measures it exactly. A freshly built
QFormer (our initialisation: LayerNorm gains 1, Linear weights U(+-1/sqrt(d)), queries randn / sqrt(d)) is
stepped once in bfloat16 and compared with its weights before; the same step on a float32 copy is the
reference (which moves every weight).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from lopd.composer import QFormer  # noqa: E402


def unchanged_fraction(d: int, n_heads: int, lr: float, dtype: torch.dtype, seed: int = 0,
                       weight_decay: float = 0.01) -> dict[str, float]:
    """Fraction of parameters (all, and per kind) that one AdamW step leaves bit-identical."""
    torch.manual_seed(seed)
    q = QFormer(d, n_heads).to(dtype)
    before = {n: p.detach().clone() for n, p in q.named_parameters()}
    for p in q.parameters():
        p.grad = torch.randn_like(p)
    torch.optim.AdamW(q.parameters(), lr=lr, weight_decay=weight_decay).step()
    kinds: dict[str, list[int]] = {}
    for n, p in q.named_parameters():
        kind = "queries" if n == "queries" else "layernorm" if "norm" in n else "linear"
        same = int((p.detach() == before[n]).sum())
        k = kinds.setdefault(kind, [0, 0])
        k[0], k[1] = k[0] + same, k[1] + p.numel()
    total = sum(v[1] for v in kinds.values())
    out = {"all": sum(v[0] for v in kinds.values()) / total, "parameters": total}
    out.update({kind: same / n for kind, (same, n) in kinds.items()})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--widths", type=int, nargs="+", default=[128, 2560])
    ap.add_argument("--lrs", type=float, nargs="+", default=[1e-5, 2e-4])
    ap.add_argument("--json", help="write the rows here too")
    args = ap.parse_args(argv)
    heads = {128: 4, 2560: 32}
    rows = []
    print("| width | lr | dtype | parameters | unchanged: all | linear | layernorm | queries |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for d in args.widths:
        for lr in args.lrs:
            for name, dtype in (("bfloat16", torch.bfloat16), ("float32", torch.float32)):
                r = unchanged_fraction(d, heads.get(d, max(1, d // 64)), lr, dtype)
                rows.append({"width": d, "lr": lr, "dtype": name, **r})
                print(f"| {d} | {lr:g} | {name} | {r['parameters']:,} | {r['all']:.3f} | {r['linear']:.3f} | "
                      f"{r['layernorm']:.3f} | {r['queries']:.3f} |", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
