"""The ablation table (:mod:`benchmarks.ablation`) from the committed result files alone, beside the paper's.

    python benchmarks/ablation.py --table

Each row: its runs' test reward (120 test tasks, greedy, the final student), mean over seeds with a 95%
two-level bootstrap interval over seeds and tasks (:mod:`harness.stats.bootstrap`), the seeds, and the
validation AUC the later cells' choice reads.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

WINNER = "winner"
"""The recipe name a later cell uses for the recipe whose learned composer wins the first cell on validation."""
PAPER = {"paper-learned": 0.637, "authors-learned": 0.637, "paper-frozen": 0.573, "authors-frozen": 0.573,
         "m0": 0.551, "m0.05": 0.637, "m0.2": 0.613, "latents8": 0.56, "latents16": 0.56, "latents32": 0.637,
         "retrieve1": 0.605, "retrieve3": 0.637}
"""The paper's EnvScaler numbers for the matching rows (Qwen3-4B; ../shared/PAPER.md, METHOD.md)."""


def cell_results(folder: Path) -> list[dict[str, Any]]:
    """Every result file of a cell's folder."""
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))] if folder.is_dir() else []


def counted_results(cell: Any, results: Path, chosen: str | None) -> list[dict[str, Any]] | None:
    """The results of ``cell`` that count: all of them, or for a later cell (its rows' recipe :data:`WINNER`)
    those of ``chosen``, the first cell's choice; None while it has not chosen."""
    res = cell_results(results / cell.name)
    if not any(row.recipe == WINNER for row in cell.runs):
        return res
    return None if chosen is None else [r for r in res if r.get("recipe") == chosen]


def val_auc(result: dict[str, Any]) -> float:
    """Mean validation reward over the evaluation points after 0."""
    pts = [np.mean(list(tasks.values())) for g, tasks in result["val"].items() if int(g) > 0 and tasks]
    if not pts:
        raise ValueError(f"{result['label']} seed {result['seed']}: no validation point after 0")
    return float(np.mean(pts))


def row_stats(runs: list[dict[str, Any]], n_boot: int = 2000) -> dict[str, Any]:
    """Test mean and its 95% interval over seeds and tasks, with the seeds and validation AUCs."""
    from harness.stats.bootstrap import curve_ci

    tasks = sorted(set.intersection(*(set(r["test"]) for r in runs)))
    R = np.array([[[r["test"][t]] for t in tasks] for r in runs])  # [S, T, 1]
    ci = curve_ci(R, n_boot=n_boot)[0]
    return {"mean": ci["mean"], "lo": ci["lo"], "hi": ci["hi"], "seeds": [r["seed"] for r in runs],
            "cold_starts": sorted({r["composer_seed"] for r in runs}), "tasks": len(tasks),
            "val_auc": float(np.mean([val_auc(r) for r in runs])),
            "per_seed": {r["seed"]: round(float(np.mean(list(r["test"].values()))), 4) for r in runs}}


def table_markdown(proto: Any, results: Path, chosen: str | None = None) -> str:
    """Every cell of ``proto`` as a markdown table; a row without results says how many are missing. A later
    cell (its rows' recipe :data:`WINNER`) shows only ``chosen``'s results: the first cell's choice of recipe,
    None while it has not chosen."""
    out = []
    for cell in proto.cells:
        res = counted_results(cell, results, chosen)
        if res is None:  # runs trained ahead on a guess are no result until the first cell confirms it
            ahead = len(cell_results(results / cell.name))
            out += [f"### {cell.name}", "", cell.description, "", "Not reported yet: the first cell has not chosen "
                    f"its recipe; {ahead} of its runs were trained ahead on a guess.", ""]
            continue
        out += [f"### {cell.name}", "", cell.description, "",
                "| row | test reward [95% CI] | per seed | cold starts | val AUC | paper |",
                "| --- | --- | --- | --- | --- | --- |"]
        for row in cell.runs:
            runs = [r for r in res if r["label"] == row.label]
            paper = PAPER.get(row.label, "")
            if len(runs) < len(row.seeds):  # the seeds done so far, without an interval
                done = ", ".join(f"s{r['seed']}: {np.mean(list(r['test'].values())):.3f}"
                                 for r in sorted(runs, key=lambda r: r["seed"]))
                out.append(f"| {row.label} | {len(runs)} of {len(row.seeds)} runs done | {done} | | | {paper} |")
                continue
            s = row_stats(runs)
            seeds = ", ".join(f"s{k}: {v:.3f}" for k, v in s["per_seed"].items())
            out.append(f"| {row.label} | {s['mean']:.3f} [{s['lo']:.3f}, {s['hi']:.3f}] | {seeds} | "
                       f"{s['cold_starts']} | {s['val_auc']:.3f} | {paper} |")
        out += paired_lines(cell, res) + [""] + collapse_lines(cell, res)
    return "\n".join(out)


STEPS = (1, 2, 5, 10, 20, 30, 40, 50)
"""The steps :func:`collapse_lines` tabulates (the plot has every step)."""


