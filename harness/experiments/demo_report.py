"""The main job's report: mean curves, generations-to-threshold, the table and the plot.

:func:`harness.experiments.demo.run_pipeline` returns a report dict; these turn it into what people read::

    report = run_pipeline(cfg, specs)
    print(format_report(report)); plot_curves(report, "runs/demo/curves.png")
"""

from __future__ import annotations

import math
import os
import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.experiments.demo_config import RunSpec

BEHAVIOUR = ("reward", "env_steps", "calls_per_step", "first_response_tokens", "repeated_calls", "reward_per_call")
"""Behaviour statistics reported for the untrained and the final students (docs/STATS.md)."""

def mean_curve(curves: list[list[tuple[int, float]]]) -> list[dict[str, float]]:
    """Mean, sample std, min and max over seeds at every generation count all curves share.

    >>> mean_curve([[(0, 0.1), (32, 0.3)], [(0, 0.3), (32, 0.5)]])[1]["mean"]
    0.4
    """
    common = sorted(set.intersection(*(set(g for g, _ in c) for c in curves))) if curves else []
    out = []
    for g in common:
        vals = [dict(c)[g] for c in curves]
        out.append({"generations": g, "mean": round(statistics.fmean(vals), 6),
                    "std": round(statistics.stdev(vals), 6) if len(vals) > 1 else 0.0,
                    "min": min(vals), "max": max(vals), "n": len(vals)})
    return out


def generations_to(curve: list[dict[str, float]], threshold: float) -> int | None:
    """The first budget point whose mean reward reaches ``threshold`` (None: never).

    >>> generations_to([{"generations": 0, "mean": 0.2}, {"generations": 64, "mean": 0.5}], 0.45)
    64
    """
    for p in curve:
        if p["mean"] >= threshold - 1e-12:
            return int(p["generations"])
    return None


def summarize(runs: list[dict[str, Any]], specs: list[RunSpec], threshold: float | None) -> dict[str, Any]:
    """Per spec: mean/spread curve, final reward, generations to threshold, behaviour start -> end."""
    per: dict[str, dict[str, Any]] = {}
    for spec in specs:
        mine = [r for r in runs if r["label"] == spec.label]
        curve = mean_curve([r["curve"] for r in mine])
        beh: dict[str, dict[str, float]] = {}
        for when in ("start", "end"):
            rows = [r["behaviour"][when] for r in mine if r["behaviour"].get(when)]
            beh[when] = {m: _nanmean([x[m] for x in rows]) for m in BEHAVIOUR} if rows else {}
        per[spec.label] = {"learner": spec.learner, "overrides": spec.overrides, "curve": curve,
                           "final": curve[-1]["mean"] if curve else math.nan, "behaviour": beh,
                           "seeds": [r["seed"] for r in mine]}
    first = specs[0].label
    thr = threshold if threshold is not None else per[first]["final"]
    # a threshold of 0 is reached by every run at generation 0: report "-" rather than a fake 0
    informative = math.isfinite(thr) and thr > 0
    for v in per.values():
        v["generations_to_threshold"] = generations_to(v["curve"], thr) if informative else None
    source = "given" if threshold is not None else f"final mean reward of {first}"
    if not informative:
        source += "; not informative (<= 0), so no run has a generations-to-threshold"
    return {"threshold": thr, "threshold_source": source, "runs": runs, "specs": per}


def _nanmean(xs: list[float | None]) -> float:
    vals = [float(x) for x in xs if x is not None and math.isfinite(float(x))]
    return statistics.fmean(vals) if vals else math.nan


def format_report(report: dict[str, Any]) -> str:
    """The three tables: reward at each budget point, generations to threshold, behaviour statistics."""
    from harness.stats import format_table

    specs = report["specs"]
    gens = sorted({p["generations"] for v in specs.values() for p in v["curve"]})
    rows = []
    for label, v in specs.items():
        pts = {p["generations"]: p for p in v["curve"]}
        row: dict[str, Any] = {"run": label, "seeds": len(v["seeds"])}
        for g in gens:
            p = pts.get(g)
            row[f"@{g}"] = "-" if p is None else (f"{p['mean']:.3f}" + (f"±{p['std']:.3f}" if p["n"] > 1 else ""))
        rows.append(row)
    lines = ["Held-out reward (mean over seeds ± std) at each budget point (generations):", format_table(rows), ""]
    thr = report["threshold"]
    rows = []
    for label, v in specs.items():
        g = v["generations_to_threshold"]
        budget = max((p["generations"] for p in v["curve"]), default=0)
        never = "never" if report["threshold"] > 0 else "-"
        rows.append({"run": label, "final reward": v["final"], "generations to threshold": never if g is None else g,
                     "share of budget": "-" if g is None or not budget else f"{100 * g / budget:.0f}%"})
    lines += [f"Generations to reach {thr:.3f} ({report['threshold_source']}):", format_table(rows), ""]
    rows = []
    for label, v in specs.items():
        for when in ("start", "end"):
            b = v["behaviour"].get(when) or {}
            if b:
                rows.append({"run": label, "model": "untrained" if when == "start" else "final",
                             **{m: b.get(m, math.nan) for m in BEHAVIOUR}})
    lines += ["Behaviour of the held-out episodes (per-episode means, harness.stats; docs/STATS.md):",
              format_table(rows)]
    return "\n".join(lines)


