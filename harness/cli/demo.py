"""``lopd demo``: the main job end to end on the micro world, GRPO against LOPD at an equal budget.

    lopd demo                                  # base (pinned) -> bank -> cold start -> GRPO and LOPD,
                                               # 64 generations each -> table + plot, then the shipped
                                               # full-budget result with its intervals
    lopd demo --out runs/demo2 generations=320 eval_every=64      # DemoConfig overrides (key=value)
    lopd demo --learners grpo opsd sdpo lopd --seeds 0 1 2

Writes ``OUT/report.txt`` (the printed tables), ``OUT/report.json`` (curves, behaviour, timings),
``OUT/curves.png`` (reward against generations) and every run under ``OUT/runs/``. A second run
reuses the cached base, bank and cold-start composer, and every finished run whose settings are
unchanged. The full comparison with seeds and ablations is ``benchmarks/compare.py``.
"""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("demo", help="the main job: GRPO vs LOPD on the micro world (table + plot)")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                   help="DemoConfig overrides, e.g. generations=320 base.n_plain=600 embedder=hashing")
    p.add_argument("--out", default=None, help="output directory (default: runs/demo)")
    p.add_argument("--learners", nargs="+", default=["grpo", "lopd"], metavar="NAME",
                   help="learners to compare (default: grpo lopd; the first sets the threshold)")
    p.add_argument("--seeds", nargs="+", type=int, default=None, help="training seeds (default: 0)")
    p.add_argument("--config", metavar="YAML", help="DemoConfig YAML file")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import time

    from harness.config import check_output, load_config
    from harness.experiments.demo import DemoConfig, RunSpec, run_pipeline
    from harness.experiments.demo_report import format_report, live_caveat, plot_curves, shipped_summary

    ov = list(args.overrides)
    if args.out:
        ov.append(f"out={args.out}")
    if args.seeds:
        ov.append(f"seeds={list(args.seeds)}")
    cfg = load_config(DemoConfig, args.config, ov)
    check_output(cfg.out, "--out", folder=True)
    from harness.training.trainer import example_config

    for name in args.learners:  # each starts from its packaged config: a typo fails now, not after the bank
        example_config(name)
    t0 = time.perf_counter()
    report = run_pipeline(cfg, [RunSpec(name, name) for name in args.learners])
    from pathlib import Path

    out = Path(cfg.out)
    plot = plot_curves(report, out / "curves.png")
    text = format_report(report)
    t = report["timings"]
    base = report["base"]
    how = "pinned" if base.get("pinned") else "cached" if base["cached"] else "built"
    text += (f"\n\nbase: {how}; bank: {report['bank']['entries']} "
             f"experiences ({report['bank']['base_successes']} base successes of {report['bank']['base_episodes']}, "
             f"{report['bank']['expert']} expert); timings (s): "
             + ", ".join(f"{k} {v:.0f}" for k, v in t.items()))
    (out / "report.txt").write_text(text + "\n", encoding="utf-8")
    print()
    print(text)
    print(f"\nplot: {plot}\nreport: {out / 'report.json'} ({time.perf_counter() - t0:.0f}s)")
    print("\n" + live_caveat(report) + "\n\n" + shipped_summary())
    return 0