def collapse_lines(cell: Any, res: list[dict[str, Any]]) -> list[str]:
    """Where a learned composer falls behind its frozen pair, in numbers beside the plot: for each recipe with
    learned and frozen results, the validation reward of both at every evaluation point (mean over the seeds
    done in both rows), then the learned row's diagnostics at :data:`STEPS` (mean over its seeds)."""
    out = []
    for row in cell.runs:
        if not row.label.endswith("-learned"):
            continue
        frozen = f"{row.label[: -len('-learned')]}-frozen"
        a = {r["seed"]: r for r in res if r["label"] == row.label}
        b = {r["seed"]: r for r in res if r["label"] == frozen}
        seeds = sorted(set(a) & set(b))
        if not seeds:
            continue
        gens = sorted({int(g) for s in seeds for g in a[s]["val"]} & {int(g) for s in seeds for g in b[s]["val"]})
        val = [[float(np.mean([np.mean(list(x[s]["val"][str(g)].values())) for s in seeds if str(g) in x[s]["val"]]))
                for g in gens] for x in (a, b)]
        out += [f"{row.label} against {frozen}, seeds {seeds}: validation reward by generations", "",
                "| generations | " + " | ".join(str(g) for g in gens) + " |", "| --- |" + " --- |" * len(gens),
                *[f"| {name} | " + " | ".join(f"{v:.3f}" for v in vs) + " |" for name, vs in
                  (("learned", val[0]), ("frozen", val[1]),
                   ("learned - frozen", [x - y for x, y in zip(*val)]))], ""]
        runs = list(a.values())
        keys = [k for k, _ in PANELS]
        rows = []
        for step in STEPS:
            at = [d for r in runs for d in r["diagnostics"] if int(d["step"]) == step]
            if at:
                rows.append(f"| {step} | " + " | ".join(_mean_cell([d.get(k) for d in at]) for k in keys) + " |")
        if rows:
            out += [f"{row.label}: per-step diagnostics, mean over seeds {sorted(a)}", "",
                    "| step | " + " | ".join(title for _, title in PANELS) + " |", "| --- |" + " --- |" * len(keys),
                    *rows, ""]
    return out


def _mean_cell(values: list[Any]) -> str:
    got = [float(v) for v in values if v is not None]
    return f"{np.mean(got):.3g}" if got else ""


def paired_lines(cell: Any, res: list[dict[str, Any]]) -> list[str]:
    """For each recipe with a complete learned and frozen row: learned minus frozen on the test tasks, paired
    by seed (the same seed and cold start in both rows), with a paired two-level bootstrap interval."""
    from harness.stats.bootstrap import paired_difference

    out = []
    for row in cell.runs:
        if not row.label.endswith("-learned"):
            continue
        recipe = row.label[: -len("-learned")]
        a = {r["seed"]: r for r in res if r["label"] == row.label}
        b = {r["seed"]: r for r in res if r["label"] == f"{recipe}-frozen"}
        seeds = sorted(set(a) & set(b))
        if not seeds or len(seeds) < len(row.seeds):
            continue
        tasks = sorted(set.intersection(*(set(x[s]["test"]) for x in (a, b) for s in seeds)))
        RA, RB = (np.array([[x[s]["test"][t] for t in tasks] for s in seeds]) for x in (a, b))
        d = paired_difference(RA, RB)
        out.append(f"{recipe}: learned minus frozen {d['diff']:+.3f} [{d['lo']:+.3f}, {d['hi']:+.3f}] (p = {d['p']:.2f}; "
                   f"seeds {seeds}, each pair sharing its cold start)")
    return out


PANELS = (("composer/anchor", "anchor distance"), ("composer/delta", "mean Delta"), ("composer/beta", "beta"),
          ("composer/drift_kl", "teacher drift KL"), ("composer/grad_norm", "composer grad norm"),
          ("grad_norm", "student grad norm"), ("composer/qformer_moved", "QFormer moved (rel.)"),
          ("composer/lora_moved", "LoRA moved (rel.)"))
"""The per-step diagnostics plotted, beside the validation reward."""


def _mean_series(runs: list[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    by_step: dict[int, list[float]] = {}
    for r in runs:
        for d in r["diagnostics"]:
            if key in d and d[key] is not None:
                by_step.setdefault(int(d["step"]), []).append(float(d[key]))
    steps = sorted(by_step)
    return steps, [float(np.mean(by_step[s])) for s in steps]


def plot_diagnostics(folder: Path, out: Path, results: list[dict[str, Any]] | None = None) -> Path | None:
    """One panel per diagnostic (mean over each row's seeds, by step) and the validation reward by
    generations, every row of the cell in ``folder`` a line (``results``: just these of its results); None
    when there is no result."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    res = cell_results(folder) if results is None else results
    if not res:
        return None
    labels = list(dict.fromkeys(r["label"] for r in res))
    fig, axes = plt.subplots(3, 3, figsize=(13, 10))
    color = {label: f"C{i}" for i, label in enumerate(labels)}  # a row's colour in every panel, data or not
    for ax, (key, title) in zip(axes.flat, PANELS):
        for label in labels:
            steps, ys = _mean_series([r for r in res if r["label"] == label], key)
            if steps:
                ax.plot(steps, ys, marker="." if len(steps) < 30 else None, color=color[label], label=label)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("step", fontsize=9)
    ax = axes.flat[len(PANELS)]
    for label in labels:
        runs = [r for r in res if r["label"] == label]
        gens = sorted({int(g) for r in runs for g in r["val"]})
        ax.plot(gens, [np.mean([np.mean(list(r["val"][str(g)].values())) for r in runs if str(g) in r["val"]])
                       for g in gens], marker="o", color=color[label], label=label)
    ax.set_title("validation reward", fontsize=10)
    ax.set_xlabel("generations", fontsize=9)
    ax.legend(fontsize=8)  # every row has a validation curve
    fig.suptitle(f"{folder.name}: per-step diagnostics, mean over seeds", fontsize=11)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
