"""Per-group statistics as rows and text tables (``lopd stats``'s output)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from harness.stats.episodes import METRICS, GroupStats


def table_rows(groups: dict[str, GroupStats]) -> list[dict[str, Any]]:
    """Flat rows (group, metric, mean, std, median, n) for text, CSV or JSON output."""
    rows = []
    for g, gs in groups.items():
        for m, s in gs.summary().items():
            rows.append({"group": g, "metric": m, "mean": s.mean, "std": s.std, "median": s.median, "n": s.n})
    return rows


def tool_rows(groups: dict[str, GroupStats], names: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """The distribution of calls per tool: per group, each tool's count and share of the group's calls.

    Rows carry ``metric="calls_by_tool"`` so they can follow :func:`table_rows` in one CSV or JSON
    list; most called tools first.

    >>> g = GroupStats(calls_by_tool=Counter({"b": 1, "a": 3}))
    >>> [(r["tool"], r["count"], r["share"]) for r in tool_rows({"x": g})]
    [('a', 3, 0.75), ('b', 1, 0.25)]
    """
    rows = []
    for g in (list(groups) if names is None else names):
        counts = groups[g].calls_by_tool
        total = sum(counts.values())
        for tool, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
            rows.append({"group": g, "metric": "calls_by_tool", "tool": tool, "count": n, "share": n / total})
    return rows


def compare_rows(groups: dict[str, GroupStats], a: str, b: str) -> list[dict[str, Any]]:
    """The paper's vanilla -> trained layout: per metric, A, B, B - A and the relative change."""
    missing = [g for g in (a, b) if g not in groups]
    if missing:
        raise KeyError(f"no group named {', '.join(map(repr, missing))}; groups are {sorted(groups)}")
    sa, sb = groups[a].summary(), groups[b].summary()
    rows = []
    for m in METRICS:
        x, y = sa[m].mean, sb[m].mean
        rel = (y - x) / abs(x) * 100 if x and not math.isnan(x) else math.nan
        rows.append({"metric": m, a: x, b: y, "delta": y - x, "delta_pct": rel})
    return rows


def format_table(rows: list[dict[str, Any]]) -> str:
    """Aligned plain-text table of dict rows (floats to 4 significant digits); the leading columns
    of names (strings in every row) align left, the rest right.

    >>> print(format_table([{"tool": "f", "count": 12}, {"tool": "long_name", "count": 3}]))
    tool       count
    ---------  -----
    f             12
    long_name      3
    """
    if not rows:
        return ""
    cols = list(rows[0])
    left = next((i for i, c in enumerate(cols) if not all(isinstance(r[c], str) for r in rows)), len(cols))

    def cell(v: Any) -> str:
        return f"{v:.4g}" if isinstance(v, float) else str(v)

    cells = [[cell(r[c]) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]

    def line(values: list[str]) -> str:
        padded = (v.ljust(w) if i < left else v.rjust(w) for i, (v, w) in enumerate(zip(values, widths)))
        return "  ".join(padded).rstrip()

    return "\n".join([line(cols), line(["-" * w for w in widths]), *map(line, cells)])
