"""The micro-world comparison of GRPO, OPSD, SDPO and LOPD under a named protocol, in one command.

    .venv/bin/python benchmarks/compare.py --protocol benchmarks/protocols/equal_data.yaml --out runs/compare
    .venv/bin/python benchmarks/compare.py --protocol benchmarks/protocols/paper.yaml --out runs/compare-paper
    .venv/bin/python benchmarks/compare.py --protocol benchmarks/protocols/equal_data.yaml --dry-run
    .venv/bin/python benchmarks/compare.py ... --stage tune        # only the validation sweep

Stages (``--stage all`` runs them in order; :mod:`harness.experiments.comparison` documents the protocol):

1. ``tune``: every learner's sweep configurations (the same number each) at the full budget on the
   validation tasks; each learner's best validation AUC is chosen (``OUT/tuning.json``, ``tuning.md``,
   ``tuning.png``, ``tuning_composer.png``; a later ``--stage test`` reads ``OUT/tuning.json``, so a shipped one can be copied there);
2. ``test``: the chosen configurations and the ablations on the protocol's seeds, on the test tasks;
3. the report (``--stage report``: of the finished test runs only, without training): ``OUT/report.json``, ``OUT/results.md`` (the RESULTS.md section: budgets, tuning table, test
   curves and finals with 95% bootstrap intervals, generations-to-threshold, paired tests, composer
   diagnostics), ``OUT/curves.png``, ``OUT/composer.png`` and ``OUT/tuning.png``.

Finished runs are reused (same spec, same resolved config), so an interrupted command resumes where it
stopped, and ``--set demo.jobs=1`` or another protocol override only retrains what it changes.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness.experiments.comparison import LEARNERS, load_protocol, run_test, stage_config, tune, tune_specs  # noqa: E402
from benchmarks.probe_teacher import teacher_advantage  # noqa: E402
from harness.experiments.comparison_report import (  # noqa: E402
    analyse, composer_lines, composer_trace, markdown, plot_all, plot_composer, plot_tuning, resolved, tuning_markdown)


def dry_run(proto, out: Path) -> str:
    """What the protocol would train: every run with its overrides, and the episode counts."""
    t, h = stage_config(proto, out, "tune"), stage_config(proto, out, "test")
    tune_runs = [(s.label, seed, s.overrides) for s in tune_specs(proto) for seed in t.seeds]
    test_runs = [(n, seed, ["<chosen configuration>"]) for n in LEARNERS for seed in h.seeds]
    test_runs += [(label, seed, ["<LOPD's chosen configuration>", *ov]) for label, ov in proto.ablations.items()
                  for seed in proto.ablation_seeds]
    t_points, h_points = t.generations // t.eval_every + 1, h.generations // h.eval_every + 1
    lines = [f"protocol {proto.name}: {proto.description}", "",
             f"tune ({len(tune_runs)} runs, {t.eval_tasks} validation tasks x {t_points} points each):"]
    lines += [f"  {label} seed {seed}: {' '.join(ov)}" for label, seed, ov in tune_runs]
    lines += ["", f"test ({len(test_runs)} runs, {h.eval_tasks} test tasks x {h_points} points each):"]
    lines += [f"  {label} seed {seed}: {' '.join(ov)}" for label, seed, ov in test_runs]
    n_train = (len(tune_runs) + len(test_runs)) * h.generations
    n_eval = len(tune_runs) * t.eval_tasks * t_points + len(test_runs) * h.eval_tasks * h_points
    cold = h.coldstart_tasks if h.coldstart_source == "referenced" else 0
    lines += ["", f"training episodes {n_train:,}; evaluation episodes {n_eval:,}; bank {h.bank_tasks} and "
                  f"cold-start {cold} episodes once; output {out}"]
    return "\n".join(lines)


def tune_composer(proto, out: Path) -> str:
    """LOPD's composer diagnostics per sweep configuration (``tuning_composer.png``), as a table."""
    runs = {}
    for i, ov in enumerate(proto.lopd.sweep):
        dirs = [str(out / "tune" / "runs" / f"lopd-c{i}-s{seed}") for seed in proto.tune_seeds]
        margin = resolved("lopd", [*proto.lopd.fixed, *ov]).lopd.margin.margin
        runs[f"lopd-c{i} ({' '.join(ov)})"] = (composer_trace(dirs), margin)
    plot_composer(runs, out / "tuning_composer.png")
    return "\n".join(composer_lines({"specs": {k: {"composer": c, "margin": m} for k, (c, m) in runs.items()}}))


