"""Probe: how fast the tiny Qwen3 learns to copy a span of random tokens (induction), with
``harness.basemodel.pretrain.pretrain``. See docs/MICRO.md, "Building the micro-world base".

    python benchmarks/probe_induction.py --pool 100 --epochs 4                 # variable offset
    python benchmarks/probe_induction.py --pool 100 --epochs 2 --fixed         # fixed offset
    python benchmarks/probe_induction.py --pool 100 --epochs 4 --rope-theta 1e4

A sequence is random tokens (a prefix), a separator, a span, a separator and the span again; the
loss is taken on the repeat only. Prints the fit loss and the held-out loss after every epoch.
"""

from __future__ import annotations

import argparse
import random
import time

import torch
from transformers import Qwen3ForCausalLM

from harness.models import build_tokenizer, tiny_config
from harness.basemodel.pretrain import Example, PretrainConfig, evaluate_loss, pretrain


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pool", type=int, default=100, help="distinct token ids the sequences use")
    ap.add_argument("--n", type=int, default=1000, help="training sequences")
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--batch-tokens", type=int, default=512)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--rope-theta", type=float, default=1e6)
    ap.add_argument("--prefix-max", type=int, default=16, help="longest random prefix (variable offset)")
    ap.add_argument("--qk-gain", type=float, default=1.0, help="initial q_norm/k_norm weight (sharper attention)")
    ap.add_argument("--init-range", type=float, default=None, help="initializer_range of the model config")
    ap.add_argument("--fixed", action="store_true", help="fixed prefix (8) and span (24): a fixed copy offset")
    args = ap.parse_args()
    torch.set_num_threads(1)
    tok = build_tokenizer()
    rng = random.Random(0)
    pool = list(range(300, 300 + args.pool))

    def example() -> Example:
        n, k = (24, 8) if args.fixed else (rng.randint(10, 30), rng.randint(0, args.prefix_max))
        span = [rng.choice(pool) for _ in range(n)]
        prefix = [rng.choice(pool) for _ in range(k)]
        ids = [5, *prefix, 7, *span, 6, *span]
        return Example(ids, [0] * (len(ids) - n) + [1] * n)

    train = [example() for _ in range(args.n)]
    test = [example() for _ in range(50)]
    cfg = tiny_config("1m", tok)
    cfg.rope_parameters = {"rope_type": "default", "rope_theta": args.rope_theta}
    if args.init_range is not None:
        cfg.initializer_range = args.init_range
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("q_norm.weight", "k_norm.weight")):
                p.fill_(args.qk_gain)
    t0 = time.perf_counter()
    steps = 0
    for epoch in range(args.epochs):
        res = pretrain(model, train, PretrainConfig(epochs=1, batch_tokens=args.batch_tokens, lr=args.lr,
                                                    warmup_steps=10, min_lr_ratio=1.0, progress=False, seed=epoch),
                       pad_id=tok.pad_token_id)
        steps += res.steps
        print(f"epoch {epoch}: {steps} steps, fit CE {res.losses[-1]:.3f}, "
              f"test CE {evaluate_loss(model, test, tok.pad_token_id):.3f}, {time.perf_counter() - t0:.0f}s", flush=True)


if __name__ == "__main__":
    main()
