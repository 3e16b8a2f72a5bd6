"""Parallel reading for :func:`harness.stats.collect.collect`: byte ranges of trace files, one process each.

Each file is split into ranges that start on line boundaries (:func:`split_lines`). A worker
reduces its range to per-group partial statistics; the parent appends them in file order, so the
per-episode values, and every summary of them, are exactly those of one serial pass. Errors name
the file and its line as a serial pass would: a worker that meets a bad line counts the lines
before its range (only then, so a clean input is read once). With ``skip_bad`` off the first bad
line in file order is raised.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from envs.trace import TraceError, iter_records
from harness.stats.episodes import GroupBy, GroupStats, add_records

AUTO_BYTES = 32 << 20
"""Inputs larger than this are read by :func:`default_workers` processes (smaller ones serially)."""
MIN_RANGE = 1 << 20


def cpus() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def default_workers(files: list[Path]) -> int:
    """min(2, CPUs) for inputs over :data:`AUTO_BYTES` in all, else 1 (starting processes costs more)."""
    return min(2, cpus()) if sum(os.path.getsize(f) for f in files) > AUTO_BYTES else 1


def split_lines(path: str | os.PathLike, pieces: int) -> list[tuple[int, int]]:
    """``path`` as at most ``pieces`` byte ranges ``(start, end)`` of about equal size that cover it,
    each starting at a line start (fewer ranges when lines are longer than a range; none if empty).
    """
    size = os.path.getsize(path)
    bounds = [0]
    with open(path, "rb") as f:
        for k in range(1, pieces):
            target = size * k // pieces
            if target <= bounds[-1]:
                continue
            f.seek(target - 1)
            f.readline()  # to the end of the line holding byte target - 1: the next line starts at or after target
            if f.tell() < size:
                bounds.append(f.tell())
    return list(zip(bounds, bounds[1:] + [size])) if size else []


def _lines_before(path: str | os.PathLike, offset: int) -> int:
    n = 0
    with open(path, "rb") as f:
        while offset > 0 and (block := f.read(min(offset, 1 << 20))):
            n += block.count(b"\n")
            offset -= len(block)
    return n


def _reduce_range(task: tuple[Path, int, int, GroupBy, bool, float]) -> tuple[dict[str, GroupStats], list, Any]:
    """One worker's range: its groups, its skipped lines and its fatal error (as (path, line, reason))."""
    path, start, end, by, skip_bad, success_threshold = task
    groups: dict[str, GroupStats] = {}
    errors: list[TraceError] = []
    fatal = None
    records = iter_records(path, on_error="skip" if skip_bad else "raise", errors=errors, span=(start, end))
    try:
        add_records(groups, path, records, by, skip_bad=skip_bad, errors=errors, success_threshold=success_threshold)
    except TraceError as e:
        fatal = e
    before = _lines_before(path, start) if errors or fatal else 0  # span line numbers count from its start

    def where(e: TraceError) -> tuple[str, int, str]:  # plain tuples: a TraceError does not unpickle
        return e.path, e.line + before, e.reason

    return groups, [where(e) for e in errors], fatal and where(fatal)


def collect_parallel(files: list[Path], by: GroupBy, workers: int, *, skip_bad: bool,
                     errors: list[TraceError] | None, success_threshold: float) -> dict[str, GroupStats]:
    """:func:`harness.stats.collect.collect` over ``workers`` processes (about 4 ranges per worker, for balance)."""
    sizes = [os.path.getsize(f) for f in files]
    per_range = max(sum(sizes) // (4 * workers), MIN_RANGE)
    tasks = [(path, start, end, by, skip_bad, success_threshold)
             for path, size in zip(files, sizes) for start, end in split_lines(path, max(1, round(size / per_range)))]
    groups: dict[str, GroupStats] = {}
    pool = ProcessPoolExecutor(min(workers, len(tasks)) or 1)
    try:
        for part, skipped, fatal in pool.map(_reduce_range, tasks):  # in file order
            if errors is not None:
                errors.extend(TraceError(*e) for e in skipped)
            if fatal:
                raise TraceError(*fatal)
            for key, gs in part.items():
                groups.setdefault(key, GroupStats()).merge(gs)
    finally:
        pool.shutdown(cancel_futures=True)
    return groups
