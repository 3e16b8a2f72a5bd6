"""Tool-call behaviour statistics from traces (docs/STATS.md): per-episode metrics (:mod:`.episodes`),
reading trace files (:mod:`.collect`, in parallel by :mod:`.parallel`), tables (:mod:`.tables`), figures
(:mod:`.plots`) and bootstrap intervals of learning curves (:mod:`.bootstrap`).

>>> from harness.stats import collect, table_rows  # doctest: +SKIP
>>> print(format_table(table_rows(collect(["runs/lopd/traces.jsonl"], by="run"))))  # doctest: +SKIP
"""

from harness.stats.collect import collect, trace_file
from harness.stats.episodes import METRICS, GroupBy, GroupStats, Summary, episode_stats
from harness.stats.tables import compare_rows, format_table, table_rows, tool_rows

__all__ = ["METRICS", "GroupBy", "GroupStats", "Summary", "collect", "compare_rows", "episode_stats", "format_table",
           "table_rows", "tool_rows", "trace_file"]
