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


def calls_by_tool_figure(groups: dict[str, GroupStats], top: int = 20, per_row: int = 10,
                         max_groups: int = 8) -> plt.Figure:
    """Share of each group's calls per tool, for the ``top`` most called tools, ``per_row`` tools a row
    of panels: the figure's size is bounded whatever the numbers of tools and groups. Only groups that
    made calls are drawn and in the legend, at most ``max_groups`` (those with the most calls)."""
    called = [name for name, g in groups.items() if sum(g.calls_by_tool.values())]
    most = set(sorted(called, key=lambda name: -sum(groups[name].calls_by_tool.values()))[:max_groups])
    shown = {name: groups[name] for name in called if name in most}  # in the caller's order
    tools = [t for t, _ in sum((g.calls_by_tool for g in shown.values()), start=Counter()).most_common(top)]
    rows, cols = max(1, math.ceil(len(tools) / per_row)), max(1, min(per_row, len(tools)))
    size = (min(12, 4 + 0.8 * cols), 2.9 * rows + 0.3 * math.ceil(len(shown) / 4))  # inches, legend rows included
    fig, axes = plt.subplots(rows, 1, figsize=size, squeeze=False, layout="constrained")
    width = 0.8 / max(1, len(shown))
    for r, ax in enumerate(axes[:, 0]):
        part = tools[r * per_row:(r + 1) * per_row]
        for i, (name, g) in enumerate(shown.items()):
            n = sum(g.calls_by_tool.values())
            ax.bar([x - 0.4 + (i + 0.5) * width for x in range(len(part))], [g.calls_by_tool[t] / n for t in part],
                   width, label=name if r == 0 else None, color=f"C{i}")
        ax.set_xticks(range(len(part)), [t if len(t) <= 28 else t[:27] + "\u2026" for t in part],
                      rotation=25, ha="right", fontsize=9)
        ax.set_xlim(-0.5, cols - 0.5)  # the same bar width in every row
        ax.set_ylabel("share of calls", fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    if not shown:
        axes[0, 0].text(0.5, 0.5, "no tool calls", ha="center", va="center", transform=axes[0, 0].transAxes)
    skipped = len(called) - len(shown)
    note = f" ({skipped} more group(s) with fewer calls not drawn)" if skipped else ""
    axes[0, 0].set_title(f"Calls per tool, top {len(tools)} tools{note}", fontsize=11)
    if shown:
        fig.legend(loc="outside upper center", ncol=min(4, len(shown)), fontsize=10, frameon=False)
    return fig


def plot_calls_by_tool(groups: dict[str, GroupStats], out: str | os.PathLike, top: int = 20) -> Path:
    """:func:`calls_by_tool_figure` as a PNG."""
    return _save(calls_by_tool_figure(groups, top), out)


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
