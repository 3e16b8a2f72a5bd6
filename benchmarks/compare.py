"""The full micro-world comparison in one command: GRPO, OPSD, SDPO and LOPD, seeds, ablations.

    .venv/bin/python benchmarks/compare.py                         # 1,600 generations x 3 seeds x 4
                                                                   # learners + LOPD ablations
    .venv/bin/python benchmarks/compare.py --tune                  # first the lr grid (below), then the rest
    .venv/bin/python benchmarks/compare.py --generations 256 --seeds 0 --jobs 2 --out /tmp/cmp   # reduced

Every run goes through :func:`harness.demo.run_pipeline` (the same base, bank, cold start, tasks,
budget and evaluation as ``lopd demo``), so all learners see the same training tasks in the same
order per seed and are evaluated on the same held-out tasks at the same budget points. The
threshold of generations-to-threshold is GRPO's final mean reward.

Runs (labels):
- main: ``grpo``, ``opsd``, ``sdpo``, ``lopd`` (each learner's packaged config);
- margin ablation: ``lopd-m0`` (m = 0), ``lopd`` (m = 0.05), ``lopd-m0.2``, ``lopd-frozen`` (composer
  not trained: ``lopd.train_composer=false``);
- latents per experience: ``lopd-lat8``, ``lopd-lat16``, ``lopd`` (32), ``lopd-lat64``;
- retrievals: ``lopd-k1``, ``lopd`` (3);
- composer_lr (not in the default groups): the margin ablation with the composer's RL lr at 1e-4
  instead of the paper's 1e-5 (``lopd-clr1e-4-m0``, ``lopd-clr1e-4``, ``lopd-clr1e-4-m0.2``, ``lopd-frozen``).
Ablations are config overrides only (``ABLATIONS``).

Tuning (``--tune``): the same grid for every learner, the student learning rate in
``TUNE_LRS`` at ``--tune-generations`` with seed 0 (one run per point); each learner then trains
with the lr of its best final held-out reward (ties: the smaller lr). No other knob is tuned for
any learner. The grid's short horizon can pick an lr that collapses later: on the r12 base it chose
1e-3 for GRPO, which fell to 0 after 800-1,440 generations on every seed (RESULTS.md); set
``--tune-generations`` to the full budget when the CPU allows. Without ``--tune`` every learner uses its packaged config's lr (1e-4 for all four).
``--lrs lopd=1e-3 grpo=3e-4 ...`` sets them by hand, e.g. to reuse an earlier tuning (finished runs
are reused only when their overrides, the lr included, are the same).

Writes OUT/report.json, OUT/report.txt, OUT/curves_main.png, OUT/curves_margin.png,
OUT/curves_latents.png, OUT/curves_retrieval.png and OUT/results.md (a RESULTS.md section draft).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness.config import load_config  # noqa: E402
from harness.demo import DemoConfig, RunSpec, copy_config, run_pipeline  # noqa: E402
from harness.demo_report import format_report, plot_curves  # noqa: E402

LEARNERS = ["grpo", "opsd", "sdpo", "lopd"]
_CLR = "lopd.composer_optim.lr=1e-4"
ABLATIONS: dict[str, list[tuple[str, list[str]]]] = {
    "margin": [("lopd-m0", ["lopd.margin.margin=0"]), ("lopd", []), ("lopd-m0.2", ["lopd.margin.margin=0.2"]),
               ("lopd-frozen", ["lopd.train_composer=false"])],
    "latents": [("lopd-lat8", ["lopd.composer.qformer.n_latents=8"]),
                ("lopd-lat16", ["lopd.composer.qformer.n_latents=16"]), ("lopd", []),
                ("lopd-lat64", ["lopd.composer.qformer.n_latents=64"])],
    "retrieval": [("lopd-k1", ["lopd.n_retrieved=1"]), ("lopd", [])],
    # The margin ablation again with the composer's RL lr x10: at the paper's 1e-5 the composer hardly
    # moves in the 50 steps of a 1,600-generation run, so the margin term cannot matter (RESULTS.md, r14).
    "composer_lr": [("lopd-clr1e-4-m0", [_CLR, "lopd.margin.margin=0"]), ("lopd-clr1e-4", [_CLR]),
                    ("lopd-clr1e-4-m0.2", [_CLR, "lopd.margin.margin=0.2"]),
                    ("lopd-frozen", ["lopd.train_composer=false"])],
}
# Moved up twice when the best lr sat on the grid's top for every learner: 3e-4 of [3e-5 .. 3e-4] (r7 base),
# 1e-3 of [1e-4 .. 1e-3] for GRPO, OPSD, SDPO and LOPD on the r12 base.
TUNE_LRS = [1e-4, 3e-4, 1e-3, 3e-3]


def specs_for(groups: list[str], lrs: dict[str, float]) -> list[RunSpec]:
    """Run specs of the chosen groups (main first, GRPO first), each label once."""
    def lr(learner: str) -> list[str]:
        return [f"optim.lr={lrs[learner]}"] if learner in lrs else []

    out: dict[str, RunSpec] = {}
    if "main" in groups:
        for name in LEARNERS:
            out[name] = RunSpec(name, name, lr(name))
    for g in groups:
        for label, ov in ABLATIONS.get(g, []):
            out.setdefault(label, RunSpec(label, "lopd", lr("lopd") + ov))
    if "grpo" not in out:  # the threshold needs GRPO
        out = {"grpo": RunSpec("grpo", "grpo", lr("grpo")), **out}
    return list(out.values())


def select(specs: list[RunSpec], only: list[str] | None) -> list[RunSpec]:
    """The specs labelled in ``only`` (None: all), in their order; ValueError names an unknown label."""
    if only is None:
        return specs
    unknown = sorted(set(only) - {s.label for s in specs})
    if unknown:
        raise ValueError(f"--only: {', '.join(unknown)} not among the groups' runs {[s.label for s in specs]}")
    return [s for s in specs if s.label in only]


def parse_lrs(items: list[str]) -> dict[str, float]:
    """``["lopd=1e-3", "grpo=3e-4"]`` -> ``{"lopd": 0.001, "grpo": 0.0003}`` (ValueError on a bad item).

    Lets a comparison reuse an earlier ``--tune`` (its ``tune/report.json`` "chosen") without rerunning it.
    """
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or name not in LEARNERS:
            raise ValueError(f"--lrs wants LEARNER=LR with LEARNER in {LEARNERS}, not {item!r}")
        try:
            lr = float(value)
        except ValueError:
            raise ValueError(f"--lrs {item!r}: {value!r} is not a number") from None
        if not (math.isfinite(lr) and lr > 0):
            raise ValueError(f"--lrs {item!r}: the lr must be a positive number")
        out[name] = lr
    return out


def subset(report: dict, labels: list[str]) -> dict:
    return {**report, "specs": {k: v for k, v in report["specs"].items() if k in labels}}


def tune(cfg: DemoConfig, generations: int) -> tuple[dict[str, float], dict]:
    """The lr grid for every learner at a reduced budget, seed 0; returns the chosen lr per learner."""
    tcfg = copy_config(cfg, out=str(Path(cfg.out) / "tune"), seeds=[0], generations=generations, threshold=None)
    specs = [RunSpec(f"{name}-lr{lr:g}", name, [f"optim.lr={lr}"]) for name in LEARNERS for lr in TUNE_LRS]
    rep = run_pipeline(tcfg, specs)
    chosen, table = {}, {}
    for name in LEARNERS:
        finals = {lr: rep["specs"][f"{name}-lr{lr:g}"]["final"] for lr in TUNE_LRS}
        table[name] = finals
        chosen[name] = max(TUNE_LRS, key=lambda lr: (finals[lr], -lr))
    return chosen, {"generations": generations, "grid": TUNE_LRS, "final_reward": table, "chosen": chosen}


def at_grid_top(tuning: dict) -> list[str]:
    """Learners whose chosen lr is the grid's largest: their optimum may lie above the grid."""
    return [name for name, lr in tuning["chosen"].items() if lr == max(tuning["grid"])]