def plot_curves(report: dict[str, Any], out: str | os.PathLike, title: str | None = None) -> Path:
    """Mean held-out reward against generations per run spec, the seed range shaded; the threshold dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for label, v in report["specs"].items():
        c = v["curve"]
        if not c:
            continue
        x = [p["generations"] for p in c]
        ax.plot(x, [p["mean"] for p in c], marker="o", ms=3, label=f"{label} (n={len(v['seeds'])})")
        if len(v["seeds"]) > 1:
            ax.fill_between(x, [p["min"] for p in c], [p["max"] for p in c], alpha=0.15)
    thr = report.get("threshold")
    if thr is not None and math.isfinite(thr):
        ax.axhline(thr, ls="--", lw=0.8, color="grey", label=f"threshold {thr:.3f}")
    ax.set_xlabel("generations (training episodes)")
    ax.set_ylabel("held-out mean reward")
    ax.set_title(title or "Micro world: reward against generations")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


SHIPPED = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "micro" / "equal_data" / "report.json"
"""The shipped full-budget comparison (``benchmarks/compare.py``'s analysis of the headline protocol)."""


def live_caveat(report: dict[str, Any]) -> str:
    """One plain sentence on what a short live run can and cannot show."""
    cfg = report["config"]
    n = cfg["eval_tasks"]
    return (f"The live run above is {len(cfg['seeds'])} seed(s) of {cfg['generations']} generations scored on {n} test "
            f"tasks (one task moves the mean by {1 / max(n, 1):.3f}): it shows that every stage runs and that the "
            "reward moves, but it cannot rank the learners, whose seed-to-seed spread at this budget is as large "
            "as their gap; the ranking is the shipped result below.")


def _pair(label: str, p: dict[str, Any], lopd_seeds: list[int] | None) -> str:
    f = p["final"]
    seeds = "" if p.get("seeds", lopd_seeds) == lopd_seeds else f", seeds {p['seeds']}"
    return f"{label} {f['diff']:+.3f} [{f['lo']:+.3f}, {f['hi']:+.3f}] (p = {f['p']:.3f}{seeds})"


def shipped_summary(path: str | os.PathLike = SHIPPED) -> str:
    """The shipped comparison's headline: final test reward and generations-to-threshold with their 95%
    intervals and the budgets, per learner, with the command that reproduces it."""
    path = Path(path)
    if not path.is_file():
        return (f"No shipped full-budget result in this checkout ({path}); "
                "`python benchmarks/compare.py` makes it (benchmarks/RESULTS.md says how long it takes).")
    import json

    a = json.loads(path.read_text(encoding="utf-8"))
    cfg, thr = a["config"], a["threshold"]
    n = [len(v.get("seeds", a["protocol"]["seeds"])) for v in a["specs"].values()]
    lo, hi = min(n, default=0), max(n, default=0)
    n_seeds = str(lo) if lo == hi else f"{lo}-{hi}"
    partial = (f"PARTIAL ({len(a['missing'])} of the protocol's runs missing: {', '.join(a['missing'])}). "
               if a.get("missing") else "")
    lines = [f"Shipped result ({path.parent}, protocol {a['protocol']['name']}): {partial}{n_seeds} seeds, "
             f"{a['test_tasks']} test tasks, {cfg['generations']} generations, every learner tuned on validation "
             f"with the same number of configurations; mean [95% bootstrap interval]. "
             f"Reproduce (every stage): `{a.get('reproduce', a['command'])}`", "",
             f"{'learner':<12} {'final test reward':<24} {'generations to ' + format(thr['value'], '.3f'):<24} "
             "total episodes (RL + bank + cold start)"]
    for label, v in a["specs"].items():
        c, t, b = v["curve"][-1], v["to_threshold"], v["budget"]
        gens = (f"not within {cfg['generations']}" if t["point"] is None
                else f"{t['point']} [{t['lo']}, {'n.r.' if t['hi'] is None else t['hi']}]")
        lines.append(f"{label:<12} {c['mean']:.3f} [{c['lo']:.3f}, {c['hi']:.3f}]{'':<4} {gens:<24} "
                     f"{b['total']} ({b['rl']} + {b['bank']} + {b['coldstart']})")
    if a["paired"]:
        lopd_seeds = a["specs"].get("lopd", {}).get("seeds")
        pairs = "; ".join(_pair(k, p, lopd_seeds) for k, p in a["paired"].items())
        lines += ["", f"LOPD minus each at the full budget, paired bootstrap: {pairs}. "
                      f"Threshold: {thr['learner']}'s final, {thr['value']:.3f}."]
    return "\n".join(lines)
