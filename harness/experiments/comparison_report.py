"""The comparison's numbers and pictures: intervals, thresholds, paired tests, budgets, composer diagnostics.

:func:`analyse` turns the test stage's pipeline report (and the tuning table) into one dict; :func:`markdown`
writes the RESULTS.md section from it and :func:`plot_all` the figures::

    analysis = analyse(proto, run_test(proto, out, chosen), tuning)
    print(markdown(analysis)); plot_all(analysis, out)

Every interval is a 95% two-level bootstrap over training seeds and test tasks (:mod:`harness.stats.bootstrap`).
"""

from __future__ import annotations

import math
import platform
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from harness.stats.bootstrap import (auc, curve_ci, generations_to_threshold_ci, paired_difference, stack_runs,
                               task_rewards)
from harness.experiments.comparison import LEARNERS, Protocol
from harness.metrics import read_metrics

COMPOSER_KEYS = ("train/composer/anchor", "train/composer/delta", "train/composer/beta")
"""Per-step LOPD diagnostics: the anchor distance, the privileged margin Delta and the dual variable beta."""


def resolved(learner: str, overrides: list[str]) -> Any:
    """The TrainConfig of a run spec (its learner's packaged config with the overrides)."""
    from harness.experiments.demo_runs import run_config

    return run_config([f"learner={learner}", *overrides])


def budgets(spec: dict[str, Any], label: str, report: dict[str, Any]) -> dict[str, int]:
    """Episodes behind one run: RL (the training budget), bank rollouts and cold-start rollouts when the
    learner reads the bank or a cold-started composer, scripted-expert episodes in that bank; and the total."""
    from harness.learners.privileged import run_inputs

    reads_bank = run_inputs(resolved(spec["learner"], spec["overrides"]))[0]
    bank = report["bank"]
    cs = report["coldstart"]
    cold = label in cs["composers"] and cs["traces"].get("source") == "referenced"
    out = {"rl": int(report["config"]["generations"]),
           "bank": int(bank["base_episodes"]) if reads_bank else 0,
           "coldstart": int(cs["traces"].get("episodes", 0)) if cold else 0,
           "expert": int(bank.get("expert", 0)) if reads_bank else 0}
    out["total"] = out["rl"] + out["bank"] + out["coldstart"]
    return out


def composer_trace(run_dirs: list[str]) -> dict[str, list[dict[str, float]]]:
    """Per step, the mean / min / max over seeds of each of :data:`COMPOSER_KEYS` (empty: no LOPD metrics)."""
    per_run = []
    for d in run_dirs:
        rows = {int(r["step"]): r for r in read_metrics(Path(d) / "metrics.jsonl") if COMPOSER_KEYS[0] in r}
        per_run.append(rows)
    steps = sorted(set.intersection(*(set(r) for r in per_run))) if per_run else []
    out: dict[str, list[dict[str, float]]] = {}
    for k in COMPOSER_KEYS:
        vals = [[float(r[s][k]) for r in per_run] for s in steps]
        out[k.rsplit("/", 1)[-1]] = [{"step": s, "mean": float(np.mean(v)), "min": min(v), "max": max(v)}
                                     for s, v in zip(steps, vals)]
    return out


def eval_cost(run_dirs: list[str]) -> dict[str, float]:
    """Evaluation episodes and seconds over the runs (not training budget, reported as cost)."""
    eps = secs = 0.0
    for d in run_dirs:
        for r in read_metrics(Path(d) / "metrics.jsonl"):
            if "eval/episodes" in r:
                eps += float(r["eval/episodes"])
                secs += float(r.get("time/eval", 0.0))
    return {"episodes": int(eps), "seconds": round(secs, 1)}