def markdown(report: dict, args: argparse.Namespace, cmd: str, seconds: float, tuning: dict | None) -> str:
    """A RESULTS.md section draft: command, machine, tables (numbers from this run only)."""
    specs = report["specs"]
    gens = sorted({p["generations"] for v in specs.values() for p in v["curve"]})
    lines = [f"Command: `{cmd}`", "",
             f"Machine: {platform.machine()} {platform.system()}, 2-core shared CPU VM (other jobs running); "
             f"date {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; wall time {seconds / 60:.1f} min.", "",
             f"Budget {report['config']['generations']} generations per run, {report['config']['rollouts_per_step']} "
             f"a step; seeds {report['config']['seeds']}; held-out eval on {report['config']['eval_tasks']} eval tasks "
             f"(greedy) every {report['config']['eval_every']} generations. Bank: {report['bank']['entries']} "
             f"experiences ({report['bank']['base_successes']} successful base episodes of "
             f"{report['bank']['base_episodes']}, {report['bank']['expert']} scripted-expert episodes added).", ""]
    if tuning:
        lines += [f"Tuning grid (every learner, seed 0, {tuning['generations']} generations): student lr in "
                  f"{tuning['grid']}; final held-out reward per lr: "
                  + "; ".join(f"{k}: " + ", ".join(f"{lr:g}->{v:.3f}" for lr, v in d.items())
                              for k, d in tuning["final_reward"].items())
                  + f". Chosen: {tuning['chosen']}.", ""]
        edge = at_grid_top(tuning)
        if edge:
            lines += [f"Best at the grid's top (the optimum may lie above it): {', '.join(edge)}.", ""]
    if args.lrs:
        lines += [f"Student lr given on the command line (`--lrs`): {parse_lrs(args.lrs)}.", ""]
    if not tuning and not args.lrs:
        lines += ["Tuning: none run; every learner uses its packaged config (student lr 1e-4).", ""]
    head = "| run | seeds | " + " | ".join(f"@{g}" for g in gens) + " | gens to thr |"
    lines += [f"Held-out mean reward (± std over seeds) by generations; threshold {report['threshold']:.3f} "
              f"({report['threshold_source']}):", "", head, "|" + "---|" * (len(gens) + 3)]
    for label, v in specs.items():
        pts = {p["generations"]: p for p in v["curve"]}
        cells = [(f"{pts[g]['mean']:.3f}" + (f" ± {pts[g]['std']:.3f}" if pts[g]["n"] > 1 else "")) if g in pts else "-"
                 for g in gens]
        g = v["generations_to_threshold"]
        never = "never" if report["threshold"] > 0 else "-"
        lines.append(f"| {label} | {len(v['seeds'])} | " + " | ".join(cells) + f" | {never if g is None else g} |")
    lines += ["", "Behaviour of the held-out episodes, untrained -> final (per-episode means):", "",
              "| run | reward | env steps | calls/step | first-response tokens | repeated calls | reward/call |",
              "|---|---|---|---|---|---|---|"]
    for label, v in specs.items():
        a, b = v["behaviour"].get("start") or {}, v["behaviour"].get("end") or {}

        def f(m: str) -> str:
            x, y = a.get(m, math.nan), b.get(m, math.nan)
            return f"{x:.3g} -> {y:.3g}"
        lines.append(f"| {label} | " + " | ".join(f(m) for m in ("reward", "env_steps", "calls_per_step",
                                                              "first_response_tokens", "repeated_calls",
                                                              "reward_per_call")) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="runs/compare", help="output directory")
    ap.add_argument("--generations", type=int, default=1600, help="budget per run (default 1600)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--groups", nargs="+", default=["main", "margin", "latents", "retrieval"],
                    choices=["main", *ABLATIONS], help="which runs (composer_lr: not run by default)")
    ap.add_argument("--jobs", type=int, default=2, help="runs trained at once (processes)")
    ap.add_argument("--only", nargs="+", default=None, metavar="LABEL",
                    help="train and report only these runs of the groups (e.g. the learners that need no cold "
                         "start, while it is being chosen); a later full command reuses them")
    ap.add_argument("--tune", action="store_true", help="run the lr grid first and use each learner's best lr")
    ap.add_argument("--tune-generations", type=int, default=320)
    ap.add_argument("--lrs", nargs="*", default=[], metavar="LEARNER=LR",
                    help="student lr per learner, e.g. an earlier --tune's choice (overrides --tune's)")
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                    help="DemoConfig overrides, e.g. eval_every=160 rollouts_per_step=32 eval_tasks=60")
    args = ap.parse_args(argv)
    cmd = "python benchmarks/compare.py " + " ".join(argv if argv is not None else sys.argv[1:])
    t0 = time.perf_counter()
    defaults = ["rollouts_per_step=32", "eval_every=160", "eval_tasks=60", "coldstart_tasks=600",
                "coldstart_steps=200", "coldstart_batch=8"]
    cfg = load_config(DemoConfig, None, defaults + [f"out={args.out}", f"generations={args.generations}",
                                                    f"seeds={list(args.seeds)}", f"jobs={args.jobs}", *args.set])
    try:
        given = parse_lrs(args.lrs)
    except ValueError as e:
        ap.error(str(e))
    lrs, tuning = {}, None
    if args.tune:
        lrs, tuning = tune(cfg, args.tune_generations)
    lrs.update(given)
    specs = specs_for(args.groups, lrs)
    try:
        specs = select(specs, args.only)
    except ValueError as e:
        ap.error(str(e))
    report = run_pipeline(cfg, specs)
    out = Path(cfg.out)
    seconds = time.perf_counter() - t0
    report["tuning"] = tuning
    report["lrs"] = lrs
    report["command"] = cmd
    (out / "report.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    text = format_report(report)
    (out / "report.txt").write_text(text + "\n", encoding="utf-8")
    print(text)
    groups = {"main": LEARNERS, **{g: [lbl for lbl, _ in ABLATIONS[g]] for g in ABLATIONS}}
    for g in args.groups:
        labels = [x for x in (["grpo", *groups[g]] if g != "main" else groups[g]) if x in report["specs"]]
        if not labels:
            continue
        plot_curves(subset(report, labels), out / f"curves_{g}.png", title=f"Micro world: {g}")
    (out / "results.md").write_text(markdown(report, args, cmd, seconds, tuning), encoding="utf-8")
    print(f"\nwrote {out}/report.json, report.txt, results.md and curves_*.png ({seconds / 60:.1f} min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
