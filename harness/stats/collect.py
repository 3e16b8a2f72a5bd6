"""Reading traces into per-group statistics: one process, or several over byte ranges (:mod:`.parallel`).

Inputs may also be datasets of OpenAI-style rows (:mod:`harness.traces`: a ``save_to_disk`` folder, parquet,
JSONL of rows), read in this process and turned into trace records first.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from envs.trace import TraceError, iter_records
from harness.stats.episodes import GroupBy, GroupStats, add_records
from harness.stats.parallel import collect_parallel, default_workers
from harness.traces import is_rows_source, iter_episodes

ROW_COLUMNS = ("messages", "reward")
"""What a dataset of rows must have for the statistics (the rest has defaults, docs/TRACES.md)."""


def trace_file(path: str | os.PathLike) -> Path:
    """``path`` itself, or ``path/traces.jsonl`` when it is a run directory (as ``lopd eval`` writes)."""
    path = Path(path)
    if path.is_dir():
        if not (path / "traces.jsonl").is_file():
            raise FileNotFoundError(f"{path} is a directory without a traces.jsonl (nor a saved dataset)")
        return path / "traces.jsonl"
    return path


def _row_records(path: Path, skip_bad: bool, errors: list[TraceError] | None) -> Iterator[tuple[int, dict[str, Any]]]:
    for n, ep in iter_episodes(path, required=ROW_COLUMNS, on_error="skip" if skip_bad else "raise", errors=errors):
        yield n, asdict(ep)


def collect(paths: Iterable[str | os.PathLike], by: GroupBy = "run", *, skip_bad: bool = False,
            errors: list[TraceError] | None = None, success_threshold: float = 1.0,
            workers: int | None = None) -> dict[str, GroupStats]:
    """Stream every episode of ``paths`` into per-group statistics.

    A path may be a run directory (its ``traces.jsonl`` is read) or a dataset of rows. A corrupt line
    raises :class:`TraceError` (file and line) unless ``skip_bad``; skipped lines are appended to ``errors``
    so the caller can report them. ``workers`` processes read the trace files in parallel; None picks
    :func:`harness.stats.parallel.default_workers` (2 for large inputs). The result is the same
    for any number of workers.
    """
    sources = [(Path(p), True) if is_rows_source(p) else (trace_file(p), False) for p in paths]
    files = [p for p, rows in sources if not rows]
    workers = default_workers(files) if workers is None else workers
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    if workers > 1 and len(files) == len(sources):
        return collect_parallel(files, by, workers, skip_bad=skip_bad, errors=errors,
                                success_threshold=success_threshold)
    groups: dict[str, GroupStats] = {}
    for path, rows in sources:
        if rows:
            records: Iterable[tuple[int, dict[str, Any]]] = _row_records(path, skip_bad, errors)
        elif workers > 1:  # files mixed with datasets: each file in parallel, joined in input order
            for key, g in collect_parallel([path], by, workers, skip_bad=skip_bad, errors=errors,
                                           success_threshold=success_threshold).items():
                groups.setdefault(key, GroupStats()).merge(g)
            continue
        else:
            records = iter_records(path, on_error="skip" if skip_bad else "raise", errors=errors)
        add_records(groups, path, records, by, skip_bad=skip_bad, errors=errors, success_threshold=success_threshold)
    return groups
