"""Figures people would rather look at than read: metric distributions and learning curves.

Headless (Agg backend); every function writes a PNG and returns its path.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from harness.metrics import read_metrics
from harness.stats import METRICS, GroupStats


def plot_distributions(groups: dict[str, GroupStats], out: str | os.PathLike,
                       metrics: Sequence[str] = METRICS) -> Path:
    """One panel per metric, a box per group side by side (means marked)."""
    metrics = [m for m in metrics if any(g.values.get(m) for g in groups.values())]
    cols = 3
    rows = max(1, math.ceil(len(metrics) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False)
    names = list(groups)
    for ax, m in zip(axes.flat, metrics):
        data = [groups[g].values.get(m, []) or [math.nan] for g in names]
        ax.boxplot(data, showmeans=True, showfliers=False)
        ax.set_xticks(range(1, len(names) + 1), names, rotation=20, fontsize=8)
        ax.set_title(m.replace("_", " "), fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    for ax in list(axes.flat)[len(metrics):]:
        ax.axis("off")
    fig.suptitle("Tool-call behaviour per episode")
    fig.tight_layout()
    return _save(fig, out)


def plot_calls_by_tool(groups: dict[str, GroupStats], out: str | os.PathLike, top: int = 20) -> Path:
    """Share of calls per tool, groups side by side (the `top` most called tools overall)."""
    total = sum((g.calls_by_tool for g in groups.values()), start=Counter())
    tools = [t for t, _ in total.most_common(top)]
    fig, ax = plt.subplots(figsize=(max(6, 0.5 * len(tools) * max(1, len(groups))), 4))
    width = 0.8 / max(1, len(groups))
    for i, (name, g) in enumerate(groups.items()):
        n = sum(g.calls_by_tool.values()) or 1
        ax.bar([x + i * width for x in range(len(tools))], [g.calls_by_tool[t] / n for t in tools], width, label=name)
    ax.set_xticks([x + width * (len(groups) - 1) / 2 for x in range(len(tools))], tools, rotation=45, ha="right",
                  fontsize=8)
    ax.set_ylabel("share of calls")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, out)


def plot_learning_curves(metric_files: Sequence[str | os.PathLike], out: str | os.PathLike,
                         y: str = "eval/reward", x: str = "generations") -> Path:
    """Reward against generations from training metrics JSONL (one curve per file).

    Each line of a metrics file is a JSON object; lines holding both ``x`` and ``y`` are plotted.
    The curve is labelled with the run directory's name.
    """
    fig, ax = plt.subplots(figsize=(6, 4))
    plotted = 0
    for path in metric_files:
        pts = [(rec[x], rec[y]) for rec in read_metrics(path) if x in rec and y in rec]
        if pts:
            pts.sort()
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, label=Path(path).parent.name)
            plotted += 1
    if not plotted:
        plt.close(fig)
        raise ValueError(f"no line in {list(map(str, metric_files))} has both {x!r} and {y!r}")
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, out)


def _save(fig: plt.Figure, out: str | os.PathLike) -> Path:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
