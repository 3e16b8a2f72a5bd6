"""``lopd pretrain``: build (or load from the cache) the micro world's base model and measure it.

    lopd pretrain                                   # defaults; trains once, then loads the cache
    lopd pretrain n_plain=600 pretrain.epochs=1     # BaseModelConfig overrides (key=value)
    lopd pretrain --eval-tasks 60 --json out.json   # fewer eval tasks; write the numbers as JSON
    lopd pretrain --no-eval                         # build or load only
    lopd pretrain --pin                             # then make it the pinned base (harness/pinned_base)
    lopd pretrain --base DIR --eval-tasks 120       # measure a built base folder as it is

It prints the two numbers self-distillation depends on: the mean reward on held-out eval tasks
without context, and with a good reference in the privileged-context framing.
"""

from __future__ import annotations

import argparse


def _flag(name: str):
    """A flag read and range-checked as field ``name`` of the measurement's EvalConfig (one rule for both)."""
    from harness.config import arg_type

    return arg_type("harness.basemodel.measure:EvalConfig", name)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("pretrain", help="build or load the micro world's base model and measure its gap")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                   help="BaseModelConfig overrides, e.g. n_plain=600 pretrain.epochs=1 preset=5m")
    p.add_argument("--config", metavar="YAML", help="BaseModelConfig YAML file")
    p.add_argument("--cache-dir", default=None, help="cache root (default $LOPD_CACHE_DIR or ~/.cache/lopd)")
    p.add_argument("--eval-tasks", type=_flag("n_tasks"), default=120, help="held-out tasks to roll out (0: all)")
    p.add_argument("--samples", type=_flag("samples"), default=1, help="episodes per task and condition")
    p.add_argument("--temperature", type=_flag("temperature"), default=0.7,
                   help="sampling temperature of the rollouts (top-p 0.95, top-k 20: the learners' sampling)")
    p.add_argument("--seed", type=int, default=0, help="sampling and reference-choice seed")
    p.add_argument("--no-eval", action="store_true", help="build or load the base, do not roll it out")
    p.add_argument("--json", metavar="FILE", help="also write the build info and the scores as JSON")
    p.add_argument("--base", metavar="DIR", help="measure this built base folder (its recorded config) "
                   "instead of building or loading the base of the config")
    p.add_argument("--pin", action="store_true",
                   help="copy the base into harness/pinned_base, which a fresh clone then loads instead of training")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from harness.basemodel.build import load_or_build_base
    from harness.basemodel.config import BaseModelConfig
    from harness.basemodel.measure import EvalConfig, evaluate_base
    from harness.config import check_output, load_config

    if args.json:  # output paths are checked before a base is built or loaded
        check_output(args.json, "--json", folder=False)
    if args.cache_dir:
        check_output(args.cache_dir, "--cache-dir", folder=True)
    if args.base:
        from harness.basemodel.build import load_base_dir

        if args.overrides or args.config:
            raise ValueError("--base measures a built base as it is: no config or overrides")
        model, tok, info = load_base_dir(args.base)
        cfg = info.pop("config_obj")
    else:
        cfg = load_config(BaseModelConfig, args.config, list(args.overrides))
        model, tok, info = load_or_build_base(cfg, cache_dir=args.cache_dir)
    how = ("copied from the pinned base" if info.get("pinned") else "loaded from the cache" if info["cached"]
           else f"built in {info['seconds']['total']:.0f}s")
    pre = info["pretrain"]
    print(f"base model: {info['path']} ({how})")
    print(f"  {info['parameters']:,} parameters, vocab {info['vocab']}; corpus {info['corpus']['kinds']}; "
          f"pretrain {pre['steps']} steps, {pre['tokens']:,} tokens, {pre['seconds']}s, "
          f"loss {pre['loss_first']} -> {pre['loss_last']}")
    out: dict = {"base": {k: v for k, v in info.items() if k != "losses"}}
    if not args.no_eval:
        ecfg = EvalConfig(n_tasks=args.eval_tasks, samples=args.samples, temperature=args.temperature, seed=args.seed)
        scores = evaluate_base(model, tok, cfg, ecfg)
        out["eval"] = scores
        print(f"held-out eval ({scores['tasks']} tasks x {ecfg.samples}, T={ecfg.temperature}, "
              f"{scores['seconds']:.0f}s):")
        print(f"  mean reward without context:      {scores['no_context']:.3f} "
              f"(full pass {scores['full_pass']['no_context']:.3f})")
        print(f"  mean reward with a good reference: {scores['with_reference']:.3f} "
              f"(full pass {scores['full_pass']['with_reference']:.3f})")
        for cond in ("no_context", "with_reference"):
            per = ", ".join(f"{d} {v:.2f}" for d, v in scores["per_domain"][cond].items())
            print(f"  {cond:>14}: {per}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    if args.pin:
        from harness.basemodel.pin import pin

        print(f"pinned: {pin(info['path'])}")
    return 0