def analyse(proto: Protocol, report: dict[str, Any], tuning: dict[str, Any], command: str = "",
            seconds: float = math.nan, probes: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """Everything the results section shows (see the module docstring). ``probes``: per LOPD run folder, the
    teacher's advantage over the student as policies on held-out tasks at the start and the end
    (``benchmarks/probe_teacher.py``'s ``teacher_advantage``)."""
    n_boot = proto.n_boot
    data: dict[str, np.ndarray] = {}
    out_specs: dict[str, Any] = {}
    grid: list[int] | None = None
    tasks: list[str] | None = None
    for label, spec in report["specs"].items():
        runs = sorted((r for r in report["runs"] if r["label"] == label), key=lambda r: r["seed"])
        R, gens, tids = stack_runs([task_rewards(Path(r["run_dir"]) / "traces.jsonl") for r in runs], grid, tasks)
        grid, tasks = grid or gens, tasks or tids
        data[label] = R
        dirs = [r["run_dir"] for r in runs]
        out_specs[label] = {
            "learner": spec["learner"], "overrides": spec["overrides"], "seeds": [r["seed"] for r in runs],
            "curve": [{"generations": g, **c} for g, c in zip(gens, curve_ci(R, n_boot))],
            "auc": _ci_of(auc(R), n_boot), "budget": budgets(spec, label, report), "eval_cost": eval_cost(dirs),
            "train_seconds": [r["summary"].get("seconds") for r in runs],
            "composer": composer_trace(dirs) if spec["learner"] == "lopd" else {},
        }
        if spec["learner"] == "lopd":
            out_specs[label]["margin"] = resolved("lopd", spec["overrides"]).lopd.margin.margin
            mine = [probes[d] for d in dirs if d in (probes or {})]
            if mine:
                out_specs[label]["teacher_probe"] = {
                    "split": mine[0]["split"], "tasks": mine[0]["tasks"], "samples": mine[0]["samples"],
                    **{k: float(np.mean([m[k] for m in mine])) for k in ("advantage_start", "advantage_end")},
                    **{k: float(np.mean([m["reward"][k] for m in mine]))
                       for k in ("student_start", "teacher_start", "student_end", "teacher_end")}}
    thr_label = proto.threshold_learner
    threshold = robust_threshold(data[thr_label]) if thr_label in out_specs else math.nan
    for label, v in out_specs.items():
        g = (generations_to_threshold_ci(data[label], grid, threshold, n_boot) if math.isfinite(threshold)
             else {"point": None, "lo": None, "hi": None, "never_frac": math.nan})
        extra = v["budget"]["total"] - v["budget"]["rl"]
        v["to_threshold"] = {**g, "total_point": None if g["point"] is None else g["point"] + extra,
                             "per_seed": per_seed_to_threshold(data[label], grid, threshold, v["seeds"])}
    paired = paired_tests(data, {k: v["seeds"] for k, v in out_specs.items()}, n_boot)
    return {"protocol": {"name": proto.name, "description": proto.description, "seeds": proto.seeds,
                         "tune_seeds": proto.tune_seeds, "n_boot": n_boot},
            "command": command, "seconds": seconds, "date": f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC",
            "machine": f"{platform.machine()} {platform.system()}", "config": report["config"],
            "bank": report["bank"], "coldstart": report["coldstart"], "grid": grid, "test_tasks": len(tasks or []),
            "threshold": {"learner": thr_label, "value": threshold}, "specs": out_specs, "paired": paired,
            "tuning": tuning, "missing": report.get("missing", [])}


def robust_threshold(R: np.ndarray) -> float:
    """The threshold of generations-to-threshold: the median over seeds of each seed's final mean test reward
    (``R`` [S, T, P]), so that one collapsed seed cannot pull it down (the mean of the finals could)."""
    return float(np.median(R[:, :, -1].mean(axis=1)))


def per_seed_to_threshold(R: np.ndarray, grid: list[int], threshold: float, seeds: list[int]) -> dict[str, Any]:
    """Each seed's first budget point whose mean test reward reaches ``threshold`` (None: never)."""
    out: dict[str, Any] = {}
    for s, seed in zip(range(R.shape[0]), seeds):
        means = R[s].mean(axis=0)
        hit = [g for g, m in zip(grid, means) if m >= threshold - 1e-12] if math.isfinite(threshold) else []
        out[str(seed)] = hit[0] if hit else None
    return out


def paired_tests(data: dict[str, np.ndarray], seeds: dict[str, list[int]], n_boot: int) -> dict[str, Any]:
    """LOPD minus every other run, final reward and AUC, paired on the seeds both have (an ablation may
    have fewer) and on the tasks; ``data[label]`` is [seeds, tasks, points] in the order of ``seeds[label]``."""
    out: dict[str, Any] = {}
    if "lopd" not in data:
        return out
    for other in [x for x in data if x != "lopd"]:
        common = [s for s in seeds["lopd"] if s in seeds[other]]
        if not common:
            continue
        a = data["lopd"][[seeds["lopd"].index(s) for s in common]]
        b = data[other][[seeds[other].index(s) for s in common]]
        out[other] = {"seeds": common, "final": paired_difference(a[:, :, -1], b[:, :, -1], n_boot),
                      "auc": paired_difference(auc(a), auc(b), n_boot)}
    return out


def _ci_of(per_seed_task: np.ndarray, n_boot: int) -> dict[str, float]:
    """Mean and interval of an [S, T] summary (as a one-point curve)."""
    return curve_ci(per_seed_task[:, :, None], n_boot)[0]


def _paired_on(p: dict[str, Any], specs: dict[str, Any]) -> str:
    """Names the seeds of a pair that uses fewer than LOPD's."""
    return "" if p.get("seeds", specs["lopd"]["seeds"]) == specs["lopd"]["seeds"] else f"; seeds {p['seeds']}"


def _cell(c: dict[str, float]) -> str:
    return f"{c['mean']:.3f} [{c['lo']:.3f}, {c['hi']:.3f}]"


def _gens(t: dict[str, Any], budget: int) -> str:
    if t["point"] is None:
        return f"not within {budget}"
    hi = "n.r." if t["hi"] is None else t["hi"]
    return f"{t['point']} [{t['lo']}, {hi}]"


def markdown(a: dict[str, Any]) -> str:
    """The results section: headline table first, then tuning, curves, composer diagnostics."""
    cfg, specs, thr = a["config"], a["specs"], a["threshold"]
    budget = cfg["generations"]
    lines = [f"Protocol **{a['protocol']['name']}**: {a['protocol']['description']}", ""]
    if a.get("missing"):
        lines += [f"**Partial: {len(a['missing'])} of the protocol's test runs are not finished** "
                  f"({', '.join(a['missing'])}); every number below comes from the finished ones and each row "
                  "names its seeds.", ""]
    lines += [
             f"Test: {a['test_tasks']} held-out test tasks, greedy, at {len(a['grid'])} budget points "
             f"({', '.join(map(str, a['grid']))}); seeds {a['protocol']['seeds']}; every cell a mean with its 95% "
             f"bootstrap interval over seeds and tasks ({a['protocol']['n_boot']} replicates). Threshold: "
             f"the median over {thr['learner']}'s seeds of each seed's final test mean, {thr['value']:.3f} (one "
             "collapsed seed cannot pull it down); an upper bound of n.r. means that "
             "over 2.5% of the bootstrap replicates never reach it within the budget.", "",
             "| learner | seeds | final test reward | AUC (mean over points > 0) | generations to threshold (RL) | "
             "RL budget | total budget (RL + bank + cold start) | total at threshold | LOPD - learner, final (p) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for label, v in specs.items():
        b, t = v["budget"], v["to_threshold"]
        p = a["paired"].get(label)
        pair = "-" if p is None else (f"{p['final']['diff']:+.3f} [{p['final']['lo']:+.3f}, {p['final']['hi']:+.3f}] "
                                      f"(p={p['final']['p']:.3f}{_paired_on(p, specs)})")
        total_thr = "-" if t["total_point"] is None else str(t["total_point"])
        lines.append(f"| {label} | {len(v['seeds'])} | {_cell(v['curve'][-1])} | {_cell(v['auc'])} | {_gens(t, budget)} | {b['rl']} | "
                     f"{b['total']} ({b['rl']} + {b['bank']} + {b['coldstart']}) | {total_thr} | {pair} |")
    lines += ["", "Generations to threshold per seed: " + "; ".join(
        f"{label} " + ", ".join(f"s{k} {'never' if g is None else g}" for k, g in v["to_threshold"]
                                .get("per_seed", {}).items()) for label, v in specs.items()) + "."]
    lines += ["", "Paired tests on the learning-speed summary (AUC), LOPD minus each: " + "; ".join(
        f"{k} {p['auc']['diff']:+.3f} [{p['auc']['lo']:+.3f}, {p['auc']['hi']:+.3f}] (p={p['auc']['p']:.3f}"
        f"{_paired_on(p, specs)})"
        for k, p in a["paired"].items()) + ".", ""]
    lines += _tuning_lines(a) + [""] + _curve_lines(a) + [""] + composer_lines(a)
    cost = {k: v["eval_cost"] for k, v in specs.items()}
    lines += ["", "Evaluation cost (not training budget): " + "; ".join(
        f"{k} {c['episodes']:,} episodes, {c['seconds'] / 60:.0f} min" for k, c in cost.items()) + ".",
        f"Bank: {a['bank']['entries']} experiences from {a['bank']['base_successes']} successes of "
        f"{a['bank']['base_episodes']} base episodes, {a['bank']['expert']} scripted-expert episodes.",
        "", f"Command: `{a['command']}`; machine {a['machine']}; finished {a['date']}; "
        f"wall time {a['seconds'] / 60:.0f} min (reused runs cost nothing)."]
    return "\n".join(lines) + "\n"


def tuning_markdown(tuning: dict[str, Any], tune_seeds: list[int]) -> str:
    """The tuning table alone (``compare.py --stage tune`` writes it before any test run)."""
    return "\n".join(_tuning_lines({"tuning": tuning, "protocol": {"tune_seeds": tune_seeds}})) + "\n"


def _tuning_lines(a: dict[str, Any]) -> list[str]:
    t = a["tuning"]
    lines = ["Tuning on the validation tasks (the same number of configurations per learner, full budget, "
             f"seeds {a['protocol']['tune_seeds']}); chosen = best validation AUC:", "",
             "| learner | configuration | validation AUC | validation final | chosen |", "|---|---|---|---|---|"]
    for n in LEARNERS:
        for row in t["table"][n]:
            mark = "**yes**" if int(t["chosen"][n]) == row["config"] else ""
            lines.append(f"| {n} | {' '.join(row['overrides'])} | {row['val_auc']:.3f} | {row['val_final']:.3f} | {mark} |")
    return lines


def _curve_lines(a: dict[str, Any]) -> list[str]:
    grid = a["grid"]
    lines = ["Test reward by generations (mean [95% interval]):", "",
             "| learner | " + " | ".join(f"@{g}" for g in grid) + " |", "|---|" + "---|" * len(grid)]
    for label, v in a["specs"].items():
        lines.append(f"| {label} | " + " | ".join(f"{c['mean']:.3f} [{c['lo']:.2f}, {c['hi']:.2f}]"
                                                   for c in v["curve"]) + " |")
    return lines


def composer_lines(a: dict[str, Any]) -> list[str]:
    """The composer-diagnostics table of ``a["specs"]`` (each with ``composer``, ``margin`` and optionally
    ``teacher_probe``)."""
    lines = ["Composer diagnostics (mean over seeds; first step -> last step). Teacher advantage: the latent "
             "teacher's reward minus the student's, both played as policies on held-out validation tasks, "
             "before training (cold-start composer, base student) and after it (trained composer, final student):",
             "", "| run | anchor distance | Delta (margin m) | beta | teacher - student reward, start -> end |",
             "|---|---|---|---|---|"]
    for label, v in a["specs"].items():
        c = v.get("composer") or {}
        if not c.get("anchor"):
            continue

        def ends(k: str) -> str:
            return f"{c[k][0]['mean']:.4f} -> {c[k][-1]['mean']:.4f}"
        t = v.get("teacher_probe")
        adv = "-" if not t else (f"{t['teacher_start']:.3f} - {t['student_start']:.3f} = {t['advantage_start']:+.3f} -> "
                                 f"{t['teacher_end']:.3f} - {t['student_end']:.3f} = {t['advantage_end']:+.3f}")
        lines.append(f"| {label} | {ends('anchor')} | {ends('delta')} (m = {v['margin']:g}) | {ends('beta')} | {adv} |")
    return lines


def plot_all(a: dict[str, Any], out: str | Path) -> list[Path]:
    """``curves.png`` (test curves with intervals), ``composer.png`` (per-step diagnostics), ``tuning.png``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out)
    paths = []
    fig, ax = plt.subplots(figsize=(7, 4.4))
    for label, v in a["specs"].items():
        x = [c["generations"] for c in v["curve"]]
        ax.plot(x, [c["mean"] for c in v["curve"]], marker="o", ms=3, label=f"{label} (n={len(v['seeds'])})")
        ax.fill_between(x, [c["lo"] for c in v["curve"]], [c["hi"] for c in v["curve"]], alpha=0.15)
    ax.axhline(a["threshold"]["value"], ls="--", lw=0.8, color="grey", label="threshold")
    ax.set(xlabel="generations (RL episodes)", ylabel=f"test reward ({a['test_tasks']} tasks)",
           title=f"Micro world, protocol {a['protocol']['name']}: mean and 95% bootstrap interval")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    paths.append(out / "curves.png")
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)

    paths.append(plot_composer({k: (v.get("composer") or {}, v.get("margin")) for k, v in a["specs"].items()},
                               out / "composer.png"))
    paths.append(plot_tuning(a["tuning"], out / "tuning.png"))
    return paths


def plot_composer(runs: dict[str, tuple[dict[str, Any], float | None]], path: str | Path) -> Path:
    """Anchor distance, Delta against the margin and beta per step: ``runs`` maps a label to its
    :func:`composer_trace` and margin (labels without a trace are skipped)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    for label, (c, margin) in runs.items():
        for ax, k in zip(axes, ("anchor", "delta", "beta")):
            if c.get(k):
                s = [p["step"] for p in c[k]]
                ax.plot(s, [p["mean"] for p in c[k]], label=label)
                ax.fill_between(s, [p["min"] for p in c[k]], [p["max"] for p in c[k]], alpha=0.15)
        if c.get("delta") and margin is not None:
            axes[1].axhline(margin, ls="--", lw=0.8, color="grey")
    for ax, t in zip(axes, ("anchor distance", "Delta (dashed: margin m)", "beta")):
        ax.set(xlabel="step", title=t)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_tuning(tuning: dict[str, Any], path: str | Path) -> Path:
    """Validation reward against generations, one panel per learner, one line per configuration (the chosen
    one thick)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(LEARNERS), figsize=(15, 3.8), sharey=True)
    for ax, n in zip(axes, LEARNERS):
        for row in tuning["table"][n]:
            chosen = int(tuning["chosen"][n]) == row["config"]
            x, y = zip(*row["curve"]) if row.get("curve") else ((), ())
            ax.plot(x, y, marker="o", ms=3, lw=2.5 if chosen else 1,
                    label=f"{' '.join(row['overrides'])} ({row['val_auc']:.3f})" + (" *" if chosen else ""))
        ax.set(title=n, xlabel="generations")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    axes[0].set_ylabel("validation reward (AUC in brackets, * chosen)")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