def every_stage(args: argparse.Namespace) -> str:
    """The one command that runs every stage (tune, test, report) of this protocol with these overrides:
    what a reader reruns, whichever ``--stage`` wrote the report."""
    proto = Path(args.protocol).resolve()
    shown = proto.relative_to(ROOT) if proto.is_relative_to(ROOT) else proto
    return shlex.join(["python", "benchmarks/compare.py", "--protocol", str(shown), "--out", args.out,
                       *(["--set", *args.set] if args.set else [])])


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--protocol", default=str(ROOT / "benchmarks" / "protocols" / "equal_data.yaml"),
                    help="protocol YAML (harness.experiments.comparison.Protocol)")
    ap.add_argument("--out", default="runs/compare", help="output directory")
    ap.add_argument("--stage", choices=["all", "tune", "test", "report"], default="all",
                    help="report: train nothing, analyse the finished test runs (a partial report names the rest)")
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                    help="protocol overrides, e.g. demo.jobs=1 seeds=[1,2] demo.generations=320")
    ap.add_argument("--dry-run", action="store_true", help="list the runs and the episode counts, train nothing")
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    try:
        proto = load_protocol(args.protocol, args.set)
    except (ValueError, OSError) as e:
        ap.error(str(e))
    out = Path(args.out)
    if args.dry_run:
        print(dry_run(proto, out))
        return 0
    out.mkdir(parents=True, exist_ok=True)
    cmd = "python benchmarks/compare.py " + " ".join(argv if argv is not None else sys.argv[1:])
    t0 = time.perf_counter()
    tuning_file = out / "tuning.json"
    if args.stage in ("all", "tune"):
        chosen, tuning = tune(proto, out)
        tuning_file.write_text(json.dumps(tuning, indent=1) + "\n", encoding="utf-8")
        (out / "tuning.md").write_text(tuning_markdown(tuning, proto.tune_seeds) + "\n"
                                       + tune_composer(proto, out), encoding="utf-8")
        plot_tuning(tuning, out / "tuning.png")
        print("chosen on validation: " + ", ".join(f"{n}: {' '.join(proto.plan(n).sweep[i])}"
                                                  for n, i in chosen.items()))
        if args.stage == "tune":
            return 0
    if not tuning_file.is_file():
        ap.error(f"{tuning_file} is missing: run --stage tune (or --stage all) first")
    tuning = json.loads(tuning_file.read_text(encoding="utf-8"))
    chosen = {n: int(i) for n, i in tuning["chosen"].items()}
    report = run_test(proto, out, chosen, train=args.stage != "report")
    # the teacher's advantage as a policy, before and after training, on the validation tasks (cached per run)
    probes = {r["run_dir"]: teacher_advantage(r["run_dir"], n_tasks=proto.demo.val_tasks, samples=1, split="val")
              for r in report["runs"] if r["learner"] == "lopd"}
    analysis = analyse(proto, report, tuning, command=cmd, seconds=time.perf_counter() - t0, probes=probes)
    analysis["reproduce"] = every_stage(args)
    (out / "report.json").write_text(json.dumps(analysis, indent=1, default=str) + "\n", encoding="utf-8")
    plot_all(analysis, out)
    text = markdown(analysis)
    (out / "results.md").write_text(text, encoding="utf-8")
    print(text)
    print(f"wrote {out}/report.json, results.md, curves.png, composer.png, tuning.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
